/* An int8 job's calibration in its output file: its digest, and reading it
 * back for a later job (output/calibration.h). output.c writes it. */
#include "output/calibration.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "base/hdf5_attributes.h"
#include "base/context.h"
#include "base/files.h"
#include "base/hdf5_error.h"
#include "base/hdf5_intact.h"
#include "base/precision.h"
#include "base/sha256.h"

/* The widest map a calibration may hold: [model] d_model's bound times the
 * widest stack of parts (weights.c takes up to 8). */
#define WIDEST_MAP (65536 * 8)

int tfenc_int8_calibration_add_map(tfenc_context *ctx, tfenc_int8_calibration *calibration,
                                   const char *key, int width, const float *ranges)
{
    int at = 0;
    while (at < calibration->n_maps && strcmp(calibration->maps[at], key) < 0)
        at++;
    if (at < calibration->n_maps && strcmp(calibration->maps[at], key) == 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "int8 calibration: map %s twice", key);
    const size_t n = (size_t)calibration->n_maps + 1;
    char **maps = realloc(calibration->maps, n * sizeof *maps);
    if (maps != NULL)
        calibration->maps = maps;
    int *widths = realloc(calibration->widths, n * sizeof *widths);
    if (widths != NULL)
        calibration->widths = widths;
    float **all_ranges = realloc(calibration->ranges, n * sizeof *all_ranges);
    if (all_ranges != NULL)
        calibration->ranges = all_ranges;
    char *copy = strdup(key);
    float *values = malloc((size_t)width * sizeof *values);
    if (maps == NULL || widths == NULL || all_ranges == NULL || copy == NULL || values == NULL) {
        free(copy);
        free(values);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "int8 calibration: out of memory");
    }
    memcpy(values, ranges, (size_t)width * sizeof *values);
    const size_t after = (size_t)(calibration->n_maps - at);
    memmove(maps + at + 1, maps + at, after * sizeof *maps);
    memmove(widths + at + 1, widths + at, after * sizeof *widths);
    memmove(all_ranges + at + 1, all_ranges + at, after * sizeof *all_ranges);
    maps[at] = copy;
    widths[at] = width;
    all_ranges[at] = values;
    calibration->n_maps++;
    return TFENC_OK;
}

int tfenc_int8_calibration_digest(tfenc_context *ctx, tfenc_int8_calibration *calibration)
{
    tfenc_sha256 hash;
    if (tfenc_sha256_init(&hash) != TFENC_OK)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "int8 calibration: out of memory");
    for (int i = 0; i < calibration->n_maps; i++) {
        char width[32];
        int length = snprintf(width, sizeof width, "%d", calibration->widths[i]);
        tfenc_sha256_update(&hash, calibration->maps[i], strlen(calibration->maps[i]) + 1);
        tfenc_sha256_update(&hash, width, (size_t)length + 1);
        /* Little-endian float32 whatever the machine: the digest is the
         * file's, which stores them so. */
        for (int j = 0; j < calibration->widths[i]; j++) {
            uint32_t bits;
            memcpy(&bits, &calibration->ranges[i][j], sizeof bits);
            unsigned char bytes[4] = {(unsigned char)bits, (unsigned char)(bits >> 8),
                                      (unsigned char)(bits >> 16), (unsigned char)(bits >> 24)};
            tfenc_sha256_update(&hash, bytes, sizeof bytes);
        }
    }
    const char *steps = calibration->precision_steps != NULL ? calibration->precision_steps : "";
    tfenc_sha256_update(&hash, steps, strlen(steps));
    unsigned char digest[32];
    tfenc_sha256_final(&hash, digest);
    for (int i = 0; i < 32; i++)
        snprintf(calibration->sha256 + 2 * i, 3, "%02x", digest[i]);
    return TFENC_OK;
}

void tfenc_int8_calibration_free(tfenc_int8_calibration *calibration)
{
    for (int i = 0; i < calibration->n_maps; i++) {
        free(calibration->maps[i]);
        free(calibration->ranges[i]);
    }
    free(calibration->maps);
    free(calibration->widths);
    free(calibration->ranges);
    free(calibration->precision_steps);
    free(calibration->source);
    free(calibration->heads);
    memset(calibration, 0, sizeof *calibration);
}

/* ------------------------------------------------------------- reading */

typedef struct reader {
    tfenc_context *ctx;
    const char *what, *path;
    hid_t file, group;
    tfenc_int8_calibration *calibration;
    int status;
} reader;

static int damaged(reader *r, const char *format, ...) TFENC_PRINTF(2, 3);

/* "WHAT PATH: its int8 calibration is damaged: ..." (the first failure). */
static int damaged(reader *r, const char *format, ...)
{
    if (r->status != TFENC_OK)
        return r->status;
    char text[TFENC_MESSAGE_MAX];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    r->status = tfenc_error(r->ctx, TFENC_ERR_CONFIG, "%s %s: its int8 calibration is damaged: %s",
                            r->what, r->path, text);
    return r->status;
}

