/* What keeps a plugin's memory errors from passing silently, and names the
 * plugin when they do not pass at all (issue 46 item 13).
 *
 * Guarded buffers: the memory the host hands a plugin's forward() to
 * write (the batch's rows, batch->x, and the workspace) is laid out with a
 * canary right after the block the plugin may use: a known pattern,
 * written before each forward() and compared after it, so that a write
 * past the end is found and measured at the next check, whether or not
 * the bytes lie inside a larger allocation (where no sanitizer looks). It
 * costs two passes over TFENC_CANARY_BYTES per call. With
 * TFENC_CHECK_PLUGINS=1 in the environment, each buffer is mapped with a
 * PROT_NONE guard page after it and the block is placed to end where the
 * guard page starts (up to the 64-byte alignment, which the canary
 * covers): the first byte written past it faults at once, inside the
 * plugin, with the plugin's own frame on the stack. Buffers a plugin may
 * only read (the batch's token arrays) can then also be made read-only
 * while it runs.
 *
 * The running call: core marks which plugin callback runs (the layer, the
 * plugin file, the callback) around each call, so that a crash inside it
 * (SIGSEGV, SIGBUS, ...) can be reported naming them. The report is the
 * driver's (drivers/tfenc-batch.c installs the signal handler): library
 * code never prints, and only the program knows how its lines look and
 * how it dies. The two functions a handler calls here read plain
 * variables and nothing else, so they are async-signal-safe. */
#ifndef TFENC_PLUGIN_GUARD_H
#define TFENC_PLUGIN_GUARD_H

#include <stddef.h>

/* Bytes of canary after each block (fewer with a guard page: the slack up
 * to the page). */
#define TFENC_CANARY_BYTES 512

typedef struct tfenc_guarded_buffer {
    const char *what;     /* for messages: "the workspace", ... (static text) */
    unsigned char *start; /* NULL until reserved */
    size_t size;          /* bytes from start the blocks and canaries may use */
    size_t mapped;        /* with a guard page: bytes mapped, the guard page last; else 0 */
    /* With a guard page: what a crash report says of an address on it, or
     * in the buffer while it is read-only, and their entries in the table
     * tfenc_guard_describe reads (plus one; 0: none). */
    char guard_text[112], read_only_text[112];
    int guard_slot, read_only_slot;
} tfenc_guarded_buffer;

/* 1 when the environment asks for guard pages (TFENC_CHECK_PLUGINS set to
 * anything but "" or "0"). */
int tfenc_plugin_checks_enabled(void);

/* Makes `buffer` hold a block of `bytes` at least (its contents are not
 * kept when it grows); `what` names it in reports. 0 on success, -1 when
 * out of memory. A buffer starts zeroed ({0}), and is released (even
 * never reserved) with tfenc_guarded_release. */
int tfenc_guarded_reserve(tfenc_guarded_buffer *buffer, const char *what, size_t bytes);
void tfenc_guarded_release(tfenc_guarded_buffer *buffer);

/* Where a block of `bytes` (<= what was reserved) starts: 64-byte aligned,
 * at the buffer's start, or with a guard page as near its end as the
 * alignment allows. */
void *tfenc_guarded_place(const tfenc_guarded_buffer *buffer, size_t bytes);

/* Writes the canary after the `bytes` of `block` (a pointer place gave,
 * bytes at most what it was placed for). */
void tfenc_guarded_arm(const tfenc_guarded_buffer *buffer, const void *block, size_t bytes);

/* With a guard page only (else nothing happens): makes the buffer
 * read-only (1) or writable again (0). 0 on success, -1 on failure. */
int tfenc_guarded_protect(tfenc_guarded_buffer *buffer, int read_only);

/* After the plugin ran: 0 when the canary after the block is whole, else
 * how far past the block's end the farthest overwritten byte lies; *checked
 * gets the canary's length (a count equal to it means "at least"). */
size_t tfenc_guarded_overwritten(const tfenc_guarded_buffer *buffer, const void *block,
                                 size_t bytes, size_t *checked);

/* ------------------------------------------------------ the running call */

typedef struct tfenc_plugin_call {
    const char *layer;    /* "layer encoder.3.ffn (ffn)" */
    const char *file;     /* the plugin file that provides its type */
    const char *callback; /* "forward", "create", ... */
} tfenc_plugin_call;

/* Around each plugin callback; `call` must live until the end. Calls do not
 * nest (the host calls one plugin at a time per process). */
void tfenc_plugin_call_begin(const tfenc_plugin_call *call);
void tfenc_plugin_call_end(void);

/* Async-signal-safe: the callback running now, or NULL. */
const tfenc_plugin_call *tfenc_plugin_call_current(void);

/* Async-signal-safe: where `address` lies, when on a guard page or in a
 * read-only buffer ("on the guard page after the workspace", "in the
 * batch's token arrays, which plugins may only read"); else NULL. */
const char *tfenc_guard_describe(const void *address);

#endif
