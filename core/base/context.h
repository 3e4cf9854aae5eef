/* The error context: one slot for the first failure of a run, with the name
 * of the layer or file it concerns. Library code records errors here and
 * returns a status; only drivers print them. */
#ifndef TFENC_CONTEXT_H
#define TFENC_CONTEXT_H

#include <stdarg.h>
#include "tfenc/plugin.h"

#define TFENC_MESSAGE_MAX 1024

/* Receives the rows of tfenc_sparse_row() (plugin.h); returns a status. */
typedef int (*tfenc_sparse_sink)(void *user, tfenc_context *ctx, int sequence, int n,
                                 const int32_t *indices, const float *values);

/* What a batch's sparse_rows points at (plugin.h): the receiver of its
 * rows, output/sparse.h's rows of the microbatch's head. */
struct tfenc_sparse_destination {
    tfenc_sparse_sink receive;
    void *user;
};

struct tfenc_context {
    int status;                        /* TFENC_OK while no error is recorded */
    char message[TFENC_MESSAGE_MAX];   /* one line, no trailing newline */
    const char *scope;                 /* prefixed to plugin messages, e.g. "layer encoder.3.ffn" */
    /* Where tfenc_sparse_row() sends a SPARSE layer's rows: the batch's
     * destination while the model runs it (model.c sets it), or NULL: the
     * rows are dropped. */
    tfenc_sparse_sink sparse_sink;
    void *sparse_sink_user;
};

void tfenc_context_init(tfenc_context *ctx);
void tfenc_context_clear(tfenc_context *ctx);
/* The recorded message, or "" when there is none. */
const char *tfenc_context_message(const tfenc_context *ctx);
/* While set, messages recorded through tfenc_error() start with "SCOPE: ". */
void tfenc_context_set_scope(tfenc_context *ctx, const char *scope);
/* Sends the rows of SPARSE layers to sink(user, ...) until set again (NULL
 * drops them). */
void tfenc_context_set_sparse_sink(tfenc_context *ctx, tfenc_sparse_sink sink, void *user);
int tfenc_verror(tfenc_context *ctx, int status, const char *format, va_list args);
/* Puts FORMAT's text and ": " before the recorded message and records it
 * again with `status`: where a caller knows what the callee did not (the
 * document, the rank, the layer), it says so in the same one line. Returns
 * status. */
int tfenc_error_prefix(tfenc_context *ctx, int status, const char *format, ...)
    TFENC_PRINTF(3, 4);

#endif
