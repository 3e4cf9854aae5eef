/* A plugin file examined without loading it: is it an ELF shared object that
 * the dynamic loader can map whole, and which layer types does it declare?
 *
 * dlopen() maps a shared object's segments from the file and touches them;
 * a file cut short (a copy that did not finish, a full disk during install)
 * then raises SIGBUS inside the dynamic loader, which kills the process
 * before dlopen can return an error. Checking the headers first turns that
 * into one line naming the file: every loadable segment, the dynamic
 * section and the section table must lie inside the file. The check reads
 * a few kilobytes with pread() and runs none of the file's code. It cannot
 * catch every malformed ELF a hostile author could craft (a plugin runs
 * with the job's rights anyway); it catches damaged files.
 *
 * The version requirements (.gnu.version_r) tell whether the object needs
 * symbols of libtfenc's private version, which a plugin must not use.
 *
 * The declared types (TFENC_PLUGIN_TYPES in tfenc/plugin.h) are the strings
 * of section .tfenc_types: names separated by spaces, one NUL-terminated
 * string per source file that declared some. */
#ifndef TFENC_SHARED_OBJECT_H
#define TFENC_SHARED_OBJECT_H

#include <stddef.h>
#include <sys/types.h>

/* Most layer types one file may declare. */
#define TFENC_MAX_DECLARED_TYPES 256

/* The symbol version of libtfenc's functions that are not plugin ABI
 * (core/libtfenc.map). */
#define TFENC_PRIVATE_VERSION "TFENC_PRIVATE"

typedef struct tfenc_shared_object {
    int uses_private_symbols; /* 1 when it needs symbols of TFENC_PRIVATE_VERSION */
    int declares_types; /* 1 when the file has a .tfenc_types section */
    char **types;       /* the declared names, each [a-z0-9_]+ */
    int n_types;
} tfenc_shared_object;

/* Examines the open file `descriptor` of `size` bytes. Returns 0 and fills
 * *object, or -1 with the reason in `why` (one line, no file name). */
int tfenc_shared_object_examine(int descriptor, off_t size, tfenc_shared_object *object,
                                char *why, size_t why_size);

void tfenc_shared_object_free(tfenc_shared_object *object);

#endif
