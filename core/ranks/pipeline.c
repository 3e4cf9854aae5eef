/* Pipeline transport: slots of microbatches moved between stages with
 * non-blocking MPI, receives posted ahead so that transfers overlap compute. */
#include "ranks/pipeline.h"
#include "base/clock.h"

#include "base/aligned.h"
#include "ranks/patient_wait.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { TAG_META = 1, TAG_ACTIVATIONS = 2 };

typedef enum slot_state { SLOT_FREE, SLOT_RECEIVING, SLOT_SENDING, SLOT_IN_USE } slot_state;

/* The start of every meta buffer; what the receiver needs to find the rest. */
typedef struct meta_header {
    int32_t n_seq;
    int32_t n_tokens;
    int32_t rows;
    int32_t end_of_stream;
    uint64_t ids_bytes;
    uint64_t keys_masked; /* the batch's seq_keys is set (the keys array is always sent) */
} meta_header;

typedef struct slot {
    tfenc_microbatch microbatch;
    unsigned char *meta;
    float *x;
    slot_state state;
    MPI_Request requests[2];
    uint64_t order; /* when its send or receive was posted: oldest first */
} slot;

struct tfenc_pipeline {
    MPI_Comm replica;
    int stage, n_stages;
    tfenc_microbatch_limits limits;
    size_t meta_capacity;
    slot *slots;
    int n_slots;
    uint64_t next_order;
};


static size_t meta_bytes(int n_seq, int n_tokens, size_t ids_bytes)
{
    return sizeof(meta_header) + (size_t)n_seq * (3 * sizeof(int64_t) + 11 * sizeof(int32_t)) +
           sizeof(int32_t) + (size_t)n_tokens * 5 * sizeof(int32_t) + ids_bytes;
}

/* Lays the arrays out after the header: 64-bit arrays first, so that every
 * array is aligned to its element size. */
static void point_into_meta(slot *s, int n_seq, int n_tokens, size_t ids_bytes, int d_model)
{
    tfenc_microbatch *m = &s->microbatch;
    unsigned char *p = s->meta + sizeof(meta_header);
    m->indices = (int64_t *)p;
    p += (size_t)n_seq * sizeof(int64_t);
    m->token_offsets = (int64_t *)p;
    p += (size_t)n_seq * sizeof(int64_t);
    m->source_lines = (int64_t *)p;
    p += (size_t)n_seq * sizeof(int64_t);
    m->seq_start = (int32_t *)p;
    m->batch.seq_start = m->seq_start;
    p += (size_t)(n_seq + 1) * sizeof(int32_t);
    m->token_ids = (int32_t *)p;
    m->batch.token_ids = m->token_ids;
    p += (size_t)n_tokens * sizeof(int32_t);
    m->token_types = (int32_t *)p;
    m->batch.token_types = m->token_types;
    p += (size_t)n_tokens * sizeof(int32_t);
    m->positions = (int32_t *)p;
    m->batch.positions = m->positions;
    p += (size_t)n_tokens * sizeof(int32_t);
    m->sources = (int32_t *)p;
    p += (size_t)n_seq * sizeof(int32_t);
    m->lengths = (int32_t *)p;
    p += (size_t)n_seq * sizeof(int32_t);
    m->truncated = (int32_t *)p;
    p += (size_t)n_seq * sizeof(int32_t);
    m->chunk = (int32_t *)p;
    p += (size_t)n_seq * sizeof(int32_t);
    m->n_chunks = (int32_t *)p;
    p += (size_t)n_seq * sizeof(int32_t);
    m->chunk_start = (int32_t *)p;
    p += (size_t)n_seq * sizeof(int32_t);
    m->spans = (int32_t *)p;
    p += (size_t)n_seq * sizeof(int32_t);
    m->keys = (int32_t *)p;
    p += (size_t)n_seq * sizeof(int32_t);
    m->span_begin = (int32_t *)p;
    p += (size_t)(n_seq + n_tokens) * sizeof(int32_t);
    m->span_end = (int32_t *)p;
    p += (size_t)(n_seq + n_tokens) * sizeof(int32_t);
    m->batch.seq_keys = NULL;
    m->ids = ids_bytes > 0 ? (char *)p : NULL;
    m->ids_bytes = ids_bytes;
    m->batch.n_seq = n_seq;
    m->batch.n_tokens = n_tokens;
    m->batch.rows = n_tokens;
    m->batch.d_model = d_model;
    m->batch.x = s->x;
    m->end_of_stream = 0;
}

