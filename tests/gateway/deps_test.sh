#!/bin/sh
# The gateway runs no function code and touches no device, so the gpufaas
# binary must not link the CUDA runtime, cuBLAS, the driver or a BLAS, nor
# know by name the CUDA backend module or OpenBLAS (which the cpu backend
# loads at run time, runtime/backend/cpu/cpu_blas.h). The worker is checked
# the same way as a control: when the build has OpenBLAS the check must see
# it there.
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
for name in libgf_backend_cuda libopenblas; do
  if grep -q "$name" "$gpufaas"; then
    echo "FAIL: $gpufaas names $name (it would load it)"
    status=1
  fi
done
if [ "$have_blas" = 1 ] && ! { ldd "$worker" | grep -Eqi 'openblas|libblas|libcblas' ||
                               grep -q libopenblas "$worker"; }; then
  echo "FAIL: the check does not see the worker's OpenBLAS: it cannot be trusted"
  status=1
fi
[ "$status" = 0 ] && echo "ok: $gpufaas links no device or BLAS library"
exit "$status"
