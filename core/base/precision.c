/* The names of the precision tiers, as [model] precision spells them. */
#include "base/precision.h"

#include <stddef.h>

const char *const tfenc_precision_names[TFENC_PRECISION_COUNT + 1] = {"fp32", "bf16", "int8",
                                                                      NULL};
