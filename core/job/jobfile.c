/* Job files: inih does the INI syntax; this module keeps every section and
 * key in file order with its line number, so that composition and error
 * messages can refer to file:line. */
#include "job/jobfile.h"
#include "base/context.h"
#include "base/files.h"

#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Comments (docs/job-file.md): a line starting with ';' or '#', and the rest
 * of a line from a ';' or '#' that follows a space or tab, so that
 * `output = x.h5   # note` names x.h5. inih's defaults know only ';' inline.
 * Debian's libinih exposes its options as variables (its ini.h declares
 * them); builds that fix them at compile time lack the symbols, hence weak
 * references, and there a value with " #" is refused rather than kept. */
extern char *ini_inline_comment_prefixes;
extern bool ini_allow_inline_comments;
#pragma weak ini_inline_comment_prefixes
#pragma weak ini_allow_inline_comments
static char inline_comment_prefixes[] = ";#";

static int inline_hash_comments_supported(void)
{
    return &ini_inline_comment_prefixes != NULL && &ini_allow_inline_comments != NULL;
}

/* Line length: inih's default buffer holds 198 characters, which a path or
 * a prompt written by tfenc-import can pass. Debian's libinih lets the
 * buffer live on the heap and grow (by doubling) up to ini_max_line, so a
 * parse sets that to the whole text's length: no line of it can be cut,
 * and the job file's own size cap (MAX_JOB_FILE_BYTES) bounds the memory.
 * Builds that fix these at compile time keep their cap, which read_line
 * reports as "line is longer than N characters". */
extern int ini_max_line;
extern bool ini_use_stack;
extern bool ini_allow_realloc;
extern int ini_initial_alloc;
#pragma weak ini_max_line
#pragma weak ini_use_stack
#pragma weak ini_allow_realloc
#pragma weak ini_initial_alloc

static int growing_lines_supported(void)
{
    return &ini_max_line != NULL && &ini_use_stack != NULL && &ini_allow_realloc != NULL &&
           &ini_initial_alloc != NULL;
}

/* inih's line settings, saved around a parse (they are process-wide). */
typedef struct line_settings {
    int max_line, initial_alloc;
    bool use_stack, allow_realloc;
} line_settings;

static void lines_as_long_as(size_t text_length, line_settings *saved)
{
    *saved = (line_settings){ini_max_line, ini_initial_alloc, ini_use_stack, ini_allow_realloc};
    /* +3: inih's buffer holds '\r', '\n' and the NUL besides the line. */
    size_t longest = text_length + 3;
    if (longest > (size_t)ini_max_line)
        ini_max_line = longest < INT_MAX ? (int)longest : INT_MAX;
    ini_use_stack = false;
    ini_allow_realloc = true;
}

static void restore_lines(const line_settings *saved)
{
    ini_max_line = saved->max_line;
    ini_initial_alloc = saved->initial_alloc;
    ini_use_stack = saved->use_stack;
    ini_allow_realloc = saved->allow_realloc;
}

/* The longest line inih takes whole (its buffer also holds '\n' and NUL). */
static int longest_line(void)
{
    return (growing_lines_supported() ? ini_max_line : INI_MAX_LINE) - 2;
}

#define MAX_JOB_FILE_BYTES ((size_t)1 << 20)

typedef struct parse_state {
    tfenc_context *ctx;
    tfenc_jobfile *job;
    const char *cursor; /* next unread character of the text */
    int line;           /* line number of the line inih is processing */
    int header_line;    /* line of the last [section] header seen */
    int line_too_long;  /* first line that exceeded inih's buffer, or 0 */
    int mid_line;       /* the last read stopped inside a line (inih grows its buffer) */
    int status;
} parse_state;

/* An fgets over the in-memory text that counts lines, because Debian's inih
 * is built without INI_HANDLER_LINENO. */
