/* tfenc-export: a tfenc output file (HDF5) as Parquet files, for the
 * tools that read those (pyarrow, pandas, Polars, DuckDB, Spark): one row
 * per finished document with its id, source, lengths and output.
 *
 * This file is the program: arguments and messages. The work is in
 * drivers/export/: reading the output (output_reader), writing Parquet
 * through Arrow (parquet.cc, or parquet_none.c in a build without Arrow)
 * and the two together (export). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "base/context.h"
#include "export/export.h"
#include "export/parquet.h"

/* A file of a million 1024-d float32 vectors is 4 GB: beyond that, several
 * files let readers work on them in parallel. */
#define DEFAULT_ROWS_PER_FILE ((int64_t)1000000)

static void usage(FILE *stream)
{
    fprintf(stream,
            "usage: tfenc-export OUTPUT.h5 --parquet DIR [--rows-per-file N] [--output NAME]\n"
            "Writes the finished documents of a tfenc output file as Parquet files\n"
            "DIR/part-00000.parquet, ...: one row per document with its ids, source file\n"
            "and line, lengths and truncated, and its output (embeddings, scores, hidden,\n"
            "vectors or sparse). DIR must be new or empty.\n"
            "  --parquet DIR        the directory to write (made if missing)\n"
            "  --rows-per-file N    documents per file (default %" PRId64 ")\n"
            "  --output NAME        a file of several heads: the head to write (default: the\n"
            "                       first, the root's rows; tfenc-batch's status lists them)\n"
            "  --version, --help\n",
            DEFAULT_ROWS_PER_FILE);
}

/* Parses argv into *options. Returns -1 to go on, else the exit status (0
 * after --help or --version, 2 for a usage error, already reported). */
static int parse_arguments(int argc, char **argv, export_options *options)
{
    *options = (export_options){.rows_per_file = DEFAULT_ROWS_PER_FILE};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(arg, "--version") == 0) {
            const char *library = export_parquet_library();
            printf("tfenc-export %s (%s)\n", PACKAGE_VERSION,
                   library != NULL ? library : "built without Apache Arrow: no Parquet");
            return 0;
        } else if (strcmp(arg, "--parquet") == 0 || strcmp(arg, "--rows-per-file") == 0 ||
                   strcmp(arg, "--output") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "tfenc-export: %s needs a value\n", arg);
                return 2;
            }
            const char *value = argv[++i];
            if (strcmp(arg, "--parquet") == 0) {
                options->directory = value;
                continue;
            }
            if (strcmp(arg, "--output") == 0) {
                options->output = value;
                continue;
            }
            char *end = NULL;
            errno = 0;
            long long rows = strtoll(value, &end, 10);
            if (errno != 0 || end == value || *end != '\0' || rows < 1) {
                fprintf(stderr, "tfenc-export: --rows-per-file '%s' is not a whole number of "
                        "documents, 1 or more\n", value);
                return 2;
            }
            options->rows_per_file = rows;
        } else if (arg[0] == '-' && arg[1] != '\0') {
            fprintf(stderr, "tfenc-export: unknown option '%s' (see --help)\n", arg);
            return 2;
        } else if (options->input == NULL) {
            options->input = arg;
        } else {
            fprintf(stderr, "tfenc-export: one output file expected, got '%s' and '%s'\n",
                    options->input, arg);
            return 2;
        }
    }
    if (options->input == NULL || options->directory == NULL) {
        fprintf(stderr, "tfenc-export: %s (see --help)\n",
                options->input == NULL ? "no output file given" : "no --parquet DIR given");
        return 2;
    }
    return -1;
}

int main(int argc, char **argv)
{
    export_options options;
    int exit_status = parse_arguments(argc, argv, &options);
    if (exit_status >= 0)
        return exit_status;
    if (export_parquet_library() == NULL) {
        fprintf(stderr, "tfenc-export: this tfenc was built without Apache Arrow's C++ Parquet "
                "library, which Parquet export needs: configure it with --with-parquet "
                "(README.md, Building and installing)\n");
        return 1;
    }
    /* The one-line message below says what failed; HDF5's stack dump would
     * bury it. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    export_summary summary;
    if (export_to_parquet(&ctx, &options, &summary) != TFENC_OK) {
        fprintf(stderr, "tfenc-export: %s\n", tfenc_context_message(&ctx));
        return 1;
    }
    if (summary.left_out > 0)
        fprintf(stderr, "tfenc-export: %s: %" PRId64 " finished documents left out: the file "
                "records where a document's vectors end only once the next one is finished; "
                "complete the job to export them\n", options.input, summary.left_out);
    printf("tfenc-export: wrote %" PRId64 " of %" PRId64 " documents of %s (%s%s) to %d file%s "
           "in %s\n", summary.rows, summary.n_documents, options.input, summary.kind,
           summary.complete ? "" : ", unfinished", summary.files, summary.files == 1 ? "" : "s",
           options.directory);
    return 0;
}
