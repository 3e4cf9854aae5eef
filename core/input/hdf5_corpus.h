/* HDF5 token-id corpora (corpus.h's TFENC_CORPUS_HDF5): ragged, flat ids
 * `tokens [T]` with `offsets [N+1]` from 0 to T, or padded, `ids [N, L]`
 * with `lengths [N]` (dataset names from the corpus options). One file.
 *
 * A range of documents is selected at a time: its part of the offsets (or
 * lengths) is read and checked, and its token ids are read a block of
 * about a million at a time as the documents are asked for, so a reader
 * never holds much of its share. Every error names the file and the
 * dataset: a missing dataset, a wrong rank, a non-integer type, a dataset
 * that stores less than it declares, offsets that do not start at 0,
 * decrease, or do not end at the token count, a length outside [0, L], a
 * negative token id or one past int32 (with the value as stored). */
#ifndef TFENC_HDF5_CORPUS_H
#define TFENC_HDF5_CORPUS_H

#include <stdint.h>
#include <hdf5.h>

#include "input/corpus.h"

typedef struct tfenc_hdf5_corpus tfenc_hdf5_corpus;

/* Opens `path` and selects share `share` of `n_shares` (about equal
 * document counts: share k starts at document k*N/n). */
int tfenc_hdf5_corpus_open(tfenc_context *ctx, const char *path,
                           const tfenc_corpus_options *options, int share, int n_shares,
                           tfenc_hdf5_corpus **corpus);

/* Selects documents [first, end) (0 <= first <= end <= N), checking their
 * part of the index. */
int tfenc_hdf5_corpus_select(tfenc_context *ctx, tfenc_hdf5_corpus *corpus, int64_t first,
                             int64_t end);

/* Document first + local of the selection: its token ids (valid until the
 * next call) into document->token_ids and n_tokens; TFENC_ERR_NOT_FOUND
 * past the selection (no message). */
int tfenc_hdf5_corpus_next(tfenc_context *ctx, tfenc_hdf5_corpus *corpus, int64_t local,
                           tfenc_document *document);

/* N; the selection's first document, its documents and its token ids. */
int64_t tfenc_hdf5_corpus_total_documents(const tfenc_hdf5_corpus *corpus);
int64_t tfenc_hdf5_corpus_first(const tfenc_hdf5_corpus *corpus);
int64_t tfenc_hdf5_corpus_selected(const tfenc_hdf5_corpus *corpus);
int64_t tfenc_hdf5_corpus_selected_tokens(const tfenc_hdf5_corpus *corpus);

/* NULL is allowed. */
void tfenc_hdf5_corpus_close(tfenc_hdf5_corpus *corpus);

#endif
