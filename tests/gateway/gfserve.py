"""A real `gpufaas serve` for the Python tests (tests/gateway/*_test.py).

Run by meson with GF_GPUFAAS and GF_WORKER set: start_server starts the
server on a free port with its state in tmp and returns (process, address);
serve runs checks(address) against it, prints the end of the server's log
when they fail, and stops it with SIGTERM, which must exit 0.
"""
import os
import signal
import subprocess
import sys


def start_server(tmp, token, devices="cpu:1", device_memory="1536M", host_memory="1536M",
                 extra=()):
    """token None: no admin token; extra: more `serve` flags. The log is
    appended to, so a test that restarts the server keeps every run's."""
    log = open(os.path.join(tmp, "serve.log"), "ab")
    proc = subprocess.Popen(
        [os.environ["GF_GPUFAAS"], "serve", "--listen", "127.0.0.1:0",
         "--state-dir", os.path.join(tmp, "var"), "--devices", devices,
         "--device-memory", device_memory, "--host-memory", host_memory,
         "--worker", os.environ["GF_WORKER"],
         *(["--admin-token", token] if token is not None else []), *extra],
        stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL)
    line = proc.stdout.readline().decode().strip()
    prefix = "gpufaas: serving on http://"
    if not line.startswith(prefix):
        proc.kill()
        raise AssertionError(f"unexpected first line {line!r}; see {tmp}/serve.log")
    return proc, line[len(prefix):]


def serve(tmp, token, checks, **server_args):
    """checks(addr) against a fresh server; then SIGTERM, which must exit 0."""
    proc, addr = start_server(tmp, token, **server_args)
    try:
        checks(addr)
    except BaseException:
        proc.kill()
        proc.wait()
        with open(os.path.join(tmp, "serve.log"), "rb") as f:
            sys.stderr.write(f.read()[-6000:].decode(errors="replace"))
        raise
    proc.send_signal(signal.SIGTERM)
    if proc.wait(timeout=120) != 0:
        raise AssertionError(f"SIGTERM: exit status {proc.returncode}")
