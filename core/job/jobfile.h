/* The job file: INI text parsed by inih into sections and keys that remember
 * their line, so every later error can point at file:line. */
#ifndef TFENC_JOBFILE_H
#define TFENC_JOBFILE_H

#include "tfenc/plugin.h"

typedef struct tfenc_job_entry {
    char *key;
    char *value;
    int line; /* 1-based line in the job file; 0 for a --set override */
    int used; /* set once a getter has read it: unused keys are errors */
    /* Set when read as a file the job reads (tfenc_param_input_path), to
     * what that file is to the job ("the corpus"): the job's inputs are
     * exactly these entries, so that no input key can be left out of the
     * checks that an output never overwrites an input. */
    const char *input;
    /* Set when tfenc chose the value where the job left it to `auto`
     * (run/path_choice.h): ADDED where the job had no such key, FOR_AUTO
     * where it said auto. The job's identity keeps the user's text (the
     * choice is recorded beside it), so that a resume compares what the
     * user wrote. */
    int chosen;
} tfenc_job_entry;

enum { TFENC_JOB_ENTRY_CHOSEN_ADDED = 1, TFENC_JOB_ENTRY_CHOSEN_FOR_AUTO = 2 };

typedef struct tfenc_job_section {
    char *name;
    int line;
    tfenc_job_entry *entries;
    int n_entries;
    int capacity;
} tfenc_job_section;

typedef struct tfenc_jobfile {
    char *path;      /* as given: used in messages */
    char *directory; /* relative paths in the job are relative to it */
    char *text;      /* the whole file, stored in the output for provenance */
    tfenc_job_section *sections;
    int n_sections;
    int capacity;
} tfenc_jobfile;

int tfenc_jobfile_load(tfenc_context *ctx, const char *path, tfenc_jobfile **job);
/* Parses `text` as if it were the file `name` (tests, and jobs built in memory). */
int tfenc_jobfile_parse_string(tfenc_context *ctx, const char *name, const char *text,
                               tfenc_jobfile **job);
/* Applies "section.key=value" (the --set option): replaces the key or adds it. */
int tfenc_jobfile_override(tfenc_context *ctx, tfenc_jobfile *job, const char *assignment);
/* The section called `name`, or NULL. */
tfenc_job_section *tfenc_jobfile_find(const tfenc_jobfile *job, const char *name);
/* The entry `key` of `section`, or NULL. Does not mark it used. */
tfenc_job_entry *tfenc_job_section_get(const tfenc_job_section *section, const char *key);
/* Calls `visit` for every entry read so far as an input path, with what it
 * is to the job, "[section] key" and the path resolved; stops at the first
 * status other than TFENC_OK and returns it. */
typedef int (*tfenc_job_input_visitor)(void *user, const char *what, const char *setting,
                                       const char *path);
int tfenc_jobfile_each_input(const tfenc_jobfile *job, tfenc_job_input_visitor visit, void *user);
/* Resolves a path from the job relative to the job file's directory.
 * Returns a new string (free() it) or NULL when out of memory. */
char *tfenc_jobfile_resolve_path(const tfenc_jobfile *job, const char *path);
void tfenc_jobfile_destroy(tfenc_jobfile *job);

#endif