static char *read_line(char *buffer, int size, void *stream)
{
    parse_state *state = stream;
    if (*state->cursor == '\0')
        return NULL;
    const char *end = strchr(state->cursor, '\n');
    size_t length = end != NULL ? (size_t)(end - state->cursor) + 1 : strlen(state->cursor);
    if (!state->mid_line) {
        state->line++;
        const char *first = state->cursor;
        while (*first == ' ' || *first == '\t')
            first++;
        if (*first == '[')
            state->header_line = state->line;
    }
    state->mid_line = 0;
    if (length > (size_t)size - 1 && growing_lines_supported()) {
        /* As fgets: the part that fits; inih grows its buffer and asks for
         * the rest of the same line. */
        length = (size_t)size - 1;
        state->mid_line = 1;
    } else if (length > (size_t)size - 1) {
        if (state->line_too_long == 0)
            state->line_too_long = state->line;
        length = (size_t)size - 1;
        /* Skip the rest of the line so that it is not parsed as a new one. */
        memcpy(buffer, state->cursor, length);
        buffer[length] = '\0';
        state->cursor = end != NULL ? end + 1 : state->cursor + strlen(state->cursor);
        return buffer;
    }
    memcpy(buffer, state->cursor, length);
    buffer[length] = '\0';
    state->cursor += length;
    return buffer;
}

static tfenc_job_section *add_section(tfenc_jobfile *job, const char *name, int line)
{
    if (job->n_sections == job->capacity) {
        int capacity = job->capacity ? job->capacity * 2 : 16;
        tfenc_job_section *grown = realloc(job->sections, (size_t)capacity * sizeof *grown);
        if (grown == NULL)
            return NULL;
        job->sections = grown;
        job->capacity = capacity;
    }
    tfenc_job_section *section = &job->sections[job->n_sections];
    memset(section, 0, sizeof *section);
    section->name = strdup(name);
    if (section->name == NULL)
        return NULL;
    section->line = line;
    job->n_sections++;
    return section;
}

static tfenc_job_entry *add_entry(tfenc_job_section *section, const char *key, const char *value,
                                  int line)
{
    if (section->n_entries == section->capacity) {
        int capacity = section->capacity ? section->capacity * 2 : 8;
        tfenc_job_entry *grown = realloc(section->entries, (size_t)capacity * sizeof *grown);
        if (grown == NULL)
            return NULL;
        section->entries = grown;
        section->capacity = capacity;
    }
    tfenc_job_entry *entry = &section->entries[section->n_entries];
    entry->key = strdup(key);
    entry->value = strdup(value);
    entry->line = line;
    entry->used = 0;
    entry->input = NULL;
    entry->chosen = 0;
    if (entry->key == NULL || entry->value == NULL) {
        free(entry->key);
        free(entry->value);
        return NULL;
    }
    section->n_entries++;
    return entry;
}

static int on_key(void *user, const char *section_name, const char *key, const char *value)
{
    parse_state *state = user;
    tfenc_jobfile *job = state->job;
    if (state->status != TFENC_OK)
        return 0;
    if (section_name[0] == '\0') {
        state->status = tfenc_error(state->ctx, TFENC_ERR_CONFIG,
                                    "%s:%d: key '%s' is outside any [section]", job->path,
                                    state->line, key);
        return 0;
    }
    tfenc_job_section *section = job->n_sections > 0 ? &job->sections[job->n_sections - 1] : NULL;
    if (section == NULL || strcmp(section->name, section_name) != 0) {
        /* inih reports keys, not headers: a new name here is a new section. */
        tfenc_job_section *earlier = tfenc_jobfile_find(job, section_name);
        if (earlier != NULL) {
            state->status = tfenc_error(state->ctx, TFENC_ERR_CONFIG,
                                        "%s:%d: section [%s] appears twice (first at line %d)",
                                        job->path, state->line, section_name, earlier->line);
            return 0;
        }
        section = add_section(job, section_name, state->header_line);
        if (section == NULL) {
            state->status = tfenc_error(state->ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory",
                                        job->path);
            return 0;
        }
    }
    if (!inline_hash_comments_supported()) {
        for (const char *c = value; *c != '\0'; c++)
            if (*c == '#' && c > value && (c[-1] == ' ' || c[-1] == '\t')) {
                state->status = tfenc_error(state->ctx, TFENC_ERR_CONFIG,
                                            "%s:%d: [%s] %s: this build's inih keeps '#' "
                                            "comments in the value: put the comment on a line "
                                            "of its own or start it with ';'",
                                            job->path, state->line, section_name, key);
                return 0;
            }
    }
    tfenc_job_entry *existing = tfenc_job_section_get(section, key);
    if (existing != NULL) {
        state->status = tfenc_error(state->ctx, TFENC_ERR_CONFIG,
                                    "%s:%d: [%s] key '%s' is set twice (first at line %d)",
                                    job->path, state->line, section_name, key, existing->line);
        return 0;
    }
    if (add_entry(section, key, value, state->line) == NULL) {
        state->status = tfenc_error(state->ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory",
                                    job->path);
        return 0;
    }
    return 1;
}

