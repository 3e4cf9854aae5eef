/* The corpus formats' table. A new format is one reader file and one entry
 * here (with its name in the names column, its constant in corpus_types.h,
 * and, when its reader needs a library, its configure check deciding the
 * presence flag): docs/architecture.md has the recipe. */
#include "config.h"
#include "input/formats.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/names.h"

/* The readers, each defined in its own file. */
extern const tfenc_corpus_reader tfenc_text_reader;
extern const tfenc_corpus_reader tfenc_jsonl_reader;
extern const tfenc_corpus_reader tfenc_hdf5_reader;
/* Parquet's is built only when configure found Apache Arrow. */
#ifdef HAVE_PARQUET
extern const tfenc_corpus_reader tfenc_parquet_reader;
#define PARQUET_READER (&tfenc_parquet_reader)
#else
#define PARQUET_READER NULL
#endif

const char *const tfenc_corpus_format_names[] = {"text", "jsonl", "hdf5", "parquet", "auto", NULL};

static const char *const jsonl_extensions[] = {".jsonl", ".ndjson", NULL};
/* C4 and Dolma name their JSON Lines shards "*.json.gz". */
static const char *const jsonl_inner_extensions[] = {".json", NULL};
static const char *const hdf5_extensions[] = {".h5", ".hdf5", NULL};
static const char *const parquet_extensions[] = {".parquet", ".pq", NULL};

static const tfenc_corpus_format_info formats[] = {
    /* Text is what no other entry claims by name. */
    [TFENC_CORPUS_TEXT] = {.title = "plain text", .document = "a line",
                          .reader = &tfenc_text_reader},
    [TFENC_CORPUS_JSONL] = {.title = "JSON Lines", .document = "a line's object",
                            .extensions = jsonl_extensions,
                            .inner_extensions = jsonl_inner_extensions,
                            .reader = &tfenc_jsonl_reader, .pairs = 1},
    [TFENC_CORPUS_HDF5] = {.title = "HDF5 token ids", .document = "a run of token ids",
                           .extensions = hdf5_extensions, .reader = &tfenc_hdf5_reader,
                           .token_ids = 1},
    [TFENC_CORPUS_PARQUET] = {.title = "Parquet", .document = "a row",
                              .extensions = parquet_extensions, .reader = PARQUET_READER,
                              .missing = "Apache Arrow was not found: run "
                                         "tests/setup-python-venv and configure --with-parquet",
                              .pairs = 1},
};

_Static_assert(sizeof formats / sizeof *formats == TFENC_CORPUS_AUTO,
               "one entry of the formats' table per corpus format");
_Static_assert(sizeof tfenc_corpus_format_names / sizeof *tfenc_corpus_format_names
                   == TFENC_CORPUS_AUTO + 2,
               "one name per corpus format, then \"auto\" and NULL");

const char *const tfenc_corpus_compression_extensions[] = {".gz", ".zst", ".zstd", ".xz", NULL};

const tfenc_corpus_format_info *tfenc_corpus_format_info_of(tfenc_corpus_format format)
{
    return (int)format >= 0 && format < TFENC_CORPUS_AUTO ? &formats[format] : NULL;
}

int tfenc_corpus_format_token_ids(tfenc_corpus_format format)
{
    const tfenc_corpus_format_info *info = tfenc_corpus_format_info_of(format);
    return info != NULL && info->token_ids;
}

int tfenc_corpus_format_pairs(tfenc_corpus_format format)
{
    const tfenc_corpus_format_info *info = tfenc_corpus_format_info_of(format);
    return info != NULL && info->pairs;
}

void tfenc_corpus_format_pair_titles(char *line, size_t size)
{
    int n_pairs = 0, written = 0;
    for (int i = 0; i < TFENC_CORPUS_AUTO; i++)
        n_pairs += formats[i].pairs;
    line[0] = '\0';
    for (int i = 0, seen = 0; i < TFENC_CORPUS_AUTO && written >= 0 && (size_t)written < size;
         i++)
        if (formats[i].pairs) {
            seen++;
            written += snprintf(line + written, size - (size_t)written, "%s%s",
                                seen == 1 ? "" : seen == n_pairs ? " or " : ", ",
                                formats[i].title);
        }
}

int tfenc_corpus_format_from_name(const char *name, tfenc_corpus_format *format)
{
    int index = tfenc_name_index(tfenc_corpus_format_names, name);
    if (index < 0 || index == TFENC_CORPUS_AUTO)
        return TFENC_ERR_NOT_FOUND;
    *format = (tfenc_corpus_format)index;
    return TFENC_OK;
}

const char *tfenc_corpus_format_name(tfenc_corpus_format format)
{
    return tfenc_name_of(tfenc_corpus_format_names, TFENC_CORPUS_AUTO, format);
}

static int listed(const char *const *extensions, const char *extension)
{
    for (int i = 0; extensions != NULL && extensions[i] != NULL; i++)
        if (strcasecmp(extension, extensions[i]) == 0)
            return 1;
    return 0;
}

/* The format whose entry claims `extension`; behind a compression's, its
 * inner extensions count too. */
static tfenc_corpus_format by_extension(const char *extension, int behind_compression)
{
    for (int i = 0; i < TFENC_CORPUS_AUTO; i++)
        if (listed(formats[i].extensions, extension)
            || (behind_compression && listed(formats[i].inner_extensions, extension)))
            return (tfenc_corpus_format)i;
    return TFENC_CORPUS_TEXT;
}

tfenc_corpus_format tfenc_corpus_format_from_path(const char *path)
{
    const char *dot = path != NULL ? strrchr(path, '.') : NULL;
    if (dot == NULL || strchr(dot, '/') != NULL)
        return TFENC_CORPUS_TEXT;
    if (!listed(tfenc_corpus_compression_extensions, dot))
        return by_extension(dot, 0);
    /* "c4-0001.json.gz": the format's extension comes before. */
    const char *format_dot = dot;
    while (format_dot > path && *--format_dot != '.' && *format_dot != '/')
        ;
    char format_extension[16];
    size_t n = (size_t)(dot - format_dot);
    if (*format_dot != '.' || n >= sizeof format_extension)
        return TFENC_CORPUS_TEXT;
    memcpy(format_extension, format_dot, n);
    format_extension[n] = '\0';
    return by_extension(format_extension, 1);
}

void tfenc_corpus_format_describe(const tfenc_corpus_options *options, char *line, size_t size)
{
    const tfenc_corpus_format_info *info = tfenc_corpus_format_info_of(options->format);
    if (info == NULL) {
        snprintf(line, size, "%s", tfenc_corpus_format_name(options->format));
        return;
    }
    if (info->reader == NULL) {
        snprintf(line, size, "%s, not in this build (%s)", info->title, info->missing);
        return;
    }
    char detail[256] = "";
    info->reader->describe(options, detail, sizeof detail);
    snprintf(line, size, "%s%s%s", info->title, detail[0] != '\0' ? ": " : "", detail);
}
