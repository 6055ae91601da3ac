#!/usr/bin/env bash
# For deploy/container/verify.sh --gpu only: stand-ins for NVIDIA's CUDA base
# images, which cannot be pulled here, made from this machine's CUDA toolkit
# on the debootstrap'd Debian 12 base:
#   localhost/gpufaas-cuda-standin:devel     nvcc, headers, cudart, cuBLAS (what
#                                            nvidia/cuda:*-devel gives a build)
#   localhost/gpufaas-cuda-standin:runtime   cudart and cuBLAS only, under
#                                            /usr/local/cuda/lib64 as in
#                                            nvidia/cuda:*-runtime
# Usage: cuda-standin.sh BASE TOOLKIT_DIR PODMAN_OPTS...
set -euo pipefail
base=$1 toolkit=$2
shift 2
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
libs='lib/libcudart.so* lib/libcublas.so* lib/libcublasLt.so*'
cat > "$ctx/Containerfile.devel" <<CF
FROM $base
RUN mkdir -p /usr/local/cuda-13.0/lib \\
 && cp -a /toolkit/bin /toolkit/include /toolkit/nvvm /usr/local/cuda-13.0/ \\
 && cd /toolkit && cp -a $libs lib/libcudart_static.a lib/libcudadevrt.a lib/libculibos.a lib/stubs \\
      /usr/local/cuda-13.0/lib/ \\
 && ln -s lib /usr/local/cuda-13.0/lib64 && ln -s cuda-13.0 /usr/local/cuda
CF
cat > "$ctx/Containerfile.runtime" <<CF
FROM $base
RUN mkdir -p /usr/local/cuda-13.0/lib && cd /toolkit && cp -a $libs /usr/local/cuda-13.0/lib/ \\
 && ln -s lib /usr/local/cuda-13.0/lib64 && ln -s cuda-13.0 /usr/local/cuda
CF
for kind in devel runtime; do
  podman build "$@" -v "$toolkit:/toolkit:ro" -f "$ctx/Containerfile.$kind" \
    -t "localhost/gpufaas-cuda-standin:$kind" "$ctx" >/dev/null
done