static char *directory_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        return strdup(".");
    size_t length = slash == path ? 1 : (size_t)(slash - path);
    char *directory = malloc(length + 1);
    if (directory != NULL) {
        memcpy(directory, path, length);
        directory[length] = '\0';
    }
    return directory;
}

int tfenc_jobfile_parse_string(tfenc_context *ctx, const char *name, const char *text,
                               tfenc_jobfile **job_out)
{
    *job_out = NULL;
    tfenc_jobfile *job = calloc(1, sizeof *job);
    if (job == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", name);
    job->path = strdup(name);
    job->directory = directory_of(name);
    job->text = strdup(text);
    if (job->path == NULL || job->directory == NULL || job->text == NULL) {
        tfenc_jobfile_destroy(job);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", name);
    }
    parse_state state = {.ctx = ctx, .job = job, .cursor = job->text, .status = TFENC_OK};
    char *saved_prefixes = NULL;
    bool saved_allow = false;
    if (inline_hash_comments_supported()) {
        /* Process-wide settings of the library: set for this parse only. */
        saved_prefixes = ini_inline_comment_prefixes;
        saved_allow = ini_allow_inline_comments;
        ini_inline_comment_prefixes = inline_comment_prefixes;
        ini_allow_inline_comments = true;
    }
    line_settings saved_lines;
    if (growing_lines_supported())
        lines_as_long_as(strlen(job->text), &saved_lines);
    int result = ini_parse_stream(read_line, &state, on_key, &state);
    if (growing_lines_supported())
        restore_lines(&saved_lines);
    if (inline_hash_comments_supported()) {
        ini_inline_comment_prefixes = saved_prefixes;
        ini_allow_inline_comments = saved_allow;
    }
    int status = state.status;
    if (status == TFENC_OK && state.line_too_long > 0)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                             "%s:%d: line is longer than %d characters", name,
                             state.line_too_long, longest_line());
    if (status == TFENC_OK && result > 0)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                             "%s:%d: not INI syntax (expected [section] or key = value)", name,
                             result);
    if (status == TFENC_OK && result < 0)
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory while parsing", name);
    if (status != TFENC_OK) {
        tfenc_jobfile_destroy(job);
        return status;
    }
    *job_out = job;
    return TFENC_OK;
}

int tfenc_jobfile_load(tfenc_context *ctx, const char *path, tfenc_jobfile **job)
{
    *job = NULL;
    char *text = NULL;
    size_t length = 0;
    /* A job file is a page of text: anything bigger than the cap is another
     * file named by mistake. */
    int status = tfenc_file_read_all(ctx, "job file", path, MAX_JOB_FILE_BYTES, &text, &length);
    if (status == TFENC_OK && memchr(text, '\0', length) != NULL)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: job file contains a NUL byte", path);
    if (status == TFENC_OK)
        status = tfenc_jobfile_parse_string(ctx, path, text, job);
    free(text);
    return status;
}

