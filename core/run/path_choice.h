/* Paths chosen by measurement: where tfenc has more than one way to
 * compute the same thing and the job left the choice to `auto`, the
 * candidates are timed on the job's own sample before the job, and another
 * path than the default is taken only when it is clearly faster (by
 * TFENC_PATH_MARGIN). The candidates differ in their bits, so a choice is
 * made once, on rank 0, told to every rank, recorded in the output file
 * (attribute path_choices) and taken from there on resume, never measured
 * again; a job pins any choice by its key, or takes an earlier file's
 * choices with [model] paths = FILE.
 *
 * The places today: each attention section (type = mha) whose `kernel` is
 * auto, between the fused kernel and the host's products; in an fp32 job,
 * [model] fp32_products, between OpenBLAS (the default) and oneDNN's f32
 * matmul on weights packed once (core/matrix/onednn_f32.h). */
#ifndef TFENC_PATH_CHOICE_H
#define TFENC_PATH_CHOICE_H

#include "job/jobfile.h"
#include "model/model.h"
#include "run/accuracy_gate.h"

/* How much faster another path must be than the default to be taken: its
 * time at most (1 - margin) of the default's. Two passes of a step, the
 * faster counting, vary by 2-4% between runs on a quiet machine and by up
 * to ~6% on a shared one (docs/performance.md); 10% is above both, so a
 * choice does not flip with noise. */
#define TFENC_PATH_MARGIN 0.10

/* The choice among n candidates whose measured times are seconds[i] (not
 * a positive number: not measured, never chosen): `pinned` when it is a
 * candidate (>= 0), else the fastest candidate when its time is at most
 * (1 - margin) of the default's, else `default_index` (ties and noise keep
 * it, and so does a default that could not be measured). */
int tfenc_path_pick(const double *seconds, int n, int default_index, int pinned, double margin);

/* The choice from CPU-seconds and wall seconds both: tfenc_path_pick on
 * the CPU-seconds (a shared machine's other work inflates them far less
 * than wall time), kept only when the candidate's wall time is also below
 * the default's (a path that saves CPU time by leaving threads idle is not
 * faster); else the default. */
int tfenc_path_pick_measured(const double *cpu_seconds, const double *wall_seconds, int n,
                             int default_index, int pinned, double margin);

/* The value recorded for "section.key" in `recorded` (lines of
 * "section.key=value", as the file's path_choices holds them) copied into
 * value (NUL-terminated, truncated to size); 1 when found, else 0. */
int tfenc_path_recorded(const char *recorded, const char *section, const char *key, char *value,
                        size_t size);

/* 0 when the environment says TFENC_PATHS=default: every auto takes its
 * default path without measuring (jobs whose bits must match without
 * sharing a file, and the test suite, whose jobs compare bits across
 * runs), and a run does not print its paths line; 1 otherwise. */
int tfenc_path_measuring(void);

/* The choices of one job. */
typedef struct tfenc_path_choices {
    char *assignments; /* "section.key=value\n" per choice: what the file records ("" none) */
    char line[1024];   /* "paths: ..." for the user, one line */
} tfenc_path_choices;

/* Where a recorded set of choices comes from. */
typedef struct tfenc_path_record {
    const char *assignments; /* lines of "section.key=value", or NULL: measure */
    const char *origin;      /* "the file this run resumes OUT.h5", "[model] paths FILE" */
} tfenc_path_record;

/* Rank 0: decides every choice of the job. A key set to other than auto
 * pins its place; else the record's value (refused in one line when it
 * names no candidate); with no record, the candidates are timed with
 * `options` (one step at a time, the options' precision) on `sample`,
 * unless record->origin is set without assignments (a file from before
 * path_choices: the default, as that tfenc ran). A key that contradicts
 * the record is one error line. The job's entries are set to the choices
 * (tfenc_path_choices_apply), so every model built later runs them.
 * TFENC_PATH_FAVOUR=section.key=value divides that candidate's measured
 * time by 1000: the tests' way to make a measurement choose a path
 * whatever this machine's speeds. */
int tfenc_path_choices_decide(tfenc_context *ctx, tfenc_jobfile *job, const tfenc_model_plan *plan,
                              const tfenc_model_options *options,
                              const tfenc_gate_sample *sample, const tfenc_path_record *record,
                              tfenc_path_choices *choices);

/* Sets the job's entries to `assignments` (every rank, rank 0's choices),
 * marked as chosen so that the job's identity keeps the user's text. */
int tfenc_path_choices_apply(tfenc_context *ctx, tfenc_jobfile *job, const char *assignments);

/* The attribute path_choices of the HDF5 file `path` into *assignments
 * (malloc'd; NULL when the file has none); `what` names the file in an
 * error ("[model] paths"). */
int tfenc_path_choices_read(tfenc_context *ctx, const char *what, const char *path,
                            char **assignments);

void tfenc_path_choices_free(tfenc_path_choices *choices);

#endif
