#!/usr/bin/env bash
# Install Triton's perf_analyzer into .venv/perf_analyzer and a launcher
# .venv/bin/perf_analyzer (deploy/install-deps.sh --perf runs this).
#
# perf_analyzer comes from PyPI (`perf-analyzer`), whose wheels are built for
# glibc 2.38 and libstdc++ GLIBCXX_3.4.32, newer than Debian 12's (2.36). So
# the C and C++ runtime come from Debian 13's packages (libc6, libstdc++6,
# libgcc-s1), downloaded with apt-get from a private list (the system's apt
# sources are left alone) and unpacked into a folder; the launcher starts
# perf_analyzer through that folder's loader. Nothing is installed system-wide.
#
# Idempotent: a second run checks the launcher and returns.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '==> %s\n' "$*"; }

version=2.60.0
dir=$PWD/.venv/perf_analyzer
launcher=$PWD/.venv/bin/perf_analyzer
stamp=$dir/.installed-$version

if [ -f "$stamp" ] && [ -x "$launcher" ]; then
  say "perf_analyzer $version: present ($launcher)"
  exit 0
fi
[ -x .venv/bin/python3 ] || { say "creating the Python virtual environment .venv"; python3 -m venv .venv; }
command -v unzip >/dev/null || { echo "needs unzip (./deploy/install-deps.sh --perf)" >&2; exit 1; }

rm -rf "$dir"
mkdir -p "$dir/wheel" "$dir/root" "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial" \
         "$dir/apt/debs"

say "downloading perf-analyzer $version from PyPI"
.venv/bin/python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  --platform manylinux_2_38_x86_64 --python-version 3.11 -d "$dir/wheel" \
  "perf-analyzer==$version"
unzip -q -o "$dir"/wheel/perf_analyzer-*.whl 'perf_analyzer/bin/perf_analyzer' -d "$dir/wheel"
install -m 0755 "$dir/wheel/perf_analyzer/bin/perf_analyzer" "$dir/perf_analyzer.bin"

say "downloading Debian 13's libc6, libstdc++6 and libgcc-s1 (unpacked into $dir/root)"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
  > "$dir/apt/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$dir/apt/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
          -o "Dir::State::Lists=$dir/apt/lists" -o "Dir::Cache=$dir/apt/cache"
          -o "APT::Sandbox::User=root")
apt-get "${apt_opts[@]}" update -qq
(cd "$dir/apt/debs" && apt-get "${apt_opts[@]}" download libc6 libstdc++6 libgcc-s1 >/dev/null)
for deb in "$dir"/apt/debs/*.deb; do
  dpkg-deb -x "$deb" "$dir/root"
done
rm -rf "$dir/apt" "$dir/wheel"

lib=$dir/root/usr/lib/x86_64-linux-gnu
cat > "$launcher" <<EOF
#!/bin/sh
# Triton's perf_analyzer $version through Debian 13's loader (deploy/install-perf-analyzer.sh).
exec "$lib/ld-linux-x86-64.so.2" --library-path "$lib:/usr/lib/x86_64-linux-gnu" \\
  "$dir/perf_analyzer.bin" "\$@"
EOF
chmod 0755 "$launcher"
"$launcher" --version 2>&1 | grep -q "Perf Analyzer" || {
  echo "perf_analyzer does not start through $launcher" >&2; exit 1; }
touch "$stamp"
say "perf_analyzer $version installed: $launcher"
