/* The one shape every product of a linear map runs in, shared by the
 * backend (matrix.h) and its oneDNN half (matrix_onednn.h), which sits
 * beneath it and so cannot include it. */
#ifndef TFENC_BLOCK_ROWS_H
#define TFENC_BLOCK_ROWS_H

/* Rows of every product of a linear map: a batch runs as blocks of this
 * many rows, the last one padded, each block on one thread. A product's
 * bits depend on its shape (the libraries pick kernels by it), so one
 * fixed shape makes every row a function of its own input alone, whatever
 * the batch, its other rows and the thread count (matrix.c). */
#define TFENC_MATRIX_BLOCK_ROWS 64

#endif