static int is_digest(const char *text)
{
    if (text == NULL || strlen(text) != 64)
        return 0;
    for (int i = 0; i < 64; i++)
        if (!isxdigit((unsigned char)text[i]) || isupper((unsigned char)text[i]))
            return 0;
    return 1;
}

/* Each line "NAME PRECISION", PRECISION one of [model] precision's values. */
static int well_formed_steps(const char *steps)
{
    if (steps == NULL || steps[0] == '\0')
        return 0;
    for (const char *line = steps; *line != '\0';) {
        const char *end = strchr(line, '\n');
        if (end == NULL)
            return 0;
        const char *space = end;
        while (space > line && space[-1] != ' ')
            space--;
        int known = 0;
        for (int p = 0; p < TFENC_PRECISION_COUNT; p++)
            known |= (size_t)(end - space) == strlen(tfenc_precision_names[p]) &&
                     strncmp(space, tfenc_precision_names[p], (size_t)(end - space)) == 0;
        if (!known || space - line < 2)
            return 0;
        line = end + 1;
    }
    return 1;
}

static void read_attributes(reader *r)
{
    tfenc_int8_calibration *c = r->calibration;
    c->precision_steps = tfenc_hdf5_attribute_string(r->group, "precision_steps");
    c->source = tfenc_hdf5_attribute_string(r->group, "source");
    c->heads = tfenc_hdf5_attribute_string(r->group, "heads"); /* NULL: one head */
    char *weights = tfenc_hdf5_attribute_string(r->group, "weights_sha256");
    if (!well_formed_steps(c->precision_steps))
        damaged(r, "attribute '" TFENC_CALIBRATION_GROUP "/precision_steps' is missing or not "
                   "lines 'STEP PRECISION'");
    else if (!is_digest(weights))
        damaged(r, "attribute '" TFENC_CALIBRATION_GROUP "/weights_sha256' is missing or not a "
                   "SHA-256");
    else if (c->source == NULL)
        damaged(r, "attribute '" TFENC_CALIBRATION_GROUP "/source' is missing");
    else
        memcpy(c->weights_sha256, weights, sizeof c->weights_sha256);
    free(weights);
    const struct { const char *name; double *value; double low, high; } numbers[] = {
        {"min_cosine", &c->min_cosine, -1.0, 1.0},
        {"sample_min_cosine", &c->sample_min_cosine, -1.0, 1.0}};
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++)
        if (!tfenc_hdf5_attribute_number(r->group, numbers[i].name, H5T_FLOAT,
                                           H5T_NATIVE_DOUBLE, numbers[i].value) ||
            !(*numbers[i].value >= numbers[i].low && *numbers[i].value <= numbers[i].high))
            damaged(r, "attribute '" TFENC_CALIBRATION_GROUP "/%s' is missing or not a number "
                       "in -1..1", numbers[i].name);
    if (!tfenc_hdf5_attribute_number(r->group, "sample_documents", H5T_INTEGER,
                                       H5T_NATIVE_INT64, &c->sample_documents) ||
        c->sample_documents < 0)
        damaged(r, "attribute '" TFENC_CALIBRATION_GROUP "/sample_documents' is missing or not "
                   "a count");
}

/* A map's dataset: "PATH:PARTS" below the group, float [width], every
 * value finite and >= 0 (a largest |x|). */
