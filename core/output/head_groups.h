/* The further heads' groups of a file of several heads (/outputs/NAME, as
 * output_heads.c makes them), walked by a reader: the checks hold each to
 * the description, --status reports each. */
#ifndef TFENC_OUTPUT_HEAD_GROUPS_H
#define TFENC_OUTPUT_HEAD_GROUPS_H

#include <hdf5.h>

#include "base/context.h"

/* Called with each head's group open (closed after) and its name. */
typedef int (*tfenc_head_group_visit)(void *user, hid_t group, const char *name);

/* Calls visit for each group of /outputs, in name order, until one returns
 * another status than TFENC_OK, which is returned. A file without /outputs
 * has no further heads: TFENC_OK, no call. TFENC_ERR_CONFIG "PATH:
 * inconsistent: /outputs is not a group of heads" (or "/outputs/NAME is
 * not a group (a head's output)"), TFENC_ERR_IO "PATH: cannot list
 * /outputs". */
int tfenc_head_groups_visit(tfenc_context *ctx, const char *path, hid_t file,
                            tfenc_head_group_visit visit, void *user);

#endif
