#!/usr/bin/env bash
# The quick start: install what is missing, build gpufaas, start the server on
# its embedded defaults (cpu workers when there is no GPU, state in ./var),
# deploy the example functions, and print commands to try. The server runs
# in the foreground: Ctrl-C stops it (draining in-flight requests).
#
#   ./deploy/run.sh                  listen on 127.0.0.1:8080
#   GPUFAAS_LISTEN=127.0.0.1:9000 ./deploy/run.sh
#   GPUFAAS_BUILD_DIR=build-asan ./deploy/run.sh   another build folder (default build)
#
# Every `gpufaas serve` option can be set with its GPUFAAS_* variable (see
# `./build/gateway/gpufaas serve --help`). Run it again at any time (after
# Ctrl-C, after `gpufaas rm`, after a crash): it deploys only what is missing
# or changed. When it fails it stops the server it started, and exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

say() { printf '==> %s\n' "$*"; }

say "checking dependencies"
GF_WANT_PYTHON=1 ./deploy/install-deps.sh   # .venv with numpy and scikit-learn trains the digits example
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi
export PATH="$root/.venv/bin:$PATH"
build=${GPUFAAS_BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then
  say "configuring $build/"
  meson setup "$build" >/dev/null
fi
say "building"
ninja -C "$build" >/dev/null

listen=${GPUFAAS_LISTEN:-127.0.0.1:8080}
state=${GPUFAAS_STATE_DIR:-./var}
url="http://$listen"
case "$build" in /*) ;; *) build=$root/$build ;; esac
gpufaas=$build/gateway/gpufaas
examples=$state/examples
mkdir -p "$examples"

# ---- the example functions ------------------------------------------------
if [ ! -f "$examples/digits/digits.safetensors" ]; then
  say "training the digits example (scikit-learn's 8x8 digits, an MLP)"
  python3 examples/digits/train.py "$examples/digits"
fi
if [ ! -f "$examples/resnet18.safetensors" ]; then
  say "writing resnet18 (random weights, 10 classes, 64x64 images)"
  "$gpufaas" mkmodel resnet18 --classes 10 --image 64 --name resnet18 "$examples/resnet18.safetensors" >/dev/null
fi
if [ ! -f "$examples/bert-mini.safetensors" ]; then
  say "writing bert-mini (random weights, 4 layers, hidden 256)"
  "$gpufaas" mkmodel bert --layers 4 --hidden 256 --heads 4 --intermediate 1024 --vocab 30522 \
    --max-positions 128 --labels 2 --seq 16 --name bert-mini "$examples/bert-mini.safetensors" >/dev/null
fi

# ---- the server --------------------------------------------------------------
# Whatever makes this script end early (a failed deploy, a signal), the server
# it started goes with it: it never keeps running on its own after a failure.
server=
stop_server() {
  if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  server=
}
trap 'status=$?; trap - EXIT; stop_server; exit $status' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "starting gpufaas serve on $listen (state in $state)"
"$gpufaas" serve --listen "$listen" --state-dir "$state" &
server=$!
ready=0
for _ in $(seq 1 150); do
  if curl -fs "$url/v2/health/ready" >/dev/null 2>&1; then ready=1; break; fi
  if ! kill -0 "$server" 2>/dev/null; then
    wait "$server" || true
    server=
    say "the server did not start (see its messages above)"; exit 1
  fi
  sleep 0.2
done
if [ "$ready" != 1 ]; then
  say "the server did not become ready in 30 s (see its messages above)"; exit 1
fi

# A deploy is idempotent: the same weights and manifest as a version there is
# make no new version (200), so this runs the same on a fresh state, after a
# restart, after `gpufaas rm NAME` (a new version, 201) and after a crash.
deploy() { # name, manifest, weights
  local out code
  out=$(mktemp)
  code=$(curl -sS -o "$out" -w '%{http_code}' -F "manifest=@$2" -F "weights=@$3" \
         "$url/v1/functions") || code=000
  case "$code" in
    201) say "deployed $1" ;;
    200) say "$1 is deployed (the same weights and manifest)" ;;
    *) say "deploying $1 failed (HTTP $code): $(cat "$out")"; rm -f "$out"; exit 1 ;;
  esac
  rm -f "$out"
}
deploy digits "$examples/digits/digits.json" "$examples/digits/digits.safetensors"
deploy resnet18 "$examples/resnet18.json" "$examples/resnet18.safetensors"
deploy bert-mini "$examples/bert-mini.json" "$examples/bert-mini.safetensors"

cat <<TXT

gpufaas is serving on $url with the example functions deployed. Try:

  # classify a handwritten digit (the held-out image in request.json is a 2)
  curl -s -X POST -d @$examples/digits/request.json $url/v2/models/digits/infer

  # the same through the FaaS API, and with the CLI
  curl -s -X POST -d @$examples/digits/request.json $url/v1/functions/digits/invoke
  $gpufaas invoke digits --file $examples/digits/request.json --top 3

  # what is deployed, and where each model lives right now
  curl -s $url/v1/functions
  curl -s $url/v1/placements
  sqlite3 $state/gpufaas.db 'select * from v_placement'

  # metrics (Prometheus text format)
  curl -s $url/metrics | grep ^gpufaas_requests_total

Deploy your own: curl -F manifest=@m.json -F weights=@model.safetensors $url/v1/functions
(see docs/functions.md). Ctrl-C stops the server.
TXT
# serve until the server ends or Ctrl-C (the EXIT trap stops it then)
status=0
wait "$server" || status=$?
server=
exit "$status"
