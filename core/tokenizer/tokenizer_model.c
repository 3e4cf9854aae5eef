/* The tokenizer models: WordPiece, BPE and Unigram, each as `tokenizers`
 * 0.19 computes ids, and the hash table they look pieces up in. */
#include "tokenizer/tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ token table */

/* FNV-1a: simple, fast on short strings, and extendable byte by byte, which
 * Unigram's prefix search uses. */
uint64_t tok_hash_start(void)
{
    return 1469598103934665603ULL;
}

uint64_t tok_hash_byte(uint64_t hash, unsigned char byte)
{
    return (hash ^ byte) * 1099511628211ULL;
}

uint64_t tok_hash(const char *bytes, size_t length)
{
    uint64_t hash = tok_hash_start();
    for (size_t i = 0; i < length; i++)
        hash = tok_hash_byte(hash, (unsigned char)bytes[i]);
    return hash;
}

void tok_table_init(tok_table *table)
{
    memset(table, 0, sizeof *table);
}

void tok_table_free(tok_table *table)
{
    free(table->bytes);
    free(table->offset);
    free(table->length);
    free(table->hash);
    free(table->value);
    free(table->slots);
    memset(table, 0, sizeof *table);
}

static int32_t find_entry(const tok_table *table, uint64_t hash, const char *bytes, size_t length,
                          size_t *slot_out)
{
    if (table->slots == NULL)
        return -1;
    for (size_t slot = hash & table->slot_mask;; slot = (slot + 1) & table->slot_mask) {
        int32_t entry = table->slots[slot];
        if (entry < 0) {
            if (slot_out != NULL)
                *slot_out = slot;
            return -1;
        }
        if (table->hash[entry] == hash && table->length[entry] == length &&
            memcmp(table->bytes + table->offset[entry], bytes, length) == 0)
            return entry;
    }
}

static int grow_slots(tok_table *table)
{
    size_t capacity = table->slots == NULL ? 64 : (table->slot_mask + 1) * 2;
    int32_t *slots = malloc(capacity * sizeof *slots);
    if (slots == NULL)
        return -1;
    memset(slots, 0xff, capacity * sizeof *slots);
    for (size_t entry = 0; entry < table->count; entry++) {
        size_t slot = table->hash[entry] & (capacity - 1);
        while (slots[slot] >= 0)
            slot = (slot + 1) & (capacity - 1);
        slots[slot] = (int32_t)entry;
    }
    free(table->slots);
    table->slots = slots;
    table->slot_mask = capacity - 1;
    return 0;
}

int tok_table_put(tok_table *table, const char *bytes, size_t length, int32_t value)
{
    uint64_t hash = tok_hash(bytes, length);
    int32_t entry = find_entry(table, hash, bytes, length, NULL);
    if (entry >= 0) {
        table->value[entry] = value;
        return 0;
    }
    if (length > UINT32_MAX || table->count >= INT32_MAX)
        return -1;
    /* Keep the table at most half full. */
    if (table->slots == NULL || 2 * (table->count + 1) > table->slot_mask + 1)
        if (grow_slots(table) != 0)
            return -1;
    if (table->count == table->capacity) {
        size_t capacity = table->capacity ? table->capacity * 2 : 256;
        size_t *offset = realloc(table->offset, capacity * sizeof *offset);
        if (offset != NULL)
            table->offset = offset;
        uint32_t *lengths = realloc(table->length, capacity * sizeof *lengths);
        if (lengths != NULL)
            table->length = lengths;
        uint64_t *hashes = realloc(table->hash, capacity * sizeof *hashes);
        if (hashes != NULL)
            table->hash = hashes;
        int32_t *values = realloc(table->value, capacity * sizeof *values);
        if (values != NULL)
            table->value = values;
        if (offset == NULL || lengths == NULL || hashes == NULL || values == NULL)
            return -1;
        table->capacity = capacity;
    }
    if (table->bytes_used + length + 1 > table->bytes_capacity) {
        size_t capacity = table->bytes_capacity ? table->bytes_capacity : 4096;
        while (capacity < table->bytes_used + length + 1)
            capacity *= 2;
        char *grown = realloc(table->bytes, capacity);
        if (grown == NULL)
            return -1;
        table->bytes = grown;
        table->bytes_capacity = capacity;
    }
    size_t slot;
    find_entry(table, hash, bytes, length, &slot);
    memcpy(table->bytes + table->bytes_used, bytes, length);
    table->bytes[table->bytes_used + length] = '\0';
    entry = (int32_t)table->count++;
    table->offset[entry] = table->bytes_used;
    table->length[entry] = (uint32_t)length;
    table->hash[entry] = hash;
    table->value[entry] = value;
    table->bytes_used += length + 1;
    table->slots[slot] = entry;
    if (length > table->longest)
        table->longest = length;
    return 0;
}

