#!/usr/bin/env bash
# Run HERE (a machine with Debian's package registry) before tests/gpu/run.sh
# is sent to a GPU machine: the GPU machine has the CUDA toolkit, meson and
# ninja but no package registry and none of our -dev packages, so the few the
# runtime's tests need (Check and subunit, static libraries) are downloaded as
# .deb files and unpacked with dpkg -x into third_party/deps (git ignores it).
set -euo pipefail
cd "$(dirname "$0")/../.."
say() { printf '==> %s\n' "$*"; }
root=third_party/deps
mkdir -p third_party/debs "$root"
cd third_party/debs
for p in check libsubunit-dev libsubunit0; do
  if ! ls "${p}"_*.deb >/dev/null 2>&1; then
    say "downloading $p"
    apt-get download "$p" >/dev/null
  fi
done
cd ../..
for d in third_party/debs/*.deb; do
  dpkg -x "$d" "$root"
done
say "unpacked into $root: $(du -sh "$root" | cut -f1)"
