/* Entry point of the layers plugin: enumerates the per-token and pooling
 * layer types (embedding, sinusoidal, ffn, layernorm, rmsnorm, pooling), the
 * classification head (classifier), the sparse masked-LM head (splade),
 * BGE-M3's sparse head (lexical_weights),
 * the multi-vector head (multivector), the static-embedding model
 * (static_embedding) and the mixture-of-experts block (moe). */
#include "layers.h"

/* Each type's source file declares it next to its descriptor
 * (TFENC_PLUGIN_TYPES): the loader checks this list against those. */
static const tfenc_layer_descriptor *const layer_types[] = {
    &tfenc_layers_embedding,
    &tfenc_layers_sinusoidal,
    &tfenc_layers_ffn,
    &tfenc_layers_layernorm,
    &tfenc_layers_rmsnorm,
    &tfenc_layers_pooling,
    &tfenc_layers_classifier,
    &tfenc_layers_splade,
    &tfenc_layers_lexical_weights,
    &tfenc_layers_multivector,
    &tfenc_layers_static_embedding,
    &tfenc_layers_moe,
};

TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index);

TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index)
{
    if (index >= sizeof layer_types / sizeof layer_types[0])
        return NULL;
    return layer_types[index];
}
