/* The inner loops of the fused attention kernel at one vector width.
 * attention_kernel.c includes this file once per width, with
 *   LOOP_VECTOR  a GCC vector type of LOOP_WIDTH floats (8: AVX2, 16: AVX-512)
 *   LOOP_LOAD(p), LOOP_STORE(p, v)  loads and stores of it at any float address
 *   LOOP_NAME(name)  name with the width's suffix
 * so that both widths are one text. Each loop keeps its sums in named
 * vectors, which GCC keeps in registers (arrays of vectors it keeps in
 * memory); 4 query rows share each key or value load, where one row per
 * load made the kernel wait on loads (it ran ~2.4x slower per FLOP than
 * OpenBLAS at 8,192 tokens). Every sum runs over its terms in the same
 * order as one row at a time would (scores over the dims, contexts over
 * the keys, ascending), so the width and the grouping of rows change no
 * bit of the result. LOOP_FUNCTION makes each function inline into every
 * clone of attention_kernel_run (TFENC_VECTOR_CLONES): a copy left out of
 * line is compiled for the baseline x86-64, where these vectors spill (it
 * ran 4-10x slower). No include guard: included once per width. */

/* tile[r][c] = sum over e of scaled[r][e] k[e][c] for the 4 rows of
 * `scaled` (row stride head_dim) and the ATTENTION_KEY_BLOCK keys of the
 * block (dim e of key c at transposed[e * transposed_stride + c]); tile's
 * rows are ATTENTION_KEY_BLOCK floats apart. */
LOOP_FUNCTION void LOOP_NAME(score_4_rows)(const float *scaled, int head_dim,
                                           const float *transposed, int transposed_stride,
                                           float *tile)
{
    const float *q0 = scaled, *q1 = q0 + head_dim, *q2 = q1 + head_dim, *q3 = q2 + head_dim;
    for (int c = 0; c < ATTENTION_KEY_BLOCK; c += 2 * LOOP_WIDTH) {
        LOOP_VECTOR s00 = {0}, s01 = {0}, s10 = {0}, s11 = {0}, s20 = {0}, s21 = {0},
                    s30 = {0}, s31 = {0};
        for (int e = 0; e < head_dim; e++) {
            const float *k = transposed + (size_t)e * transposed_stride + c;
            const LOOP_VECTOR k0 = LOOP_LOAD(k), k1 = LOOP_LOAD(k + LOOP_WIDTH);
            s00 += q0[e] * k0;
            s01 += q0[e] * k1;
            s10 += q1[e] * k0;
            s11 += q1[e] * k1;
            s20 += q2[e] * k0;
            s21 += q2[e] * k1;
            s30 += q3[e] * k0;
            s31 += q3[e] * k1;
        }
        float *t = tile + c;
        LOOP_STORE(t, s00);
        LOOP_STORE(t + LOOP_WIDTH, s01);
        t += ATTENTION_KEY_BLOCK;
        LOOP_STORE(t, s10);
        LOOP_STORE(t + LOOP_WIDTH, s11);
        t += ATTENTION_KEY_BLOCK;
        LOOP_STORE(t, s20);
        LOOP_STORE(t + LOOP_WIDTH, s21);
        t += ATTENTION_KEY_BLOCK;
        LOOP_STORE(t, s30);
        LOOP_STORE(t + LOOP_WIDTH, s31);
    }
}

/* context[r] += sum over keys [lo, hi) of p[r][c] v_c for 4 rows: context
 * rows head_dim floats apart, p rows ATTENTION_KEY_BLOCK apart, v_c at
 * values + c * stride. head_dim: a multiple of 2 LOOP_WIDTH. */
LOOP_FUNCTION void LOOP_NAME(accumulate_4_rows)(float *context, int head_dim, const float *p,
                                                const float *values, int stride, int lo, int hi)
{
    const float *p0 = p, *p1 = p0 + ATTENTION_KEY_BLOCK, *p2 = p1 + ATTENTION_KEY_BLOCK,
                *p3 = p2 + ATTENTION_KEY_BLOCK;
    for (int e = 0; e < head_dim; e += 2 * LOOP_WIDTH) {
        float *c0 = context + e, *c1 = c0 + head_dim, *c2 = c1 + head_dim, *c3 = c2 + head_dim;
        LOOP_VECTOR a00 = LOOP_LOAD(c0), a01 = LOOP_LOAD(c0 + LOOP_WIDTH), a10 = LOOP_LOAD(c1),
                    a11 = LOOP_LOAD(c1 + LOOP_WIDTH), a20 = LOOP_LOAD(c2),
                    a21 = LOOP_LOAD(c2 + LOOP_WIDTH), a30 = LOOP_LOAD(c3),
                    a31 = LOOP_LOAD(c3 + LOOP_WIDTH);
        for (int c = lo; c < hi; c++) {
            const float *value = values + (size_t)c * stride + e;
            const LOOP_VECTOR v0 = LOOP_LOAD(value), v1 = LOOP_LOAD(value + LOOP_WIDTH);
            a00 += p0[c] * v0;
            a01 += p0[c] * v1;
            a10 += p1[c] * v0;
            a11 += p1[c] * v1;
            a20 += p2[c] * v0;
            a21 += p2[c] * v1;
            a30 += p3[c] * v0;
            a31 += p3[c] * v1;
        }
        LOOP_STORE(c0, a00);
        LOOP_STORE(c0 + LOOP_WIDTH, a01);
        LOOP_STORE(c1, a10);
        LOOP_STORE(c1 + LOOP_WIDTH, a11);
        LOOP_STORE(c2, a20);
        LOOP_STORE(c2 + LOOP_WIDTH, a21);
        LOOP_STORE(c3, a30);
        LOOP_STORE(c3 + LOOP_WIDTH, a31);
    }
}

