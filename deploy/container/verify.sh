#!/usr/bin/env bash
# Build the cpu container image on this machine and run it, with no registry
# at hand: the Debian 12 base image is made here with debootstrap (minbase,
# the same package set debian:12-slim starts from) and imported into podman
# as a local image; Containerfile.cpu is then built from it unchanged (BASE is
# its only argument), exactly as it would be from docker.io/library/debian:12-slim.
#
#   deploy/container/verify.sh          # about 10 minutes the first time on 2 cores
#   deploy/container/verify.sh --gpu    # Containerfile.gpu instead, on stand-ins for
#                                       # NVIDIA's bases made from this machine's CUDA
#                                       # toolkit (cuda-standin.sh), run without a GPU
#
# It checks what the image promises: a non-root user, the state in a volume,
# a HEALTHCHECK on /v2/health/ready that passes, a function deployed and
# answered correctly (the numpy reference), SIGTERM draining in-flight
# requests (none lost, exit status 0, well before the stop timeout), and the
# state surviving a restart of the container. Not in deploy/test.sh (CI):
# building the image installs a compiler and builds gpufaas again.
# Everything lives under build-container/ (ignored by git) and in podman's
# storage as localhost/gpufaas-base:debian12 and localhost/gpufaas:verify-cpu.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
say() { printf '==> %s\n' "$*"; }
fail() { printf 'FAILED: %s\n' "$*" >&2; exit 1; }

./deploy/install-deps.sh --container
GF_WANT_PYTHON=1 ./deploy/install-deps.sh >/dev/null   # numpy: the reference answers
py=$root/.venv/bin/python3
work=$root/build-container
mkdir -p "$work"
base=localhost/gpufaas-base:debian12
flavour=cpu
[ "${1:-}" = "--gpu" ] && flavour=gpu
image=localhost/gpufaas:verify-$flavour
name=gpufaas-verify-$flavour
volume=gpufaas-verify-state-$flavour
# runc rather than crun, which refuses hosts with hybrid cgroups (v1 and v2
# mounted, as here); limits that a sandbox without CAP_SYS_RESOURCE can set
# (podman's defaults are above them)
run_opts=(--runtime runc --ulimit nofile=16384:16384 --ulimit nproc=16384:16384)

# ---- the base image: debootstrap, imported -------------------------------------
if ! podman image exists "$base"; then
  if [ ! -f "$work/debian12-rootfs.tar" ]; then
    say "debootstrap: a Debian 12 (bookworm) minbase root file system"
    rm -rf "$work/rootfs"
    debootstrap --variant=minbase bookworm "$work/rootfs" http://deb.debian.org/debian >/dev/null
    echo "deb http://deb.debian.org/debian-security bookworm-security main" \
      >> "$work/rootfs/etc/apt/sources.list"
    rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
    tar -C "$work/rootfs" -cf "$work/debian12-rootfs.tar.part" .
    mv "$work/debian12-rootfs.tar.part" "$work/debian12-rootfs.tar"
    rm -rf "$work/rootfs"
  fi
  say "importing it as $base"
  podman import --change 'CMD ["bash"]' "$work/debian12-rootfs.tar" "$base" >/dev/null
fi

# ---- the image ---------------------------------------------------------------------
if [ "$flavour" = gpu ]; then
  toolkit=$(readlink -f /usr/local/cuda)
  [ -x "$toolkit/bin/nvcc" ] || fail "--gpu needs the CUDA toolkit in /usr/local/cuda"
  say "stand-ins for NVIDIA's CUDA bases from $toolkit"
  deploy/container/cuda-standin.sh "$base" "$toolkit" "${run_opts[@]}"
  build_args=(--build-arg BUILD_BASE=localhost/gpufaas-cuda-standin:devel
              --build-arg RUN_BASE=localhost/gpufaas-cuda-standin:runtime)
else
  build_args=(--build-arg BASE="$base")
fi
say "building $image from deploy/container/Containerfile.$flavour (${build_args[*]})"
t0=$(date +%s)
podman build "${run_opts[@]}" --network host --format docker -f deploy/container/Containerfile.$flavour \
  "${build_args[@]}" -t "$image" . > "$work/build-$flavour.log" 2>&1 \
  || { tail -40 "$work/build-$flavour.log"; fail "podman build (log: $work/build-$flavour.log)"; }
