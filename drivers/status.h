/* tfenc-batch --status OUT.h5|JOB.ini: prints what core/output/inspect.h reads from an
 * output file. */
#ifndef TFENC_DRIVERS_STATUS_H
#define TFENC_DRIVERS_STATUS_H

/* Exit status of --status for a file that is a tfenc output but not
 * complete (0: complete; 1: not a readable tfenc output, or a damaged one:
 * core/output/output_checks.h). */
#define STATUS_UNFINISHED 3

/* Inspects `path` and prints the report on standard output
 * (errors on standard error). `path` is an output file, or a job file
 * whose [job] output (after the --set overrides) is inspected: a batch
 * script knows its job, not always where it writes. Returns the exit
 * status. Needs no MPI. With `as_json`, the report is one JSON object on
 * one line (docs/output.md), errors and exit status as without. */
int status_print(const char *path, const char *const *overrides, int n_overrides, int as_json);

#endif
