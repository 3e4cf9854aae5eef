/* The tokenizer in the weights file: the `/tokenizer` group that
 * tfenc-import writes and tfenc-batch reads. A tokenizer.json is kept as
 * its text (/tokenizer/json); a vocab.txt keeps the layout of tfenc 0.1
 * (/tokenizer/vocab and option attributes), so files imported before
 * tokenizer.json support still load. */
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_internal.h"
#include "base/files.h"
#include "base/hdf5_attributes.h"
#include "base/hdf5_error.h"
#include "base/hdf5_intact.h"

#include <hdf5.h>
#include <stdlib.h>
#include <string.h>

static int hdf5_failure(tfenc_context *ctx, const char *path, const char *name)
{
    char detail[256];
    return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "weights %s: cannot write %s: %s", path, name,
                       tfenc_hdf5_error_detail(detail, sizeof detail));
}

static hid_t utf8_string_type(void)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    if (type >= 0 && (H5Tset_size(type, H5T_VARIABLE) < 0 || H5Tset_cset(type, H5T_CSET_UTF8) < 0)) {
        H5Tclose(type);
        return -1;
    }
    return type;
}

static int write_int(tfenc_context *ctx, const char *path, hid_t group, const char *name, int value)
{
    return tfenc_hdf5_write_attribute(group, name, H5T_STD_I32LE, H5T_NATIVE_INT, &value) == 0
               ? TFENC_OK
               : hdf5_failure(ctx, path, name);
}

static int write_string(tfenc_context *ctx, const char *path, hid_t group, const char *name,
                        const char *value)
{
    return tfenc_hdf5_write_string_attribute(group, name, value) == 0
               ? TFENC_OK
               : hdf5_failure(ctx, path, name);
}

/* A dataset of UTF-8 strings: one (scalar) or n of them. */
static int write_strings(tfenc_context *ctx, const char *path, hid_t group, const char *name,
                         const char *const *values, hsize_t n, int scalar)
{
    hid_t type = utf8_string_type();
    hid_t space = scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, NULL);
    hid_t dataset = type >= 0 && space >= 0
                        ? H5Dcreate2(group, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)
                        : -1;
    int ok = dataset >= 0 && H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0;
    if (dataset >= 0)
        H5Dclose(dataset);
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    return ok ? TFENC_OK : hdf5_failure(ctx, path, name);
}

int tfenc_tokenizer_store(tfenc_context *ctx, const tfenc_tokenizer *t, int64_t file,
                          const char *path)
{
    hid_t group = H5Gcreate2((hid_t)file, "/tokenizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (group < 0)
        return hdf5_failure(ctx, path, "/tokenizer");
    int status;
    if (t->json_text != NULL) {
        const char *text = t->json_text;
        status = write_strings(ctx, path, group, "json", &text, 1, 1);
    } else {
        status = write_strings(ctx, path, group, "vocab", (const char *const *)t->vocab_tokens,
                               (hsize_t)t->n_vocab_tokens, 0);
        if (status == TFENC_OK)
            status = write_int(ctx, path, group, "do_lower_case", t->options.lowercase);
        if (status == TFENC_OK)
            status = write_int(ctx, path, group, "strip_accents", t->options.strip_accents);
        if (status == TFENC_OK)
            status = write_int(ctx, path, group, "tokenize_chinese_chars", t->options.chinese_chars);
        static const char *const names[] = {"cls_token", "sep_token", "unk_token", "pad_token"};
        static const char *const tokens[] = {"[CLS]", "[SEP]", "[UNK]", "[PAD]"};
        for (int i = 0; i < 4 && status == TFENC_OK; i++)
            if (tfenc_tokenizer_token_id(t, tokens[i]) >= 0)
                status = write_string(ctx, path, group, names[i], tokens[i]);
    }
    H5Gclose(group);
    return status;
}

/* --------------------------------------------------------------- loading */

static int read_int(hid_t group, const char *name, int *value)
{
    if (H5Aexists(group, name) <= 0)
        return 0;
    hid_t attribute = H5Aopen(group, name, H5P_DEFAULT);
    hid_t space = attribute >= 0 ? H5Aget_space(attribute) : -1;
    /* One value only: H5Aread of an array would write past *value. */
    int ok = space >= 0 && H5Sget_simple_extent_npoints(space) == 1 &&
             H5Aread(attribute, H5T_NATIVE_INT, value) >= 0;
    if (space >= 0)
        H5Sclose(space);
    if (attribute >= 0)
        H5Aclose(attribute);
    return ok;
}

static int load_json(tfenc_context *ctx, const char *path, hid_t file,
                     const tfenc_tokenizer_options *options, tfenc_tokenizer **tokenizer)
{
    hid_t dataset = H5Dopen2(file, "/tokenizer/json", H5P_DEFAULT);
    hid_t type = utf8_string_type();
    hid_t space = dataset >= 0 ? H5Dget_space(dataset) : -1;
    char *text = NULL;
    int status;
    if (dataset < 0 || type < 0 || space < 0 || H5Sget_simple_extent_npoints(space) != 1 ||
        H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, &text) < 0 || text == NULL) {
        char detail[256];
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "weights %s: /tokenizer/json is not one "
                             "string: %s", path, tfenc_hdf5_error_detail(detail, sizeof detail));
    } else if ((status = tfenc_hdf5_check_intact(ctx, file, path, "/tokenizer/json")) ==
               TFENC_OK) {
        size_t length = strlen(path) + sizeof ":/tokenizer/json";
        char *source = malloc(length);
        if (source == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        else {
            snprintf(source, length, "%s:/tokenizer/json", path);
            status = tfenc_tokenizer_create_from_json_text(ctx, text, strlen(text), source, options,
                                                           tokenizer);
            free(source);
        }
    }
    if (text != NULL)
        H5free_memory(text);
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    if (dataset >= 0)
        H5Dclose(dataset);
    return status;
}

