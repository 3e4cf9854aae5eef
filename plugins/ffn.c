/* Layer type `ffn`: the position-wise feed-forward network of an encoder
 * block, Linear(d -> f) -> activation -> Linear(f -> d), with the gated
 * variants (SwiGLU, GEGLU) of later models: Linear(f -> d)(act(gate) * up).
 *
 * Job keys:
 *   activation  relu | gelu | gelu_tanh | silu | swiglu | geglu | geglu_tanh |
 *               identity, default gelu.
 *               gelu is the exact erf form (torch.nn.functional.gelu),
 *               gelu_tanh its tanh approximation (approximate='tanh'),
 *               swiglu = silu(gate) * up, geglu = gelu(gate) * up,
 *               geglu_tanh = gelu_tanh(gate) * up (Gemma); identity: two
 *               linear maps in a row (sentence-transformers' Dense modules
 *               with an Identity activation, outside a block).
 *   bias        bool, true  whether the linear maps have biases
 *
 * Weights (in the layer's group; f is read from their shapes):
 *   in_weight   [f, d], in_bias   [f]  first linear ("up" when gated)
 *   gate_weight [f, d], gate_bias [f]  swiglu, geglu and geglu_tanh only
 *   out_weight  [d, f], out_bias  [d]  second linear
 *
 * The gate and up projections are stacked into one linear map, so a gated
 * FFN costs one GEMM [rows, 2f] instead of two. The activation (gating
 * included) is the host's epilogue of the first map: oneDNN's post-op in
 * bf16, a pass over each chunk of the product while it is in cache in fp32
 * and int8 (tfenc/plugin_math.h has the formulas: exact GELU by Abramowitz and
 * Stegun's erf, error <= 1.5e-7). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"

enum activation { RELU, GELU, GELU_TANH, SILU, SWIGLU, GEGLU, GEGLU_TANH, IDENTITY };
static const char *const activation_names[] = {"relu",   "gelu",  "gelu_tanh",  "silu",
                                               "swiglu", "geglu", "geglu_tanh", "identity",
                                               NULL};
/* The host applies the activation inside the first linear map (its
 * epilogue), in the order of enum activation. */
static const tfenc_activation activation_kinds[] = {
    TFENC_ACTIVATION_RELU, TFENC_ACTIVATION_GELU,   TFENC_ACTIVATION_GELU_TANH,
    TFENC_ACTIVATION_SILU, TFENC_ACTIVATION_SWIGLU, TFENC_ACTIVATION_GEGLU,
    TFENC_ACTIVATION_GEGLU_TANH, TFENC_ACTIVATION_NONE};

typedef struct ffn {
    int d_model;
    int hidden;             /* f */
    int activation;         /* enum activation */
    int gated;              /* swiglu, geglu or geglu_tanh */
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
    const int gated = activation == SWIGLU || activation == GEGLU || activation == GEGLU_TANH;
    /* Weights of a gated model under an ungated activation would run without
     * their gate and give plausible but wrong numbers: refuse them. */
    if (!gated && tfenc_weight_exists(init->weights, "gate_weight"))
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "ffn: the weights hold gate_weight but activation = %s is not gated "
                           "(use swiglu, geglu or geglu_tanh)", activation_names[activation]);

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
    /* Make forward()'s products now (calls of 0 rows), so it does not allocate. */
    const tfenc_element_type hidden_dtype = tfenc_linear_dtype(layer->in);
    tfenc_linear_args first = {.struct_size = sizeof first, .x_dtype = TFENC_FLOAT32,
                               .y_dtype = hidden_dtype, .rows = 0,
                               .activation = activation_kinds[activation]};
    tfenc_linear_args second = {.struct_size = sizeof second, .x_dtype = hidden_dtype,
                                .y_dtype = TFENC_FLOAT32, .rows = 0,
                                .activation = TFENC_ACTIVATION_NONE};
    /* and the second map's kind that adds the block's input (any residual
     * pointer prepares it) */
    const float any_residual = 0.0f;
    tfenc_linear_args second_adding = second;
    second_adding.residual = &any_residual;
    if ((status = tfenc_linear_run(ctx, layer->in, &first)) ||
        (status = tfenc_linear_run(ctx, layer->out, &second)) ||
        (status = tfenc_linear_run(ctx, layer->out, &second_adding)))
        goto fail;
    *instance = layer;
    return TFENC_OK;
fail:
    free(layer); /* linear maps belong to the host */
    return status;
}

/* Rows of the hidden activations at a time: the workspace holds
 * FFN_CHUNK_ROWS x f values whatever the batch size (at f = 1536 in float32,
 * 3 MiB instead of 12 at 2048-token batches), and a chunk's hidden rows are
 * still in cache when the second map reads them. A multiple of the matrix
 * backend's own chunk (256 rows), so that its primitives see the same row
 * counts as before. */