int tfenc_jobfile_override(tfenc_context *ctx, tfenc_jobfile *job, const char *assignment)
{
    const char *equals = strchr(assignment, '=');
    /* The key is after the last dot before '=', since section names contain dots. */
    const char *dot = NULL;
    for (const char *p = assignment; equals != NULL && p < equals; p++)
        if (*p == '.')
            dot = p;
    if (equals == NULL || dot == NULL || dot == assignment || dot + 1 == equals)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "--set '%s': expected section.key=value", assignment);
    size_t section_length = (size_t)(dot - assignment);
    size_t key_length = (size_t)(equals - dot - 1);
    char *section_name = strndup(assignment, section_length);
    char *key = strndup(dot + 1, key_length);
    int status = TFENC_OK;
    if (section_name == NULL || key == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "--set: out of memory");
        goto done;
    }
    /* Trim the spaces a user may put around '='. */
    while (key_length > 0 && (key[key_length - 1] == ' ' || key[key_length - 1] == '\t'))
        key[--key_length] = '\0';
    const char *value = equals + 1;
    while (*value == ' ' || *value == '\t')
        value++;
    tfenc_job_section *section = tfenc_jobfile_find(job, section_name);
    if (section == NULL)
        section = add_section(job, section_name, 0);
    if (section == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "--set: out of memory");
        goto done;
    }
    tfenc_job_entry *entry = tfenc_job_section_get(section, key);
    if (entry != NULL) {
        char *copy = strdup(value);
        if (copy == NULL) {
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "--set: out of memory");
            goto done;
        }
        free(entry->value);
        entry->value = copy;
        entry->line = 0;
    } else if (add_entry(section, key, value, 0) == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "--set: out of memory");
    }
done:
    free(section_name);
    free(key);
    return status;
}

tfenc_job_section *tfenc_jobfile_find(const tfenc_jobfile *job, const char *name)
{
    for (int i = 0; i < job->n_sections; i++)
        if (strcmp(job->sections[i].name, name) == 0)
            return &job->sections[i];
    return NULL;
}

tfenc_job_entry *tfenc_job_section_get(const tfenc_job_section *section, const char *key)
{
    if (section == NULL)
        return NULL;
    for (int i = 0; i < section->n_entries; i++)
        if (strcmp(section->entries[i].key, key) == 0)
            return &section->entries[i];
    return NULL;
}

char *tfenc_jobfile_resolve_path(const tfenc_jobfile *job, const char *path)
{
    if (path[0] == '/' || strcmp(job->directory, ".") == 0)
        return strdup(path);
    size_t length = strlen(job->directory) + 1 + strlen(path) + 1;
    char *resolved = malloc(length);
    if (resolved != NULL)
        snprintf(resolved, length, "%s/%s", job->directory, path);
    return resolved;
}

int tfenc_jobfile_each_input(const tfenc_jobfile *job, tfenc_job_input_visitor visit, void *user)
{
    int status = TFENC_OK;
    for (int i = 0; status == TFENC_OK && i < job->n_sections; i++) {
        const tfenc_job_section *section = &job->sections[i];
        for (int j = 0; status == TFENC_OK && j < section->n_entries; j++) {
            const tfenc_job_entry *entry = &section->entries[j];
            if (entry->input == NULL)
                continue;
            char *path = tfenc_jobfile_resolve_path(job, entry->value);
            size_t size = strlen(section->name) + strlen(entry->key) + 4;
            char *setting = malloc(size);
            if (path == NULL || setting == NULL)
                status = TFENC_ERR_NO_MEMORY;
            else {
                snprintf(setting, size, "[%s] %s", section->name, entry->key);
                status = visit(user, entry->input, setting, path);
            }
            free(setting);
            free(path);
        }
    }
    return status;
}

void tfenc_jobfile_destroy(tfenc_jobfile *job)
{
    if (job == NULL)
        return;
    for (int i = 0; i < job->n_sections; i++) {
        tfenc_job_section *section = &job->sections[i];
        for (int k = 0; k < section->n_entries; k++) {
            free(section->entries[k].key);
            free(section->entries[k].value);
        }
        free(section->entries);
        free(section->name);
    }
    free(job->sections);
    free(job->path);
    free(job->directory);
    free(job->text);
    free(job);
}