say "built in $(( $(date +%s) - t0 )) s; $(podman image inspect --format '{{.Size}}' "$image") bytes"
if [ "$flavour" = gpu ]; then
  # the CUDA module is in the image and finds cudart and cuBLAS where NVIDIA's runtime
  # base keeps them (its RUNPATH); without a GPU the workers are cpu workers
  podman run "${run_opts[@]}" --rm --entrypoint sh "$image" -c \
    'm=$(ls /opt/gpufaas/lib/*/gpufaas/libgf_backend_cuda.so) && ldd "$m" | grep -q "libcublas.so.13 => /usr/local/cuda" && ! ldd "$m" | grep -q "not found"' \
    || fail "the CUDA module is missing or does not find cudart/cuBLAS in the image"
  say "the CUDA backend module is installed and resolves cudart and cuBLAS"
fi

inspect() { podman image inspect --format "$1" "$image"; }
[ "$(inspect '{{.Config.User}}')" = 10001 ] || fail "the image's user is not 10001"
[[ "$(inspect '{{json .Config.Volumes}}')" == *'"/var/lib/gpufaas"'* ]] || fail "no state volume"
[[ "$(inspect '{{json .Config.Healthcheck}}')" == *healthcheck.sh* ]] || fail "no HEALTHCHECK"
[[ "$(inspect '{{json .Config.Entrypoint}}')" == *tini* ]] || fail "tini is not PID 1"
[ "$(inspect '{{.Config.StopSignal}}')" = SIGTERM ] || fail "stop signal is not SIGTERM"
say "image: user 10001, volume /var/lib/gpufaas, HEALTHCHECK, tini, SIGTERM"

# ---- run it ------------------------------------------------------------------------
cleanup() { podman rm -f "$name" >/dev/null 2>&1 || true; podman volume rm -f "$volume" >/dev/null 2>&1 || true; }
cleanup
trap cleanup EXIT
port=$($py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port
devices=cpu:1
[ "$flavour" = gpu ] && devices=auto   # no GPU here: auto finds none and starts a cpu worker
podman volume create "$volume" >/dev/null
# --health-interval=disable: no periodic runs (they need systemd timers); the checks
# below run the image's HEALTHCHECK command by hand with `podman healthcheck run`
podman run "${run_opts[@]}" -d --name "$name" --network host --health-interval=disable -v "$volume:/var/lib/gpufaas" \
  -e GPUFAAS_LISTEN=127.0.0.1:$port -e GPUFAAS_DEVICES="$devices" \
  -e GPUFAAS_DEVICE_MEMORY=64M -e GPUFAAS_HOST_MEMORY=64M "$image" >/dev/null

healthy() {
  for _ in $(seq 1 120); do
    if podman healthcheck run "$name" >/dev/null 2>&1; then return 0; fi
    [ "$(podman inspect --format '{{.State.Running}}' "$name")" = true ] || break
    sleep 0.5
  done
  podman logs "$name" | tail -20
  return 1
}
healthy || fail "the HEALTHCHECK never passed"
say "the HEALTHCHECK passes (/v2/health/ready)"
[ "$(podman exec "$name" id -u)" = 10001 ] || fail "not running as 10001"
podman top "$name" user args | awk 'NR > 1 && $1 == "root" { bad = 1 } END { exit bad }' \
  || fail "a process runs as root"
[[ "$(podman exec "$name" stat -c '%u %a' /var/lib/gpufaas)" == "10001 "* ]] \
  || fail "the state volume is not the user's"
say "every process runs as uid 10001; the state volume is its own"

# a function, from the numpy reference, deployed and answered over HTTP
fn=$work/fn
rm -rf "$fn"
$py tests/functions/ref_models.py --kind mlp --batch 2 --mlp-dims 16,24,4 \
  --mlp-acts tanh,identity --out "$fn" >/dev/null
sed -i 's/"ref-mlp"/"verify"/' "$fn/manifest.json"
curl -fsS -F "manifest=@$fn/manifest.json" -F "weights=@$fn/weights.safetensors" \
  "$url/v1/functions" >/dev/null || fail "deploy"
request() { # the request body for the reference inputs
  $py - "$fn" <<'PY'
import json, sys
import numpy as np
def read(p):
    raw = open(p, "rb").read(); n = int.from_bytes(raw[:8], "little")
    h = json.loads(raw[8:8 + n]); d = raw[8 + n:]
    return {k: np.frombuffer(d[v["data_offsets"][0]:v["data_offsets"][1]],
                             dtype={"F32": "<f4", "F64": "<f8"}[v["dtype"]]).reshape(v["shape"])
            for k, v in h.items() if k != "__metadata__"}
x = read(sys.argv[1] + "/inputs.safetensors")["x"]
print(json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape),
                              "data": x.ravel().tolist()}]}))
