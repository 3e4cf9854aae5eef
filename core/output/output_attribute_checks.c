/* The root attributes of a tfenc output, each with its type and domain,
 * and the check that holds a file's to them and to each other
 * (output_checks.h). */
#include "output/output_checks.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hdf5_attributes.h"
#include "base/hdf5_error.h"
#include "base/precision.h"
#include "job/id2label.h"
#include "output/kinds.h"
#include "output/output.h"
#include "output/output_check_state.h"

typedef enum attribute_domain {
    DOMAIN_TEXT,          /* any string */
    DOMAIN_CHOICE,        /* one of `choices` (its first n_choices, when given) */
    DOMAIN_INTEGER,       /* one integer in minimum..maximum */
    DOMAIN_FLOAT,         /* one finite value in low..high */
    DOMAIN_FLOAT_ARRAY,   /* d_model finite values */
    DOMAIN_DIGEST,        /* a SHA-256 as 64 hex digits, or "" where there is nothing to hash */
    DOMAIN_FILE_DIGESTS,  /* lines "FILE SHA256" (plugins_sha256) */
    DOMAIN_ID2LABEL,      /* "" or a JSON object naming d_model labels (job/id2label.h) */
    DOMAIN_TOKEN_IDS,     /* non-negative integers separated by spaces, or "" */
    DOMAIN_LAYOUT,        /* "ranks=R data_parallel=D pipeline_stages=S", words KEY=VALUE */
    DOMAIN_CORPUS_SHARDS  /* the table of the corpus's files (read_corpus_shards) */
} attribute_domain;

typedef struct attribute_spec {
    const char *name;
    attribute_domain domain;
    const char *const *choices;
    int n_choices; /* 0: every entry of `choices` up to its NULL */
    int64_t minimum, maximum;
    double low, high;
} attribute_spec;

static const char *const multivector_modes[] = {"document", "query", NULL};
static const char *const query_paddings[] = {"", "attended", "masked", NULL};
static const char *const first_tokens[] = {"", "kept", "skipped", NULL};

/* Every root attribute a tfenc output has (output/output.h), in the order
 * they are checked: `complete` first, since a reader trusts it first. */
static const attribute_spec attributes[] = {
    {.name = "complete", .domain = DOMAIN_INTEGER, .minimum = 0, .maximum = 1},
    {.name = "n_documents", .domain = DOMAIN_INTEGER, .minimum = 0, .maximum = INT64_MAX},
    {.name = "d_model", .domain = DOMAIN_INTEGER, .minimum = 1, .maximum = INT32_MAX},
    {.name = "n_tokens", .domain = DOMAIN_INTEGER, .minimum = 0, .maximum = INT64_MAX},
    {.name = "n_chunks", .domain = DOMAIN_INTEGER, .minimum = 0, .maximum = INT64_MAX},
    {.name = "sparse_top_k", .domain = DOMAIN_INTEGER, .minimum = 0, .maximum = INT32_MAX},
    {.name = "output_kind", .domain = DOMAIN_CHOICE, .choices = tfenc_output_kind_names,
     .n_choices = TFENC_OUTPUT_AUTO},
    {.name = "dtype", .domain = DOMAIN_CHOICE, .choices = tfenc_output_dtype_names,
     .n_choices = TFENC_DTYPE_COUNT},
    {.name = "compression", .domain = DOMAIN_CHOICE, .choices = tfenc_output_compression_names},
    {.name = "chunks", .domain = DOMAIN_CHOICE, .choices = tfenc_output_chunks_names},
    {.name = "precision", .domain = DOMAIN_CHOICE, .choices = tfenc_precision_names,
     .n_choices = TFENC_PRECISION_COUNT},
    {.name = "multivector_mode", .domain = DOMAIN_CHOICE, .choices = multivector_modes},
    {.name = "multivector_query_padding", .domain = DOMAIN_CHOICE, .choices = query_paddings},
    {.name = "multivector_skiplist", .domain = DOMAIN_TOKEN_IDS},
    {.name = "multivector_first_token", .domain = DOMAIN_CHOICE, .choices = first_tokens},
    {.name = "multivector_marker", .domain = DOMAIN_TEXT},
    {.name = "id2label", .domain = DOMAIN_ID2LABEL},
    {.name = "sparse_threshold", .domain = DOMAIN_FLOAT, .low = 0.0, .high = INFINITY},
    {.name = "precision_sample_min_cosine", .domain = DOMAIN_FLOAT, .low = -1.0, .high = 1.0},
    {.name = "quantization_min", .domain = DOMAIN_FLOAT_ARRAY},
    {.name = "quantization_max", .domain = DOMAIN_FLOAT_ARRAY},
    {.name = "quantization_ranges_source", .domain = DOMAIN_TEXT},
    {.name = "weights_sha256", .domain = DOMAIN_DIGEST},
    {.name = "corpus_fingerprint", .domain = DOMAIN_DIGEST},
    {.name = "vocabulary_fingerprint", .domain = DOMAIN_DIGEST},
    {.name = "plugins_sha256", .domain = DOMAIN_FILE_DIGESTS},
    {.name = "corpus_shards", .domain = DOMAIN_CORPUS_SHARDS},
    {.name = "layout", .domain = DOMAIN_LAYOUT},
    {.name = "tfenc_version", .domain = DOMAIN_TEXT},
    {.name = "created", .domain = DOMAIN_TEXT},
    {.name = "job", .domain = DOMAIN_TEXT},
    {.name = "job_settings", .domain = DOMAIN_TEXT},
    {.name = "job_path", .domain = DOMAIN_TEXT},
    {.name = "working_directory", .domain = DOMAIN_TEXT},
    {.name = "job_overrides", .domain = DOMAIN_TEXT},
    {.name = "precision_steps", .domain = DOMAIN_TEXT},
    {.name = "kernels", .domain = DOMAIN_TEXT},
    {.name = "path_choices", .domain = DOMAIN_TEXT},
    {.name = "run_summaries", .domain = DOMAIN_TEXT},
    {.name = "unit_norm", .domain = DOMAIN_INTEGER, .minimum = 0, .maximum = 1},
};

