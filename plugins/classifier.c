/* Layer type `classifier`: a sequence-classification / regression head, the
 * *ForSequenceClassification heads of transformers without their dropout.
 * It declares the output kind scores (plugin.h), so the job writes
 * `scores [N, n_labels]` (docs/scores.md).
 *
 *   pooled = cls (the first token) or mean (over the sequence's tokens)
 *   h      = norm(activation(pooled W_d^T + b_d))   when dense = true
 *   logits = h W_o^T + b_o
 *   scores = logits, softmax(logits) or sigmoid(logits)
 *
 * which is, as transformers writes them:
 *   bert         BertPooler (dense, tanh on [CLS]) + classifier
 *   roberta/xlm  RobertaClassificationHead: dense, tanh on <s>, out_proj
 *   distilbert   pre_classifier, ReLU, classifier
 *   electra      ElectraClassificationHead: dense, GELU, out_proj
 *   modernbert   ModernBertPredictionHead (dense, activation, LayerNorm) on the
 *                cls or mean pooled vector, classifier
 *
 * Job keys:
 *   pooling       cls | mean, default cls
 *   dense         bool, true: the dense map (weights dense_weight [d, d], dense_bias [d]
 *                 when present) and its activation
 *   activation    tanh | relu | gelu | gelu_tanh | none, default tanh
 *   norm          bool, false: a LayerNorm after the activation (norm_weight [d],
 *                 norm_bias [d] when present), eps `norm_eps` (1e-5)
 *   problem_type  single_label_classification | multi_label_classification |
 *                 regression | auto (default: as config.json leaves it unset)
 *   scores        logits | softmax | sigmoid | auto (default): auto is what
 *                 transformers' text-classification pipeline applies:
 *                 nothing for regression, sigmoid for multi_label or one
 *                 label, softmax otherwise
 *   n_labels      int, 0: the rows of out_weight; else they must agree
 *   labels        id2label as a JSON object ({"0": "NEGATIVE", ...}), default
 *                 none; the host checks it names exactly labels 0..n_labels-1
 *
 * Weights: out_weight [n_labels, d], out_bias [n_labels] when present. */
#include <math.h>
#include <stdlib.h>

#include "layers.h"

enum pooling { POOL_CLS, POOL_MEAN };
static const char *const pooling_names[] = {"cls", "mean", NULL};
enum activation { ACT_TANH, ACT_RELU, ACT_GELU, ACT_GELU_TANH, ACT_NONE };
static const char *const activation_names[] = {"tanh", "relu", "gelu", "gelu_tanh", "none",
                                               NULL};
enum problem { PROBLEM_SINGLE, PROBLEM_MULTI, PROBLEM_REGRESSION, PROBLEM_AUTO };
static const char *const problem_names[] = {"single_label_classification",
                                            "multi_label_classification", "regression", "auto",
                                            NULL};
enum scores { SCORES_LOGITS, SCORES_SOFTMAX, SCORES_SIGMOID, SCORES_AUTO };
static const char *const scores_names[] = {"logits", "softmax", "sigmoid", "auto", NULL};

typedef struct classifier {
    int d_model;
    int n_labels;
    int pooling;    /* enum pooling */
    int activation; /* enum activation, when dense */
    int scores;     /* enum scores, never SCORES_AUTO */
    double norm_eps;
    const char *labels;         /* JSON or NULL; owned by the host's params */
    const tfenc_linear *dense;  /* [d, d], NULL without dense */
    const tfenc_linear *out;    /* [n_labels, d] */
    const float *norm_weight;   /* [d], NULL without norm */
    const float *norm_bias;     /* [d], NULL when the norm has none */
} classifier;

/* transformers' pipeline: regression -> logits; multi_label or one label ->
 * sigmoid; single_label or several labels -> softmax. */
static int default_scores(int problem, int n_labels)
{
    if (problem == PROBLEM_REGRESSION)
        return SCORES_LOGITS;
    if (problem == PROBLEM_MULTI || (problem == PROBLEM_AUTO && n_labels == 1))
        return SCORES_SIGMOID;
    return SCORES_SOFTMAX;
}

