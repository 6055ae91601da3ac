#!/usr/bin/env bash
# deploy/run.sh as a user runs it, in every state it can meet: a fresh state
# directory, a second run, a run after `gpufaas rm`, a run after the server
# crashed, and a run whose deploy fails. Each run must end with the example
# functions deployed and served, deploying only what is missing; a failed
# run must not leave its server behind. Run by meson with GF_SOURCE_ROOT and
# GF_BUILD_ROOT (the build folder run.sh uses: its binaries, no rebuild).
#   test_run_sh.sh
set -uo pipefail
src=${GF_SOURCE_ROOT:?} build=${GF_BUILD_ROOT:?}
work=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
listen=127.0.0.1:$port url=http://$listen
export GPUFAAS_LISTEN=$listen GPUFAAS_STATE_DIR=$work/var GPUFAAS_BUILD_DIR=$build
export GPUFAAS_DEVICES=cpu:1 GPUFAAS_SERVER=$url
gpufaas=$build/gateway/gpufaas
pid=
fail() {
  echo "FAIL: $*"
  [ -f "$work/out" ] && tail -n 40 "$work/out"
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null
  local s
  s=$(server_pid)
  [ -n "$s" ] && kill -TERM "$s" 2>/dev/null
  sleep 1
  rm -rf "$work"
  exit 1
}
# The pid of the gpufaas serve on our port, or nothing.
server_pid() { pgrep -f "gpufaas serve --listen $listen" | head -n 1; }

# Start run.sh in the background; wait until it says the server is serving.
start() {
  # emptied here, not by the background job's redirection: that runs after
  # the fork, and the first grep below could read the last run's "serving"
  : > "$work/out"
  "$src/deploy/run.sh" >> "$work/out" 2>&1 &
  pid=$!
  for _ in $(seq 1 900); do
    grep -q "gpufaas is serving on" "$work/out" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || fail "run.sh ended before serving (exit $(wait "$pid"; echo $?))"
    sleep 0.2
  done
  fail "run.sh did not serve within 180 s"
}
# Stop run.sh as a signal does (SIGTERM: a background job here ignores
# SIGINT, a terminal's Ctrl-C reaches run.sh's INT trap the same way); it
# must take its server with it.
stop() {
  kill -TERM "$pid"
  for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$pid" 2>/dev/null && fail "run.sh did not stop on SIGTERM"
  wait "$pid"
  pid=
  [ -z "$(server_pid)" ] || fail "the server outlived run.sh"
}
expect() { grep -q -- "$1" "$work/out" || fail "run.sh did not say '$1'"; }
serves() { # every example answers
  local body
  body=$(cat "$work/var/examples/digits/request.json") || fail "no digits request"
  curl -fsS -X POST -d "$body" "$url/v2/models/digits/infer" > /dev/null || fail "digits does not answer"
  for f in resnet18 bert-mini; do
    curl -fsS "$url/v2/models/$f/ready" > /dev/null || fail "$f is not ready"
  done
}

# 1. a fresh state: everything is made and deployed
start
expect "deployed digits"; expect "deployed resnet18"; expect "deployed bert-mini"
serves
stop
# 2. again: nothing new
start
expect "digits is deployed (the same weights and manifest)"
expect "bert-mini is deployed (the same weights and manifest)"
serves
# 3. after gpufaas rm: that one is deployed again, the others are as they were
"$gpufaas" rm digits > /dev/null || fail "gpufaas rm digits"
stop
start
expect "deployed digits"; expect "resnet18 is deployed (the same weights and manifest)"
serves
[ "$("$gpufaas" ls --json | python3 -c 'import json, sys; print([f["version"] for f in json.load(sys.stdin)["functions"] if f["name"] == "digits"][0])')" = 2 ] \
  || fail "digits should be version 2 after its redeploy"
# 4. the server crashes: run.sh ends with it, and the next run serves again
kill -KILL "$(server_pid)"
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
kill -0 "$pid" 2>/dev/null && fail "run.sh kept running after its server died"
wait "$pid"; pid=
start
expect "digits is deployed (the same weights and manifest)"
serves
stop
# 5. a deploy that fails: run.sh exits non-zero and its server is gone
printf 'not a safetensors file' > "$work/var/examples/bert-mini.safetensors"
"$src/deploy/run.sh" > "$work/out" 2>&1
status=$?
[ "$status" -ne 0 ] || fail "run.sh succeeded with a broken example"
expect "deploying bert-mini failed (HTTP 400)"
sleep 0.5
[ -z "$(server_pid)" ] || fail "run.sh left its server running after a failure"

rm -rf "$work"
echo "ok: deploy/run.sh in a fresh state, again, after rm, after a crash, and on a failure"