/* ============================================================== the checks */


static int is_digest(const char *text, size_t length)
{
    if (length != 64)
        return 0;
    for (size_t i = 0; i < length; i++)
        if (!isxdigit((unsigned char)text[i]))
            return 0;
    return 1;
}

/* The attribute's form, its type class and count of values, before its
 * value: a value in another form would read as absent or be misread. */
static int check_attribute_form(tfenc_check *c, const attribute_spec *spec, hid_t attribute)
{
    hid_t type = H5Aget_type(attribute), space = H5Aget_space(attribute);
    H5T_class_t found = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    hssize_t count = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    H5T_class_t wanted = spec->domain == DOMAIN_INTEGER     ? H5T_INTEGER
                         : spec->domain == DOMAIN_FLOAT ||
                                   spec->domain == DOMAIN_FLOAT_ARRAY ? H5T_FLOAT
                                                                      : H5T_STRING;
    const int64_t d_model = c->d_model;
    int agrees = found == wanted &&
                 (spec->domain != DOMAIN_FLOAT_ARRAY ? count == 1
                                                     : d_model < 0 || count == d_model);
    if (!agrees) {
        char type_text[32] = "unreadable", shape[96] = "unreadable", expected[96];
        if (type >= 0)
            tfenc_check_describe_type(type, type_text, sizeof type_text);
        if (space >= 0)
            tfenc_check_describe_space(space, shape, sizeof shape);
        if (spec->domain == DOMAIN_INTEGER)
            snprintf(expected, sizeof expected, "one integer");
        else if (spec->domain == DOMAIN_FLOAT)
            snprintf(expected, sizeof expected, "one floating-point value");
        else if (spec->domain == DOMAIN_FLOAT_ARRAY)
            snprintf(expected, sizeof expected, "d_model (%lld) floating-point values",
                     (long long)d_model);
        else
            snprintf(expected, sizeof expected, "one string");
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute '%s' is %s of %s, expected %s",
                         c->attribute, shape, type_text, expected);
    }
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    return c->status;
}

static void check_integer_value(tfenc_check *c, const attribute_spec *spec)
{
    int64_t value = tfenc_check_integer_attribute(c->group, spec->name, 0);
    if (value >= spec->minimum && value <= spec->maximum)
        return;
    if (spec->minimum == 0 && spec->maximum == 1)
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute '%s' is %lld, expected 0 or 1",
                         c->attribute, (long long)value);
    else if (spec->maximum == INT64_MAX)
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute '%s' is %lld, expected at least %lld",
                         c->attribute, (long long)value, (long long)spec->minimum);
    else
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute '%s' is %lld, expected %lld to %lld",
                         c->attribute, (long long)value, (long long)spec->minimum,
                         (long long)spec->maximum);
}

static void check_float_value(tfenc_check *c, const attribute_spec *spec)
{
    double value = NAN;
    tfenc_hdf5_attribute_number(c->group, spec->name, H5T_FLOAT, H5T_NATIVE_DOUBLE, &value);
    if (isfinite(value) && value >= spec->low && value <= spec->high)
        return;
    if (isinf(spec->high))
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute '%s' is %g, expected a finite value >= %g",
                         c->attribute, value, spec->low);
    else
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute '%s' is %g, expected a finite value from "
                         "%g to %g", c->attribute, value, spec->low, spec->high);
}