int32_t tok_table_get_hashed(const tok_table *table, uint64_t hash, const char *bytes,
                             size_t length)
{
    if (length > table->longest)
        return -1;
    int32_t entry = find_entry(table, hash, bytes, length, NULL);
    return entry < 0 ? -1 : table->value[entry];
}

int32_t tok_table_get(const tok_table *table, const char *bytes, size_t length)
{
    if (length > table->longest)
        return -1;
    return tok_table_get_hashed(table, tok_hash(bytes, length), bytes, length);
}

/* ------------------------------------------------------------------ ids */

int tok_ids_add(tok_id_list *list, int32_t id)
{
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? list->capacity * 2 : 1024;
        int32_t *grown = realloc(list->ids, capacity * sizeof *grown);
        if (grown == NULL)
            return -1;
        list->ids = grown;
        list->capacity = capacity;
    }
    list->ids[list->count++] = id;
    return 0;
}

static int no_memory(tfenc_context *ctx)
{
    return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: out of memory");
}

/* The lookup key prefix + piece + suffix, built in the scratch. */
static const char *make_key(tok_model_scratch *s, const char *prefix, size_t prefix_length,
                            const char *piece, size_t length, const char *suffix,
                            size_t suffix_length, size_t *key_length)
{
    s->key.length = 0;
    if (tok_text_append(&s->key, prefix, prefix_length) != 0 ||
        tok_text_append(&s->key, piece, length) != 0 ||
        tok_text_append(&s->key, suffix, suffix_length) != 0)
        return NULL;
    *key_length = s->key.length;
    return s->key.data;
}

/* ------------------------------------------------------------ WordPiece */

/* Greedy longest match first; one uncoverable spot makes the whole word the
 * unknown token, as does a word longer than max_input_chars_per_word. */
static int wordpiece(tfenc_context *ctx, const tok_model *m, tok_model_scratch *s, const char *word,
                     size_t length, tok_id_list *out)
{
    size_t chars = 0;
    for (size_t i = 0; i < length; i++)
        chars += ((unsigned char)word[i] & 0xC0) != 0x80;
    if (chars > (size_t)m->max_input_chars_per_word)
        return tok_ids_add(out, m->unk_id) == 0 ? TFENC_OK : no_memory(ctx);
    size_t first_new = out->count;
    for (size_t start = 0; start < length;) {
        size_t prefix = start > 0 ? m->continuing_prefix_length : 0;
        size_t longest = m->vocab.longest > prefix ? m->vocab.longest - prefix : 0;
        size_t end = length - start > longest ? start + longest : length;
        while (end > start && end < length && ((unsigned char)word[end] & 0xC0) == 0x80)
            end--;
        int32_t id = -1;
        while (end > start) {
            if (start > 0) {
                size_t key_length;
                const char *key = make_key(s, m->continuing_prefix, prefix, word + start,
                                           end - start, "", 0, &key_length);
                if (key == NULL)
                    return no_memory(ctx);
                id = tok_table_get(&m->vocab, key, key_length);
            } else {
                id = tok_table_get(&m->vocab, word, end);
            }
            if (id >= 0)
                break;
            do
                end--;
            while (end > start && ((unsigned char)word[end] & 0xC0) == 0x80);
        }
        if (id < 0) {
            out->count = first_new;
            return tok_ids_add(out, m->unk_id) == 0 ? TFENC_OK : no_memory(ctx);
        }
        if (tok_ids_add(out, id) != 0)
            return no_memory(ctx);
        start = end;
    }
    return TFENC_OK;
}

