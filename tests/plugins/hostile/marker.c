/* A plugin whose constructor leaves a trace: the file named by
 * $TFENC_TEST_MARKER. A job that does not need its type must never load it
 * (its constructor never runs), so the file must not appear. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"

__attribute__((constructor)) static void leave_a_trace(void)
{
    const char *path = getenv("TFENC_TEST_MARKER");
    if (path != NULL) {
        int descriptor = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (descriptor >= 0)
            close(descriptor);
    }
}

static const tfenc_layer_descriptor marker_layer = {
    TFENC_DESCRIPTOR_INIT,
    .type = "marker",
    .description = "its constructor creates $TFENC_TEST_MARKER (test)",
    .create = identity_create,
    .forward = identity_forward,
    .destroy = identity_destroy,
};

ONE_TYPE_PLUGIN(marker_layer)
