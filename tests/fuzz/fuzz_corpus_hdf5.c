/* libFuzzer target: the HDF5 token-id corpus reader. Most inputs describe a
 * corpus (ragged or padded, integer widths, storage layout, document
 * lengths, token values, and deliberate defects: a wrong type or rank, a
 * missing dataset, bad offsets or lengths, negative ids); the target builds
 * that file with the HDF5 API, reads it in 1 to 4 shares as the ranks of
 * tfenc-batch do, and checks the outcome against what it built: a valid
 * corpus must come back document for document, an invalid one must be
 * refused with a message.
 *
 * With TFENC_FUZZ_RAW_HDF5=1 in the environment (tests/fuzz/run.sh
 * --raw-hdf5), inputs flagged raw are written as the file bytes themselves,
 * which reaches HDF5's own parsing of corrupt files. That is off by
 * default: HDF5 1.10.8 (Debian 12) itself crashes on some corrupt files
 * (h5dump too), which no caller can prevent, so CI would fail on HDF5's
 * bugs rather than tfenc's. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "base/context.h"
#include "input/corpus.h"

#define MAX_DOCUMENTS 40
#define MAX_LENGTH 12
#define MAX_TOKENS (MAX_DOCUMENTS * MAX_LENGTH + 4)

/* A broken invariant is a finding: say which, then stop the fuzzer with a
 * stack trace and the input saved. */
#define require(condition) ((condition) ? (void)0 : broken(__LINE__, #condition))

static void broken(int line, const char *condition)
{
    fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, line, condition);
    abort();
}

/* The fuzz input read front to back; zeros once it runs out. */
typedef struct reader {
    const uint8_t *data;
    size_t size;
    size_t at;
} reader;

static uint64_t take(reader *r, int bytes)
{
    uint64_t value = 0;
    for (int i = 0; i < bytes; i++)
        value |= (uint64_t)(r->at < r->size ? r->data[r->at++] : 0) << (8 * i);
    return value;
}

/* The integer types a corpus may use, and how a value survives being stored
 * in one: HDF5 converts on write and on read, clipping what does not fit. */
typedef struct integer_type {
    hid_t (*id)(void); /* a function: the H5T_NATIVE_* ids are not constants */
    int64_t min;
    uint64_t max;
} integer_type;

static hid_t type_i8(void) { return H5T_NATIVE_INT8; }
static hid_t type_u8(void) { return H5T_NATIVE_UINT8; }
static hid_t type_i16(void) { return H5T_NATIVE_INT16; }
static hid_t type_u16(void) { return H5T_NATIVE_UINT16; }
static hid_t type_i32(void) { return H5T_NATIVE_INT32; }
static hid_t type_u32(void) { return H5T_NATIVE_UINT32; }
static hid_t type_i64(void) { return H5T_NATIVE_INT64; }
static hid_t type_u64(void) { return H5T_NATIVE_UINT64; }

static const integer_type integer_types[] = {
    {type_i8, INT8_MIN, INT8_MAX},     {type_u8, 0, UINT8_MAX},
    {type_i16, INT16_MIN, INT16_MAX},  {type_u16, 0, UINT16_MAX},
    {type_i32, INT32_MIN, INT32_MAX},  {type_u32, 0, UINT32_MAX},
    {type_i64, INT64_MIN, INT64_MAX},  {type_u64, 0, UINT64_MAX},
};

static int64_t clip(int64_t value, const integer_type *type)
{
    if (value < type->min)
        return type->min;
    if (value >= 0 && (uint64_t)value > type->max)
        return (int64_t)type->max;
    return value;
}

/* How one dataset is written: its element type, a defect, its storage. */
typedef enum defect { FINE, FLOATS, EXTRA_RANK, MISSING, GROUP, GROWN } defect;

typedef struct dataset_plan {
    const integer_type *type;
    defect defect;
    int chunk; /* 0: contiguous */
    int grow;  /* chunked: after writing, grow dim 0 by 2^(grow-1) unwritten rows (0: none) */
} dataset_plan;