/* ------------------------------------------------------------------ BPE */

static uint64_t pair_hash(int32_t left, int32_t right)
{
    uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return key;
}

/* The merge of (left, right), or NULL. */
static const tok_bpe_merge *find_merge(const tok_model *m, int32_t left, int32_t right)
{
    if (m->merges == NULL)
        return NULL;
    for (size_t slot = pair_hash(left, right) & m->merge_mask;; slot = (slot + 1) & m->merge_mask) {
        const tok_bpe_merge *merge = &m->merges[slot];
        if (merge->rank < 0)
            return NULL;
        if (merge->left == left && merge->right == right)
            return merge;
    }
}

int tok_model_set_merges(tfenc_context *ctx, tok_model *m, const char *const *left,
                         const size_t *left_length, const char *const *right,
                         const size_t *right_length, size_t count, const char *source)
{
    size_t capacity = 16;
    while (capacity < 2 * count)
        capacity *= 2;
    free(m->merges);
    m->merges = malloc(capacity * sizeof *m->merges);
    if (m->merges == NULL)
        return no_memory(ctx);
    for (size_t i = 0; i < capacity; i++)
        m->merges[i].rank = -1;
    m->merge_mask = capacity - 1;
    tok_text_buffer joined = {0};
    int status = TFENC_OK;
    for (size_t i = 0; i < count && status == TFENC_OK; i++) {
        int32_t a = tok_table_get(&m->vocab, left[i], left_length[i]);
        int32_t b = tok_table_get(&m->vocab, right[i], right_length[i]);
        /* The merged token drops the right side's continuing prefix, as HF
         * does (whether or not the right side starts with it). */
        size_t skip = m->continuing_prefix_length < right_length[i] ? m->continuing_prefix_length
                                                                    : right_length[i];
        joined.length = 0;
        if (tok_text_append(&joined, left[i], left_length[i]) != 0 ||
            tok_text_append(&joined, right[i] + skip, right_length[i] - skip) != 0) {
            status = no_memory(ctx);
            break;
        }
        int32_t merged = tok_table_get(&m->vocab, joined.data, joined.length);
        if (a < 0 || b < 0 || merged < 0) {
            status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                                 "%s: BPE merge %zu ('%.*s' '%.*s') names a token that is not "
                                 "in the vocabulary", source, i + 1, (int)left_length[i],
                                 left[i], (int)right_length[i], right[i]);
            break;
        }
        /* A pair listed twice keeps its last rank (HF collects a hash map). */
        size_t slot = pair_hash(a, b) & m->merge_mask;
        while (m->merges[slot].rank >= 0 && !(m->merges[slot].left == a && m->merges[slot].right == b))
            slot = (slot + 1) & m->merge_mask;
        m->merges[slot].left = a;
        m->merges[slot].right = b;
        m->merges[slot].merged = merged;
        m->merges[slot].rank = (int32_t)i;
    }
    free(joined.data);
    return status;
}

void tok_model_find_byte_ids(tok_model *m)
{
    for (int byte = 0; byte < 256; byte++) {
        char name[8];
        static const char digits[] = "0123456789ABCDEF";
        name[0] = '<';
        name[1] = '0';
        name[2] = 'x';
        name[3] = digits[byte >> 4];
        name[4] = digits[byte & 15];
        name[5] = '>';
        m->byte_ids[byte] = tok_table_get(&m->vocab, name, 6);
    }
}

