/* tfenc/plugin.h: the whole SDK a layer plugin needs.
 *
 * A plugin is a shared object that exports one symbol, tfenc_plugin_descriptor,
 * which tfenc calls with index 0, 1, 2, ... until it returns NULL. Each
 * descriptor is one layer type (its `type` name is what a job file's
 * `type = ...` refers to). docs/plugins.md walks through a complete example.
 *
 * Contract words: MUST / MUST NOT are promises a plugin or the host keeps.
 */
#ifndef TFENC_PLUGIN_H
#define TFENC_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ABI version. A plugin built against a different MAJOR is refused. A plugin
 * built against a newer MINOR than the host is refused too (it may rely on
 * host services the host lacks); an older MINOR is accepted, because minor
 * releases only append fields (guarded by struct_size, or for the entries of
 * a declared parameter table, which have no size of their own, by the
 * descriptor's abi_minor) and functions. */
#define TFENC_ABI_MAJOR 1
#define TFENC_ABI_MINOR 6

#define TFENC_PLUGIN_ENTRY "tfenc_plugin_descriptor"

#if defined(__GNUC__)
#define TFENC_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#define TFENC_EXPORT __attribute__((visibility("default")))
#else
#define TFENC_PRINTF(fmt_index, first_arg)
#define TFENC_EXPORT
#endif

/* ---------------------------------------------------------------- status */

/* Every host service and plugin callback returns one of these. Zero is
 * success; the detail of a failure is the message in the context. */
typedef enum tfenc_status {
    TFENC_OK = 0,
    TFENC_ERR_NO_MEMORY = -1,   /* an allocation failed */
    TFENC_ERR_CONFIG = -2,      /* job file: unknown key, bad value, missing key */
    TFENC_ERR_WEIGHTS = -3,     /* weights: missing dataset, wrong shape, NaN/Inf */
    TFENC_ERR_INPUT = -4,       /* corpus or input data is malformed */
    TFENC_ERR_IO = -5,          /* a file could not be read or written */
    TFENC_ERR_PLUGIN = -6,      /* a plugin could not be loaded or failed */
    TFENC_ERR_NOT_FOUND = -7,   /* an optional item is absent (not an error by itself) */
    TFENC_ERR_MPI = -8,         /* communication with another rank failed */
    TFENC_ERR_INTERRUPTED = -9, /* stopped by a signal; finished work is kept */
    TFENC_ERR_INTERNAL = -10    /* a broken invariant: a bug in tfenc */
} tfenc_status;

/* Returns a short constant name such as "configuration error". Never NULL. */
const char *tfenc_status_string(int status);

/* ------------------------------------------------------------- the context */

/* Per-run host state handed to every callback: the error slot. Opaque. */
typedef struct tfenc_context tfenc_context;

/* ABI 1.6: where a batch's sparse rows go (tfenc_batch.sparse_rows). Opaque:
 * the host's. */
typedef struct tfenc_sparse_destination tfenc_sparse_destination;

/* Records a one-line message (printf-style) and returns `status`, so that a
 * plugin writes `return tfenc_error(ctx, TFENC_ERR_CONFIG, "...")`. The host
 * prefixes the layer's name; the message SHOULD say what was expected and
 * what was found. The first error recorded wins until the host clears it. */
int tfenc_error(tfenc_context *ctx, int status, const char *format, ...) TFENC_PRINTF(3, 4);

/* ----------------------------------------------------------- parameters */

/* The layer's section of the job file. Every key a plugin reads counts as
 * known; after create() the host refuses the job if the section holds a key
 * that no getter asked for, naming the file, line, section and key. So a
 * plugin MUST read every key it supports during create(), even when the
 * caller kept the default. Getters return TFENC_OK (the default when the key
 * is absent) or TFENC_ERR_CONFIG with a message naming file:line and key. */
typedef struct tfenc_params tfenc_params;

int tfenc_param_int(tfenc_params *params, const char *key, long default_value, long *value);
/* ABI 1.1. An integer in [minimum, maximum], checked on the whole value as
 * written: a value outside the range, or too large for a long, fails with a
 * message naming file:line, the key, the value and the range. Use it for
 * every integer that ends up in an int, so that 2147483648 cannot wrap. */
int tfenc_param_int_range(tfenc_params *params, const char *key, long default_value,
                          long minimum, long maximum, long *value);
int tfenc_param_float(tfenc_params *params, const char *key, double default_value, double *value);
/* true/false, yes/no, on/off, 1/0 */
int tfenc_param_bool(tfenc_params *params, const char *key, int default_value, int *value);
/* The string is owned by the host and lives as long as the model. */
int tfenc_param_string(tfenc_params *params, const char *key, const char *default_value,
                       const char **value);
/* One of a NULL-terminated list of names; *index is the position of the match. */
int tfenc_param_choice(tfenc_params *params, const char *key, const char *const *choices,
                       int default_index, int *index);

/* Declared parameters (ABI 1.1): a layer type may list the keys its
 * create() reads, so that `tfenc-batch --list-plugins` shows every key with
 * its type, default, range and help, as `ompi_info` lists MCA parameters.
 * When a descriptor has a table, the host holds create() to it: reading a
 * key the table does not declare, or not reading one it declares, is
 * refused as a bug of the plugin, naming the type and the key; so is a
 * create() that returns TFENC_OK after a getter failed. */
typedef enum tfenc_param_type {
    TFENC_PARAM_INT = 1,
    TFENC_PARAM_FLOAT = 2,
    TFENC_PARAM_BOOL = 3,
    TFENC_PARAM_STRING = 4,
    TFENC_PARAM_CHOICE = 5
} tfenc_param_type;

/* ABI 1.2: which bounds of an int or float key hold (tfenc_param_info.bounds).
 * The host checks a value the job gives against them before create() runs
 * and refuses the job with one line naming the file, line, section, key,
 * value and range; getters check them too. So create() need not repeat
 * them, and the range is written once, where --list-plugins shows it. */
#define TFENC_PARAM_MINIMUM 1u           /* value >= minimum */
#define TFENC_PARAM_MAXIMUM 2u           /* value <= maximum */
#define TFENC_PARAM_MINIMUM_EXCLUSIVE 4u /* with MINIMUM: value > minimum */
#define TFENC_PARAM_MAXIMUM_EXCLUSIVE 8u /* with MAXIMUM: value < maximum */
/* Initialisers for the range fields, after the four of ABI 1.1:
 *     {"n_heads", TFENC_PARAM_INT, NULL, "query heads", TFENC_PARAM_RANGE(1, 65536)} */
#define TFENC_PARAM_RANGE(lo, hi) \
    .bounds = TFENC_PARAM_MINIMUM | TFENC_PARAM_MAXIMUM, .minimum = (lo), .maximum = (hi)
#define TFENC_PARAM_AT_LEAST(lo) .bounds = TFENC_PARAM_MINIMUM, .minimum = (lo)
#define TFENC_PARAM_ABOVE(lo) \
    .bounds = TFENC_PARAM_MINIMUM | TFENC_PARAM_MINIMUM_EXCLUSIVE, .minimum = (lo)
/* For a key without range; an ABI 1.1 entry of four initialisers means the
 * same (GCC's -Wextra then notes the missing ones, which this silences). */
#define TFENC_PARAM_NO_RANGE .bounds = 0

typedef struct tfenc_param_info {
    const char *name;          /* the key; NULL ends the table */
    tfenc_param_type type;
    const char *default_value; /* as a job file would spell it; NULL: required or computed */
    const char *help;          /* one line: what it does, its choices */
    /* ABI 1.2 (the host reads a 1.1 table without them, as unbounded).
     * Zero bounds: no range. Int bounds MUST be whole numbers; a declared
     * default MUST lie inside the range (the loader refuses the file). */
    unsigned bounds;           /* TFENC_PARAM_MINIMUM | TFENC_PARAM_MAXIMUM | ... */
    double minimum;
    double maximum;
} tfenc_param_info;

/* -------------------------------------------------------------- weights */

/* The layer's group in the weights file (e.g. /encoder/3/attention). */
typedef struct tfenc_weights tfenc_weights;

/* Maximum rank of a weight tensor. */
#define TFENC_MAX_RANK 4

/* Reads dataset `name` of the layer's group as float32 (float16 and bfloat16
 * datasets are converted), checking its rank and shape: dims[i] >= 0 must
 * match, dims[i] < 0 accepts any size and is replaced by the size found. A
 * mismatch, a missing dataset, or a NaN/Inf value fails with a message that
 * names the dataset path, the expected and the found shape. The data is owned
 * by the host, row-major, 64-byte aligned, and valid until the layer's
 * destroy() returns: the host frees what a layer loaded right after it, so
 * a plugin MUST NOT keep it beyond its instance. */
int tfenc_weight_load(tfenc_weights *weights, const char *name, int rank, int64_t *dims,
                      const float **data);

/* 1 if dataset `name` exists in the layer's group, else 0. */
int tfenc_weight_exists(tfenc_weights *weights, const char *name);

/* A linear map y = x W^T + b with W stored as PyTorch's nn.Linear stores it,
 * [out_features, in_features]. The host owns the matrix and keeps it in the
 * layout and precision its matrix backend runs fastest: OpenBLAS fp32 by
 * default, oneDNN bf16 or int8 when the job's [model] precision asks. */
typedef struct tfenc_linear tfenc_linear;

/* Loads n_parts weight datasets [out_i, in_features] and stacks them along
 * the output dimension into one linear map (so Q, K and V become one GEMM).
 * bias_names is NULL for a map without bias; otherwise it lists one bias
 * dataset [out_i] per part. The stacked output width is returned in
 * *out_features. */
int tfenc_linear_load(tfenc_weights *weights, int n_parts, const char *const *weight_names,
                      const char *const *bias_names, int in_features, int *out_features,
                      tfenc_linear **linear);

/* y[rows, out] = x[rows, in] W^T (+ b). x and y MUST NOT overlap. Runs on
 * the host's matrix backend with the rank's configured threads. */
int tfenc_linear_forward(tfenc_context *ctx, const tfenc_linear *linear, const float *x, int rows,
                         float *y);

/* ------------------------------------------- matrix services (ABI 1.1) */

/* Element types of the activation buffers the matrix services read and
 * write. bfloat16 values are the top 16 bits of a float32, as uint16_t. */
typedef enum tfenc_element_type {
    TFENC_FLOAT32 = 0,
    TFENC_BFLOAT16 = 1
} tfenc_element_type;

/* What a linear map applies to x W^T + b before it stores the result: the
 * host fuses it into the product instead of another pass over memory. */
typedef enum tfenc_activation {
    TFENC_ACTIVATION_NONE = 0,
    TFENC_ACTIVATION_RELU = 1,
    TFENC_ACTIVATION_GELU = 2,      /* exact: 0.5 z (1 + erf(z / sqrt 2)) */
    TFENC_ACTIVATION_GELU_TANH = 3, /* torch's approximate='tanh' */
    TFENC_ACTIVATION_SILU = 4,      /* z sigmoid(z) */
    TFENC_ACTIVATION_SWIGLU = 5,    /* gated: y[j] = silu(z[j]) z[f + j], f = out / 2 */
    TFENC_ACTIVATION_GEGLU = 6,     /* gated: y[j] = gelu(z[j]) z[f + j] */
    TFENC_ACTIVATION_GEGLU_TANH = 7 /* ABI 1.3, gated: y[j] = gelu_tanh(z[j]) z[f + j]
                                     * (Gemma's MLP) */
} tfenc_activation;

/* The element type in which the map reads x and writes y fastest: float32
 * when the job runs it in fp32, bfloat16 in bf16 and int8. A plugin that
 * keeps an activation between two of its maps (an FFN's hidden layer)
 * SHOULD keep it in this type; any type is correct. */
tfenc_element_type tfenc_linear_dtype(const tfenc_linear *linear);

typedef struct tfenc_linear_args {
    size_t struct_size;   /* sizeof(tfenc_linear_args) as the plugin saw it */
    const void *x;        /* [rows, in_features] of x_dtype, row-major */
    tfenc_element_type x_dtype;
    void *y;              /* [rows, out_features] of y_dtype; out_features / 2 when gated */
    tfenc_element_type y_dtype;
    int rows;
    tfenc_activation activation;
    /* ABI 1.5 (absent from a smaller struct_size: NULL). Non-NULL: float32
     * rows [rows, y's width] added to the result, y = residual + result
     * (y_dtype float32 only); it may be y itself, which then accumulates.
     * A residual connection's add inside the product's epilogue: bitwise
     * the sum a pass of its own would give. (A pointer, not a flag: an int
     * would sit in the 1.4 struct's tail padding, which a 1.4 plugin may
     * leave as garbage.) */
    const float *residual;
} tfenc_linear_args;

/* y = activation(x W^T + b) (+ residual) in the map's precision. x and y
 * MUST NOT overlap. Like every matrix service it uses the rank's threads itself, so
 * it MUST NOT be called from inside a parallel region. A call with rows = 0
 * computes nothing and prepares the map for its types, activation and
 * whether it has a residual (any non-NULL one prepares that kind): a
 * plugin SHOULD make one from create() for each kind of call its forward()
 * makes, so that forward() does not allocate (tfenc_linear_forward's kind,
 * float32 without activation or residual, is always prepared). */
int tfenc_linear_run(tfenc_context *ctx, const tfenc_linear *linear, const tfenc_linear_args *args);

/* Products of two activations, such as attention's scores Q K^T and its
 * context P V: for b < batch, C_b = alpha A_b op(B_b), with A_b [m, k],
 * op(B_b) [k, n] and C_b [m, n], float32, each matrix row-major with its own
 * row stride and each batch entry at its own offset (the heads of packed
 * Q, K, V rows). They run at the layer's precision: bf16 (fp32 sums) in bf16
 * and int8 jobs, float32 in fp32 ones. A plan made at create() for the
 * largest sizes lets forward() run them without allocating. */
typedef struct tfenc_matmul_plan tfenc_matmul_plan;

typedef struct tfenc_matmul_shape {
    size_t struct_size; /* sizeof(tfenc_matmul_shape) as the plugin saw it */
    int batch;          /* products per call, >= 1 */
    int m, n, k;        /* the largest sizes a call will use, >= 1 */
    int b_transposed;   /* 1: B_b is stored [n, k] and used as B_b^T (Q K^T); 0: stored [k, n] */
} tfenc_matmul_shape;

/* Plans the products of `largest` for the layer whose weights handle this
 * is; the host owns the plan and frees it after the layer's destroy(). */
int tfenc_matmul_plan_create(tfenc_weights *weights, const tfenc_matmul_shape *largest,
                             tfenc_matmul_plan **plan);

typedef struct tfenc_matmul_args {
    size_t struct_size;         /* sizeof(tfenc_matmul_args) as the plugin saw it */
    int m, n, k;                /* within the plan's sizes */
    float alpha;
    const float *a;             /* A_b[i][j] = a[b * a_batch_stride + i * a_row_stride + j] */
    long a_row_stride, a_batch_stride;
    const float *b;             /* stored B_s[i][j] = b[s * b_batch_stride + i * b_row_stride + j] */
    long b_row_stride, b_batch_stride;
    int b_shared_by;            /* batch entries that use one stored B: B_b = B_(b / b_shared_by);
                                   1 (or 0) normally, heads per group for grouped-query attention */
    float *c;                   /* C_b[i][j] = c[b * c_batch_stride + i * c_row_stride + j] */
    long c_row_stride, c_batch_stride;
    /* ABI 1.3 (absent from a smaller struct_size: all NULL). Operands in
     * the plan's own layout (tfenc_matmul_padded_layout), which the host
     * then reads or writes in place instead of copying: */
    const uint16_t *a_bf16;     /* non-NULL: A in bfloat16, [batch][m_padded][k_padded], every
                                   element past A_b's m x k zero; a and its strides unread */
    float *c_padded;            /* non-NULL: C written here, [batch][m_padded][n_padded], the
                                   padding included (its values unspecified), instead of to c;
                                   alpha MUST be 1 */
    const uint16_t *b_bf16;     /* non-NULL: B in bfloat16 as stored, one per batch entry (no
                                   b_shared_by): [batch][n_padded][k_padded] when b_transposed,
                                   else [batch][k_padded][n_padded], every element past B_b's
                                   zero; b and its strides unread */
} tfenc_matmul_args;

/* Runs the batch of products of `args` (plan->batch of them). C MUST NOT
 * overlap A or B. Unlike the linear maps it MAY be called from the
 * threads of an OpenMP parallel region (a plugin spreading its sequences
 * over the pool), one call per thread at a time: it then runs on the
 * calling thread alone. */
int tfenc_matmul(tfenc_context *ctx, const tfenc_matmul_plan *plan, const tfenc_matmul_args *args);

/* ABI 1.3: the layout a call of sizes m, n, k reads its A from and writes
 * its C to (rows and columns padded to the sizes it was planned for), for a
 * caller that keeps an operand in it (tfenc_matmul_args' a_bf16, b_bf16
 * and c_padded): attention's scores read where the product wrote them and
 * its probabilities written where the next product reads them, as
 * bfloat16, without the two copies between; its keys and values laid out
 * once per sequence rather than copied for each tile of queries. TFENC_ERR_NOT_FOUND when the plan's
 * products copy nothing (float32: they read the caller's strides) or
 * m, n, k lie outside the plan. */
typedef struct tfenc_matmul_layout {
    size_t struct_size;         /* sizeof(tfenc_matmul_layout) as the plugin saw it */
    int m_padded, n_padded, k_padded;
} tfenc_matmul_layout;

int tfenc_matmul_padded_layout(const tfenc_matmul_plan *plan, int m, int n, int k,
                               tfenc_matmul_layout *layout);

/* -------------------------------------------------------- packed batches */

/* A microbatch of n_seq sequences laid end to end, without padding: the
 * tokens of sequence s are rows seq_start[s] .. seq_start[s+1]-1. Per-token
 * layers treat x as one [rows, d_model] matrix; only attention and pooling
 * look at seq_start. */
typedef struct tfenc_batch {
    int n_seq;                  /* sequences in the batch, >= 1 */
    int n_tokens;               /* seq_start[n_seq] */
    const int32_t *seq_start;   /* [n_seq + 1], seq_start[0] = 0, non-decreasing */
    const int32_t *token_ids;   /* [n_tokens] vocabulary ids */
    const int32_t *token_types; /* [n_tokens] segment ids, zeros when the input has none */
    const int32_t *positions;   /* [n_tokens] position inside the sequence, from 0 */
    float *x;                   /* [rows, d_model] activations, row-major, 64-byte aligned */
    int rows;                   /* n_tokens, or n_seq once a pooling layer has run */
    int d_model;
    /* ABI 1.4: [n_seq] or NULL. Non-NULL: sequence s's keys of attention
     * are its first seq_keys[s] tokens (1 <= seq_keys[s] <= its length);
     * every token is still a query and keeps its row. A ColBERT query whose
     * [MASK] padding is not attended to (attend_to_mask_tokens = false)
     * is such a sequence: its padding takes part as queries only, as
     * attention_mask = 0 does in Hugging Face models. NULL: every token is a
     * key. The host sets it only when every layer of the model has declared
     * what it does with it (tfenc_layer_descriptor.key_masking). */
    const int32_t *seq_keys;
    /* ABI 1.6: where this batch's sparse rows go (tfenc_batch_sparse_row),
     * the host's; NULL when nobody keeps them (a trial run of the model):
     * they are dropped. A job of several heads runs each head on a batch of
     * its own, so a row goes to the output of the head that made it. */
    tfenc_sparse_destination *sparse_rows;
} tfenc_batch;

/* --------------------------------------------------------- layer types */

/* The model's dimensions, from the job's [model] section. */
typedef struct tfenc_model_info {
    int d_model;
    int vocab_size;    /* 0 when the job does not say */
    int max_positions; /* longest sequence the model accepts */
    int n_layers;      /* repeats of the encoder block */
    int layer_index;   /* this instance's repeat inside its block, or -1 */
} tfenc_model_info;

/* The largest batch forward() will ever see; size workspace from these. */
typedef struct tfenc_limits {
    int max_tokens;  /* rows of x at most */
    int max_seq_len; /* tokens in one sequence at most */
    int max_seqs;    /* sequences in one batch at most */
} tfenc_limits;

typedef struct tfenc_layer_init {
    size_t struct_size;     /* sizeof(tfenc_layer_init) of the host */
    const char *name;       /* instance name for messages, e.g. "encoder.3.ffn" */
    tfenc_params *params;   /* the layer's job-file section */
    tfenc_weights *weights; /* the layer's weights group */
    tfenc_model_info model;
    tfenc_limits limits;
} tfenc_layer_init;

/* ABI 1.3: a SPARSE layer's forward() hands sequence `sequence`'s row to
 * the host: its n non-zero values `values` at the columns `indices`
 * (ascending, each in 0..width-1). Called once per sequence of the batch,
 * in order; the host copies what it keeps (it may apply a top-k or a
 * threshold), so the arrays may be workspace. Returns TFENC_OK, or
 * TFENC_ERR_INTERNAL for a call out of order, with a message. When the
 * host does not write sparse rows (a trial run of the model) it accepts
 * and drops them. */
int tfenc_sparse_row(tfenc_context *ctx, int sequence, int n, const int32_t *indices,
                     const float *values);

/* ABI 1.6: the same, with the row going where the batch says
 * (batch->sparse_rows): the call a SPARSE layer SHOULD make, so that its
 * rows travel with the batch it computed them for. tfenc_sparse_row sends
 * them to the batch the host is running, which is the same for a layer
 * that calls it from forward(). */
int tfenc_batch_sparse_row(tfenc_context *ctx, const tfenc_batch *batch, int sequence, int n,
                           const int32_t *indices, const float *values);

/* ABI 1.2: what a model's last layer produces, which decides what the job
 * writes (docs/scores.md). A layer without an `output` callback keeps the
 * batch's kind: per-token rows, or pooled rows of d_model once a pooling
 * layer has run. */
typedef enum tfenc_layer_output_kind {
    TFENC_LAYER_OUTPUT_HIDDEN = 0, /* rows of d_model values: embeddings or hidden states */
    TFENC_LAYER_OUTPUT_SCORES = 1, /* one row per sequence, the first `width` values of each
                                    * d_model-wide row: a classification/regression head */
    /* ABI 1.3: one sparse row per sequence over `width` columns (a vocabulary),
     * handed to the host with tfenc_sparse_row() from forward(), which
     * leaves batch->rows = n_seq (their values unused). Such a row does not
     * fit a d_model-wide row of the batch: a SPLADE head's has up to 30,522
     * values per sequence, so the host takes them directly. */
    TFENC_LAYER_OUTPUT_SPARSE = 2,
    TFENC_LAYER_OUTPUT_VECTORS = 3 /* ABI 1.3: one row per token, the first `width` values of
                                    * each d_model-wide row: a multi-vector (ColBERT) projection;
                                    * the host leaves out the job's skiplist tokens */
} tfenc_layer_output_kind;

typedef struct tfenc_layer_output {
    size_t struct_size;           /* sizeof(tfenc_layer_output) of the host */
    tfenc_layer_output_kind kind;
    int width;                    /* SCORES: values per sequence, VECTORS: per token;
                                   * 1 <= width <= d_model; SPARSE: columns (the
                                   * vocabulary size), >= 1 */
    const char *labels;           /* SCORES: id2label as a JSON object ({"0": "NEGATIVE",
                                   * ...}) or NULL; owned by the plugin or the host's params,
                                   * valid until destroy() */
} tfenc_layer_output;

/* ABI 1.4: what a layer does with a batch whose seq_keys is set
 * (tfenc_batch). A job that sets it refuses, naming the layer, every layer
 * that declares nothing: a layer that mixes tokens of a sequence and reads
 * no seq_keys would let the masked tokens in. */
typedef enum tfenc_key_masking {
    TFENC_KEY_MASKING_UNDECLARED = 0, /* the value of every plugin built before ABI 1.4 */
    TFENC_KEY_MASKING_UNAFFECTED = 1, /* each token's row depends on that token alone
                                       * (embeddings, norms, feed-forward, projections) */
    TFENC_KEY_MASKING_APPLIED = 2     /* reads seq_keys: attends to, or pools, a sequence's
                                       * keys only, as attention_mask does in Hugging Face
                                       * models and sentence-transformers' pooling */
} tfenc_key_masking;

typedef struct tfenc_layer_descriptor {
    /* ABI this descriptor was compiled against: set them to the macros. */
    uint32_t abi_major;
    uint32_t abi_minor;
    /* sizeof(tfenc_layer_descriptor) as the plugin saw it. */
    size_t struct_size;
    /* Name used by `type =` in job files: lower case, [a-z0-9_]. */
    const char *type;
    /* One line for `tfenc-batch --list-plugins`. */
    const char *description;

    /* Reads parameters and weights and returns an instance in *instance.
     * MUST read every key it supports (see tfenc_params). On failure it MUST
     * free what it allocated, record an error and return it; the host then
     * does not call destroy(). */
    int (*create)(tfenc_context *ctx, const tfenc_layer_init *init, void **instance);

    /* Transforms batch->x in place. MUST NOT allocate, print, exit, or call
     * MPI or HDF5: scratch memory is `workspace`, workspace_size() bytes,
     * 64-byte aligned. May change batch->rows only downward (pooling). Called
     * by one thread at a time per instance. MUST NOT start threads of its
     * own; MAY run OpenMP parallel loops, which use the rank's one thread
     * pool (the host sizes it; the matrix services use it too). */
    int (*forward)(void *instance, tfenc_context *ctx, tfenc_batch *batch, void *workspace);

    /* Called exactly once for every instance create() returned. */
    void (*destroy)(void *instance);

    /* Optional (may be NULL = no scratch). Bytes of workspace forward() needs
     * for batches within `limits`. */
    size_t (*workspace_size)(const void *instance, const tfenc_limits *limits);

    /* Optional (may be NULL = cheap). Floating-point operations per token for
     * sequences of mean length `mean_seq_len`; the pipeline balances stages
     * by it. */
    double (*flops_per_token)(const void *instance, double mean_seq_len);

    /* Optional (may be NULL). Future interfaces by URI; return NULL for an
     * unknown one. */
    const void *(*extension)(const char *uri);

    /* ABI 1.1, optional (may be NULL). The keys create() reads, ended by an
     * entry whose name is NULL (see tfenc_param_info). */
    const tfenc_param_info *params;

    /* ABI 1.2, optional (may be NULL). Fills *output for an instance
     * create() returned; the host asks the model's last layer only. A
     * SCORES layer MUST leave batch->rows = n_seq with each sequence's
     * values at the start of its row. Returns TFENC_OK or an error. */
    int (*output)(const void *instance, tfenc_layer_output *output);

    /* ABI 1.4, in the first reserved slot: an enum and its padding take
     * no more room than the pointer there was, so the struct keeps its
     * layout, and a 1.3 plugin's zero there reads as UNDECLARED. */
    tfenc_key_masking key_masking;

    /* Zero. Lets minor versions append callbacks without a major bump. */
    void *reserved[5];
} tfenc_layer_descriptor;

/* Counters (an extension: descriptor->extension(TFENC_COUNTERS_URI)
 * returns a tfenc_counters_extension, or NULL when the layer keeps none).
 * A layer MAY count what its forward passes saw, such as a mixture of
 * experts' tokens per expert; `tfenc-batch --dry-run` prints the counts of
 * one pass over its timing sample beside the layer's step. counters()
 * gives the counts since create() (values owned by the instance, valid
 * until its next forward() or destroy()), *label what they count and *n
 * how many there are; it MUST NOT allocate. Read between forward passes
 * only. */
#define TFENC_COUNTERS_URI "tfenc:counters/1"

typedef struct tfenc_counters_extension {
    size_t struct_size; /* sizeof(tfenc_counters_extension) as the plugin saw it */
    int (*counters)(const void *instance, const char **label, int *n,
                    const long long **values);
} tfenc_counters_extension;

/* ABI 1.5: what extension(TFENC_EXTENSION_ADDS_INPUT) returns for a layer
 * that can end with its own input added to its result, batch->x = x +
 * f(x), the add made in its last product (tfenc_linear_args.residual). The
 * host calls it instead of forward() where a residual connection's skip
 * is the layer's input (a block sublayer without a norm before it: the
 * post-norm blocks of BERT and MPNet), and so drops its own copy of the
 * input and its add, two passes over the activations per sublayer. Its
 * result MUST be bitwise forward()'s plus the input, and it MUST NOT change
 * batch->rows. */
#define TFENC_EXTENSION_ADDS_INPUT "tfenc:forward_adding_input"

typedef struct tfenc_forward_adding_input {
    size_t struct_size; /* sizeof(tfenc_forward_adding_input) as the plugin saw it */
    int (*forward)(void *instance, tfenc_context *ctx, tfenc_batch *batch, void *workspace);
} tfenc_forward_adding_input;

/* The entry symbol every plugin exports. Returns descriptor `index`, or NULL
 * past the last one. */
typedef const tfenc_layer_descriptor *(*tfenc_plugin_entry_fn)(unsigned index);

/* The layer types a plugin file provides, readable without loading it (ABI
 * 1.1). tfenc loads only the plugin files a job needs: a file provides the
 * types this declaration lists, or, without one, the type its name says
 * (mytype.so provides mytype). Write it once per source file, next to the
 * descriptors, listing their type names separated by spaces:
 *     TFENC_PLUGIN_TYPES("attention_pooling");
 * It puts the names into the ELF section .tfenc_types of the shared object,
 * where the loader reads them. The descriptors MUST describe every type the
 * file declares; a type described but not declared is not offered to jobs. */
#if defined(__GNUC__)
#define TFENC_PLUGIN_TYPES(names) \
    __attribute__((used, section(".tfenc_types"))) static const char tfenc_declared_types_[] = names
#else
#define TFENC_PLUGIN_TYPES(names) \
    static const char tfenc_declared_types_[] = names
#endif

#define TFENC_DESCRIPTOR_INIT .abi_major = TFENC_ABI_MAJOR, .abi_minor = TFENC_ABI_MINOR, \
    .struct_size = sizeof(tfenc_layer_descriptor)

#ifdef __cplusplus
}
#endif
#endif /* TFENC_PLUGIN_H */