static int classifier_create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    int pooling, dense, activation, norm, problem, scores;
    long n_labels;
    double norm_eps;
    const char *labels;
    int status;
    if ((status = tfenc_param_choice(init->params, "pooling", pooling_names, POOL_CLS,
                                     &pooling)) ||
        (status = tfenc_param_bool(init->params, "dense", 1, &dense)) ||
        (status = tfenc_param_choice(init->params, "activation", activation_names, ACT_TANH,
                                     &activation)) ||
        (status = tfenc_param_bool(init->params, "norm", 0, &norm)) ||
        (status = tfenc_param_float(init->params, "norm_eps", 1e-5, &norm_eps)) ||
        (status = tfenc_param_choice(init->params, "problem_type", problem_names, PROBLEM_AUTO,
                                     &problem)) ||
        (status = tfenc_param_choice(init->params, "scores", scores_names, SCORES_AUTO,
                                     &scores)) ||
        (status = tfenc_param_int_range(init->params, "n_labels", 0, 0, 1 << 20, &n_labels)) ||
        (status = tfenc_param_string(init->params, "labels", "", &labels)))
        return status;
    if (norm && !dense)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "classifier: norm = true needs dense = true "
                           "(the norm follows the dense map)");
    if (!(norm_eps >= 0.0) || !isfinite(norm_eps))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "classifier: norm_eps must be finite and >= 0");
    classifier *layer = calloc(1, sizeof *layer);
    if (layer == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "classifier: out of memory");
    const int d = init->model.d_model;
    layer->d_model = d;
    layer->pooling = pooling;
    layer->activation = dense ? activation : ACT_NONE;
    layer->norm_eps = norm_eps;
    layer->labels = labels[0] != '\0' ? labels : NULL;
    int width = 0;
    if (dense) {
        status = layers_load_map(init->weights, "dense_weight", "dense_bias", d, &width, &layer->dense);
        if (status == TFENC_OK && width != d)
            status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "classifier: dense_weight has %d rows, "
                                 "expected d_model %d", width, d);
    }
    if (status == TFENC_OK && norm) {
        int64_t dims[1] = {d};
        status = tfenc_weight_load(init->weights, "norm_weight", 1, dims, &layer->norm_weight);
        if (status == TFENC_OK && tfenc_weight_exists(init->weights, "norm_bias"))
            status = tfenc_weight_load(init->weights, "norm_bias", 1, dims, &layer->norm_bias);
    }
    if (status == TFENC_OK)
        status = layers_load_map(init->weights, "out_weight", "out_bias", d, &width, &layer->out);
    if (status == TFENC_OK && n_labels > 0 && width != n_labels)
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "classifier: n_labels = %ld but out_weight "
                             "has %d rows", n_labels, width);
    if (status == TFENC_OK && width > d)
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "classifier: out_weight has %d rows, more "
                             "labels than d_model %d (scores travel in the batch's rows)",
                             width, d);
    if (status != TFENC_OK) {
        free(layer);
        return status;
    }
    layer->n_labels = width;
    layer->scores = scores != SCORES_AUTO ? scores : default_scores(problem, width);
    *instance = layer;
    return TFENC_OK;
}

static float activate(float z, int activation)
{
    switch (activation) {
    case ACT_TANH: return tanhf(z);
    case ACT_RELU: return z > 0.0f ? z : 0.0f;
    case ACT_GELU: return 0.5f * z * (1.0f + erff(z * 0.70710678118654752f));
    case ACT_GELU_TANH:
        return 0.5f * z * (1.0f + tanhf(0.79788456080286536f * (z + 0.044715f * z * z * z)));
    default: return z;
    }
}

/* softmax or sigmoid of one row of logits, in double (a 1e-4 bar). */
static void apply_scores(float *row, int k, int scores)
{
    if (scores == SCORES_SIGMOID) {
        for (int j = 0; j < k; j++)
            row[j] = (float)(1.0 / (1.0 + exp(-(double)row[j])));
    } else if (scores == SCORES_SOFTMAX) {
        double largest = row[0], sum = 0.0;
        for (int j = 1; j < k; j++)
            largest = row[j] > largest ? row[j] : largest;
        for (int j = 0; j < k; j++)
            sum += exp(row[j] - largest);
        for (int j = 0; j < k; j++)
            row[j] = (float)(exp(row[j] - largest) / sum);
    }
}

static int classifier_forward(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                              void *workspace)
{
    const classifier *layer = instance;
    const int d = layer->d_model, k = layer->n_labels, n = batch->n_seq;
    int status = layers_check_width(ctx, "classifier", batch, d);
    if (status)
        return status;
    if (batch->rows != batch->n_tokens)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "classifier: the batch holds %d rows for %d "
                           "tokens: it was already pooled by an earlier layer (the head pools "
                           "itself: pooling = cls or mean)", batch->rows, batch->n_tokens);
    float *pooled = workspace;                                               /* (n, d) */
    float *hidden = (float *)((char *)workspace + layers_align((size_t)n * d * sizeof(float)));
    float *logits = (float *)((char *)hidden + layers_align((size_t)n * d * sizeof(float)));
    for (int s = 0; s < n; s++) {
        const int start = batch->seq_start[s], end = layers_keys_end(batch, s);
        float *out = pooled + (size_t)s * d;
        if (end <= start) {
            memset(out, 0, (size_t)d * sizeof *out);
        } else if (layer->pooling == POOL_CLS) {
            memcpy(out, batch->x + (size_t)start * d, (size_t)d * sizeof *out);
        } else {
            /* double sums: ModernBERT's mean over a long sequence */
            for (int j = 0; j < d; j++) {
                double sum = 0.0;
                for (int t = start; t < end; t++)
                    sum += batch->x[(size_t)t * d + j];
                out[j] = (float)(sum / (end - start));
            }
        }
    }
    const float *features = pooled;
    if (layer->dense != NULL) {
        if ((status = tfenc_linear_forward(ctx, layer->dense, pooled, n, hidden)))
            return status;
        for (size_t i = 0; i < (size_t)n * d; i++)
            hidden[i] = activate(hidden[i], layer->activation);
        if (layer->norm_weight != NULL)
            for (int s = 0; s < n; s++)
                layers_head_layer_norm(hidden + (size_t)s * d, d, layer->norm_eps,
                                       layer->norm_weight, layer->norm_bias);
        features = hidden;
    }
    if ((status = tfenc_linear_forward(ctx, layer->out, features, n, logits)))
        return status;
    /* Scores at the start of each sequence's row, the output kind's contract. */
    for (int s = 0; s < n; s++) {
        float *row = batch->x + (size_t)s * d;
        memcpy(row, logits + (size_t)s * k, (size_t)k * sizeof *row);
        memset(row + k, 0, (size_t)(d - k) * sizeof *row);
        apply_scores(row, k, layer->scores);
    }
    batch->rows = n;
    return TFENC_OK;
}

