/* The values that name what an output file holds (its kind, dtype,
 * compression, chunking), in a header of their own: output.h, quantize.h
 * and the kinds' table (kinds.h) all need them, and none of those should
 * include another only for a type (output.c includes quantize.h, so
 * quantize.h including output.h made the two a loop). */
#ifndef TFENC_OUTPUT_TYPES_H
#define TFENC_OUTPUT_TYPES_H

/* AUTO is a job's choice (whatever the model gives), never a file's kind. */
typedef enum tfenc_output_kind {
    TFENC_OUTPUT_POOLED,
    TFENC_OUTPUT_TOKENS,
    TFENC_OUTPUT_SCORES, /* a head's scores: `scores [N, d_model]`, d_model its label count */
    TFENC_OUTPUT_SPARSE, /* a sparse head's rows over the vocabulary, as CSR (sparse.h);
                          * d_model holds the vocabulary size */
    TFENC_OUTPUT_VECTORS, /* multi-vector (ColBERT): `vectors [T, d_model]` + `offsets`, as
                           * hidden and offsets are for tokens, d_model the projection's
                           * width and T the rows kept (output/multivector.h) */
    TFENC_OUTPUT_AUTO
} tfenc_output_kind;
typedef enum tfenc_output_dtype {
    TFENC_DTYPE_FLOAT32,
    TFENC_DTYPE_FLOAT16,
    TFENC_DTYPE_BFLOAT16,
    /* Compact pooled vectors (output/quantize.h), as sentence-transformers'
     * quantize_embeddings makes them: */
    TFENC_DTYPE_INT8,    /* [N, d] int8 buckets of the ranges */
    TFENC_DTYPE_UINT8,   /* [N, d] uint8 buckets of the ranges */
    TFENC_DTYPE_BINARY,  /* [N, d/8] int8: packed signs, minus 128 */
    TFENC_DTYPE_UBINARY, /* [N, d/8] uint8: packed signs */
    TFENC_DTYPE_COUNT
} tfenc_output_dtype;
typedef enum tfenc_output_compression {
    TFENC_COMPRESSION_NONE,
    TFENC_COMPRESSION_GZIP
} tfenc_output_compression;

/* Long documents cut into chunks ([job] long_documents = chunk), for a
 * pooled output or a scores head's: */
typedef enum tfenc_output_chunks {
    TFENC_CHUNKS_OFF,  /* documents are truncated, not chunked */
    TFENC_CHUNKS_MEAN, /* embeddings [N, d] holds the mean of each document's chunk
                        * vectors; chunks [N] how many it had */
    TFENC_CHUNKS_EACH, /* embeddings [C, d] holds every chunk's vector: document i's
                        * are rows chunk_offsets[i] .. chunk_offsets[i+1]-1, chunk_starts [C]
                        * the first token of each chunk within its document (special
                        * tokens not counted), chunks [N] how many each document had */
    /* A scores head's chunks ([job] chunk_scores; mean and all are MEAN
     * and EACH over scores [., labels]): */
    TFENC_CHUNKS_MAX,   /* scores [N, labels]: each label's largest over the chunks */
    TFENC_CHUNKS_FIRST, /* scores [N, labels]: the first chunk's */
    TFENC_CHUNKS_COUNT
} tfenc_output_chunks;

#endif
