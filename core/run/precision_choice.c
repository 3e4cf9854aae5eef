/* int8 jobs' precision per step (run/precision_choice.h): a file's
 * calibration or the accuracy gate's, on rank 0, then shared. */
#include "config.h"

#include "run/precision_choice.h"

#include "base/files.h"
#include "matrix/matrix.h"
#include "run/accuracy_gate.h"
#include "run/calibration.h"
#include "run/job_reading.h"
#include "run/kind_survey.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(tfenc_precision) == sizeof(int), "step precisions travel as MPI_INT");

/* Where an int8 job's calibration came from, told by rank 0 to every rank. */
typedef struct calibration_origin {
    double min_cosine, sample_cosine;
    int64_t sample_documents;
    int from_file;       /* 0: the gate calibrated; 1: [model] calibration; 2: the file resumed */
    int changed;         /* steps it keeps in bf16 that run fp32 on this CPU */
    char weights_sha256[65];
    char path[PATH_MAX]; /* the file it came from */
    char heads[TFENC_MESSAGE_MAX]; /* the heads the gate judged (calibration.h), "": one */
    char source[PATH_MAX + 64];
} calibration_origin;

/* Rank 0: the calibration of a file, when the job names one ([model]
 * calibration) or resumes a file that records one, put into the model
 * (run/calibration.h); origin->from_file stays 0 when neither: the gate
 * calibrates. A file the job resumes that records no calibration of this
 * model is let be here: the reopen says what it is (another job's, an
 * older tfenc's), and its check of the calibration's digest refuses a
 * file begun with another. */
static int take_calibration(tfenc_run *r, calibration_origin *origin)
{
    const char *path = r->settings.model.calibration_path;
    tfenc_int8_calibration given = {0};
    int status = TFENC_OK;
    if (path != NULL) {
        origin->from_file = 1;
        status = tfenc_int8_calibration_read(r->ctx, "[model] calibration", path, &given);
    } else if (r->settings.job.resume && !r->settings.request->dry_run &&
               tfenc_file_present(r->settings.job.output)) {
        path = r->settings.job.output;
        if (tfenc_int8_calibration_read(r->ctx, "[job] output", path, &given) != TFENC_OK) {
            tfenc_context_clear(r->ctx);
            return TFENC_OK;
        }
        origin->from_file = 2;
    } else {
        return TFENC_OK;
    }
    /* A dry run does not hash the weights otherwise. */
    if (status == TFENC_OK && r->settings.weights_sha256[0] == '\0')
        status = tfenc_run_hash_weights(r);
    char weights_digest[65];
    if (status == TFENC_OK)
        tfenc_run_calibration_weights_digest(r, weights_digest);
    if (status == TFENC_OK)
        status =
            tfenc_calibration_to_model(r->ctx, &given, path, weights_digest, &r->settings.steps,
                                       r->plan.weights, r->plan.step_precision, &origin->changed);
    if (status != TFENC_OK && origin->from_file == 2) {
        tfenc_context_clear(r->ctx);
        origin->from_file = 0;
        status = TFENC_OK;
    } else if (status == TFENC_OK) {
        origin->min_cosine = given.min_cosine;
        origin->sample_cosine = given.sample_min_cosine;
        origin->sample_documents = given.sample_documents;
        snprintf(origin->heads, sizeof origin->heads, "%s",
                 given.heads != NULL ? given.heads : "");
        char *located = tfenc_file_located_path(path);
        snprintf(origin->path, sizeof origin->path, "%s", located != NULL ? located : path);
        free(located);
        if (origin->from_file == 1)
            snprintf(origin->source, sizeof origin->source, "given: %s ([model] calibration)",
                     origin->path);
        else
            snprintf(origin->source, sizeof origin->source, "%s", given.source);
    }
    tfenc_int8_calibration_free(&given);
    return status;
}

/* Rank 0: the accuracy gate (run/accuracy_gate.h) on a sample of the
 * corpus chooses each step's precision and calibrates the int8 maps; with
 * several heads it judges every head's output (report->output_cosine). */
