#!/bin/sh
# The cuda module finds libcudart and libcublas through its RUNPATH, which
# must be absolute: a relative one (./lib64) is read against the working
# directory of whatever process dlopens the module, and fails everywhere but
# in the toolkit's own folder.
set -eu
mod=$1
[ -f "$mod" ] || { echo "no module at $mod"; exit 1; }
rp=$(readelf -d "$mod" | sed -n 's/.*(RUNPATH).*\[\(.*\)\].*/\1/p')
[ -n "$rp" ] || { echo "FAIL: $mod has no RUNPATH"; exit 1; }
old_ifs=$IFS; IFS=:
for d in $rp; do
  case $d in
    /*) ;;
    *) echo "FAIL: RUNPATH entry '$d' of $mod is relative"; exit 1 ;;
  esac
  if ! ls "$d"/libcudart.so* >/dev/null 2>&1; then
    echo "FAIL: RUNPATH entry '$d' of $mod holds no libcudart"; exit 1
  fi
done
IFS=$old_ifs
echo "RUNPATH of $mod: $rp"