int tfenc_pipeline_create(tfenc_context *ctx, MPI_Comm replica, const tfenc_microbatch_limits *limits,
                          int n_slots, tfenc_pipeline **pipeline_out)
{
    *pipeline_out = NULL;
    tfenc_pipeline *p = calloc(1, sizeof *p);
    if (p == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    p->replica = MPI_COMM_NULL;
    p->n_stages = 1;
    if (replica != MPI_COMM_NULL) {
        /* A private communicator: our tags never meet anyone else's messages. */
        MPI_Comm_dup(replica, &p->replica);
        MPI_Comm_rank(p->replica, &p->stage);
        MPI_Comm_size(p->replica, &p->n_stages);
    }
    p->limits = *limits;
    p->n_slots = p->n_stages > 1 ? n_slots : 1;
    p->meta_capacity = meta_bytes(limits->max_seqs, limits->max_tokens, limits->max_ids_bytes);
    p->slots = calloc((size_t)p->n_slots, sizeof *p->slots);
    int ok = p->slots != NULL;
    for (int i = 0; ok && i < p->n_slots; i++) {
        p->slots[i].meta = tfenc_aligned_alloc(p->meta_capacity);
        p->slots[i].x = tfenc_aligned_alloc((size_t)limits->max_tokens * (size_t)limits->d_model *
                                            sizeof(float));
        p->slots[i].requests[0] = p->slots[i].requests[1] = MPI_REQUEST_NULL;
        ok = p->slots[i].meta != NULL && p->slots[i].x != NULL;
    }
    if (!ok) {
        tfenc_pipeline_destroy(p);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY,
                           "out of memory for %d microbatch slots of %d tokens x %d", n_slots,
                           limits->max_tokens, limits->d_model);
    }
    *pipeline_out = p;
    return TFENC_OK;
}

/* Sends that have finished give their slots back. */
static void collect_sends(tfenc_pipeline *p)
{
    for (int i = 0; i < p->n_slots; i++) {
        slot *s = &p->slots[i];
        if (s->state != SLOT_SENDING)
            continue;
        int done = 0;
        MPI_Testall(2, s->requests, &done, MPI_STATUSES_IGNORE);
        if (done)
            s->state = SLOT_FREE;
    }
}

static slot *oldest(tfenc_pipeline *p, slot_state state)
{
    slot *found = NULL;
    for (int i = 0; i < p->n_slots; i++)
        if (p->slots[i].state == state && (found == NULL || p->slots[i].order < found->order))
            found = &p->slots[i];
    return found;
}

/* The mirror of the receive's wait. The header goes out as a synchronous
 * send, which completes only once the next stage has matched it, that is
 * once that stage has a slot free and a receive posted for the activations
 * too: until then (a slower next stage keeps every slot of this one
 * sending) the wait is patient; from then on the activations are moving,
 * and their transfer may need this side's progress at full speed. */
static void wait_send(slot *s)
{
    tfenc_patient_waitall(1, &s->requests[0], MPI_STATUS_IGNORE);
    MPI_Wait(&s->requests[1], MPI_STATUS_IGNORE);
    s->state = SLOT_FREE;
}

static void wait_oldest_send(tfenc_pipeline *p)
{
    slot *s = oldest(p, SLOT_SENDING);
    if (s != NULL)
        wait_send(s);
}