static int run_gate(tfenc_run *r, tfenc_precision_report *report, calibration_origin *origin,
                    int *scores_width)
{
    const int n_steps = r->settings.steps.n_steps;
    const tfenc_model_plan *plan = &r->settings.steps;
    tfenc_gate_head *heads = calloc((size_t)plan->n_extra_heads + 1, sizeof *heads);
    if (heads == NULL)
        return tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i < plan->n_extra_heads; i++)
        heads[i] = (tfenc_gate_head){.name = plan->extra_head_names[i],
                                     .plan = &plan->extra_heads[i]};
    tfenc_gate_sample sample = {0};
    const tfenc_gate_corpus source = {
        .corpus = r->state.corpus, .windows = &r->plan.windows, .tokenizer = r->plan.tokenizer,
        .feeding = &r->plan.feeding, .max_seq_len = r->settings.job.max_seq_len,
        .batch_tokens = r->settings.job.batch_tokens, .d_model = r->settings.model.d_model};
    int status = tfenc_gate_sample_read(r->ctx, &source, &sample);
    if (status == TFENC_OK && sample.n_batches == 0)
        status = tfenc_error(r->ctx, TFENC_ERR_INPUT,
                             "%s: no document to check precision = %s on", r->settings.job.input,
                             tfenc_precision_names[r->settings.model.precision]);
    tfenc_model_options o = tfenc_run_model_options(r, 0, n_steps);
    o.limits.max_tokens = o.limits.max_seqs = sample.batch_tokens;
    if (status == TFENC_OK)
        status = tfenc_run_declared_scores_width(r, scores_width);
    if (status == TFENC_OK)
        status = tfenc_precision_gate(r->ctx, &o, sample.batches, sample.n_batches,
                                      r->settings.model.min_cosine, *scores_width, heads,
                                      plan->n_extra_heads, report);
    free(heads);
    if (status != TFENC_OK && status != TFENC_ERR_CONFIG)
        status = tfenc_error_prefix(r->ctx, status, "precision = %s: the accuracy gate failed",
                                    tfenc_precision_names[r->settings.model.precision]);
    origin->min_cosine = r->settings.model.min_cosine;
    origin->sample_cosine = report->sample_cosine;
    origin->sample_documents = sample.n_documents;
    snprintf(origin->source, sizeof origin->source,
             "calibrated: the accuracy gate on a sample of %d documents of the job's corpus",
             sample.n_documents);
    /* With several heads the record says that every head was judged. */
    int used = 0;
    for (int i = -1; plan->n_extra_heads > 0 && i < plan->n_extra_heads && used >= 0 &&
                     (size_t)used < sizeof origin->heads;
         i++)
        used += snprintf(origin->heads + used, sizeof origin->heads - used, "%s%s",
                         i < 0 ? "" : ",", i < 0 ? plan->first_head : plan->extra_head_names[i]);
    tfenc_gate_sample_free(&sample);
    return status;
}

/* Every rank: rank 0's calibration table, then the job's calibration as
 * the output records it (r->plan.calibration), from the table the maps are
 * made with. */
