/* The checks that hold a tfenc output file to what it should hold: its
 * root attributes, each with its type and domain (output_kind one of the
 * kinds, d_model >= 1, id2label a JSON object naming d_model labels,
 * corpus_shards a well-formed table, ...: output_attribute_checks.c), and
 * its datasets to the description (output/output_description.h, the same
 * one tfenc_output_create makes them from and tfenc_output_reopen holds
 * them to): each present when the attributes say, of its type class and
 * shape, and its contents keeping its rule (lengths -1 or >= 1; offsets
 * from 0, never decreasing, ending at the rows' length, each document's
 * run agreeing with its length; CSR columns inside the vocabulary and
 * ascending; document_source naming a file of corpus_shards that holds the
 * row; ...: output_dataset_checks.c). Each further head's group
 * /outputs/NAME is held to the same attribute domains and description,
 * its documents being the root's. tfenc-batch --status (output/inspect.c) runs them on every file
 * it reports, and tfenc_output_reopen runs the same before it appends to a
 * file.
 *
 * Index datasets (lengths, offsets, the CSR, document_source, ...) are
 * read in blocks of bounded size, never whole, so a file of a billion
 * documents is checked in a few MiB; the rows themselves (embeddings,
 * hidden, ...) are not read. In a file that is not complete, only the
 * documents it marks finished (length >= 0) are held to the per-document
 * rules: a killed run's other entries hold whatever the disk held.
 *
 * Every failure is one line "PATH: inconsistent: ..." naming the dataset
 * (a head's as /outputs/NAME/DATASET) or attribute and, for contents, the
 * index and document. Nothing here prints. */
#ifndef TFENC_OUTPUT_CHECKS_H
#define TFENC_OUTPUT_CHECKS_H

#include <stdint.h>

#include <hdf5.h>

#include "tfenc/plugin.h"

/* The root attributes' types and values against their domains, and against
 * each other (a compact dtype only in a pooled output, ...). TFENC_OK, or
 * TFENC_ERR_CONFIG "PATH: inconsistent: attribute 'NAME' ...". An
 * attribute that older tfenc versions did not write may be absent. */
int tfenc_output_check_attributes(tfenc_context *ctx, const char *path, hid_t file);

/* 1 when a tfenc output file may hold a dataset (or group) of this name at
 * its root, of any kind (the description's, the kinds' rows and offsets):
 * [job] keep_fields may not take it. */
int tfenc_output_names_dataset(const char *name);

/* What the pass over the documents counted, for a report. */
typedef struct tfenc_output_census {
    int64_t n_documents;    /* attribute n_documents, or (older files) the rows of lengths */
    /* `lengths` has the -1 "not written" fill, so the finished documents
     * of an unfinished file are known (a tfenc before resuming existed
     * wrote lengths without it). */
    int lengths_marked;
    int64_t finished;       /* documents with a stored length (>= 0) */
    int64_t truncated;      /* of them, cut by max_seq_len; -1 without a `truncated` dataset */
    int64_t sparse_entries; /* sparse kind: entries of the CSR; -1 until the job completes */
} tfenc_output_census;

/* The datasets: presence, type class and shape against the attributes,
 * then their contents; then each further head's group the same way. Run
 * after tfenc_output_check_attributes succeeded.
 * TFENC_OK with *census filled, TFENC_ERR_CONFIG "PATH: inconsistent:
 * dataset 'NAME' ..." (naming the index for contents), or TFENC_ERR_IO when
 * HDF5 cannot read a dataset. */
int tfenc_output_check_datasets(tfenc_context *ctx, const char *path, hid_t file,
                                tfenc_output_census *census);

#endif