/* tfenc 0.1's layout: the stored options apply unless the job set them. */
static int load_vocab(tfenc_context *ctx, const char *path, hid_t file,
                      const tfenc_tokenizer_options *options, tfenc_tokenizer **tokenizer)
{
    tfenc_tokenizer_options chosen = *options;
    hid_t group = H5Gopen2(file, "/tokenizer", H5P_DEFAULT);
    if (group >= 0) {
        if (!(options->job_set & TFENC_TOKENIZER_SET_LOWERCASE))
            read_int(group, "do_lower_case", &chosen.lowercase);
        if (!(options->job_set & TFENC_TOKENIZER_SET_STRIP_ACCENTS))
            read_int(group, "strip_accents", &chosen.strip_accents);
        if (!(options->job_set & TFENC_TOKENIZER_SET_CHINESE_CHARS))
            read_int(group, "tokenize_chinese_chars", &chosen.chinese_chars);
        H5Gclose(group);
    }
    chosen.job_set = 0;
    hid_t dataset = H5Dopen2(file, "/tokenizer/vocab", H5P_DEFAULT);
    hid_t space = dataset >= 0 ? H5Dget_space(dataset) : -1;
    hssize_t count = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    hid_t type = utf8_string_type();
    char **tokens = count > 0 && count <= INT32_MAX ? calloc((size_t)count, sizeof *tokens) : NULL;
    int status;
    if (tokens == NULL || type < 0 ||
        H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, tokens) < 0) {
        char detail[256];
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "weights %s: /tokenizer/vocab is not a list "
                             "of strings: %s", path, tfenc_hdf5_error_detail(detail, sizeof detail));
    } else {
        status = tfenc_hdf5_check_intact(ctx, file, path, "/tokenizer/vocab");
        for (hssize_t i = 0; i < count && status == TFENC_OK; i++)
            if (tokens[i] == NULL)
                status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "weights %s: /tokenizer/vocab entry "
                                     "%lld is empty", path, (long long)i);
        if (status == TFENC_OK)
            status = tfenc_tokenizer_create_from_tokens(ctx, (const char *const *)tokens, (int)count,
                                                        &chosen, tokenizer);
    }
    if (tokens != NULL) {
        H5Dvlen_reclaim(type, space, H5P_DEFAULT, tokens);
        free(tokens);
    }
    if (type >= 0)
        H5Tclose(type);
    if (space >= 0)
        H5Sclose(space);
    if (dataset >= 0)
        H5Dclose(dataset);
    return status;
}

int tfenc_tokenizer_load(tfenc_context *ctx, const char *path,
                         const tfenc_tokenizer_options *options, tfenc_tokenizer **tokenizer)
{
    *tokenizer = NULL;
    tfenc_tokenizer_options chosen;
    tfenc_tokenizer_options_default(&chosen);
    if (options != NULL)
        chosen = *options;
    /* HDF5's open() would wait forever on a FIFO: check the kind first. */
    int checked = tfenc_file_check_regular(ctx, "weights", path);
    if (checked != TFENC_OK)
        return checked;
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) {
        char detail[256];
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "weights %s: cannot open: %s", path,
                           tfenc_hdf5_error_detail(detail, sizeof detail));
    }
    int status;
    if (H5Lexists(file, "/tokenizer", H5P_DEFAULT) > 0 &&
        H5Lexists(file, "/tokenizer/json", H5P_DEFAULT) > 0)
        status = load_json(ctx, path, file, &chosen, tokenizer);
    else if (H5Lexists(file, "/tokenizer", H5P_DEFAULT) > 0 &&
             H5Lexists(file, "/tokenizer/vocab", H5P_DEFAULT) > 0)
        status = load_vocab(ctx, path, file, &chosen, tokenizer);
    else
        status = tfenc_error(ctx, TFENC_ERR_NOT_FOUND, "weights %s has no tokenizer "
                             "(/tokenizer/json or /tokenizer/vocab)", path);
    H5Fclose(file);
    return status;
}