#define FFN_CHUNK_ROWS 512

/* x = ffn(x), or with add_input x = x + ffn(x), the add in the second
 * map's epilogue (TFENC_EXTENSION_ADDS_INPUT). */
static int ffn_run(const ffn *layer, tfenc_context *ctx, tfenc_batch *batch, void *workspace,
                   int add_input)
{
    int status = layers_check_width(ctx, "ffn", batch, layer->d_model);
    if (status)
        return status;
    /* hidden (rows, f) in the maps' own element type: bf16 between the two
     * GEMMs of a bf16 or int8 job, float32 in fp32 */
    const tfenc_element_type hidden_dtype = tfenc_linear_dtype(layer->in);
    /* The network is position-wise: each chunk of rows goes through both
     * maps on its own, and its result replaces its rows of x, which no
     * later chunk reads. */
    for (int first = 0; first < batch->rows; first += FFN_CHUNK_ROWS) {
        const int rows =
            batch->rows - first < FFN_CHUNK_ROWS ? batch->rows - first : FFN_CHUNK_ROWS;
        float *x = batch->x + (size_t)first * layer->d_model;
        /* first linear and the activation, fused: x -> hidden (gate and up
         * in one GEMM when gated, combined into f columns by the host) */
        tfenc_linear_args up = {.struct_size = sizeof up, .x = x, .x_dtype = TFENC_FLOAT32,
                                .y = workspace, .y_dtype = hidden_dtype, .rows = rows,
                                .activation = activation_kinds[layer->activation]};
        /* second linear: hidden -> x (the chunk's x is no longer needed,
         * but as what the result is added to) */
        tfenc_linear_args down = {.struct_size = sizeof down, .x = workspace,
                                  .x_dtype = hidden_dtype, .y = x, .y_dtype = TFENC_FLOAT32,
                                  .rows = rows, .activation = TFENC_ACTIVATION_NONE,
                                  .residual = add_input ? x : NULL};
        if ((status = tfenc_linear_run(ctx, layer->in, &up)) ||
            (status = tfenc_linear_run(ctx, layer->out, &down)))
            return status;
    }
    return TFENC_OK;
}

static int ffn_forward(void *instance, tfenc_context *ctx, tfenc_batch *batch, void *workspace)
{
    return ffn_run(instance, ctx, batch, workspace, 0);
}

static int ffn_forward_adding_input(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                                    void *workspace)
{
    return ffn_run(instance, ctx, batch, workspace, 1);
}

static const void *ffn_extension(const char *uri)
{
    static const tfenc_forward_adding_input adds_input = {sizeof adds_input,
                                                          ffn_forward_adding_input};
    return strcmp(uri, TFENC_EXTENSION_ADDS_INPUT) == 0 ? &adds_input : NULL;
}

static void ffn_destroy(void *instance)
{
    free(instance);
}

static size_t ffn_workspace_size(const void *instance, const tfenc_limits *limits)
{
    const ffn *layer = instance;
    /* hidden (rows, f) of one chunk: the gate and up halves are combined by
     * the host */
    size_t rows = limits->max_tokens <= 0              ? 0
                  : limits->max_tokens < FFN_CHUNK_ROWS ? (size_t)limits->max_tokens
                                                        : FFN_CHUNK_ROWS;
    return layers_align(rows * (size_t)layer->hidden * sizeof(float));
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
     "relu, gelu (the exact erf form), gelu_tanh (the tanh approximation), silu, gated "
     "swiglu, geglu, geglu_tanh (gelu_tanh(gate) * up), or identity (two linear maps, "
     "e.g. sentence-transformers' Dense modules)", TFENC_PARAM_NO_RANGE},
    {"bias", TFENC_PARAM_BOOL, "true", "the two linear maps have biases", TFENC_PARAM_NO_RANGE},
    {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE},
};

/* The layer type(s) of this file, readable without loading layers.so. */
TFENC_PLUGIN_TYPES("ffn");

const tfenc_layer_descriptor tfenc_layers_ffn = {
    TFENC_DESCRIPTOR_INIT,
    .key_masking = TFENC_KEY_MASKING_UNAFFECTED,
    .type = "ffn",
    .description = "feed-forward block: Linear(d->f), relu/gelu/gelu_tanh/silu/identity or "
                   "gated swiglu/geglu/geglu_tanh, Linear(f->d)",
    .params = ffn_params,
    .create = ffn_create,
    .forward = ffn_forward,
    .destroy = ffn_destroy,
    .workspace_size = ffn_workspace_size,
    .flops_per_token = ffn_flops,
    .extension = ffn_extension,
};