static dataset_plan plan_dataset(reader *r)
{
    uint64_t kind = take(r, 1), storage = take(r, 1);
    dataset_plan plan = {&integer_types[kind & 7], FINE, 0, 0};
    switch ((kind >> 3) & 15) {
    case 12: plan.defect = FLOATS; break;
    case 13: plan.defect = EXTRA_RANK; break;
    case 14: plan.defect = MISSING; break;
    case 15: plan.defect = GROUP; break;
    default: break;
    }
    if (storage & 1)
        plan.chunk = 1 + (int)((storage >> 1) % 8);
    /* Rows declared but never written: HDF5 reads them as the fill value,
     * and a large excess (2^24 rows and up) must be refused before anything
     * is sized by it. Between 2^12 and 2^24 rows HDF5 itself takes seconds
     * per read over one-element chunks, legal but slow: not fuzzed. */
    static const int grow_exponents[8] = {0, 3, 6, 12, 24, 30, 36, 42};
    if (plan.chunk && (storage & 0x80))
        plan.grow = 1 + grow_exponents[(storage >> 4) & 7];
    if (plan.grow && plan.defect == FINE)
        plan.defect = GROWN;
    return plan;
}

/* Writes `values` (rank 1 or 2, dims given) as dataset `name`. Values are
 * int64 in memory; HDF5 converts them to the planned type as a real writer
 * would. */