static void check_float_array(tfenc_check *c, const attribute_spec *spec, hid_t attribute)
{
    hid_t space = H5Aget_space(attribute);
    hssize_t count = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    if (space >= 0)
        H5Sclose(space);
    /* Its count is d_model's, which is at most WIDEST_DENSE_ROW for the
     * pooled outputs that have it (checked after); a bound here keeps a
     * damaged file without d_model from asking for any size. */
    if (count < 0 || count > WIDEST_DENSE_ROW) {
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute '%s' holds %lld values, more than a row "
                         "has", c->attribute, (long long)count);
        return;
    }
    double *values = malloc(((size_t)count + 1) * sizeof *values);
    if (values == NULL) {
        tfenc_check_fail(c, TFENC_ERR_NO_MEMORY, "out of memory for attribute '%s'", c->attribute);
        return;
    }
    if (H5Aread(attribute, H5T_NATIVE_DOUBLE, values) < 0) {
        char detail[256];
        tfenc_check_fail(c, TFENC_ERR_IO, "cannot read attribute '%s': %s", c->attribute,
                         tfenc_hdf5_error_detail(detail, sizeof detail));
    }
    for (hssize_t i = 0; c->status == TFENC_OK && i < count; i++)
        if (!isfinite(values[i]))
            tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute '%s' holds %g at index %lld, expected "
                             "finite values", c->attribute, values[i], (long long)i);
    free(values);
}

/* Lines "FILE SHA256" (the digest may be empty where none was computed). */
static int file_digests_valid(const char *text)
{
    for (const char *line = text; *line != '\0';) {
        size_t length = strcspn(line, "\n");
        const char *space = memchr(line, ' ', length);
        size_t digest_length = space != NULL ? length - (size_t)(space - line) - 1 : 0;
        if (space == NULL || space == line || line[length] != '\n' ||
            (digest_length > 0 && !is_digest(space + 1, digest_length)))
            return 0;
        line += length + 1;
    }
    return 1;
}

static int token_ids_valid(const char *text)
{
    for (const char *p = text; *p != '\0'; p++)
        if (!isdigit((unsigned char)*p) && !(*p == ' ' && p > text && p[1] != '\0' && p[1] != ' '))
            return 0;
    return 1;
}

/* "ranks=R ..." with R >= 1, every word KEY=VALUE. */
static int layout_valid(const char *text)
{
    if (*text == '\0')
        return 1;
    char *end = NULL;
    if (strncmp(text, "ranks=", 6) != 0 || strtol(text + 6, &end, 10) < 1 || end == text + 6)
        return 0;
    for (const char *word = text; *word != '\0';) {
        size_t length = strcspn(word, " ");
        const char *equals = memchr(word, '=', length);
        if (length == 0 || equals == NULL || equals == word || equals == word + length - 1)
            return 0;
        word += length + (word[length] == ' ');
    }
    return 1;
}

static void check_string_value(tfenc_check *c, const attribute_spec *spec)
{
    char *value = tfenc_hdf5_attribute_string(c->group, spec->name);
    if (value == NULL) {
        tfenc_check_fail(c, TFENC_ERR_IO, "cannot read attribute '%s'", c->attribute);
        return;
    }
    char shown[80], why[256];
    if (spec->domain == DOMAIN_CHOICE) {
        int found = 0, n = 0;
        char expected[200] = "";
        for (; spec->choices[n] != NULL && (spec->n_choices == 0 || n < spec->n_choices); n++) {
            found |= strcmp(value, spec->choices[n]) == 0;
            size_t used = strlen(expected);
            snprintf(expected + used, sizeof expected - used, "%s'%s'", n > 0 ? ", " : "",
                     spec->choices[n]);
        }
        if (!found)
            tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute '%s' is '%s', expected one of %s",
                             c->attribute, tfenc_check_quoted(value, shown, sizeof shown),
                             expected);
    } else if (spec->domain == DOMAIN_DIGEST && value[0] != '\0' &&
               !is_digest(value, strlen(value))) {
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute '%s' is '%s', expected a SHA-256 of 64 "
                         "hex digits", c->attribute,
                         tfenc_check_quoted(value, shown, sizeof shown));
    } else if (spec->domain == DOMAIN_FILE_DIGESTS && !file_digests_valid(value)) {
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute '%s' is '%s', expected lines 'FILE "
                         "SHA256'", c->attribute, tfenc_check_quoted(value, shown, sizeof shown));
    } else if (spec->domain == DOMAIN_TOKEN_IDS && !token_ids_valid(value)) {
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute '%s' is '%s', expected token ids "
                         "separated by spaces", c->attribute,
                         tfenc_check_quoted(value, shown, sizeof shown));
    } else if (spec->domain == DOMAIN_LAYOUT && !layout_valid(value)) {
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute '%s' is '%s', expected 'ranks=R "
                         "data_parallel=D pipeline_stages=S'", c->attribute,
                         tfenc_check_quoted(value, shown, sizeof shown));
    } else if (spec->domain == DOMAIN_ID2LABEL && value[0] != '\0' && c->d_model >= 0) {
        char width[64];
        snprintf(width, sizeof width, "d_model is %lld", (long long)c->d_model);
        if (c->d_model > WIDEST_DENSE_ROW ||
            !tfenc_id2label_valid(value, (int)c->d_model, width, why, sizeof why))
            tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute '%s' %s", c->attribute,
                             c->d_model > WIDEST_DENSE_ROW ? "names more labels than a row holds"
                             : why);
    } else if (spec->domain == DOMAIN_CORPUS_SHARDS) {
        tfenc_check_shards table;
        tfenc_check_read_shards(c, &table);
        free(table.rows);
    }
    free(value);
}