static int share_calibration(tfenc_run *r, const calibration_origin *origin)
{
    void *table = NULL;
    size_t table_size = 0;
    int status = TFENC_OK;
    if (r->rank == 0)
        status =
            tfenc_weight_store_calibration_export(r->ctx, r->plan.weights, &table, &table_size);
    unsigned long long table_bytes = table_size;
    MPI_Bcast(&table_bytes, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    if (r->rank != 0)
        table = malloc(table_bytes > 0 ? table_bytes : 1);
    if (table == NULL && status == TFENC_OK)
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (tfenc_run_agree_on_failure(r, status)) {
        free(table);
        return 1;
    }
    MPI_Bcast(table, (int)table_bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (r->rank != 0)
        status = tfenc_weight_store_calibration_import(r->ctx, r->plan.weights, table, table_bytes);
    free(table);
    /* From here on an int8 map without ranges is an error, not a map
     * without smoothing. */
    char fixed[PATH_MAX + 64];
    snprintf(fixed, sizeof fixed, "%s%s", origin->from_file ? "[model] calibration " : "",
             origin->from_file ? origin->path : "the accuracy gate's calibration");
    if (status == TFENC_OK)
        status = tfenc_weight_store_calibration_fix(r->ctx, r->plan.weights, fixed);
    tfenc_int8_calibration *c = &r->plan.calibration;
    if (status == TFENC_OK)
        status = tfenc_calibration_from_model(r->ctx, r->plan.weights, &r->settings.steps,
                                              r->plan.step_precision, c);
    c->min_cosine = origin->min_cosine;
    c->sample_min_cosine = origin->sample_cosine;
    c->sample_documents = origin->sample_documents;
    memcpy(c->weights_sha256, origin->weights_sha256, sizeof c->weights_sha256);
    if (status == TFENC_OK && (c->source = strdup(origin->source)) == NULL)
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (status == TFENC_OK && origin->heads[0] != '\0' &&
        (c->heads = strdup(origin->heads)) == NULL)
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (status == TFENC_OK)
        status = tfenc_int8_calibration_digest(r->ctx, c);
    return tfenc_run_agree_on_failure(r, status);
}

/* The gate's figures of a job of several heads: each head's, as a job of
 * that head alone tells its own. */
static int tell_heads(const tfenc_run *r, const calibration_origin *origin,
                      const tfenc_precision_report *report, char *line, size_t size)
{
    const tfenc_model_plan *plan = &r->settings.steps;
    const double allowed = 100.0 * acos(1.0 - (1.0 - r->settings.model.min_cosine) / 2.0);
    int used = snprintf(line, size, "precision = %s: on a sample of %lld documents,",
                        tfenc_precision_names[r->settings.model.precision],
                        (long long)origin->sample_documents);
    for (int i = 0; i <= plan->n_extra_heads && used > 0 && (size_t)used < size; i++) {
        const char *name = i == 0 ? plan->first_head : plan->extra_head_names[i - 1];
        const char *after = i == plan->n_extra_heads ? "" : ";";
        const double value = report->output_cosine[i];
        used += report->output_scores[i]
                    ? snprintf(line + used, size - used,
                               " head %s: scores off fp32's by at most %.3g%% of their spread "
                               "(%.3g%% allowed)%s",
                               name, 100.0 * acos(fmax(fmin(value, 1.0), -1.0)), allowed, after)
                    : snprintf(line + used, size - used, " head %s: min cosine %.6f to fp32%s",
                               name, value, after);
    }
    if (used > 0 && (size_t)used < size)
        used += snprintf(line + used, size - used, " (min_cosine %.6f)",
                         r->settings.model.min_cosine);
    return used;
}

/* Rank 0: the line that says which model the job runs. */
static void tell_calibration(tfenc_run *r, const calibration_origin *origin, int scores_width,
                             const tfenc_precision_report *report)
{
    const int n_steps = r->settings.steps.n_steps;
    const char *precision = tfenc_precision_names[r->settings.model.precision];
    char line[TFENC_MESSAGE_MAX];
    /* Scores are measured by their error to fp32's relative to their
     * spread (run/accuracy_gate.h), the angle whose cosine the gate
     * compares with min_cosine. */
    int used = origin->from_file
        ? snprintf(line, sizeof line, "precision = %s: the calibration of %s%s (min cosine %.6f "
                   "to fp32 on its sample of %lld documents), no accuracy gate run", precision,
                   origin->path, origin->from_file == 2 ? ", the file this run resumes" : "",
                   origin->sample_cosine, (long long)origin->sample_documents)
        : r->settings.steps.n_extra_heads > 0
        ? tell_heads(r, origin, report, line, sizeof line)
        : scores_width > 0
        ? snprintf(line, sizeof line, "precision = %s: scores off fp32's by at most %.3g%% "
                   "of their spread on a sample of %lld documents (min_cosine %.6f allows "
                   "%.3g%%)", precision,
                   100.0 * acos(fmax(fmin(origin->sample_cosine, 1.0), -1.0)),
                   (long long)origin->sample_documents, r->settings.model.min_cosine,
                   100.0 * acos(1.0 - (1.0 - r->settings.model.min_cosine) / 2.0))
        : snprintf(line, sizeof line,
                   "precision = %s: min cosine %.6f to fp32 on a sample of %lld documents "
                   "(min_cosine %.6f)", precision, origin->sample_cosine,
                   (long long)origin->sample_documents, r->settings.model.min_cosine);
    int kept = 0;
    for (int i = 0; i < n_steps; i++)
        kept += r->plan.step_precision[i] != r->settings.model.precision;
    if (kept > 0 && used > 0 && (size_t)used < sizeof line)
        used += snprintf(line + used, sizeof line - used, "; kept in %s:",
                         tfenc_precision_names[tfenc_matrix_int8_fallback()]);
    for (int i = 0; i < n_steps && used > 0 && (size_t)used < sizeof line; i++)
        if (r->plan.step_precision[i] != r->settings.model.precision)
            used +=
                snprintf(line + used, sizeof line - used, " %s", r->settings.steps.steps[i].name);
    if (origin->changed > 0 && used > 0 && (size_t)used < sizeof line)
        snprintf(line + used, sizeof line - used, " (%d of them bf16 there: this CPU runs no "
                 "bf16, so the rows are not that file's bits)", origin->changed);
    tfenc_run_notice(r, "%s", line);
}

/* Rank 0's choice, every rank's calibration, and the notice: 1 when the
 * job is refused. */
static int choose_and_share(tfenc_run *r, tfenc_precision_report *report)
{
    calibration_origin origin = {0};
    int status = TFENC_OK, scores_width = 0;
    if (r->rank == 0)
        status = take_calibration(r, &origin);
    if (status == TFENC_OK && r->rank == 0 && !origin.from_file)
        status = run_gate(r, report, &origin, &scores_width);
    if (r->rank == 0)
        tfenc_run_calibration_weights_digest(r, origin.weights_sha256);
    if (tfenc_run_agree_on_failure(r, status))
        return 1;
    MPI_Bcast(r->plan.step_precision, r->settings.steps.n_steps, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(&origin, sizeof origin, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (share_calibration(r, &origin))
        return 1;
    r->plan.sample_cosine = origin.sample_cosine;
    if (r->rank == 0)
        tell_calibration(r, &origin, scores_width, report);
    return 0;
}

/* int8 jobs: rank 0 takes the calibration of a file or runs the accuracy
 * gate on a sample of the corpus, every rank takes its choice of
 * precision per step and its input ranges, and a job whose min_cosine
 * cannot be met stops here. (bf16's accuracy is the tests' business:
 * 0.9999 on the test models and all-MiniLM-L6-v2.) */
int tfenc_run_gate_precision(tfenc_run *r)
{
    if (r->settings.model.precision != TFENC_PRECISION_INT8) {
        if (r->settings.model.calibration_path != NULL)
            tfenc_run_notice(
                r, "[model] calibration %s: not used: this CPU runs precision = %s, not int8",
                r->settings.model.calibration_path,
                tfenc_precision_names[r->settings.model.precision]);
        return 0;
    }
    const int n_steps = r->settings.steps.n_steps;
    r->plan.step_precision = calloc((size_t)n_steps, sizeof *r->plan.step_precision);
    tfenc_precision_report report = {.step_precision = r->plan.step_precision};
    /* Each output's figure, for the notice of a job of several heads. */
    const int n_outputs = r->settings.steps.n_extra_heads + 1;
    report.output_cosine = calloc((size_t)n_outputs, sizeof *report.output_cosine);
    report.output_scores = calloc((size_t)n_outputs, sizeof *report.output_scores);
    const int refused =
        r->plan.step_precision == NULL || report.output_cosine == NULL ||
                report.output_scores == NULL
            ? tfenc_run_agree_on_failure(
                  r, tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory"))
            : choose_and_share(r, &report);
    free(report.output_cosine);
    free(report.output_scores);
    return refused;
}