PY
}
request > "$work/request.json"
answer_ok() { # the answer file matches the reference
  $py - "$fn" "$1" <<'PY'
import json, sys
import numpy as np
raw = open(sys.argv[1] + "/expected.safetensors", "rb").read(); n = int.from_bytes(raw[:8], "little")
h = json.loads(raw[8:8 + n])["y"]; b, e = h["data_offsets"]
want = np.frombuffer(raw[8 + n + b:8 + n + e], dtype="<f8").reshape(h["shape"])
out = json.load(open(sys.argv[2]))["outputs"][0]
y = np.asarray(out["data"]).reshape(out["shape"])
sys.exit(0 if y.shape == want.shape and np.allclose(y, want, rtol=1e-4, atol=1e-5) else 1)
PY
}
curl -fsS -X POST -d @"$work/request.json" "$url/v1/functions/verify/invoke" > "$work/answer.json"
answer_ok "$work/answer.json" || fail "a wrong answer: $(cat "$work/answer.json")"
say "a function deployed into the container answers correctly"

# SIGTERM under load: in-flight requests finish, new ones are refused, exit 0
$py - "$url" "$work/request.json" > "$work/load.txt" <<'PY' &
import sys, time, urllib.request, urllib.error
url, body = sys.argv[1], open(sys.argv[2], "rb").read()
ok = bad = refused = 0
end = time.monotonic() + 30
while time.monotonic() < end:
    try:
        with urllib.request.urlopen(urllib.request.Request(
                url + "/v1/functions/verify/invoke", data=body, method="POST"), timeout=30) as r:
            ok += r.status == 200
    except urllib.error.HTTPError as e:
        bad += 1
        print("HTTP", e.code, e.read()[:200], flush=True)
    except OSError:
        refused += 1          # the listener is closed: the drain has begun
        if refused > 20:
            break
        time.sleep(0.05)
print(f"ok={ok} failed={bad} refused={refused}")
PY
loader=$!
sleep 2
t0=$(date +%s%N)
podman stop -t 30 "$name" >/dev/null
took_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
wait $loader || true
code=$(podman inspect --format '{{.State.ExitCode}}' "$name")
tail -1 "$work/load.txt"
[ "$code" = 0 ] || fail "exit status $code after SIGTERM"
grep -q 'failed=0' "$work/load.txt" || fail "requests failed during the drain: $(cat "$work/load.txt")"
grep -q 'ok=[1-9]' "$work/load.txt" || fail "no request was answered under load"
podman logs "$name" > "$work/container.log" 2>&1   # (a pipe into grep -q would SIGPIPE it)
grep -q 'SIGTERM: no longer accepting connections, draining' "$work/container.log" \
  || fail "the gateway did not log its drain (log: $work/container.log)"
[ "$took_ms" -lt 25000 ] || fail "stopping took ${took_ms} ms: the drain did not end by itself"
say "SIGTERM: drained and exited 0 in ${took_ms} ms, no request failed"

# the state is in the volume: a restarted container still serves the function
podman start "$name" >/dev/null
healthy || fail "the restarted container is not healthy"
curl -fsS -X POST -d @"$work/request.json" "$url/v1/functions/verify/invoke" > "$work/answer.json" \
  || fail "the function is gone after a restart"
answer_ok "$work/answer.json" || fail "a wrong answer after the restart"
say "restarted on the same volume: the function is still there and answers correctly"
podman stop -t 30 "$name" >/dev/null
say "container image verified: $image ($(podman image inspect --format '{{.Id}}' "$image" | cut -c1-12))"
