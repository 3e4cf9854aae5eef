/* A plugin whose constructor crashes (SIGSEGV), as a broken library
 * initialiser can: tfenc must refuse it in one line naming the file, without
 * the crash report of Open MPI's (or a sanitizer's) signal handler, which
 * the probe process inherited (issue 24 item 12). */
#include <signal.h>

#include "common.h"

__attribute__((constructor)) static void crash_at_once(void)
{
    raise(SIGSEGV);
}

static const tfenc_layer_descriptor crash_layer = {
    TFENC_DESCRIPTOR_INIT,
    .type = "crash_layer",
    .description = "its constructor crashes with SIGSEGV (test)",
    .create = identity_create,
    .forward = identity_forward,
    .destroy = identity_destroy,
};

ONE_TYPE_PLUGIN(crash_layer)