/* The same for one row (keys a row alone sees at a window's edges):
 * four vectors of dims per pass over the keys, so that four sums are in
 * flight; a last pass of two where head_dim is an odd multiple of
 * 2 LOOP_WIDTH. */
LOOP_FUNCTION void LOOP_NAME(accumulate_row)(float *context, int head_dim, const float *p,
                                             const float *values, int stride, int lo, int hi)
{
    int e = 0;
    for (; e + 4 * LOOP_WIDTH <= head_dim; e += 4 * LOOP_WIDTH) {
        float *out = context + e;
        LOOP_VECTOR a0 = LOOP_LOAD(out), a1 = LOOP_LOAD(out + LOOP_WIDTH),
                    a2 = LOOP_LOAD(out + 2 * LOOP_WIDTH), a3 = LOOP_LOAD(out + 3 * LOOP_WIDTH);
        for (int c = lo; c < hi; c++) {
            const float *value = values + (size_t)c * stride + e;
            a0 += p[c] * LOOP_LOAD(value);
            a1 += p[c] * LOOP_LOAD(value + LOOP_WIDTH);
            a2 += p[c] * LOOP_LOAD(value + 2 * LOOP_WIDTH);
            a3 += p[c] * LOOP_LOAD(value + 3 * LOOP_WIDTH);
        }
        LOOP_STORE(out, a0);
        LOOP_STORE(out + LOOP_WIDTH, a1);
        LOOP_STORE(out + 2 * LOOP_WIDTH, a2);
        LOOP_STORE(out + 3 * LOOP_WIDTH, a3);
    }
    if (e < head_dim) {
        float *out = context + e;
        LOOP_VECTOR a0 = LOOP_LOAD(out), a1 = LOOP_LOAD(out + LOOP_WIDTH);
        for (int c = lo; c < hi; c++) {
            const float *value = values + (size_t)c * stride + e;
            a0 += p[c] * LOOP_LOAD(value);
            a1 += p[c] * LOOP_LOAD(value + LOOP_WIDTH);
        }
        LOOP_STORE(out, a0);
        LOOP_STORE(out + LOOP_WIDTH, a1);
    }
}

/* P V of one key block for the block's rows: running[r] += p[r] V over
 * the keys [row_lo[r], row_hi[r]) of the block that row r sees (none
 * where row_lo[r] >= row_hi[r]). Four rows go together over the keys all
 * four see, each row alone over the keys before and after those, so each
 * row still adds its keys in ascending order. head_dim: a multiple of
 * 2 LOOP_WIDTH. */
LOOP_FUNCTION void LOOP_NAME(accumulate_block)(float *running, int head_dim, const float *tile,
                                               const float *values, int stride,
                                               const int *row_lo, const int *row_hi, int rows)
{
    int r = 0;
    for (; r + 4 <= rows; r += 4) {
        int common_lo = row_lo[r], common_hi = row_hi[r];
        for (int i = 1; i < 4; i++) {
            common_lo = row_lo[r + i] > common_lo ? row_lo[r + i] : common_lo;
            common_hi = row_hi[r + i] < common_hi ? row_hi[r + i] : common_hi;
        }
        int empty = 0;
        for (int i = 0; i < 4; i++)
            empty |= row_lo[r + i] >= row_hi[r + i];
        if (empty || common_lo >= common_hi) {
            for (int i = 0; i < 4; i++)
                if (row_lo[r + i] < row_hi[r + i])
                    LOOP_NAME(accumulate_row)(running + (size_t)(r + i) * head_dim, head_dim,
                                              tile + (size_t)(r + i) * ATTENTION_KEY_BLOCK,
                                              values, stride, row_lo[r + i], row_hi[r + i]);
            continue;
        }
        for (int i = 0; i < 4; i++)
            LOOP_NAME(accumulate_row)(running + (size_t)(r + i) * head_dim, head_dim,
                                      tile + (size_t)(r + i) * ATTENTION_KEY_BLOCK, values,
                                      stride, row_lo[r + i], common_lo);
        LOOP_NAME(accumulate_4_rows)(running + (size_t)r * head_dim, head_dim,
                                     tile + (size_t)r * ATTENTION_KEY_BLOCK, values, stride,
                                     common_lo, common_hi);
        for (int i = 0; i < 4; i++)
            LOOP_NAME(accumulate_row)(running + (size_t)(r + i) * head_dim, head_dim,
                                      tile + (size_t)(r + i) * ATTENTION_KEY_BLOCK, values,
                                      stride, common_hi, row_hi[r + i]);
    }
    for (; r < rows; r++)
        if (row_lo[r] < row_hi[r])
            LOOP_NAME(accumulate_row)(running + (size_t)r * head_dim, head_dim,
                                      tile + (size_t)r * ATTENTION_KEY_BLOCK, values, stride,
                                      row_lo[r], row_hi[r]);
}
