/* libFuzzer target: the ONNX importer's protobuf parser and graph builder
 * (functions/onnx/import_pb.c, import_graph.c) on any bytes as a model file.
 * The parser maps a file, so each input is written to a memfd first. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "functions/onnx/import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("model.onnx", MFD_CLOEXEC);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size)
        abort();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    gf_onnx_parsed *p = NULL;
    gf_err err;
    if (gf_onnx_parse_file(path, NULL, &p, &err) == GF_OK) {
        if (gf_onnx_parsed_graph(p) == NULL)
            abort();
        gf_onnx_parsed_free(p);
    } else if (p != NULL) {
        abort();
    }
    close(fd);
    return 0;
}
