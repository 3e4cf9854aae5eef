/* Error context and status names: how failures travel from plugins and core
 * to the one driver line that reports them. */
#include "base/context.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* A plugin's threads (an OpenMP parallel loop) may report at the same time:
 * the first error still wins, whole. */
static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;

const char *tfenc_status_string(int status)
{
    switch (status) {
    case TFENC_OK: return "success";
    case TFENC_ERR_NO_MEMORY: return "out of memory";
    case TFENC_ERR_CONFIG: return "configuration error";
    case TFENC_ERR_WEIGHTS: return "weights error";
    case TFENC_ERR_INPUT: return "input error";
    case TFENC_ERR_IO: return "I/O error";
    case TFENC_ERR_PLUGIN: return "plugin error";
    case TFENC_ERR_NOT_FOUND: return "not found";
    case TFENC_ERR_MPI: return "MPI error";
    case TFENC_ERR_INTERRUPTED: return "interrupted";
    case TFENC_ERR_INTERNAL: return "internal error";
    default: return "unknown status";
    }
}

void tfenc_context_init(tfenc_context *ctx)
{
    memset(ctx, 0, sizeof *ctx);
}

void tfenc_context_clear(tfenc_context *ctx)
{
    ctx->status = TFENC_OK;
    ctx->message[0] = '\0';
}

const char *tfenc_context_message(const tfenc_context *ctx)
{
    return ctx->message;
}

void tfenc_context_set_scope(tfenc_context *ctx, const char *scope)
{
    ctx->scope = scope;
}

void tfenc_context_set_sparse_sink(tfenc_context *ctx, tfenc_sparse_sink sink, void *user)
{
    ctx->sparse_sink = sink;
    ctx->sparse_sink_user = user;
}

int tfenc_sparse_row(tfenc_context *ctx, int sequence, int n, const int32_t *indices,
                     const float *values)
{
    if (ctx == NULL || ctx->sparse_sink == NULL)
        return TFENC_OK;
    return ctx->sparse_sink(ctx->sparse_sink_user, ctx, sequence, n, indices, values);
}

int tfenc_batch_sparse_row(tfenc_context *ctx, const tfenc_batch *batch, int sequence, int n,
                           const int32_t *indices, const float *values)
{
    const tfenc_sparse_destination *to = batch != NULL ? batch->sparse_rows : NULL;
    if (to == NULL || to->receive == NULL)
        return TFENC_OK;
    return to->receive(to->user, ctx, sequence, n, indices, values);
}

int tfenc_verror(tfenc_context *ctx, int status, const char *format, va_list args)
{
    /* The first error is the cause; later ones are usually its consequences. */
    if (ctx == NULL)
        return status;
    pthread_mutex_lock(&error_lock);
    if (ctx->status != TFENC_OK) {
        pthread_mutex_unlock(&error_lock);
        return status;
    }
    ctx->status = status;
    size_t used = 0;
    if (ctx->scope != NULL) {
        int n = snprintf(ctx->message, sizeof ctx->message, "%s: ", ctx->scope);
        used = n > 0 && (size_t)n < sizeof ctx->message ? (size_t)n : 0;
    }
    vsnprintf(ctx->message + used, sizeof ctx->message - used, format, args);
    /* A message is one line: a newline inside would split the driver's report. */
    for (char *p = ctx->message; *p != '\0'; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    pthread_mutex_unlock(&error_lock);
    return status;
}

int tfenc_error(tfenc_context *ctx, int status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    tfenc_verror(ctx, status, format, args);
    va_end(args);
    return status;
}

int tfenc_error_prefix(tfenc_context *ctx, int status, const char *format, ...)
{
    if (ctx == NULL)
        return status;
    char prefix[TFENC_MESSAGE_MAX], message[TFENC_MESSAGE_MAX];
    va_list args;
    va_start(args, format);
    vsnprintf(prefix, sizeof prefix, format, args);
    va_end(args);
    snprintf(message, sizeof message, "%s", ctx->message);
    tfenc_context_clear(ctx);
    return tfenc_error(ctx, status, "%s: %s", prefix, message);
}