/* Grows each of the arrays (element sizes given) to capacity elements;
 * 0, or -1 when out of memory (the arrays that did grow stay valid). */
static int grow_arrays(size_t capacity, int n, void **arrays[], const size_t sizes[])
{
    for (int i = 0; i < n; i++) {
        void *grown = realloc(*arrays[i], capacity * sizes[i]);
        if (grown == NULL)
            return -1;
        *arrays[i] = grown;
    }
    return 0;
}

static size_t doubled(size_t capacity, size_t wanted)
{
    capacity = capacity ? capacity : 256;
    while (capacity < wanted)
        capacity *= 2;
    return capacity;
}

static int grow_symbols(tok_model_scratch *s, size_t n)
{
    if (n <= s->symbol_capacity)
        return 0;
    size_t capacity = doubled(s->symbol_capacity, n);
    void **arrays[] = {(void **)&s->symbol_id, (void **)&s->symbol_prev, (void **)&s->symbol_next,
                       (void **)&s->symbol_length, (void **)&s->heap};
    /* The heap holds at most one pair per symbol, plus stale entries. */
    const size_t sizes[] = {sizeof *s->symbol_id, sizeof *s->symbol_prev, sizeof *s->symbol_next,
                            sizeof *s->symbol_length, 4 * sizeof *s->heap};
    if (grow_arrays(capacity, 5, arrays, sizes) != 0)
        return -1;
    s->symbol_capacity = capacity;
    s->heap_capacity = 4 * capacity;
    return 0;
}

static void add_symbol(tok_model_scratch *s, size_t *n, int32_t id, uint32_t length)
{
    s->symbol_id[*n] = id;
    s->symbol_length[*n] = length;
    (*n)++;
}

/* A binary min-heap of rank << 32 | position: the lowest rank first, then
 * the leftmost position, HF's order of merges. */
static int heap_push(tok_model_scratch *s, uint64_t item)
{
    if (s->heap_count == s->heap_capacity) {
        size_t capacity = s->heap_capacity * 2 + 16;
        uint64_t *grown = realloc(s->heap, capacity * sizeof *grown);
        if (grown == NULL)
            return -1;
        s->heap = grown;
        s->heap_capacity = capacity;
    }
    size_t i = s->heap_count++;
    while (i > 0 && s->heap[(i - 1) / 2] > item) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = item;
    return 0;
}

static uint64_t heap_pop(tok_model_scratch *s)
{
    uint64_t top = s->heap[0];
    uint64_t last = s->heap[--s->heap_count];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= s->heap_count)
            break;
        if (child + 1 < s->heap_count && s->heap[child + 1] < s->heap[child])
            child++;
        if (s->heap[child] >= last)
            break;
        s->heap[i] = s->heap[child];
        i = child;
    }
    if (s->heap_count > 0)
        s->heap[i] = last;
    return top;
}

static int push_pair(tok_model_scratch *s, const tok_model *m, int32_t position)
{
    int32_t next = s->symbol_next[position];
    if (next < 0)
        return 0;
    const tok_bpe_merge *merge = find_merge(m, s->symbol_id[position], s->symbol_id[next]);
    if (merge == NULL)
        return 0;
    return heap_push(s, ((uint64_t)(uint32_t)merge->rank << 32) | (uint32_t)position);
}

/* HF's BPE::merge_word then Word::merge_all: one symbol per character (with
 * the continuing prefix after the first and the suffix on the last), then
 * merges by rank through a priority queue. */
