/* The names of the precision tiers, as [model] precision spells them, and
 * of the fp32 products' libraries, as [model] fp32_products does. */
#include "base/precision.h"

#include <stddef.h>

const char *const tfenc_precision_names[TFENC_PRECISION_COUNT + 1] = {"fp32", "bf16", "int8",
                                                                      NULL};

const char *const tfenc_fp32_products_names[TFENC_FP32_PRODUCTS_COUNT + 1] = {"openblas",
                                                                              "onednn", NULL};