int tfenc_pipeline_acquire(tfenc_context *ctx, tfenc_pipeline *p, tfenc_microbatch **microbatch)
{
    collect_sends(p);
    slot *s = oldest(p, SLOT_FREE);
    if (s == NULL) {
        wait_oldest_send(p);
        s = oldest(p, SLOT_FREE);
    }
    if (s == NULL)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "pipeline: no free microbatch slot");
    s->state = SLOT_IN_USE;
    point_into_meta(s, 0, 0, 0, p->limits.d_model);
    *microbatch = &s->microbatch;
    return TFENC_OK;
}

static slot *slot_of(tfenc_pipeline *p, tfenc_microbatch *microbatch)
{
    return (slot *)((char *)microbatch - offsetof(slot, microbatch));
}

int tfenc_microbatch_shape(tfenc_context *ctx, tfenc_pipeline *p, tfenc_microbatch *microbatch,
                           int n_seq, int n_tokens, size_t ids_bytes)
{
    if (n_seq < 0 || n_seq > p->limits.max_seqs || n_tokens < 0 ||
        n_tokens > p->limits.max_tokens || ids_bytes > p->limits.max_ids_bytes)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "pipeline: microbatch of %d sequences, %d tokens, %zu id bytes exceeds "
                           "the slot (%d, %d, %zu)",
                           n_seq, n_tokens, ids_bytes, p->limits.max_seqs,
                           p->limits.max_tokens, p->limits.max_ids_bytes);
    point_into_meta(slot_of(p, microbatch), n_seq, n_tokens, ids_bytes, p->limits.d_model);
    return TFENC_OK;
}

static void post_receive(tfenc_pipeline *p, slot *s)
{
    MPI_Irecv(s->meta, (int)p->meta_capacity, MPI_BYTE, p->stage - 1, TAG_META, p->replica,
              &s->requests[0]);
    MPI_Irecv(s->x, p->limits.max_tokens * p->limits.d_model, MPI_FLOAT, p->stage - 1,
              TAG_ACTIVATIONS, p->replica, &s->requests[1]);
    s->state = SLOT_RECEIVING;
    s->order = p->next_order++;
}

int tfenc_pipeline_receive(tfenc_context *ctx, tfenc_pipeline *p, tfenc_microbatch **microbatch,
                           double *waited)
{
    if (p->stage == 0)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "pipeline: the first stage receives nothing");
    /* Keep a receive posted in every slot not in use, in posting order:
     * MPI matches messages from one sender to receives in that order. */
    collect_sends(p);
    if (oldest(p, SLOT_RECEIVING) == NULL && oldest(p, SLOT_FREE) == NULL)
        wait_oldest_send(p);
    for (slot *s; (s = oldest(p, SLOT_FREE)) != NULL;)
        post_receive(p, s);
    slot *s = oldest(p, SLOT_RECEIVING);
    if (s == NULL)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "pipeline: no slot to receive into");
    double start = tfenc_clock_seconds();
    MPI_Status statuses[2];
    /* The wait for the upstream stage can be long: patient until its small
     * header is in, then at full speed while the activations arrive (a large
     * message may need this side's progress to move). */
    tfenc_patient_waitall(1, &s->requests[0], &statuses[0]);
    MPI_Wait(&s->requests[1], &statuses[1]);
    if (waited != NULL)
        *waited = tfenc_clock_seconds() - start;
    s->state = SLOT_IN_USE;
    int meta_count = 0, x_count = 0;
    MPI_Get_count(&statuses[0], MPI_BYTE, &meta_count);
    MPI_Get_count(&statuses[1], MPI_FLOAT, &x_count);
    meta_header header;
    if ((size_t)meta_count < sizeof header)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "pipeline stage %d: short message (%d bytes)",
                           p->stage, meta_count);
    memcpy(&header, s->meta, sizeof header);
    if (header.end_of_stream) {
        point_into_meta(s, 0, 0, 0, p->limits.d_model);
        s->microbatch.end_of_stream = 1;
        *microbatch = &s->microbatch;
        return TFENC_OK;
    }
    if (header.n_seq < 1 || header.n_seq > p->limits.max_seqs || header.n_tokens < 1 ||
        header.n_tokens > p->limits.max_tokens || header.ids_bytes > p->limits.max_ids_bytes ||
        (size_t)meta_count != meta_bytes(header.n_seq, header.n_tokens, header.ids_bytes) ||
        header.rows < 1 || header.rows > header.n_tokens ||
        x_count != header.rows * p->limits.d_model)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "pipeline stage %d: inconsistent microbatch from stage %d", p->stage,
                           p->stage - 1);
    point_into_meta(s, header.n_seq, header.n_tokens, (size_t)header.ids_bytes, p->limits.d_model);
    s->microbatch.batch.rows = header.rows;
    if (header.keys_masked)
        s->microbatch.batch.seq_keys = s->microbatch.keys;
    *microbatch = &s->microbatch;
    return TFENC_OK;
}

