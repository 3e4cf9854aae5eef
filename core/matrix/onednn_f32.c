/* fp32 linear maps on oneDNN (see core/matrix/onednn_f32.h). OpenBLAS
 * packs a map's weights into its kernel's panels in every sgemm, ~10% of
 * an fp32 job's CPU time at fixed row blocks; oneDNN's matmul reads them
 * packed once, in the layout it chose for the block's shape (format any),
 * and runs its own kernels for the CPU (AVX-512 or AVX2 brgemm) where an
 * OpenBLAS older than the CPU falls back to generic ones. */
#include "config.h"

#include "matrix/onednn_f32.h"
#include "base/aligned.h"
#include "matrix/matrix_onednn.h"

#include <dnnl.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* One thread's product: its primitive, memory objects and scratchpad. */
typedef struct f32_product {
    dnnl_primitive_t primitive;
    dnnl_memory_t source, destination, scratchpad;
    void *scratchpad_data;
} f32_product;

struct onednn_f32_linear {
    int rows, in, out, has_bias;
    dnnl_primitive_desc_t chooser; /* made for one thread; its weights layout is the map's */
    size_t weights_bytes;
    void *weights;                 /* packed */
    int borrowed;                  /* weights in the caller's memory */
    dnnl_memory_t weights_memory, bias_memory;
    f32_product *products;         /* [threads] */
    int threads;
};

/* The matmul of one block: source [rows, in], weights [in, out] in
 * `weights` (format any: oneDNN's choice), bias [1, out], destination
 * [rows, out], all f32, scratchpad the caller's; made with the pool's size
 * set to one thread (matrix_onednn.c says why). Not from a parallel region. */
static dnnl_status_t make_desc(const onednn_f32_linear *linear,
                               const dnnl_memory_desc_t *weights,
                               dnnl_primitive_desc_t *primitive_desc)
{
    dnnl_dims_t source_dims = {linear->rows, linear->in},
                destination_dims = {linear->rows, linear->out}, bias_dims = {1, linear->out};
    dnnl_memory_desc_t source, destination, bias;
    dnnl_matmul_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    const int pool = omp_get_max_threads();
    dnnl_status_t status;
    if ((status = dnnl_memory_desc_init_by_tag(&source, 2, source_dims, dnnl_f32, dnnl_ab)) ||
        (status = dnnl_memory_desc_init_by_tag(&destination, 2, destination_dims, dnnl_f32,
                                               dnnl_ab)) ||
        (status = dnnl_memory_desc_init_by_tag(&bias, 2, bias_dims, dnnl_f32, dnnl_ab)) ||
        (status = dnnl_matmul_desc_init(&desc, &source, weights,
                                        linear->has_bias ? &bias : NULL, &destination)) ||
        (status = dnnl_primitive_attr_create(&attr)) ||
        (status = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user)))
        goto done;
    omp_set_num_threads(1);
    status = dnnl_primitive_desc_create(primitive_desc, &desc, attr, onednn_engine(), NULL);
    omp_set_num_threads(pool);
done:
    if (attr != NULL)
        dnnl_primitive_attr_destroy(attr);
    return status;
}

static int failed(tfenc_context *ctx, dnnl_status_t status, const char *what,
                  const onednn_f32_linear *linear)
{
    return tfenc_error(ctx, status == dnnl_out_of_memory ? TFENC_ERR_NO_MEMORY : TFENC_ERR_INTERNAL,
                       "fp32_products = onednn: oneDNN cannot %s for a [%d, %d] weight "
                       "(status %d)", what, linear->out, linear->in, (int)status);
}

int onednn_f32_prepare(tfenc_context *ctx, int rows, int out, int in, int has_bias,
                       onednn_f32_linear **linear_out)
{
    *linear_out = NULL;
    onednn_f32_linear *linear = calloc(1, sizeof *linear);
    if (linear == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "fp32_products = onednn: out of memory");
    *linear = (onednn_f32_linear){.rows = rows, .in = in, .out = out, .has_bias = has_bias};
    dnnl_dims_t weights_dims = {in, out};
    dnnl_memory_desc_t any_weights;
    dnnl_status_t status = onednn_engine() != NULL ? dnnl_success : dnnl_runtime_error;
    if (status == dnnl_success)
        status = dnnl_memory_desc_init_by_tag(&any_weights, 2, weights_dims, dnnl_f32,
                                              dnnl_format_tag_any);
    if (status == dnnl_success)
        status = make_desc(linear, &any_weights, &linear->chooser);
    if (status != dnnl_success) {
        const int error = failed(ctx, status, "choose a layout", linear);
        free(linear);
        return error;
    }
    linear->weights_bytes = dnnl_memory_desc_get_size(
        dnnl_primitive_desc_query_md(linear->chooser, dnnl_query_weights_md, 0));
    *linear_out = linear;
    return TFENC_OK;
}

size_t onednn_f32_packed_bytes(const onednn_f32_linear *linear)
{
    return linear->weights_bytes;
}

/* Thread `thread`'s product on the map's primitive descriptor: every
 * thread's is the same kernel, with memory objects and a scratchpad of its
 * own (they run at once). */
