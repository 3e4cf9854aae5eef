/* libFuzzer target: arbitrary bytes as a .safetensors file (8-byte header
 * length, JSON header, data), opened, validated and read tensor by tensor as
 * tfenc-import does; and the same bytes as a bare header parsed in memory. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/context.h"
#include "model/safetensors.h"

/* A broken invariant is a finding: say which, then stop the fuzzer with a
 * stack trace and the input saved. */
#define require(condition) ((condition) ? (void)0 : broken(__LINE__, #condition))

static void broken(int line, const char *condition)
{
    fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, line, condition);
    abort();
}

/* One temporary file per process, rewritten for every input: in /dev/shm
 * when there is one, so that the file system costs little. */
static char path[64];

static void write_input(const uint8_t *data, size_t size)
{
    if (path[0] == '\0') {
        snprintf(path, sizeof path, "%s/tfenc-fuzz-safetensors-%ld",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (long)getpid());
    }
    FILE *file = fopen(path, "wb");
    require(file != NULL);
    require(fwrite(data, 1, size, file) == size);
    require(fclose(file) == 0);
}

static void remove_input(void)
{
    if (path[0] != '\0')
        unlink(path);
}

/* Checks what a validated header promises, then reads every float tensor. */
static void check_file(tfenc_context *ctx, tfenc_safetensors *file, uint64_t data_size,
                       int readable)
{
    int n = tfenc_safetensors_count(file);
    require(n >= 0 && tfenc_safetensors_tensor_at(file, n) == NULL);
    for (int i = 0; i < n; i++) {
        const tfenc_safetensors_tensor *tensor = tfenc_safetensors_tensor_at(file, i);
        require(tensor != NULL && tensor->begin <= tensor->end && tensor->end <= data_size);
        require(tensor->rank >= 0 && tensor->rank <= TFENC_SAFETENSORS_MAX_RANK);
        require((uint64_t)tensor->n_elements * (uint64_t)tensor->element_size
                == tensor->end - tensor->begin);
        require(tfenc_safetensors_find(file, tensor->name) != NULL);
        if (!readable)
            continue;
        /* The output holds float32 values: n_elements of them, whatever the
         * stored width (the header bounds it by the file size). */
        float *values = malloc(((size_t)tensor->n_elements + 1) * sizeof *values);
        require(values != NULL);
        tfenc_context_clear(ctx);
        int status = tfenc_safetensors_read_float32(ctx, file, tensor, values);
        int is_float = strcmp(tensor->dtype, "F32") == 0 || strcmp(tensor->dtype, "F16") == 0
                       || strcmp(tensor->dtype, "BF16") == 0;
        require(is_float ? status == TFENC_OK : status == TFENC_ERR_WEIGHTS);
        free(values);
    }
    (void)tfenc_safetensors_metadata(file, "format");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int registered;
    if (!registered) {
        atexit(remove_input);
        registered = 1;
    }
    tfenc_context ctx;
    tfenc_context_init(&ctx);

    write_input(data, size);
    tfenc_safetensors *file = NULL;
    int status = tfenc_safetensors_open(&ctx, path, &file);
    if (status == TFENC_OK) {
        uint64_t header_length = 0;
        for (int i = 7; i >= 0; i--)
            header_length = header_length << 8 | data[i];
        check_file(&ctx, file, size - 8 - header_length, 1);
        tfenc_safetensors_close(file);
    } else {
        require(file == NULL && tfenc_context_message(&ctx)[0] != '\0');
    }

    /* The bare header path, with the data size taken from the input too. A
     * heap copy of exactly `size` bytes lets ASan catch reads past the end. */
    char *header = malloc(size > 0 ? size : 1);
    require(header != NULL);
    memcpy(header, data, size);
    uint64_t data_size = size > 0 ? (uint64_t)data[size - 1] * 64 : 0;
    tfenc_context_clear(&ctx);
    status = tfenc_safetensors_parse_header(&ctx, "fuzz", header, size, data_size, &file);
    if (status == TFENC_OK) {
        check_file(&ctx, file, data_size, 0);
        tfenc_safetensors_close(file);
    }
    free(header);
    return 0;
}
