/* Measures, on this machine, what the 1,000-rank model (tests/scale/model.py)
 * needs besides the encoding itself: the round trip of the work queue's
 * counter, the time to write a window's rows with parallel HDF5, and the
 * time to flush a group of documents' metadata (fdatasync + the lengths).
 * Prints one JSON object on rank 0.
 *
 * usage: mpiexec -n R calibrate DIR CORPUS [WINDOW_DOCUMENTS D_MODEL WINDOWS_PER_RANK]
 * First the ranks read and check CORPUS (a text file) as a job's first pass
 * does, and fingerprint it: bytes per second per rank. Then each rank takes
 * windows from a work queue, writes WINDOW_DOCUMENTS pooled rows of D_MODEL
 * floats for each, and flushes their metadata, as the writer does; rows and
 * timings are what a job of that shape writes. */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/context.h"
#include "output/fingerprint.h"
#include "output/kinds.h"
#include "output/output.h"
#include "input/windows.h"
#include "ranks/work_queue.h"

static void die(tfenc_context *ctx, int rank)
{
    fprintf(stderr, "calibrate: rank %d: %s\n", rank, tfenc_context_message(ctx));
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, n_ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
    if (argc < 3) {
        if (rank == 0)
            fprintf(stderr, "usage: calibrate DIR CORPUS [WINDOW_DOCUMENTS D_MODEL "
                            "WINDOWS_PER_RANK]\n");
        MPI_Finalize();
        return 2;
    }
    const int window = argc > 3 ? atoi(argv[3]) : 2048;
    const int d_model = argc > 4 ? atoi(argv[4]) : 384;
    const int per_rank = argc > 5 ? atoi(argv[5]) : 8;
    tfenc_context ctx;
    tfenc_context_init(&ctx);

    /* 0. The first pass over the corpus, and its fingerprint. */
    tfenc_corpus_options corpus = {.path = argv[2], .format = TFENC_CORPUS_TEXT};
    tfenc_windows_share share;
    MPI_Barrier(MPI_COMM_WORLD);
    double scan_start = tfenc_clock_seconds();
    if (tfenc_windows_scan(&ctx, MPI_COMM_WORLD, &corpus, window, &share) != TFENC_OK)
        die(&ctx, rank);
    tfenc_windows_share_free(&share);
    MPI_Barrier(MPI_COMM_WORLD);
    double scan_seconds = tfenc_clock_seconds() - scan_start;
    char fingerprint[65];
    double hash_start = tfenc_clock_seconds();
    if (tfenc_fingerprint_file(&ctx, MPI_COMM_WORLD, argv[2], fingerprint) != TFENC_OK)
        die(&ctx, rank);
    double hash_seconds = tfenc_clock_seconds() - hash_start;
    int64_t documents = 0;
    MPI_Allreduce(&share.n_documents, &documents, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    const double corpus_bytes = (double)share.file_size;

    /* 1. The counter alone: every rank takes items as fast as it can. */
    const int takes = 2000;
    tfenc_work_queue *queue = NULL;
    if (tfenc_work_queue_create(&ctx, MPI_COMM_WORLD, (int64_t)takes * n_ranks, rank, n_ranks, &queue) != TFENC_OK)
        die(&ctx, rank);
    MPI_Barrier(MPI_COMM_WORLD);
    double start = tfenc_clock_seconds();
    int64_t item = 0;
    int taken = 0;
    while (tfenc_work_queue_take(&ctx, queue, &item) == TFENC_OK && item >= 0)
        taken++;
    double counter_seconds = (tfenc_clock_seconds() - start) / (taken > 0 ? taken : 1);
    tfenc_work_queue_destroy(queue);

    /* 2. Writing windows of rows, as the writers do. */
    const int64_t n_windows = (int64_t)per_rank * n_ranks;
    const int64_t n_documents = n_windows * window;
    char path[4096];
    snprintf(path, sizeof path, "%s/calibrate-%d.h5", argv[1], n_ranks);
    tfenc_output_options options = {.path = path, .kind = &tfenc_output_kinds[TFENC_OUTPUT_POOLED],
                                    .dtype = TFENC_DTYPE_FLOAT32, .width = d_model,
                                    .n_documents = n_documents, .layout = "calibrate"};
    tfenc_output *out = NULL;
    MPI_Comm writers = n_ranks > 1 ? MPI_COMM_WORLD : MPI_COMM_NULL;
    if (tfenc_output_create(&ctx, writers, &options, &out) != TFENC_OK)
        die(&ctx, rank);
    float *rows = malloc((size_t)window * (size_t)d_model * sizeof *rows);
    int64_t *indices = malloc((size_t)window * sizeof *indices);
    int32_t *lengths = malloc((size_t)window * sizeof *lengths);
    int32_t *truncated = calloc((size_t)window, sizeof *truncated);
    for (size_t i = 0; i < (size_t)window * (size_t)d_model; i++)
        rows[i] = (float)(i % 97) * 0.01f;
    int sync_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (tfenc_work_queue_create(&ctx, MPI_COMM_WORLD, n_windows, rank, n_ranks, &queue) != TFENC_OK)
        die(&ctx, rank);
    double write_seconds = 0, flush_seconds = 0;
    int written = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double io_start = tfenc_clock_seconds();
    while (tfenc_work_queue_take(&ctx, queue, &item) == TFENC_OK && item >= 0) {
        for (int j = 0; j < window; j++) {
            indices[j] = item * window + j;
            lengths[j] = 20;
        }
        double t0 = tfenc_clock_seconds();
        if (tfenc_output_write_pooled(&ctx, out, window, indices, rows) != TFENC_OK)
            die(&ctx, rank);
        double t1 = tfenc_clock_seconds();
        if (fdatasync(sync_fd) != 0 ||
            tfenc_output_write_metadata(&ctx, out, window, indices, lengths, truncated, NULL, NULL,
                                        NULL) !=
                TFENC_OK)
            die(&ctx, rank);
        double t2 = tfenc_clock_seconds();
        write_seconds += t1 - t0;
        flush_seconds += t2 - t1;
        written++;
    }
    double io_wall = tfenc_clock_seconds() - io_start;
    if (tfenc_output_finish(&ctx, out) != TFENC_OK)
        die(&ctx, rank);
    tfenc_work_queue_destroy(queue);
    close(sync_fd);
    double mine[4] = {counter_seconds, written > 0 ? write_seconds / written : 0,
                      written > 0 ? flush_seconds / written : 0, io_wall};
    double mean[4] = {0, 0, 0, 0};
    MPI_Reduce(mine, mean, 4, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int i = 0; i < 4; i++)
            mean[i] /= n_ranks;
        double bytes = (double)n_documents * d_model * sizeof(float);
        printf("{\"ranks\": %d, \"window_documents\": %d, \"d_model\": %d, "
               "\"window_bytes\": %.6g, \"counter_round_trip_s\": %.3e, "
               "\"window_write_s\": %.3e, \"metadata_flush_s\": %.3e, "
               "\"aggregate_write_bytes_per_s\": %.4g, \"corpus_bytes_per_document\": %.4g, "
               "\"scan_bytes_per_s\": %.4g, \"hash_bytes_per_s\": %.4g}\n",
               n_ranks, window, d_model, (double)window * d_model * sizeof(float), mean[0],
               mean[1], mean[2], bytes / mean[3], corpus_bytes / (double)documents,
               corpus_bytes / scan_seconds / n_ranks, corpus_bytes / hash_seconds / n_ranks);
    }
    unlink(path);
    free(rows);
    free(indices);
    free(lengths);
    free(truncated);
    MPI_Finalize();
    return 0;
}
