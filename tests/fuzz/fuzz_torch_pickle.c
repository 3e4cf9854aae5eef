/* libFuzzer target: arbitrary bytes as the data.pkl of a pytorch_model.bin,
 * interpreted by the torch.save reader's pickle machine
 * (tfenc_torch_parse_pickle): whatever the bytes, it returns, with a
 * message or with tensors that lie inside their storages. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/context.h"
#include "model/torch_checkpoint.h"

/* A broken invariant is a finding: say which, then stop the fuzzer with a
 * stack trace and the input saved. */
#define require(condition) ((condition) ? (void)0 : broken(__LINE__, #condition))

static void broken(int line, const char *condition)
{
    fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, line, condition);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    /* A heap copy of exactly `size` bytes lets ASan catch reads past the end. */
    unsigned char *pickle = malloc(size > 0 ? size : 1);
    require(pickle != NULL);
    memcpy(pickle, data, size);
    tfenc_torch_file *file = NULL;
    int status = tfenc_torch_parse_pickle(&ctx, "fuzz", pickle, size, &file);
    if (status == TFENC_OK) {
        int n = tfenc_torch_count(file);
        require(n >= 0 && tfenc_torch_tensor_at(file, n) == NULL);
        for (int i = 0; i < n; i++) {
            const tfenc_torch_tensor *tensor = tfenc_torch_tensor_at(file, i);
            require(tensor->rank >= 0 && tensor->rank <= TFENC_SAFETENSORS_MAX_RANK);
            require(tensor->element_size > 0 && tensor->n_elements >= 0);
            require(tensor->offset >= 0 && tensor->offset <= tensor->storage_elements);
            require(tensor->n_elements <= tensor->storage_elements - tensor->offset);
            require(tensor->name != NULL && tensor->storage != NULL);
        }
        tfenc_torch_close(file);
    } else {
        require(file == NULL && tfenc_context_message(&ctx)[0] != '\0');
    }
    free(pickle);
    return 0;
}
