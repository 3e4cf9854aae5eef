/* A plugin whose constructor ends the process with status 0 and no word, as
 * a careless library initialiser can: tfenc must report it, naming the file,
 * instead of ending the job "successfully". */
#include <unistd.h>

#include "common.h"

__attribute__((constructor)) static void leave_at_once(void)
{
    _exit(0);
}

static const tfenc_layer_descriptor exit_layer = {
    TFENC_DESCRIPTOR_INIT,
    .type = "exit_layer",
    .description = "its constructor calls _exit(0) (test)",
    .create = identity_create,
    .forward = identity_forward,
    .destroy = identity_destroy,
};

ONE_TYPE_PLUGIN(exit_layer)
