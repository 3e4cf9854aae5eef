/* A model's pieces for the model and accuracy-gate tests
 * (tests/encoder_fixture.c): a job composed from text with the build's
 * plugins and a memory weight store, and a BERT-like encoder of real layers
 * (mha, ffn, layernorm) with random weights, big enough that a step's
 * weights (ENCODER_D x ENCODER_F x 2 floats for the FFN) stand out from the
 * libraries' bookkeeping. */
#ifndef TFENC_TESTS_ENCODER_FIXTURE_H
#define TFENC_TESTS_ENCODER_FIXTURE_H

#include "base/context.h"
#include "job/jobfile.h"
#include "model/model.h"
#include "model/weights.h"
#include "plugin/plugin_loader.h"

#include <stdint.h>

/* The context every fixture call reports into. */
extern tfenc_context ctx;

typedef struct composed {
    tfenc_jobfile *job;
    tfenc_model_config config;
    tfenc_model_plan plan;
    tfenc_plugin_registry *registry;
    tfenc_weight_store *store;
    tfenc_model *model;
} composed;

/* The job written in `text`, its model's config and plan, the plugins of
 * `directory` (NULL: $TFENC_PLUGIN_PATH and the build tree) and an empty
 * memory store: a model's pieces, without the model. */
int compose_pieces(composed *c, const char *text, const char *directory);
void release(composed *c);

enum { ENCODER_D = 64, ENCODER_F = 1024, ENCODER_HEADS = 4, ENCODER_REPEAT = 3, ENCODER_VOCAB = 100 };

/* The pieces of a model over the encoder job (precision "fp32", "bf16" or
 * "int8"), without the model itself. */
int encoder_open(composed *c, const char *precision, tfenc_model_options *options);
/* The same with the job text `after` after the encoder's sections (heads:
 * their weights are the caller's to add). */
int encoder_open_with(composed *c, const char *precision, const char *after,
                      tfenc_model_options *options);

/* A packed batch of n_seq sequences of `length` tokens with its own buffers. */
typedef struct owned_batch {
    tfenc_batch batch;
    int32_t seq_start[16], ids[128], types[128], positions[128];
    float x[128 * ENCODER_D];
} owned_batch;

void owned_batch_fill(owned_batch *b, int n_seq, int length, float value);

/* Runs the whole encoder at the given step precisions (NULL: the job's) on
 * a copy of `in` and returns its output rows in `out`. */
int encoder_output(composed *c, tfenc_model_options options, const tfenc_precision *step_precision,
                   const owned_batch *in, owned_batch *out);

/* The smallest cosine between the rows of a and b. */
double smallest_cosine(const owned_batch *a, const owned_batch *b);

#endif