static void check_attribute(tfenc_check *c, const attribute_spec *spec)
{
    snprintf(c->attribute, sizeof c->attribute, "%s%s", c->prefix, spec->name);
    if (H5Aexists(c->group, spec->name) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return;
    }
    hid_t attribute = H5Aopen(c->group, spec->name, H5P_DEFAULT);
    if (attribute < 0) {
        char detail[256];
        tfenc_check_fail(c, TFENC_ERR_IO, "cannot open attribute '%s': %s", c->attribute,
                         tfenc_hdf5_error_detail(detail, sizeof detail));
        return;
    }
    if (check_attribute_form(c, spec, attribute) == TFENC_OK) {
        if (spec->domain == DOMAIN_INTEGER)
            check_integer_value(c, spec);
        else if (spec->domain == DOMAIN_FLOAT)
            check_float_value(c, spec);
        else if (spec->domain == DOMAIN_FLOAT_ARRAY)
            check_float_array(c, spec, attribute);
        else
            check_string_value(c, spec);
    }
    H5Aclose(attribute);
    H5Eclear2(H5E_DEFAULT);
}

/* The attributes against each other. */
static void check_attributes_agree(tfenc_check *c)
{
    const char *kind = tfenc_output_kind_name(c->kind);
    if (tfenc_check_compact(c->facts.dtype) && !c->facts.kind->compact_dtypes)
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute '%sdtype' is '%s', but only pooled "
                         "outputs are compact (output_kind '%s')", c->prefix,
                         tfenc_output_dtype_name(c->facts.dtype), kind);
    else if (c->facts.chunks != TFENC_CHUNKS_OFF && !c->facts.kind->chunks)
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute 'chunks' is '%s', but only pooled outputs "
                         "and scores are chunked (output_kind '%s')",
                         tfenc_output_chunks_names[c->facts.chunks], kind);
    else if (c->facts.kind->dense && c->d_model > WIDEST_DENSE_ROW)
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute '%sd_model' is %lld, expected 1 to %d for "
                         "output_kind '%s'", c->prefix, (long long)c->d_model, WIDEST_DENSE_ROW,
                         kind);
    else if ((c->facts.dtype == TFENC_DTYPE_BINARY || c->facts.dtype == TFENC_DTYPE_UBINARY) &&
             c->d_model % 8 != 0)
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute '%sd_model' is %lld, but dtype '%s' packs "
                         "8 dimensions a byte", c->prefix, (long long)c->d_model,
                         tfenc_output_dtype_name(c->facts.dtype));
}

int tfenc_check_attributes(tfenc_check *c)
{
    /* The counts the others are checked against, first. */
    for (size_t i = 0; c->status == TFENC_OK && i < sizeof attributes / sizeof *attributes; i++)
        if (attributes[i].domain == DOMAIN_INTEGER)
            check_attribute(c, &attributes[i]);
    if (c->status == TFENC_OK)
        tfenc_check_read_facts(c);
    for (size_t i = 0; c->status == TFENC_OK && i < sizeof attributes / sizeof *attributes; i++)
        if (attributes[i].domain != DOMAIN_INTEGER)
            check_attribute(c, &attributes[i]);
    /* (A head's group that names no kind is refused with its datasets.) */
    if (c->status == TFENC_OK && c->facts.kind != NULL)
        check_attributes_agree(c);
    return c->status;
}

int tfenc_output_check_attributes(tfenc_context *ctx, const char *path, hid_t file)
{
    tfenc_check *c = calloc(1, sizeof *c);
    if (c == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    *c = (tfenc_check){.ctx = ctx, .path = path, .file = file, .group = file, .prefix = "",
                       .status = TFENC_OK};
    int status = tfenc_check_attributes(c);
    free(c);
    return status;
}
