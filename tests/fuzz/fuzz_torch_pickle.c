/* libFuzzer target: arbitrary bytes as the data.pkl of a pytorch_model.bin,
 * interpreted by the torch.save reader's pickle machine
 * (tfenc_torch_parse_pickle): whatever the bytes, it returns, with a
 * message or with tensors that lie inside their storages. The same bytes
 * after the legacy format's magic number, as a file (tfenc_torch_open):
 * the pickles that follow it and the storages after them, every float
 * tensor read. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* torch.save's legacy format begins with this pickle of its magic number. */
static const unsigned char legacy_start[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                             0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, '.'};

static void check_tensors(const tfenc_torch_file *file)
{
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
}

/* The legacy file: opened, checked, every float tensor read (the storages
 * lie inside the file, so their sizes are bounded by the input's). */
static void open_as_file(const uint8_t *data, size_t size)
{
    static char path[64];
    if (path[0] == '\0')
        snprintf(path, sizeof path, "%s/tfenc-fuzz-torch-%ld.bin",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (long)getpid());
    FILE *out = fopen(path, "wb");
    require(out != NULL);
    require(fwrite(legacy_start, 1, sizeof legacy_start, out) == sizeof legacy_start);
    require(fwrite(data, 1, size, out) == size);
    require(fclose(out) == 0);
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_torch_file *file = NULL;
    if (tfenc_torch_open(&ctx, path, &file) == TFENC_OK) {
        check_tensors(file);
        for (int i = 0; i < tfenc_torch_count(file); i++) {
            const tfenc_torch_tensor *tensor = tfenc_torch_tensor_at(file, i);
            float *values = malloc(((size_t)tensor->n_elements + 1) * sizeof *values);
            require(values != NULL);
            tfenc_context_clear(&ctx);
            int status = tfenc_torch_read_float32(&ctx, file, tensor, values);
            require(status == TFENC_OK || tfenc_context_message(&ctx)[0] != '\0');
            free(values);
        }
        tfenc_torch_close(file);
    } else {
        require(file == NULL && tfenc_context_message(&ctx)[0] != '\0');
    }
    unlink(path);
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
        check_tensors(file);
        tfenc_torch_close(file);
    } else {
        require(file == NULL && tfenc_context_message(&ctx)[0] != '\0');
    }
    free(pickle);
    open_as_file(data, size);
    return 0;
}