static int bpe(tfenc_context *ctx, const tok_model *m, tok_model_scratch *s, const char *word,
               size_t length, tok_id_list *out)
{
    if (m->ignore_merges) {
        int32_t whole = tok_table_get(&m->vocab, word, length);
        if (whole >= 0)
            return tok_ids_add(out, whole) == 0 ? TFENC_OK : no_memory(ctx);
    }
    /* byte_fallback may give up to 4 + prefix + suffix symbols per character. */
    size_t most = length * (4 + m->continuing_prefix_length + m->end_of_word_suffix_length) + 1;
    if (grow_symbols(s, most) != 0)
        return no_memory(ctx);
    size_t n = 0;
    int32_t unk = -1;
    uint32_t unk_length = 0;
    for (size_t i = 0; i < length;) {
        size_t char_length = tok_utf8_length((unsigned char)word[i]);
        if (char_length == 0 || i + char_length > length)
            char_length = 1;
        int is_first = i == 0, is_last = i + char_length >= length;
        size_t key_length;
        const char *key = make_key(s, m->continuing_prefix, is_first ? 0 : m->continuing_prefix_length,
                                   word + i, char_length, m->end_of_word_suffix,
                                   is_last ? m->end_of_word_suffix_length : 0, &key_length);
        if (key == NULL)
            return no_memory(ctx);
        int32_t id = tok_table_get(&m->vocab, key, key_length);
        if (id >= 0) {
            if (unk >= 0) {
                add_symbol(s, &n, unk, unk_length);
                unk = -1;
            }
            add_symbol(s, &n, id, (uint32_t)char_length);
        } else {
            int fell_back = 0;
            if (m->byte_fallback) {
                fell_back = 1;
                for (size_t k = 0; k < key_length; k++)
                    fell_back &= m->byte_ids[(unsigned char)key[k]] >= 0;
                if (fell_back) {
                    /* HF keeps a pending unknown waiting across byte tokens. */
                    for (size_t k = 0; k < key_length; k++)
                        add_symbol(s, &n, m->byte_ids[(unsigned char)key[k]], 1);
                }
            }
            if (!fell_back && m->unk_id >= 0) {
                if (unk >= 0 && m->fuse_unk) {
                    unk_length += (uint32_t)char_length;
                } else {
                    if (unk >= 0)
                        add_symbol(s, &n, unk, unk_length);
                    unk = m->unk_id;
                    unk_length = (uint32_t)char_length;
                }
            }
        }
        i += char_length;
    }
    if (unk >= 0)
        add_symbol(s, &n, unk, unk_length);
    for (size_t i = 0; i < n; i++) {
        s->symbol_prev[i] = (int32_t)i - 1;
        s->symbol_next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    s->heap_count = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (push_pair(s, m, (int32_t)i) != 0)
            return no_memory(ctx);
    while (s->heap_count > 0) {
        uint64_t top = heap_pop(s);
        int32_t position = (int32_t)(uint32_t)top;
        int32_t rank = (int32_t)(top >> 32);
        if (s->symbol_length[position] == 0)
            continue;
        int32_t next = s->symbol_next[position];
        if (next < 0)
            continue;
        /* An entry made stale by an earlier merge no longer names this pair. */
        const tok_bpe_merge *merge = find_merge(m, s->symbol_id[position], s->symbol_id[next]);
        if (merge == NULL || merge->rank != rank)
            continue;
        s->symbol_id[position] = merge->merged;
        s->symbol_length[position] += s->symbol_length[next];
        s->symbol_length[next] = 0;
        s->symbol_next[position] = s->symbol_next[next];
        if (s->symbol_next[next] >= 0)
            s->symbol_prev[s->symbol_next[next]] = position;
        int32_t prev = s->symbol_prev[position];
        if ((prev >= 0 && push_pair(s, m, prev) != 0) || push_pair(s, m, position) != 0)
            return no_memory(ctx);
    }
    for (size_t i = 0; i < n; i++)
        if (s->symbol_length[i] != 0 && tok_ids_add(out, s->symbol_id[i]) != 0)
            return no_memory(ctx);
    return TFENC_OK;
}

/* -------------------------------------------------------------- Unigram */

/* SentencePiece's unknown-piece penalty below the lowest score (HF's
 * K_UNK_PENALTY). */
#define UNK_PENALTY 10.0

static int grow_paths(tok_model_scratch *s, size_t n)
{
    if (n <= s->best_capacity)
        return 0;
    size_t capacity = doubled(s->best_capacity, n);
    void **arrays[] = {(void **)&s->best_score, (void **)&s->best_id, (void **)&s->best_start,
                       (void **)&s->reversed};
    const size_t sizes[] = {sizeof *s->best_score, sizeof *s->best_id, sizeof *s->best_start,
                            sizeof *s->reversed};
    if (grow_arrays(capacity, 4, arrays, sizes) != 0)
        return -1;
    s->best_capacity = capacity;
    return 0;
}

/* Viterbi over the lattice of vocabulary pieces (HF's encode_optimized):
 * best_*[end] is the best path over text[0..end). Candidates at one start
 * come shortest first and replace the best only when strictly better, so
 * ties go as in HF. The prefix search extends one FNV hash byte by byte, so
 * the cost is O(length x longest piece). Runs of unknown characters fuse. */
static int unigram(tfenc_context *ctx, const tok_model *m, tok_model_scratch *s, const char *text,
                   size_t length, tok_id_list *out)
{
    if (grow_paths(s, length + 1) != 0)
        return no_memory(ctx);
    for (size_t i = 0; i <= length; i++)
        s->best_start[i] = -1;
    s->best_score[0] = 0.0;
    const double unk_score = m->min_score - UNK_PENALTY;
    for (size_t start = 0; start < length;) {
        double till_here = s->best_score[start];
        size_t char_length = tok_utf8_length((unsigned char)text[start]);
        if (char_length == 0 || start + char_length > length)
            char_length = 1;
        int has_single = 0;
        uint64_t hash = tok_hash_start();
        size_t limit = length - start < m->vocab.longest ? length - start : m->vocab.longest;
        for (size_t k = 0; k < limit; k++) {
            hash = tok_hash_byte(hash, (unsigned char)text[start + k]);
            int32_t id = tok_table_get_hashed(&m->vocab, hash, text + start, k + 1);
            if (id < 0)
                continue;
            size_t end = start + k + 1;
            double candidate = m->scores[id] + till_here;
            if (s->best_start[end] < 0 || candidate > s->best_score[end]) {
                s->best_score[end] = candidate;
                s->best_start[end] = (int64_t)start;
                s->best_id[end] = id;
            }
            if (k + 1 == char_length)
                has_single = 1;
        }
        if (!has_single) {
            if (m->unk_id < 0)
                return tfenc_error(ctx, TFENC_ERR_INPUT, "tokenizer: Unigram model has no unk_id "
                                   "for a character outside its vocabulary");
            size_t end = start + char_length;
            double candidate = unk_score + till_here;
            if (s->best_start[end] < 0 || candidate > s->best_score[end]) {
                s->best_score[end] = candidate;
                s->best_start[end] = (int64_t)start;
                s->best_id[end] = m->unk_id;
            }
        }
        start += char_length;
    }
    /* Back from the end, remembering where each piece ends; consecutive
     * unknown pieces fuse into one, as HF's fuse_unk (always on here). */
    size_t n = 0;
    for (size_t end = length; end > 0;) {
        size_t start = (size_t)s->best_start[end];
        if (s->best_id[end] == m->unk_id)
            while (start > 0 && s->best_id[start] == m->unk_id)
                start = (size_t)s->best_start[start];
        s->reversed[n++] = (int32_t)end;
        end = start;
    }
    for (size_t i = n; i-- > 0;) {
        size_t end = (size_t)s->reversed[i];
        size_t start = i + 1 < n ? (size_t)s->reversed[i + 1] : 0;
        int32_t id = s->best_id[end];
        if (id == m->unk_id) {
            /* HF looks the fused run up as a string, then falls back to its
             * bytes, then to the unknown token. */
            int32_t whole = tok_table_get(&m->vocab, text + start, end - start);
            int all_bytes = m->byte_fallback;
            for (size_t b = start; all_bytes && b < end; b++)
                all_bytes = m->byte_ids[(unsigned char)text[b]] >= 0;
            if (whole >= 0) {
                id = whole;
            } else if (all_bytes) {
                for (size_t b = start; b < end; b++)
                    if (tok_ids_add(out, m->byte_ids[(unsigned char)text[b]]) != 0)
                        return no_memory(ctx);
                continue;
            }
        }
        if (tok_ids_add(out, id) != 0)
            return no_memory(ctx);
    }
    return TFENC_OK;
}

/* The piece through the tokenizer's model, without the cache. */
static int tokenize_uncached(tfenc_context *ctx, const tok_model *m, tok_model_scratch *scratch,
                             const char *piece, size_t length, tok_id_list *out)
{
    switch (m->kind) {
    case TOK_MODEL_WORDPIECE:
        return wordpiece(ctx, m, scratch, piece, length, out);
    case TOK_MODEL_BPE:
        return bpe(ctx, m, scratch, piece, length, out);
    case TOK_MODEL_UNIGRAM:
        return unigram(ctx, m, scratch, piece, length, out);
    }
    return tfenc_error(ctx, TFENC_ERR_CONFIG, "tokenizer: unknown model");
}

/* Short pieces go through the cache (allocated once; without memory for it
 * the model just runs every time). */
int tok_model_tokenize(tfenc_context *ctx, const tok_model *m, tok_model_scratch *scratch,
                       const char *piece, size_t length, tok_id_list *out)
{
    if (length == 0)
        return TFENC_OK;
    if (length > CACHE_WORD_BYTES)
        return tokenize_uncached(ctx, m, scratch, piece, length, out);
    if (scratch->cache == NULL)
        scratch->cache = calloc(CACHE_SLOTS, sizeof *scratch->cache);
    if (scratch->cache == NULL)
        return tokenize_uncached(ctx, m, scratch, piece, length, out);
    uint64_t hash = tok_hash(piece, length);
    tok_cache_slot *slot = &scratch->cache[hash & (CACHE_SLOTS - 1)];
    if (slot->length == length && slot->hash == hash && memcmp(slot->word, piece, length) == 0) {
        for (uint32_t i = 0; i < slot->n_ids; i++)
            if (tok_ids_add(out, slot->ids[i]) != 0)
                return no_memory(ctx);
        return TFENC_OK;
    }
    size_t first = out->count;
    int status = tokenize_uncached(ctx, m, scratch, piece, length, out);
    if (status == TFENC_OK && out->count - first <= CACHE_IDS) {
        slot->hash = hash;
        slot->length = (uint32_t)length;
        slot->n_ids = (uint32_t)(out->count - first);
        memcpy(slot->word, piece, length);
        /* A piece may give no id at all (BPE drops characters it has
         * neither a token nor an unk_token for); then ids may be NULL. */
        if (slot->n_ids > 0)
            memcpy(slot->ids, out->ids + first, slot->n_ids * sizeof *slot->ids);
    }
    return status;
}

void tok_model_free(tok_model *m)
{
    tok_table_free(&m->vocab);
    free(m->continuing_prefix);
    free(m->end_of_word_suffix);
    free(m->merges);
    free(m->scores);
    memset(m, 0, sizeof *m);
}

void tok_model_scratch_free(tok_model_scratch *s)
{
    free(s->cache);
    free(s->symbol_id);
    free(s->symbol_prev);
    free(s->symbol_next);
    free(s->symbol_length);
    free(s->heap);
    free(s->best_score);
    free(s->best_id);
    free(s->best_start);
    free(s->reversed);
    free(s->key.data);
    memset(s, 0, sizeof *s);
}
