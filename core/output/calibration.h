/* An int8 job's calibration, as its output file records it and a later
 * job takes it back ([model] calibration = FILE): what, besides the
 * weights, makes the int8 model, so that two files encoded with one
 * calibration hold rows of one model (a query file searched against the
 * documents' file).
 *
 * In the file (docs/output.md), the group `int8_calibration`:
 *   one float32 dataset [in] per linear map, at the map's key below the
 *   group ("int8_calibration/encoder/0/ffn/in_weight:1"): the largest |x|
 *   of each input channel on the calibration sample, from which the map's
 *   SmoothQuant factors are made (matrix/matrix.h);
 *   attributes: precision_steps ("NAME PRECISION" per step of the plan: the
 *   steps kept out of int8), weights_sha256, min_cosine (the bar the gate
 *   ran with), sample_min_cosine, sample_documents, source (where the
 *   calibration came from), sha256 (calibration_digest below) and, when
 *   the gate judged several heads, heads (their names, comma-separated;
 *   not in the digest: they change what was checked, not the model). */
#ifndef TFENC_OUTPUT_CALIBRATION_H
#define TFENC_OUTPUT_CALIBRATION_H

#include <stdint.h>

#include "tfenc/plugin.h"

#define TFENC_CALIBRATION_GROUP "int8_calibration"

typedef struct tfenc_int8_calibration {
    int n_maps;
    char **maps;           /* [n_maps] keys, "/encoder/0/ffn/in_weight:1" (weights.h), sorted */
    int *widths;           /* [n_maps] input channels of each map */
    float **ranges;        /* [n_maps][widths[i]] each channel's largest |x|, >= 0 */
    char *precision_steps; /* "NAME PRECISION\n" per step of the plan, in order */
    char weights_sha256[65];
    double min_cosine;        /* the accuracy gate's min_cosine */
    double sample_min_cosine; /* what the gate measured with these steps */
    int64_t sample_documents; /* the documents of its sample */
    char *source;          /* where it came from, one line */
    char *heads;           /* a job of several heads: the heads whose output the gate judged,
                              "first,second,...", the first head first; NULL: the first head
                              only (a job of one output, or a file of an older tfenc) */
    char sha256[65];       /* the digest of maps, widths, ranges and precision_steps */
} tfenc_int8_calibration;

/* Adds a map (a copy of its key and ranges); keeps the maps sorted by key.
 * TFENC_ERR_CONFIG when the key is there already. */
int tfenc_int8_calibration_add_map(tfenc_context *ctx, tfenc_int8_calibration *calibration,
                                   const char *key, int width, const float *ranges);

/* calibration->sha256 from its maps and steps: SHA-256 over each map in
 * key order (the key, its width, its ranges as little-endian float32)
 * and then precision_steps. Two calibrations with the same digest make
 * the same int8 model of the same weights. */
int tfenc_int8_calibration_digest(tfenc_context *ctx, tfenc_int8_calibration *calibration);

/* Reads the calibration an output file records, into a zeroed
 * `calibration` (freed on failure). `what` names the setting in messages
 * ("[model] calibration"). Refused in one line naming the path and what is
 * wrong: not a regular file (a FIFO, a directory), missing, not HDF5, a
 * file of a job that ran at another precision (no group), a group whose
 * datasets or attributes are not as written (a map of another type or
 * shape, a negative or non-finite range, a digest that does not match its
 * content). */
int tfenc_int8_calibration_read(tfenc_context *ctx, const char *what, const char *path,
                                tfenc_int8_calibration *calibration);

void tfenc_int8_calibration_free(tfenc_int8_calibration *calibration);

#endif
