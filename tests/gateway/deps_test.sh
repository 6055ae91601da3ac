#!/bin/sh
# The gateway runs no function code and touches no device, so the gpufaas
# binary must not link the CUDA runtime, cuBLAS, the driver or a BLAS, nor
# know by name the CUDA backend module or OpenBLAS (which the cpu backend
# loads at run time, runtime/backend/cpu/cpu_blas.h), nor call dlopen at all
# (function code, the backends' modules and plugins are loaded only by
# gpufaas-worker). The worker is checked the same way as a control: the
# check must see its dlopen, and its OpenBLAS when the build has it.
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
dl='dlopen|dlmopen|dlsym|dlvsym'
if ! imports=$(nm -D --undefined-only "$gpufaas") ||
   ! wimports=$(nm -D --undefined-only "$worker"); then
  echo "FAIL: nm -D failed"; exit 1
fi
if printf '%s\n' "$imports" | grep -Ew "$dl"; then
  echo "FAIL: $gpufaas imports the dynamic loader's calls above (it could load function code)"
  status=1
fi
if ! printf '%s\n' "$wimports" | grep -Eqw dlopen; then
  echo "FAIL: the check does not see the worker's dlopen: it cannot be trusted"
  status=1
fi
if [ "$have_blas" = 1 ] && ! { ldd "$worker" | grep -Eqi 'openblas|libblas|libcblas' ||
                               grep -q libopenblas "$worker"; }; then
  echo "FAIL: the check does not see the worker's OpenBLAS: it cannot be trusted"
  status=1
fi
[ "$status" = 0 ] && echo "ok: $gpufaas links no device or BLAS library and calls no dlopen"
exit "$status"
