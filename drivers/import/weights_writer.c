/* Writes the weights file (docs/weights.md): every planned tensor, the
 * WordPiece tokenizer, and the provenance attributes. */
#include "config.h"

#include "weights_writer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "base/float16.h"
#include "base/hdf5_attributes.h"
#include "base/hdf5_error.h"

#include "adapters.h"

const char *const import_storage_names[3] = {"float32", "float16", "bfloat16"};

/* One line naming the file, what could not be written, and HDF5's cause. */
static int hdf5_error(tfenc_context *ctx, const char *path, const char *what)
{
    char detail[512];
    return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot write %s (HDF5: %s)", path, what,
                       tfenc_hdf5_error_detail(detail, sizeof detail));
}

static int write_string_attribute(tfenc_context *ctx, const char *path, hid_t location,
                                  const char *name, const char *value)
{
    return tfenc_hdf5_write_string_attribute(location, name, value) == 0
               ? TFENC_OK
               : hdf5_error(ctx, path, name);
}

static int write_int_attribute(tfenc_context *ctx, const char *path, hid_t location,
                               const char *name, int value)
{
    return tfenc_hdf5_write_attribute(location, name, H5T_STD_I32LE, H5T_NATIVE_INT, &value) == 0
               ? TFENC_OK
               : hdf5_error(ctx, path, name);
}

/* Writes `data` (count values) as dataset `name` with `rank`/`dims`. The
 * 16-bit storage types are filled by tfenc's own rounding (nearest, ties to
 * even, as PyTorch's .half()/.bfloat16()), not by HDF5's conversion, which
 * rounds some ties differently. */
static int write_dataset(importer *self, const char *path, hid_t file, hid_t create_groups,
                         const char *name, int rank, const int64_t *dims, const float *data)
{
    tfenc_context *ctx = self->ctx;
    hsize_t shape[2];
    size_t count = 1;
    for (int i = 0; i < rank; i++) {
        shape[i] = (hsize_t)dims[i];
        count *= (size_t)dims[i];
    }
    hid_t type = self->dtype == STORAGE_FLOAT16 ? tfenc_h5_float16_type()
                 : self->dtype == STORAGE_BFLOAT16 ? tfenc_h5_bfloat16_type()
                 : H5Tcopy(H5T_IEEE_F32LE);
    hid_t space = H5Screate_simple(rank, shape, NULL);
    hid_t dataset = -1;
    int status = TFENC_OK;
    uint16_t *narrow = NULL;
    if (type < 0 || space < 0) {
        status = hdf5_error(ctx, path, name);
        goto done;
    }
    const void *buffer = data;
    hid_t memory_type = H5T_NATIVE_FLOAT;
    if (self->dtype != STORAGE_FLOAT32) {
        narrow = malloc(count * sizeof *narrow + 1);
        if (narrow == NULL) {
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for %s", name);
            goto done;
        }
        if (self->dtype == STORAGE_FLOAT16)
            tfenc_float32_to_float16_array(narrow, data, count);
        else
            tfenc_float32_to_bfloat16_array(narrow, data, count);
        for (size_t i = 0; i < count; i++) {
            if ((narrow[i] & 0x7fffu) >= (self->dtype == STORAGE_FLOAT16 ? 0x7c00u : 0x7f80u)) {
                status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: value %g of %s overflows "
                                     "%s; use --dtype bfloat16 or float32", path,
                                     (double)data[i], name, import_storage_names[self->dtype]);
                goto done;
            }
        }
        buffer = narrow;
        memory_type = type;
    }
    dataset = H5Dcreate2(file, name, type, space, create_groups, H5P_DEFAULT, H5P_DEFAULT);
    if (dataset < 0 || H5Dwrite(dataset, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer) < 0)
        status = hdf5_error(ctx, path, name);
done:
    free(narrow);
    if (dataset >= 0)
        H5Dclose(dataset);
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    return status;
}

/* The tokenizer goes through core's tfenc_tokenizer_store, in the layout
 * tfenc-batch's tfenc_tokenizer_load reads; max_length is the importer's. */
static int write_tokenizer(importer *self, const char *path, hid_t file)
{
    tfenc_context *ctx = self->ctx;
    const tokenizer_settings *settings = &self->tokenizer;
    tfenc_tokenizer *wordpiece = NULL;
    int status = TFENC_OK;
    if (settings->json == NULL) {
        tfenc_tokenizer_options options;
        tfenc_tokenizer_options_default(&options);
        options.lowercase = settings->do_lower_case;
        options.strip_accents = settings->strip_accents;
        options.chinese_chars = settings->tokenize_chinese_chars;
        status = tfenc_tokenizer_create_from_tokens(ctx, settings->vocab, settings->vocab_count,
                                                    &options, &wordpiece);
    }
    if (status == TFENC_OK)
        status = tfenc_tokenizer_store(ctx, settings->json != NULL ? settings->json : wordpiece,
                                       file, path);
    tfenc_tokenizer_destroy(wordpiece);
    hid_t group = status == TFENC_OK ? H5Gopen2(file, "/tokenizer", H5P_DEFAULT) : -1;
    if (status == TFENC_OK && group < 0)
        status = hdf5_error(ctx, path, "/tokenizer");
    if (status == TFENC_OK)
        status = write_int_attribute(ctx, path, group, "max_length", self->max_length);
    if (group >= 0)
        H5Gclose(group);
    return status;
}

