#!/bin/sh
# The gateway runs no function code and touches no device, so the gpufaas
# binary must not link the CUDA runtime, cuBLAS, the driver or a BLAS, nor
# know the CUDA backend module by name. The worker is checked the same way
# as a control: when the build has OpenBLAS the check must see it there.
#   deps_test.sh GPUFAAS WORKER HAVE_BLAS(0|1)
set -u
gpufaas=$1 worker=$2 have_blas=$3
pat='libcudart|libcublas|libcuda[.]|libnvidia|openblas|libblas|libcblas|liblapack|libgfortran'
status=0
if ! deps=$(ldd "$gpufaas"); then
  echo "FAIL: ldd $gpufaas failed"; exit 1
fi
if printf '%s\n' "$deps" | grep -Ei "$pat"; then
  echo "FAIL: $gpufaas links the libraries above (a device or BLAS library)"
  status=1
fi
if grep -q 'libgf_backend_cuda' "$gpufaas"; then
  echo "FAIL: $gpufaas names the CUDA backend module (it would load it)"
  status=1
fi
if [ "$have_blas" = 1 ] && ! ldd "$worker" | grep -Eqi 'openblas|libblas|libcblas'; then
  echo "FAIL: the check does not see the worker's OpenBLAS: it cannot be trusted"
  status=1
fi
[ "$status" = 0 ] && echo "ok: $gpufaas links no device or BLAS library"
exit "$status"
