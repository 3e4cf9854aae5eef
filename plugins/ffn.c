/* Layer type `ffn`: the position-wise feed-forward network of an encoder
 * block, Linear(d -> f) -> activation -> Linear(f -> d), with the gated
 * variants (SwiGLU, GEGLU) of later models: Linear(f -> d)(act(gate) * up).
 *
 * Job keys:
 *   activation  relu | gelu | gelu_tanh | silu | swiglu | geglu, default gelu.
 *               gelu is the exact erf form (torch.nn.functional.gelu),
 *               gelu_tanh its tanh approximation (approximate='tanh'),
 *               swiglu = silu(gate) * up, geglu = gelu(gate) * up.
 *   bias        bool, true  whether the linear maps have biases
 *
 * Weights (in the layer's group; f is read from their shapes):
 *   in_weight   [f, d], in_bias   [f]  first linear ("up" when gated)
 *   gate_weight [f, d], gate_bias [f]  swiglu and geglu only
 *   out_weight  [d, f], out_bias  [d]  second linear
 *
 * The gate and up projections are stacked into one linear map, so a gated
 * FFN costs one GEMM [rows, 2f] instead of two. */
#include <math.h>
#include <stdlib.h>

#include "layers.h"

enum activation { RELU, GELU, GELU_TANH, SILU, SWIGLU, GEGLU };
static const char *const activation_names[] = {"relu", "gelu", "gelu_tanh", "silu",
                                               "swiglu", "geglu", NULL};

typedef struct ffn {
    int d_model;
    int hidden;             /* f */
    int activation;         /* enum activation */
    int gated;              /* swiglu or geglu */
    tfenc_linear *in;       /* (f, d), or (2f, d) when gated: gate rows, then up rows */
    tfenc_linear *out;      /* (d, f) */
} ffn;

static int ffn_create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    int activation, bias;
    int status;
    if ((status = tfenc_param_choice(init->params, "activation", activation_names, GELU,
                                     &activation)) ||
        (status = tfenc_param_bool(init->params, "bias", 1, &bias)))
        return status;
    const int gated = activation == SWIGLU || activation == GEGLU;
    /* Weights of a gated model under an ungated activation would run without
     * their gate and give plausible but wrong numbers: refuse them. */
    if (!gated && tfenc_weight_exists(init->weights, "gate_weight"))
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "ffn: the weights hold gate_weight but activation = %s is not gated "
                           "(use swiglu or geglu)", activation_names[activation]);

    ffn *layer = calloc(1, sizeof *layer);
    if (layer == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "ffn: out of memory");
    const int d = init->model.d_model;
    layer->d_model = d;
    layer->activation = activation;
    layer->gated = gated;

    static const char *const gated_weights[] = {"gate_weight", "in_weight"};
    static const char *const gated_biases[] = {"gate_bias", "in_bias"};
    static const char *const plain_weights[] = {"in_weight"};
    static const char *const plain_biases[] = {"in_bias"};
    int in_width = 0;
    status = tfenc_linear_load(init->weights, gated ? 2 : 1, gated ? gated_weights : plain_weights,
                               bias ? (gated ? gated_biases : plain_biases) : NULL, d, &in_width,
                               &layer->in);
    if (status)
        goto fail;
    if (gated && in_width % 2 != 0) {
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                             "ffn: gate_weight and in_weight together have %d rows; a gated "
                             "FFN needs the same number f in each", in_width);
        goto fail;
    }
    layer->hidden = gated ? in_width / 2 : in_width;

    static const char *const out_weights[] = {"out_weight"};
    static const char *const out_biases[] = {"out_bias"};
    int out_width = 0;
    status = tfenc_linear_load(init->weights, 1, out_weights, bias ? out_biases : NULL,
                               layer->hidden, &out_width, &layer->out);
    if (status)
        goto fail;
    if (out_width != d) {
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                             "ffn: out_weight has shape [%d, %d], expected [%d, %d] (d_model, f)",
                             out_width, layer->hidden, d, layer->hidden);
        goto fail;
    }
    *instance = layer;
    return TFENC_OK;
fail:
    free(layer); /* linear maps belong to the weight store */
    return status;
}

/* Activations over n contiguous values, in place. Plain loops without
 * branches on the data, so that the compiler can vectorise them. */

LAYERS_VECTOR_CLONES
static void relu(float *v, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        v[i] = v[i] > 0.0f ? v[i] : 0.0f;
}

/* 0.5 x (1 + erf(x / sqrt 2)), torch's exact GELU. erf by Abramowitz and
 * Stegun 7.1.26, |error| <= 1.5e-7 (then float rounding, a few 1e-8): on
 * GELU's output that is at most 0.5 |x| 1.5e-7, below the float32 noise of
 * the GEMMs around it. Unlike libm's erff it vectorises, which made GELU
 * drop from 12% of a MiniLM forward pass to about 1%. */