/* Entry item's tensor as float32 into a new *data (zeros when it has no
 * source), the chosen task's adapter merged, checked finite. */
static int read_entry(importer *self, const tensor_plan *item, float **data)
{
    tfenc_context *ctx = self->ctx;
    /* +1: a zero-size tensor still gets a pointer to pass around. */
    size_t count = item->zeros || item->values != NULL
                       ? (size_t)item->dims[0] * (item->rank > 1 ? item->dims[1] : 1)
                       : (size_t)item->tensor->n_elements;
    float *values = *data = calloc(count + 1, sizeof *values);
    if (values == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for tensor '%s'",
                           item->source);
    int status;
    if (item->values != NULL)
        memcpy(values, item->values, count * sizeof *values);
    else if (!item->zeros
             && (status = tfenc_checkpoint_read_float32(ctx, item->file, item->tensor, values)))
        return status;
    /* The chosen task's adapter, before any block of rows is taken. */
    if ((status = import_merge_adapter(self, item, values)) != TFENC_OK)
        return status;
    /* tfenc refuses non-finite weights at load time: say so now, by name
     * (computed values were checked by the importer that made them). */
    for (size_t k = 0; item->tensor != NULL && k < count; k++)
        if (!isfinite(values[k]))
            return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' holds a non-finite "
                               "value at element %zu", item->tensor->file,
                               item->tensor->stored_name, k);
    return TFENC_OK;
}

int import_write_weights(importer *self, const char *path)
{
    tfenc_context *ctx = self->ctx;
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0)
        return hdf5_error(ctx, path, "the file");
    hid_t create_groups = H5Pcreate(H5P_LINK_CREATE);
    int status = TFENC_OK;
    float *data = NULL;
    if (create_groups < 0 || H5Pset_create_intermediate_group(create_groups, 1) < 0) {
        status = hdf5_error(ctx, path, "the file");
        goto done;
    }
    /* The tensor `data` holds as read (no adapter merged into it): the
     * next entry of the same tensor, another block of its rows (each
     * expert's of megablocks' w1 and w2), takes it from there rather than
     * reading it again. */
    const tfenc_checkpoint_tensor *held = NULL;
    for (int i = 0; i < self->plan_count; i++) {
        const tensor_plan *item = &self->plan[i];
        if (held == NULL || item->tensor != held || item->lora_a != NULL) {
            free(data);
            data = NULL;
            if ((status = read_entry(self, item, &data)) != TFENC_OK)
                goto done;
            held = item->zeros || item->values != NULL || item->lora_a != NULL ? NULL
                                                                             : item->tensor;
        }
        /* A block of rows starts first_row rows into the tensor; a
         * transposed one (dims[1] rows of dims[0] values in the source) is
         * written from a turned copy. */
        size_t row_size = item->rank > 1 ? (size_t)item->dims[1] : 1;
        float *turned = NULL;
        if (item->transposed) {
            const size_t rows = (size_t)item->dims[1], columns = (size_t)item->dims[0];
            turned = malloc(rows * columns * sizeof *turned);
            if (turned == NULL) {
                status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for tensor '%s'",
                                     item->source);
                goto done;
            }
            const float *source = data + (size_t)item->first_row * columns;
            for (size_t r = 0; r < rows; r++)
                for (size_t k = 0; k < columns; k++)
                    turned[k * rows + r] = source[r * columns + k];
        }
        status = write_dataset(self, path, file, create_groups, item->target, item->rank,
                               item->dims,
                               turned != NULL ? turned : data + (size_t)item->first_row * row_size);
        free(turned);
        if (status != TFENC_OK)
            goto done;
    }
    if (self->tokenizer.present
        && (status = write_tokenizer(self, path, file)) != TFENC_OK)
        goto done;

    char *source = realpath(self->model_dir, NULL);
    status = write_string_attribute(ctx, path, file, "source",
                                    source != NULL ? source : self->model_dir);
    free(source);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, path, file, "config_json",
                                        self->config.config_text);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, path, file, "importer_version", IMPORTER_VERSION);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, path, file, "model_type", self->config.model_type);
    /* Which task's adapter the weights hold: config_json lists them all. */
    if (status == TFENC_OK && self->adapters.count > 0)
        status = write_string_attribute(ctx, path, file, "task", self->adapters.task);
done:
    free(data);
    if (create_groups >= 0)
        H5Pclose(create_groups);
    if (H5Fclose(file) < 0 && status == TFENC_OK)
        status = hdf5_error(ctx, path, "the file");
    return status;
}