static void write_dataset(hid_t file, const char *name, const dataset_plan *plan, int rank,
                          const hsize_t *dims, const int64_t *values)
{
    if (plan->defect == MISSING)
        return;
    if (plan->defect == GROUP) {
        hid_t group = H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        require(group >= 0);
        H5Gclose(group);
        return;
    }
    hsize_t file_dims[3] = {dims[0], rank > 1 ? dims[1] : 1, 1};
    int file_rank = rank + (plan->defect == EXTRA_RANK);
    hsize_t max_dims[3] = {H5S_UNLIMITED, H5S_UNLIMITED, H5S_UNLIMITED};
    hid_t space = H5Screate_simple(file_rank, file_dims, plan->chunk ? max_dims : NULL);
    hid_t properties = H5Pcreate(H5P_DATASET_CREATE);
    require(space >= 0 && properties >= 0);
    if (plan->chunk) {
        hsize_t chunk[3] = {(hsize_t)plan->chunk, (hsize_t)plan->chunk, 1};
        require(H5Pset_chunk(properties, file_rank, chunk) >= 0);
    }
    hid_t type = plan->defect == FLOATS ? H5T_NATIVE_DOUBLE : plan->type->id();
    hid_t dataset = H5Dcreate2(file, name, type, space, H5P_DEFAULT, properties, H5P_DEFAULT);
    require(dataset >= 0);
    hsize_t count = dims[0] * (rank > 1 ? dims[1] : 1);
    if (count > 0)
        require(H5Dwrite(dataset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0);
    if (plan->grow) {
        file_dims[0] += (hsize_t)1 << (plan->grow - 1);
        require(H5Dset_extent(dataset, file_dims) >= 0);
    }
    H5Dclose(dataset);
    H5Pclose(properties);
    H5Sclose(space);
}

/* The corpus the input describes, and what reading it must give. */
typedef struct corpus_plan {
    int padded;
    int n_shares;
    int n_documents;
    int valid;                          /* every rule of core/input/corpus.h holds */
    int unknown;                        /* valid or not depends on HDF5's storage */
    int lengths[MAX_DOCUMENTS];
    int starts[MAX_DOCUMENTS];          /* document d is tokens[starts[d]..][0..lengths[d]) */
    int32_t tokens[MAX_TOKENS];         /* as tfenc must return them */
} corpus_plan;

/* A token value: mostly small and valid, sometimes negative, sometimes too
 * large for narrow types (then clipped, and clipped values must be read). */
static int64_t token_value(reader *r)
{
    uint64_t raw = take(r, 2);
    if (raw >= 0xFFF0)
        return -(int64_t)(raw - 0xFFEF);
    if (raw >= 0xFF00)
        return (int64_t)((raw - 0xFF00) << 32);
    return (int64_t)raw;
}

/* The int32 value tfenc reads for `value` stored as `type`. */
static int32_t read_back(int64_t value, const integer_type *type)
{
    static const integer_type int32 = {type_i32, INT32_MIN, INT32_MAX};
    return (int32_t)clip(clip(value, type), &int32);
}

/* The ids core/input/corpus.c accepts: 0..INT32_MAX - 1. A stored id of
 * INT32_MAX or more reads back as INT32_MAX, which cannot be told from a
 * clipped one, so it is refused like a negative id. */
static int id_fits(int32_t id)
{
    return id >= 0 && id < INT32_MAX;
}

static void build_ragged(hid_t file, reader *r, corpus_plan *plan)
{
    dataset_plan tokens_plan = plan_dataset(r), offsets_plan = plan_dataset(r);
    int64_t offsets[MAX_DOCUMENTS + 1];
    int64_t tokens[MAX_TOKENS];
    offsets[0] = 0;
    for (int d = 0; d < plan->n_documents; d++)
        offsets[d + 1] = offsets[d] + (int64_t)(take(r, 1) % MAX_LENGTH);
    int64_t n_tokens = offsets[plan->n_documents];
    for (int64_t i = 0; i < n_tokens; i++)
        tokens[i] = token_value(r);
    /* Defects of the index: a changed entry, or a token count that differs. */
    uint64_t corruption = take(r, 1);
    hsize_t offsets_count = (hsize_t)plan->n_documents + 1;
    if ((corruption & 7) == 7) {
        int at = (int)(take(r, 1) % offsets_count);
        offsets[at] = (int64_t)take(r, 8);
    } else if ((corruption & 7) == 6) {
        offsets_count = 0; /* an empty offsets dataset */
    }
    hsize_t tokens_count = (hsize_t)n_tokens;
    if ((corruption & 0x18) == 0x18 && n_tokens > 0)
        tokens_count--;
    else if ((corruption & 0x18) == 0x10)
        tokens[tokens_count++] = 1;

    /* The reader sees offsets as int64 after the dataset type clipped them;
     * a changed entry may still make a valid index, of other documents. */
    int64_t seen[MAX_DOCUMENTS + 1];
    int index_fine = offsets_count > 0;
    for (hsize_t i = 0; index_fine && i < offsets_count; i++) {
        seen[i] = clip(offsets[i], offsets_plan.type);
        index_fine = i == 0 ? seen[i] == 0 : seen[i] >= seen[i - 1];
        if (index_fine && i == offsets_count - 1)
            index_fine = seen[i] == (int64_t)tokens_count;
    }
    int id_out_of_range = 0;
    for (int d = 0; index_fine && d < plan->n_documents; d++) {
        plan->starts[d] = (int)seen[d];
        plan->lengths[d] = (int)(seen[d + 1] - seen[d]);
        for (int64_t i = seen[d]; i < seen[d + 1]; i++) {
            plan->tokens[i] = read_back(tokens[i], tokens_plan.type);
            id_out_of_range |= !id_fits(plan->tokens[i]);
        }
    }
    /* Ids that do not fit (negative, or INT32_MAX and up) make it invalid. */
    plan->valid = tokens_plan.defect == FINE && offsets_plan.defect == FINE && index_fine
                  && !id_out_of_range;
    /* Grown datasets may still make a valid corpus (offsets of a corpus
     * without tokens are all 0 anyway), unless the excess is too large for
     * what is stored: either outcome can be right. */
    plan->unknown = tokens_plan.defect == GROWN || offsets_plan.defect == GROWN;
    /* 2^24 rows or more of at least a byte each, next to a few written
     * chunks: refused before any buffer is sized by them. */
    if (tokens_plan.grow > 24 || offsets_plan.grow > 24)
        plan->unknown = plan->valid = 0;
    write_dataset(file, "tokens", &tokens_plan, 1, &tokens_count, tokens);
    write_dataset(file, "offsets", &offsets_plan, 1, &offsets_count, offsets);
}

static void build_padded(hid_t file, reader *r, corpus_plan *plan)
{
    dataset_plan ids_plan = plan_dataset(r), lengths_plan = plan_dataset(r);
    int width = (int)(take(r, 1) % (MAX_LENGTH - 1));
    int64_t ids[MAX_DOCUMENTS * MAX_LENGTH];
    int64_t lengths[MAX_DOCUMENTS + 1];
    int lengths_fine = 1, id_out_of_range = 0;
    for (int d = 0; d < plan->n_documents; d++) {
        /* One more than the width now and then: a length the row cannot hold. */
        lengths[d] = (int64_t)(take(r, 1) % (uint64_t)(width + 2));
        if (take(r, 1) == 0xFF)
            lengths[d] = -lengths[d] - 1;
        int64_t seen = clip(lengths[d], lengths_plan.type);
        lengths_fine &= seen >= 0 && seen <= width;
        plan->lengths[d] = lengths_fine ? (int)seen : 0;
        plan->starts[d] = d * MAX_LENGTH;
        for (int i = 0; i < width; i++) {
            int64_t value = token_value(r);
            ids[d * width + i] = value;
            if (i < plan->lengths[d]) {
                plan->tokens[d * MAX_LENGTH + i] = read_back(value, ids_plan.type);
                /* Only the real tokens are checked; padding may be anything. */
                id_out_of_range |= !id_fits(plan->tokens[d * MAX_LENGTH + i]);
            }
        }
    }
    hsize_t rows = (hsize_t)plan->n_documents;
    hsize_t lengths_count = rows;
    uint64_t corruption = take(r, 1);
    if ((corruption & 3) == 3)
        lengths_count += 1; /* row counts disagree */
    if (lengths_count > rows)
        lengths[rows] = 0;
    hsize_t ids_dims[2] = {rows, (hsize_t)width};
    plan->valid = ids_plan.defect == FINE && lengths_plan.defect == FINE && lengths_fine
                  && !id_out_of_range && lengths_count == rows;
    /* Both grown alike, the extra rows are valid empty documents. */
    plan->unknown = ids_plan.defect == GROWN || lengths_plan.defect == GROWN;
    if (lengths_plan.grow > 24)
        plan->unknown = plan->valid = 0;
    write_dataset(file, "ids", &ids_plan, 2, ids_dims, ids);
    write_dataset(file, "lengths", &lengths_plan, 1, &lengths_count, lengths);
}

static char path[64];

static void remove_input(void)
{
    if (path[0] != '\0')
        unlink(path);
}

/* Reads every share; returns TFENC_OK and checks the documents against the
 * plan (when `plan` is non-NULL and valid), or returns the first failure's
 * status. */
static int read_corpus(const corpus_plan *plan, int padded, int n_shares, int *n_documents)
{
    tfenc_corpus_options options = {.path = path, .format = TFENC_CORPUS_HDF5};
    if (padded) {
        options.ids_dataset = "ids";
        options.lengths_dataset = "lengths";
    }
    *n_documents = 0;
    for (int share = 0; share < n_shares; share++) {
        tfenc_context ctx;
        tfenc_context_init(&ctx);
        tfenc_corpus *corpus = NULL;
        int status = tfenc_corpus_open(&ctx, &options, share, n_shares, &corpus);
        tfenc_corpus_counts counts;
        if (status == TFENC_OK) {
            require(tfenc_corpus_first_index(corpus) == *n_documents);
            status = tfenc_corpus_count(&ctx, corpus, &counts);
        }
        int64_t n_tokens = 0;
        tfenc_document document;
        int64_t local = 0;
        /* Twice: the second pass after a rewind must give the same. */
        for (int pass = 0; pass < 2 && status == TFENC_OK; pass++) {
            local = 0;
            n_tokens = 0;
            while ((status = tfenc_corpus_next(&ctx, corpus, &document)) == TFENC_OK) {
                require(document.local_index == local && document.n_tokens >= 0);
                require(document.token_ids != NULL || document.n_tokens == 0);
                int64_t global = *n_documents + local;
                for (int i = 0; i < document.n_tokens; i++)
                    require(document.token_ids[i] >= 0);
                /* Only a valid corpus has documents to compare with: in an
                 * invalid one a share may read its own documents before
                 * another share finds the defect (an index that ends
                 * short of the tokens, say), and the job is refused then. */
                if (plan != NULL && plan->valid) {
                    require(global < plan->n_documents);
                    require(document.n_tokens == plan->lengths[global]);
                    require(memcmp(document.token_ids, plan->tokens + plan->starts[global],
                                   (size_t)document.n_tokens * sizeof(int32_t)) == 0);
                }
                n_tokens += document.n_tokens;
                local++;
            }
            if (status == TFENC_ERR_NOT_FOUND) {
                status = TFENC_OK;
                require(local == counts.n_documents && n_tokens == counts.n_tokens);
                status = tfenc_corpus_rewind(&ctx, corpus);
            }
        }
        if (status != TFENC_OK) {
            const char *message = tfenc_context_message(&ctx);
            require(message[0] != '\0' && strchr(message, '\n') == NULL);
            /* To see what an input is refused for when reproducing it. */
            if (getenv("TFENC_FUZZ_VERBOSE") != NULL)
                fprintf(stderr, "share %d of %d: %s\n", share, n_shares, message);
        }
        tfenc_corpus_close(corpus);
        /* Closing the corpus closes every HDF5 object it opened, on success
         * and on failure alike: a leaked id would keep the file open. */
        require(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) == 0);
        if (status != TFENC_OK)
            return status;
        *n_documents += (int)local;
    }
    return TFENC_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (path[0] == '\0') {
        snprintf(path, sizeof path, "%s/tfenc-fuzz-corpus-%ld.h5",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (long)getpid());
        atexit(remove_input);
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    }
    reader r = {data, size, 0};
    uint64_t flags = take(&r, 1);
    int padded = flags & 1;
    int n_shares = 1 + (int)((flags >> 1) & 3);
    int n_documents = 0;

    static int raw_allowed = -1;
    if (raw_allowed < 0)
        raw_allowed = getenv("TFENC_FUZZ_RAW_HDF5") != NULL
                      && strcmp(getenv("TFENC_FUZZ_RAW_HDF5"), "1") == 0;
    if ((flags & 8) && raw_allowed) {
        /* Raw: the rest of the input is the file. */
        FILE *file = fopen(path, "wb");
        require(file != NULL);
        require(fwrite(data + 1, 1, size - 1, file) == size - 1);
        require(fclose(file) == 0);
        (void)read_corpus(NULL, padded, n_shares, &n_documents);
        return 0;
    }

    static corpus_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.padded = padded;
    plan.n_shares = n_shares;
    plan.n_documents = (int)(take(&r, 1) % (MAX_DOCUMENTS + 1));
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    require(file >= 0);
    if (padded)
        build_padded(file, &r, &plan);
    else
        build_ragged(file, &r, &plan);
    require(H5Fclose(file) >= 0);

    int status = read_corpus(plan.unknown ? NULL : &plan, padded, n_shares, &n_documents);
    if (plan.unknown) {
        /* Either outcome is right; read_corpus checked its invariants. */
    } else if (plan.valid) {
        require(status == TFENC_OK);
        require(n_documents == plan.n_documents);
    } else {
        require(status != TFENC_OK);
    }
    return 0;
}
