#!/usr/bin/env bash
# Install what gpufaas needs on Debian 12, and only what is missing.
#
#   deploy/install-deps.sh          packages to build and run the server
#   deploy/install-deps.sh --test   also what the tests need (Check, a Python
#                                   virtual environment in .venv with numpy ...)
#
# Idempotent: a second run installs nothing and takes a second or two.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '==> %s\n' "$*"; }

want_test=0
[ "${1:-}" = "--test" ] && want_test=1

pkgs=(build-essential pkg-config meson ninja-build
      libmicrohttpd-dev libjansson-dev libsqlite3-dev sqlite3 libcurl4-openssl-dev
      libopenblas-dev curl python3 python3-venv
      libprotobuf-c-dev protobuf-c-compiler libonnx-dev)
if [ "$want_test" = 1 ]; then
  pkgs+=(check libsubunit-dev wrk libonnx-testdata)
fi

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
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
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