static void read_map(reader *r, const char *name)
{
    const char *colon = strrchr(name, ':');
    int parts_ok = colon != NULL && colon[1] != '\0';
    for (const char *p = colon != NULL ? colon + 1 : ""; parts_ok && *p != '\0'; p++)
        parts_ok = isdigit((unsigned char)*p);
    if (!parts_ok) {
        damaged(r, "dataset '" TFENC_CALIBRATION_GROUP "/%s' is not named as a map "
                   "(PATH:PARTS)", name);
        return;
    }
    hid_t dataset = H5Dopen2(r->group, name, H5P_DEFAULT);
    hid_t type = dataset >= 0 ? H5Dget_type(dataset) : -1;
    hid_t space = dataset >= 0 ? H5Dget_space(dataset) : -1;
    hsize_t width = 0;
    const int shaped = type >= 0 && space >= 0 && H5Tget_class(type) == H5T_FLOAT &&
                       H5Sget_simple_extent_ndims(space) == 1 &&
                       H5Sget_simple_extent_dims(space, &width, NULL) == 1 && width >= 1 &&
                       width <= WIDEST_MAP;
    float *values = shaped ? malloc((size_t)width * sizeof *values) : NULL;
    int read = values != NULL &&
               H5Dread(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0;
    if (read && tfenc_hdf5_check_intact(r->ctx, r->file, r->path, name) != TFENC_OK)
        r->status = TFENC_ERR_IO;
    else if (!shaped)
        damaged(r, "dataset '" TFENC_CALIBRATION_GROUP "/%s' is not float [1..%d]", name,
                WIDEST_MAP);
    else if (values == NULL)
        r->status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", r->path);
    else if (!read)
        damaged(r, "dataset '" TFENC_CALIBRATION_GROUP "/%s' cannot be read as float32", name);
    for (hsize_t j = 0; r->status == TFENC_OK && j < width; j++)
        if (!(isfinite(values[j]) && values[j] >= 0.0f))
            damaged(r, "dataset '" TFENC_CALIBRATION_GROUP "/%s' holds %g at %llu (an input "
                       "range is finite and >= 0)", name, (double)values[j],
                    (unsigned long long)j);
    if (r->status == TFENC_OK) {
        char key[1100];
        snprintf(key, sizeof key, "/%s", name);
        r->status = tfenc_int8_calibration_add_map(r->ctx, r->calibration, key, (int)width,
                                                   values);
    }
    free(values);
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    if (dataset >= 0)
        H5Dclose(dataset);
}

static herr_t visit_map(hid_t group, const char *name, const H5O_info_t *info, void *user)
{
    (void)group;
    reader *r = user;
    if (info->type == H5O_TYPE_DATASET)
        read_map(r, name);
    else if (info->type != H5O_TYPE_GROUP)
        damaged(r, "'" TFENC_CALIBRATION_GROUP "/%s' is neither a map nor a group", name);
    return r->status == TFENC_OK ? 0 : 1;
}

/* A file without the group: say what it is instead. */
static int no_calibration(reader *r)
{
    char *precision = tfenc_hdf5_attribute_string(r->file, "precision");
    int status;
    if (precision != NULL && strcmp(precision, "int8") != 0)
        status = tfenc_error(r->ctx, TFENC_ERR_CONFIG,
                             "%s %s: holds no int8 calibration: it was written by a precision = "
                             "%s job (give the output of an int8 job of this model)",
                             r->what, r->path, precision[0] != '\0' ? precision : "(none)");
    else
        status = tfenc_error(r->ctx, TFENC_ERR_CONFIG,
                             "%s %s: holds no group '" TFENC_CALIBRATION_GROUP "' (give the "
                             "output of an int8 job of this model, written by this version of "
                             "tfenc or later)", r->what, r->path);
    free(precision);
    return status;
}

int tfenc_int8_calibration_read(tfenc_context *ctx, const char *what, const char *path,
                                tfenc_int8_calibration *calibration)
{
    memset(calibration, 0, sizeof *calibration);
    int status = tfenc_file_check_regular(ctx, what, path);
    if (status != TFENC_OK)
        return status;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    reader r = {.ctx = ctx, .what = what, .path = path, .calibration = calibration,
                .group = -1, .status = TFENC_OK};
    r.file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (r.file < 0) {
        char detail[256];
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s %s: cannot open it as HDF5 (%s)", what,
                           path, tfenc_hdf5_error_detail(detail, sizeof detail));
    }
    if (H5Lexists(r.file, TFENC_CALIBRATION_GROUP, H5P_DEFAULT) <= 0)
        r.status = no_calibration(&r);
    else if ((r.group = H5Gopen2(r.file, TFENC_CALIBRATION_GROUP, H5P_DEFAULT)) < 0)
        damaged(&r, "'" TFENC_CALIBRATION_GROUP "' is not a group");
    if (r.status == TFENC_OK)
        read_attributes(&r);
    if (r.status == TFENC_OK &&
        H5Ovisit2(r.group, H5_INDEX_NAME, H5_ITER_INC, visit_map, &r, H5O_INFO_BASIC) < 0 &&
        r.status == TFENC_OK)
        damaged(&r, "its datasets cannot be listed");
    if (r.status == TFENC_OK && calibration->n_maps == 0)
        damaged(&r, "it holds no map");
    char *stored = r.status == TFENC_OK ? tfenc_hdf5_attribute_string(r.group, "sha256") : NULL;
    if (r.status == TFENC_OK)
        r.status = tfenc_int8_calibration_digest(ctx, calibration);
    if (r.status == TFENC_OK && (stored == NULL || strcmp(stored, calibration->sha256) != 0))
        damaged(&r, "its maps and steps do not match their digest (attribute '"
                    TFENC_CALIBRATION_GROUP "/sha256' is %s)", stored != NULL ? stored
                                                                              : "missing");
    free(stored);
    if (r.group >= 0)
        H5Gclose(r.group);
    H5Fclose(r.file);
    H5Eclear2(H5E_DEFAULT);
    if (r.status != TFENC_OK)
        tfenc_int8_calibration_free(calibration);
    return r.status;
}