int tfenc_pipeline_pass_on(tfenc_context *ctx, tfenc_pipeline *p, tfenc_microbatch *microbatch)
{
    slot *s = slot_of(p, microbatch);
    if (p->stage == p->n_stages - 1)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "pipeline: the last stage passes nothing on");
    const tfenc_batch *b = &microbatch->batch;
    meta_header header = {.n_seq = b->n_seq, .n_tokens = b->n_tokens, .rows = b->rows,
                          .ids_bytes = microbatch->ids_bytes,
                          .keys_masked = b->seq_keys != NULL};
    memcpy(s->meta, &header, sizeof header);
    /* Synchronous: its completion says the next stage has taken it (wait_send). */
    MPI_Issend(s->meta, (int)meta_bytes(b->n_seq, b->n_tokens, microbatch->ids_bytes), MPI_BYTE,
               p->stage + 1, TAG_META, p->replica, &s->requests[0]);
    MPI_Isend(s->x, b->rows * b->d_model, MPI_FLOAT, p->stage + 1, TAG_ACTIVATIONS, p->replica,
              &s->requests[1]);
    s->state = SLOT_SENDING;
    s->order = p->next_order++;
    return TFENC_OK;
}

void tfenc_pipeline_release(tfenc_pipeline *p, tfenc_microbatch *microbatch)
{
    slot_of(p, microbatch)->state = SLOT_FREE;
}

int tfenc_pipeline_finish(tfenc_context *ctx, tfenc_pipeline *p)
{
    (void)ctx;
    if (p->n_stages == 1)
        return TFENC_OK;
    if (p->stage < p->n_stages - 1) {
        meta_header end = {.end_of_stream = 1};
        float nothing = 0;
        MPI_Send(&end, sizeof end, MPI_BYTE, p->stage + 1, TAG_META, p->replica);
        MPI_Send(&nothing, 0, MPI_FLOAT, p->stage + 1, TAG_ACTIVATIONS, p->replica);
    }
    for (int i = 0; i < p->n_slots; i++) {
        slot *s = &p->slots[i];
        if (s->state == SLOT_SENDING) {
            wait_send(s);
        } else if (s->state == SLOT_RECEIVING) {
            /* Nothing follows the end of the stream: these never match. */
            for (int k = 0; k < 2; k++) {
                MPI_Cancel(&s->requests[k]);
                MPI_Wait(&s->requests[k], MPI_STATUS_IGNORE);
            }
        }
        s->state = SLOT_FREE;
    }
    return TFENC_OK;
}

void tfenc_pipeline_destroy(tfenc_pipeline *p)
{
    if (p == NULL)
        return;
    for (int i = 0; p->slots != NULL && i < p->n_slots; i++) {
        tfenc_aligned_free(p->slots[i].meta);
        tfenc_aligned_free(p->slots[i].x);
    }
    free(p->slots);
    if (p->replica != MPI_COMM_NULL)
        MPI_Comm_free(&p->replica);
    free(p);
}
