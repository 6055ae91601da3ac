#!/usr/bin/env bash
# Install what gpufaas needs on Debian 12, and only what is missing.
#
#   deploy/install-deps.sh          packages to build and run the server
#   deploy/install-deps.sh --test   also what the tests need (Check, nginx, a
#                                   Python virtual environment in .venv with
#                                   numpy, kubectl, kubernetes-validate ...)
#   deploy/install-deps.sh --perf   also Triton's perf_analyzer into .venv
#                                   (deploy/install-perf-analyzer.sh; for
#                                   tests/bench/bench_perf_analyzer.py)
#   deploy/install-deps.sh --container
#                                   also podman, buildah and debootstrap, for
#                                   deploy/container/verify.sh
#   deploy/install-deps.sh --runtime FILE
#                                   only the packages named in FILE (one a line),
#                                   plus tini and curl: a container's runtime
#                                   stage (deploy/container/Containerfile.*)
#
# Idempotent: a second run installs nothing and takes a second or two.
set -euo pipefail
runtime_list=
if [ "${1:-}" = "--runtime" ] && [ -n "${2:-}" ]; then
  runtime_list=$(realpath "$2")   # before the cd below
fi
cd "$(dirname "$0")/.."

say() { printf '==> %s\n' "$*"; }

want_test=0
want_perf=0
pkgs=(build-essential pkg-config meson ninja-build
      libmicrohttpd-dev libjansson-dev libsqlite3-dev sqlite3 libcurl4-openssl-dev zlib1g-dev libssl-dev
      libopenblas-dev libdnnl-dev curl python3 python3-venv
      libprotobuf-c-dev protobuf-c-compiler libonnx-dev)
case "${1:-}" in
  --test)
    want_test=1
    pkgs+=(check libsubunit-dev wrk libonnx-testdata nginx
           clang libclang-rt-14-dev) ;;  # libFuzzer (tests/fuzz/run.sh)
  --perf)
    want_perf=1
    pkgs+=(unzip) ;;
  --container)
    pkgs+=(podman buildah runc debootstrap uidmap fuse-overlayfs) ;;
  --runtime)
    [ -r "$runtime_list" ] || { echo "usage: $0 --runtime FILE (a list of packages)" >&2; exit 2; }
    mapfile -t pkgs < <(grep -v '^[[:space:]]*\(#\|$\)' "$runtime_list")
    pkgs+=(tini curl ca-certificates) ;;
  "") ;;
  *) echo "usage: $0 [--test | --perf | --container | --runtime FILE]" >&2; exit 2 ;;
esac

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  say "installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  # nginx's Debian package starts a server on port 80 when it can: the tests
  # run their own: RUNLEVEL=1 makes invoke-rc.d start no service meanwhile
  $sudo env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
else
  say "Debian packages: all present"
fi

# Python packages live in a virtual environment of the project (.venv), so
# nothing is installed into the system's Python. Reinstalled only when the
# requirements file changes.
req=tests/requirements.txt
if [ "$want_test" = 1 ] || [ "${GF_WANT_PYTHON:-0}" = 1 ]; then
  if [ ! -x .venv/bin/python3 ]; then
    say "creating the Python virtual environment .venv"
    python3 -m venv .venv
  fi
  stamp=.venv/.gpufaas-requirements
  if [ ! -f "$stamp" ] || ! cmp -s "$req" "$stamp"; then
    say "installing Python packages from $req into .venv"
    .venv/bin/python3 -m pip install -q --disable-pip-version-check -r "$req"
    cp "$req" "$stamp"
  else
    say "Python packages: all present"
  fi
fi

if [ "$want_perf" = 1 ]; then
  ./deploy/install-perf-analyzer.sh
fi
