#!/usr/bin/env bash
# Install what is missing, build gpufaas and start it on its embedded
# defaults. (The HTTP server arrives with the gateway; until then this builds
# and runs `gpufaas version`.)
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '==> %s\n' "$*"; }

say "checking dependencies"
./deploy/install-deps.sh
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi
if [ ! -f build/build.ninja ]; then
  say "configuring build/"
  meson setup build >/dev/null
fi
say "building"
ninja -C build
say "running gpufaas version"
exec ./build/gateway/gpufaas version