static inline float gelu_exact(float x)
{
    const float a = fabsf(x) * 0.70710678118654752f; /* |x| / sqrt(2) */
    const float t = 1.0f / (1.0f + 0.3275911f * a);
    const float poly =
        t * (0.254829592f +
             t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    const float erf_abs = 1.0f - poly * layers_exp(-a * a);
    return 0.5f * x * (1.0f + copysignf(erf_abs, x));
}

LAYERS_VECTOR_CLONES
static void gelu(float *v, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        v[i] = gelu_exact(v[i]);
}

LAYERS_VECTOR_CLONES
static void gelu_tanh(float *v, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        const float x = v[i];
        /* torch's approximate='tanh': 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
         * 0.5 (1 + tanh(u)) is exactly 1 / (1 + exp(-2u)), and exp vectorises. */
        const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
        v[i] = x / (1.0f + layers_exp(-2.0f * u));
    }
}

static inline float silu_value(float x)
{
    /* For very negative x, exp(-x) saturates at exp(88) and x / 1.7e38 is
     * -0 or a tiny negative number: the limit, as with an infinite expf. */
    return x / (1.0f + layers_exp(-x));
}

LAYERS_VECTOR_CLONES
static void silu(float *v, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        v[i] = silu_value(v[i]);
}

/* out[j] = act(gate[j]) * up[j]. out may be gate itself (the first row of the
 * in-place compaction below), so no restrict: each element is read before it
 * is written, which keeps the exact alias correct. */
LAYERS_VECTOR_CLONES
static void swiglu_row(float *out, const float *gate, const float *up, int n)
{
#pragma omp simd
    for (int j = 0; j < n; j++)
        out[j] = silu_value(gate[j]) * up[j];
}

LAYERS_VECTOR_CLONES
static void geglu_row(float *out, const float *gate, const float *up, int n)
{
#pragma omp simd
    for (int j = 0; j < n; j++)
        out[j] = gelu_exact(gate[j]) * up[j];
}

static int ffn_forward(void *instance, tfenc_context *ctx, tfenc_batch *batch, void *workspace)
{
    const ffn *layer = instance;
    int status = layers_check_width(ctx, "ffn", batch, layer->d_model);
    if (status)
        return status;
    const int rows = batch->rows, f = layer->hidden;
    float *hidden = workspace; /* (rows, f), or (rows, 2f) when gated */

    /* first linear: x -> hidden (gate and up in one GEMM when gated) */
    if ((status = tfenc_linear_forward(ctx, layer->in, batch->x, rows, hidden)))
        return status;

    /* activation */
    if (layer->gated) {
        /* Row r of (rows, 2f) holds [gate | up]; its product goes to row r of
         * (rows, f). For r >= 1 that destination lies wholly in rows already
         * consumed (r f + f <= 2 r f), and for r = 0 it is the gate itself,
         * element by element, so compacting in place is safe. */
        for (int r = 0; r < rows; r++) {
            const float *gate = hidden + (size_t)r * 2 * f;
            if (layer->activation == SWIGLU)
                swiglu_row(hidden + (size_t)r * f, gate, gate + f, f);
            else
                geglu_row(hidden + (size_t)r * f, gate, gate + f, f);
        }
    } else {
        const size_t n = (size_t)rows * f;
        switch (layer->activation) {
        case RELU: relu(hidden, n); break;
        case GELU: gelu(hidden, n); break;
        case GELU_TANH: gelu_tanh(hidden, n); break;
        default: silu(hidden, n); break;
        }
    }

    /* second linear: hidden -> x (x is no longer needed, so it takes the result) */
    return tfenc_linear_forward(ctx, layer->out, hidden, rows, batch->x);
}

static void ffn_destroy(void *instance)
{
    free(instance);
}

static size_t ffn_workspace_size(const void *instance, const tfenc_limits *limits)
{
    const ffn *layer = instance;
    const size_t width = (size_t)layer->hidden * (layer->gated ? 2 : 1);
    return layers_align((size_t)limits->max_tokens * width * sizeof(float));
}

static double ffn_flops(const void *instance, double mean_seq_len)
{
    const ffn *layer = instance;
    /* a multiply and an add per weight; d f weights in each of in, (gate,) out */
    return 2.0 * layer->d_model * layer->hidden * (layer->gated ? 3 : 2);
}

/* The keys ffn_create() reads (shown by --list-plugins). */
static const tfenc_param_info ffn_params[] = {
    {"activation", TFENC_PARAM_CHOICE, "gelu",
     "relu, gelu (exact erf), gelu_tanh, silu, or gated swiglu, geglu"},
    {"bias", TFENC_PARAM_BOOL, "true", "the two linear maps have biases"},
    {NULL, 0, NULL, NULL},
};

/* The layer type(s) of this file, readable without loading layers.so. */
TFENC_PLUGIN_TYPES("ffn");

const tfenc_layer_descriptor tfenc_layers_ffn = {
    TFENC_DESCRIPTOR_INIT,
    .type = "ffn",
    .description = "feed-forward block: Linear(d->f), relu/gelu/gelu_tanh/silu or gated "
                   "swiglu/geglu, Linear(f->d)",
    .params = ffn_params,
    .create = ffn_create,
    .forward = ffn_forward,
    .destroy = ffn_destroy,
    .workspace_size = ffn_workspace_size,
    .flops_per_token = ffn_flops,
};
