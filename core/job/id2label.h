/* A classification head's label names, id2label: a JSON object naming each
 * of its k scores once, keys "0" to "k-1" (none twice), each value a
 * string, as transformers' config.json holds it. The job's [head] labels
 * (checked when the model is built) and an output file's id2label
 * attribute (checked by tfenc-batch --status) are held to this one rule. */
#ifndef TFENC_ID2LABEL_H
#define TFENC_ID2LABEL_H

#include <stddef.h>

/* 1 when `labels` names exactly `width` labels as above; else 0, with the
 * reason in `why` (one line, worded to follow the name of what holds the
 * labels: "is not a JSON object of label names: ...", "names label "0"
 * twice", "names 2 labels, but <width_text>", "has no name for label "1"
 * of 3"); `width_text` says where
 * the width comes from ("the head computes 3 scores"). */
int tfenc_id2label_valid(const char *labels, int width, const char *width_text, char *why,
                         size_t size);

#endif