static void classifier_destroy(void *instance)
{
    free(instance); /* linear maps and weights belong to the host */
}

static size_t classifier_workspace_size(const void *instance, const tfenc_limits *limits)
{
    const classifier *layer = instance;
    const size_t rows = (size_t)limits->max_seqs;
    return 2 * layers_align(rows * layer->d_model * sizeof(float)) +
           layers_align(rows * layer->n_labels * sizeof(float));
}

static double classifier_flops(const void *instance, double mean_seq_len)
{
    const classifier *layer = instance;
    /* per sequence, spread over its tokens */
    const double per_sequence = 2.0 * layer->d_model * (layer->d_model + layer->n_labels);
    return per_sequence / (mean_seq_len > 1.0 ? mean_seq_len : 1.0) + layer->d_model;
}

static int classifier_output(const void *instance, tfenc_layer_output *output)
{
    const classifier *layer = instance;
    output->kind = TFENC_LAYER_OUTPUT_SCORES;
    output->width = layer->n_labels;
    output->labels = layer->labels;
    return TFENC_OK;
}

/* The keys classifier_create() reads (shown by --list-plugins). */
static const tfenc_param_info classifier_params[] = {
    {"pooling", TFENC_PARAM_CHOICE, "cls", "cls (first token) or mean: the vector the head reads",
     TFENC_PARAM_NO_RANGE},
    {"dense", TFENC_PARAM_BOOL, "true", "a dense map d -> d (dense_weight, dense_bias) first",
     TFENC_PARAM_NO_RANGE},
    {"activation", TFENC_PARAM_CHOICE, "tanh", "after the dense map: tanh, relu, gelu, "
     "gelu_tanh or none", TFENC_PARAM_NO_RANGE},
    {"norm", TFENC_PARAM_BOOL, "false", "a LayerNorm (norm_weight, norm_bias) after the "
     "activation (ModernBERT)", TFENC_PARAM_NO_RANGE},
    {"norm_eps", TFENC_PARAM_FLOAT, "1e-5", "the norm's eps", TFENC_PARAM_AT_LEAST(0)},
    {"problem_type", TFENC_PARAM_CHOICE, "auto", "single_label_classification, "
     "multi_label_classification, regression or auto (config.json's problem_type)",
     TFENC_PARAM_NO_RANGE},
    {"scores", TFENC_PARAM_CHOICE, "auto", "logits, softmax, sigmoid, or auto: as transformers' "
     "text-classification pipeline (regression: logits; multi_label or 1 label: sigmoid; else "
     "softmax)", TFENC_PARAM_NO_RANGE},
    {"n_labels", TFENC_PARAM_INT, "0", "labels; 0 takes the rows of out_weight, else they must "
     "agree", TFENC_PARAM_RANGE(0, 65536)},
    {"labels", TFENC_PARAM_STRING, NULL, "id2label as a JSON object, stored as the output's "
     "id2label attribute", TFENC_PARAM_NO_RANGE},
    {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE},
};

TFENC_PLUGIN_TYPES("classifier");

const tfenc_layer_descriptor tfenc_layers_classifier = {
    TFENC_DESCRIPTOR_INIT,
    .key_masking = TFENC_KEY_MASKING_APPLIED,
    .type = "classifier",
    .description = "sequence classification / regression head (cls or mean pooling, dense, "
                   "activation, norm, out map; logits, softmax or sigmoid): writes scores",
    .params = classifier_params,
    .create = classifier_create,
    .forward = classifier_forward,
    .destroy = classifier_destroy,
    .workspace_size = classifier_workspace_size,
    .flops_per_token = classifier_flops,
    .output = classifier_output,
};
