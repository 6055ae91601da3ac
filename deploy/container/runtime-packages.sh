#!/bin/sh
# Print, one per line, the packages that provide the shared libraries the
# given ELF files need (ldd, then dpkg-query -S), so that a container's
# runtime stage installs exactly those: the same list on Debian and Ubuntu,
# whatever their packages are called there. Libraries a program loads at
# run time by name (the cpu backend dlopens OpenBLAS: runtime/backend/cpu/
# cpu_blas.c) count too: each "libNAME.so.N" string in the files that the
# loader's cache knows. A library no package owns (a
# toolkit installed without dpkg) is named on stderr: the runtime base must
# provide it.
set -eu
[ $# -gt 0 ] || { echo "usage: $0 ELF..." >&2; exit 2; }
for f in "$@"; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
  strings -a "$f" | grep -E '^lib[A-Za-z0-9_+-]+[.]so([.][0-9]+)+$' | sort -u | while read -r name; do
    ldconfig -p | awk -v n="$name" '$1 == n { print $NF; exit }'
  done
done | sort -u | while read -r lib; do
  pkg=
  real=$(readlink -f "$lib")
  for p in "$lib" "$real" "${lib#/usr}" "${real#/usr}" "/usr$lib" "/usr$real"; do
    pkg=$(dpkg-query -S "$p" 2>/dev/null | head -n1 | cut -d: -f1) || pkg=
    [ -n "$pkg" ] && break
  done
  if [ -n "$pkg" ]; then echo "$pkg"; else echo "runtime-packages: no package owns $lib" >&2; fi
done | sort -u