static dnnl_status_t make_product(onednn_f32_linear *linear, f32_product *p)
{
    const_dnnl_primitive_desc_t desc = linear->chooser;
    const int pool = omp_get_max_threads();
    omp_set_num_threads(1);
    dnnl_status_t status = dnnl_primitive_create(&p->primitive, desc);
    omp_set_num_threads(pool);
    if (status == dnnl_success)
        status = dnnl_memory_create(&p->source, dnnl_primitive_desc_query_md(desc, dnnl_query_src_md, 0),
                                    onednn_engine(), DNNL_MEMORY_NONE);
    if (status == dnnl_success)
        status = dnnl_memory_create(&p->destination,
                                    dnnl_primitive_desc_query_md(desc, dnnl_query_dst_md, 0),
                                    onednn_engine(), DNNL_MEMORY_NONE);
    const dnnl_memory_desc_t *pad = dnnl_primitive_desc_query_md(desc, dnnl_query_scratchpad_md, 0);
    const size_t pad_bytes = pad != NULL ? dnnl_memory_desc_get_size(pad) : 0;
    if (status == dnnl_success && pad_bytes > 0) {
        p->scratchpad_data = tfenc_aligned_alloc(pad_bytes);
        status = p->scratchpad_data == NULL
                     ? dnnl_out_of_memory
                     : dnnl_memory_create(&p->scratchpad, pad, onednn_engine(), p->scratchpad_data);
    }
    return status;
}

int onednn_f32_place(tfenc_context *ctx, onednn_f32_linear *linear, int threads,
                     const float *weight, const float *bias, void *packed)
{
    linear->borrowed = packed != NULL;
    linear->weights = packed != NULL ? packed : tfenc_aligned_alloc(linear->weights_bytes);
    dnnl_status_t status = linear->weights != NULL ? dnnl_success : dnnl_out_of_memory;
    if (status == dnnl_success)
        status = dnnl_memory_create(&linear->weights_memory,
                                    dnnl_primitive_desc_query_md(linear->chooser,
                                                                 dnnl_query_weights_md, 0),
                                    onednn_engine(), linear->weights);
    if (status == dnnl_success && weight != NULL)
        status = onednn_reorder_weights(
            weight, 0, linear->in, linear->out,
            dnnl_primitive_desc_query_md(linear->chooser, dnnl_query_weights_md, 0),
            linear->weights_memory);
    dnnl_dims_t bias_dims = {1, linear->out};
    dnnl_memory_desc_t bias_desc;
    if (status == dnnl_success && linear->has_bias)
        status = dnnl_memory_desc_init_by_tag(&bias_desc, 2, bias_dims, dnnl_f32, dnnl_ab);
    if (status == dnnl_success && linear->has_bias)
        status = dnnl_memory_create(&linear->bias_memory, &bias_desc, onednn_engine(),
                                    (void *)bias);
    linear->products = status == dnnl_success ? calloc((size_t)threads, sizeof *linear->products)
                                              : NULL;
    if (status == dnnl_success && linear->products == NULL)
        status = dnnl_out_of_memory;
    linear->threads = linear->products != NULL ? threads : 0;
    for (int t = 0; status == dnnl_success && t < threads; t++)
        status = make_product(linear, &linear->products[t]);
    return status == dnnl_success ? TFENC_OK : failed(ctx, status, "make a product", linear);
}

int onednn_f32_execute(tfenc_context *ctx, const onednn_f32_linear *linear, int thread,
                       void *stream, const float *src, float *dst)
{
    if (thread >= linear->threads)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "fp32_products = onednn: thread %d of a map made for %d", thread,
                           linear->threads);
    const f32_product *p = &linear->products[thread];
    dnnl_status_t status = dnnl_memory_set_data_handle(p->source, (void *)src);
    if (status == dnnl_success)
        status = dnnl_memory_set_data_handle(p->destination, dst);
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, p->source},
                               {DNNL_ARG_WEIGHTS, linear->weights_memory},
                               {DNNL_ARG_DST, p->destination}};
    int n_args = 3;
    if (linear->bias_memory != NULL)
        args[n_args++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, linear->bias_memory};
    if (p->scratchpad != NULL)
        args[n_args++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, p->scratchpad};
    if (status == dnnl_success)
        status = dnnl_primitive_execute(p->primitive, stream, n_args, args);
    if (status == dnnl_success)
        status = dnnl_stream_wait(stream);
    if (status != dnnl_success)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "fp32_products = onednn: the [%d, %d] x [%d, %d]^T product failed "
                           "(status %d)", linear->rows, linear->in, linear->out, linear->in,
                           (int)status);
    return TFENC_OK;
}

void onednn_f32_destroy(onednn_f32_linear *linear)
{
    if (linear == NULL)
        return;
    for (int t = 0; linear->products != NULL && t < linear->threads; t++) {
        f32_product *p = &linear->products[t];
        onednn_product_release(p->primitive, p->source, p->destination, p->scratchpad);
        tfenc_aligned_free(p->scratchpad_data);
    }
    free(linear->products);
    if (linear->weights_memory != NULL)
        dnnl_memory_destroy(linear->weights_memory);
    if (linear->bias_memory != NULL)
        dnnl_memory_destroy(linear->bias_memory);
    if (linear->chooser != NULL)
        dnnl_primitive_desc_destroy(linear->chooser);
    if (!linear->borrowed)
        tfenc_aligned_free(linear->weights);
    free(linear);
}

size_t onednn_f32_bytes(const onednn_f32_linear *linear)
{
    return linear->weights_bytes;
}
