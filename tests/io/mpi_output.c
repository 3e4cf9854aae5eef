/* Writes one output file from every rank of MPI_COMM_WORLD, each rank taking
 * the documents g with g % ranks == rank in scrambled order, so that
 * tests/io/mpi_output.sh can compare it with the same file written by one
 * rank. Usage: mpi_output FILE pooled|tokens DTYPE none|gzip [crash|resume]
 * "crash" stops every rank without closing the file after half its work;
 * "resume" reopens such a file and writes only what it lacks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "base/context.h"
#include "output/kinds.h"
#include "output/output.h"

enum { N_DOCUMENTS = 1000, D_MODEL = 12, CALL_DOCUMENTS = 7 };

static int document_length(int64_t g)
{
    /* 1..9 tokens: a document tfenc writes has at least one (the rule a
     * resume holds the finished documents to, output/output_checks.h) */
    return (int)((g * 37) % 9) + 1;
}

/* float32 values that are not exact in 16 bits, so rounding is exercised;
 * check_output.py computes the same products in numpy float32. */
static float value(int64_t g, int64_t token, int column)
{
    return (float)((g * 131 + token * 17 + column * 3) % 100003 - 50000) * 0.0137f;
}

static int fail(tfenc_context *ctx, int rank)
{
    fprintf(stderr, "mpi_output rank %d: %s\n", rank, tfenc_context_message(ctx));
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    const char *mode = argc == 6 ? argv[5] : "";
    if (argc != 5 && argc != 6) {
        if (rank == 0)
            fprintf(stderr, "usage: %s FILE pooled|tokens DTYPE none|gzip\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_output_options options = {.path = argv[1], .width = D_MODEL,
                                    .n_documents = N_DOCUMENTS, .has_ids = 1,
                                    .job_text = "[job]\ninput = corpus.txt\n",
                                    /* a digest and a precision as tfenc-batch
                                     * stores them: a resume holds the file's
                                     * attributes to their domains */
                                    .weights_sha256 = "0123abcd0123abcd0123abcd0123abcd"
                                                      "0123abcd0123abcd0123abcd0123abcd",
                                    .precision = "fp32"};
    if ((options.kind = tfenc_output_kind_named(argv[2])) == NULL
        || tfenc_output_dtype_from_name(argv[3], &options.dtype) != TFENC_OK
        || tfenc_output_compression_from_name(argv[4], &options.compression) != TFENC_OK) {
        fprintf(stderr, "mpi_output: bad arguments\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char layout[64];
    snprintf(layout, sizeof layout, "ranks=%d data_parallel=%d pipeline_stages=1", ranks, ranks);
    options.layout = layout;

    int64_t offsets[N_DOCUMENTS + 1] = {0};
    for (int64_t g = 0; g < N_DOCUMENTS; g++)
        offsets[g + 1] = offsets[g] + document_length(g);
    options.n_rows = offsets[N_DOCUMENTS];
    /* This rank's documents and its longest id. */
    int64_t mine[N_DOCUMENTS];
    int n_mine = 0;
    char ids[N_DOCUMENTS][24];
    for (int64_t g = 0; g < N_DOCUMENTS; g++) {
        snprintf(ids[g], sizeof ids[g], "doc-%lld%s", (long long)g, g % 10 == 0 ? "-tenth" : "");
        if (g % ranks == rank) {
            mine[n_mine++] = g;
            if (strlen(ids[g]) > options.max_id_length)
                options.max_id_length = strlen(ids[g]);
        }
    }

    tfenc_output *out = NULL;
    int status, was_complete = 0;
    if (strcmp(mode, "resume") == 0) {
        status = tfenc_output_reopen(&ctx, MPI_COMM_WORLD, &options, &out, &was_complete);
        if (status != TFENC_OK)
            return fail(&ctx, rank);
        /* Keep only the documents the crashed run did not finish: exactly
         * the first half of the calls (the ones made from the end). */
        int kept = 0, expected_done = 0;
        for (int end = n_mine, call = 0; end > 0; end -= CALL_DOCUMENTS, call++)
            if (call < (n_mine + CALL_DOCUMENTS - 1) / CALL_DOCUMENTS / 2)
                expected_done += end - CALL_DOCUMENTS > 0 ? CALL_DOCUMENTS : end;
        for (int i = 0; i < n_mine; i++) {
            uint8_t written = 0;
            if (tfenc_output_written(&ctx, out, mine[i], 1, &written) != TFENC_OK)
                return fail(&ctx, rank);
            if (!written)
                mine[kept++] = mine[i];
        }
        if (was_complete || n_mine - kept != expected_done) {
            fprintf(stderr, "mpi_output rank %d: resume found %d finished documents, expected "
                    "%d (complete = %d)\n", rank, n_mine - kept, expected_done, was_complete);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        n_mine = kept;
    } else {
        status = tfenc_output_create(&ctx, MPI_COMM_WORLD, &options, &out);
    }
    if (options.compression == TFENC_COMPRESSION_GZIP && ranks > 1) {
        /* Expected refusal, the same on every rank. */
        int refused = status == TFENC_ERR_CONFIG && strstr(ctx.message, "gzip") != NULL
                      && strstr(ctx.message, argv[1]) != NULL;
        if (!refused)
            fprintf(stderr, "mpi_output rank %d: gzip with %d writers was not refused: %s\n",
                    rank, ranks, ctx.message);
        MPI_Finalize();
        return refused ? 0 : 1;
    }
    if (status != TFENC_OK)
        return fail(&ctx, rank);

    /* Calls of 7 documents, walked from the rank's last document backwards. */
    float *rows = malloc(sizeof(float) * CALL_DOCUMENTS * 8 * D_MODEL);
    int n_calls = (n_mine + CALL_DOCUMENTS - 1) / CALL_DOCUMENTS, call = 0;
    for (int end = n_mine; end > 0; end -= CALL_DOCUMENTS, call++) {
        if (strcmp(mode, "crash") == 0 && call == n_calls / 2) {
            MPI_Barrier(MPI_COMM_WORLD); /* every rank has done its half */
            _exit(0);                    /* no close, no finalize: a killed job */
        }
        int begin = end - CALL_DOCUMENTS > 0 ? end - CALL_DOCUMENTS : 0, n = end - begin;
        int64_t indices[CALL_DOCUMENTS], token_offsets[CALL_DOCUMENTS];
        int32_t lengths[CALL_DOCUMENTS], truncated[CALL_DOCUMENTS];
        const char *call_ids[CALL_DOCUMENTS];
        int packed = 0;
        for (int j = 0; j < n; j++) {
            int64_t g = mine[end - 1 - j];
            indices[j] = g;
            token_offsets[j] = offsets[g];
            lengths[j] = document_length(g);
            truncated[j] = (int32_t)(g % 4);
            call_ids[j] = ids[g];
            if (options.kind->id == TFENC_OUTPUT_POOLED) {
                for (int c = 0; c < D_MODEL; c++)
                    rows[j * D_MODEL + c] = value(g, 0, c);
            } else {
                for (int t = 0; t < lengths[j]; t++)
                    for (int c = 0; c < D_MODEL; c++)
                        rows[(packed + t) * D_MODEL + c] = value(g, t, c);
                packed += lengths[j];
            }
        }
        status = options.kind->id == TFENC_OUTPUT_POOLED
            ? tfenc_output_write_pooled(&ctx, out, n, indices, rows)
            : tfenc_output_write_tokens(&ctx, out, n, indices, token_offsets, lengths, rows);
        if (status == TFENC_OK)
            status = tfenc_output_write_metadata(&ctx, out, n, indices, lengths, truncated,
                                                 call_ids, NULL, NULL);
        if (status != TFENC_OK)
            return fail(&ctx, rank);
    }
    free(rows);
    if (tfenc_output_finish(&ctx, out) != TFENC_OK)
        return fail(&ctx, rank);
    MPI_Finalize();
    return 0;
}
