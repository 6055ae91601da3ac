#!/usr/bin/env python3
"""Every refusal of an inference request is one invocations row with its
reason, read back with the sqlite3 command-line tool from the file a real
`gpufaas serve` wrote (issue 15, for issue 18's refusals):

  503 the request bodies the server holds fill --body-memory
  504 the request's deadline (parameters.timeout) passed while it was queued
  408 the body trickled past --request-timeout (answered on its next chunk)
  408 the body stopped arriving (the connection guard's sweeper answers)
  429 a connection beyond --max-conns-per-client
  413 a Content-Length over --max-body
  408 the headers trickled or stopped (the sweeper answers): recorded under
      the function and version the request line named

and a request line that names no inference route has no row (a metadata
call whose headers never came); a 408 answered while the server stops
(after SIGTERM, the core already shut down) is a row too. /metrics' gpufaas_requests_total
counts the same requests. Run by meson with GF_GPUFAAS, GF_WORKER and
GF_SQLITE3 set; skipped (77) without the sqlite3 tool.
"""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import abuse_test as A  # noqa: E402  (its real-socket helpers)

check = A.check


def sqlite3(db, sql):
    r = subprocess.run([os.environ["GF_SQLITE3"], db, sql], capture_output=True, text=True,
                       timeout=30)
    if r.returncode != 0 or r.stderr:
        raise AssertionError(f"sqlite3 {sql!r}: {r.returncode} {r.stderr}")
    return r.stdout


INFER_HEAD = (b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
              b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")


def stalled_body(port, src):
    """A body that stops arriving: the sweeper writes the 408 and closes."""
    s = A.connect(port, src)
    s.sendall(INFER_HEAD)
    st, _, body, took = A.read_reply(s, 10)
    s.close()
    return st, body, took


def refusal_while_stopping():
    """A body still trickling when SIGTERM comes: its 408 is answered while
    the server drains, after the core has shut down, and is still one row
    in the file the stopped server leaves (the store closes last)."""
    with tempfile.TemporaryDirectory(prefix="gf-refusals-stop-") as tmp:
        proc, port = A.start_server(tmp, "--request-timeout", "2",
                                    "--heartbeat-timeout", "600000")
        db = os.path.join(tmp, "var", "gpufaas.db")
        try:
            A.deploy_mlp(tmp, port, "m")
            # SIGTERM 0.2 s into a body that trickles a byte every 0.3 s
            threading.Timer(0.2, proc.send_signal, [signal.SIGTERM]).start()
            got, _ = A.trickle(port, "127.0.0.8", INFER_HEAD, b" ")
            check(got.startswith(b"HTTP/1.1 408"),
                  f"a body trickling through SIGTERM: 408 ({got[:40]!r})")
            rc = proc.wait(timeout=60)
            check(rc == 0, f"SIGTERM with a refusal during the drain: exit status 0 ({rc})")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        rows = sqlite3(db, "SELECT http_code, status, coalesce(reason, '') FROM invocations"
                           " WHERE http_code = 408")
        check("408|GF_ERR_TIMEOUT|" in rows and "--request-timeout" in rows,
              f"the 408 answered while stopping is a row in the file left behind ({rows!r})")


def main():
    if not os.environ.get("GF_SQLITE3"):
        print("no sqlite3 tool: skipped")
        return 77
    refusal_while_stopping()
    with tempfile.TemporaryDirectory(prefix="gf-refusals-") as tmp:
        proc, port = A.start_server(tmp, "--max-conns-per-client", "2", "--request-timeout", "2",
                                    "--body-memory", "64K", "--max-body", "1M",
                                    "--heartbeat-timeout", "600000")
        db = os.path.join(tmp, "var", "gpufaas.db")
        try:
            A.deploy_mlp(tmp, port, "m")
            A.deploy_mlp(tmp, port, "slowq", "--max-delay-us", "10000000")
            want = []  # (function, version, http_code, status, a part of the reason)
            st, _, _ = A.infer(port, "m", A.infer_body())
            check(st == 200, "m answers")
            want.append(("m", 1, 200, "GF_OK", None))

            st, out, _ = A.infer(port, "m", A.infer_body(rows=64))
            check(st == 503, f"a body over --body-memory: 503 ({st})")
            want.append(("m", 1, 503, "GF_ERR_OVERLOADED", "--body-memory"))

            st, out, _ = A.infer(port, "slowq", A.infer_body(timeout_us=300000))
            check(st == 504, f"a queued request past parameters.timeout: 504 ({st})")
            want.append(("slowq", 1, 504, "GF_ERR_DEADLINE", "parameters.timeout"))

            reply, _ = A.trickle(port, "127.0.0.2", INFER_HEAD, b" ")
            check(reply.startswith(b"HTTP/1.1 408"), f"a trickled body: 408 ({reply[:40]!r})")
            want.append(("m", 1, 408, "GF_ERR_TIMEOUT", "--request-timeout"))

            st, body, took = stalled_body(port, "127.0.0.3")
            check(st == 408 and took < 8, f"a stalled body: 408 from the sweeper ({st}, "
                                          f"{took:.1f} s)")
            want.append(("m", 1, 408, "GF_ERR_TIMEOUT", "--request-timeout"))

            held = [A.connect(port, "127.0.0.4") for _ in range(2)]
            for c in held:  # answered, so the server counts both before the third opens
                c.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
                st, _, _, _ = A.read_reply(c, 10)
                check(st == 200, f"a held connection is served ({st})")
            s = A.connect(port, "127.0.0.4")
            body = A.infer_body()
            s.sendall(b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/json\r\n"
                      + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            st, _, out, _ = A.read_reply(s, 10)
            check(st == 429 and "--max-conns-per-client" in (A.json_error(out) or ""),
                  f"a connection over the per-client limit: 429 ({st})")
            want.append(("m", 1, 429, "GF_ERR_BUSY", "--max-conns-per-client"))
            for c in held + [s]:
                c.close()

            s = A.connect(port, "127.0.0.6")
            s.sendall(b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/json\r\nContent-Length: 2097152\r\n\r\n")
            st, _, _, _ = A.read_reply(s, 10)
            s.close()
            check(st == 413, f"a Content-Length over --max-body: 413 ({st})")
            want.append(("m", 1, 413, "GF_ERR_TOO_LARGE", "--max-body"))

            got, _ = A.trickle(port, "127.0.0.5",
                               b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n", b"X")
            check(got.startswith(b"HTTP/1.1 408"), f"trickled headers: 408 ({got[:40]!r})")
            want.append(("m", 1, 408, "GF_ERR_TIMEOUT", "headers did not arrive"))
            # headers that stop: the sweeper's 408, recorded under what the line named
            s = A.connect(port, "127.0.0.7")
            s.sendall(b"POST /v2/models/m/versions/1/infer HTTP/1.1\r\nHost: x\r\n")
            st, _, _, took = A.read_reply(s, 10)
            s.close()
            check(st == 408 and took < 8, f"stalled headers: 408 ({st}, {took:.1f} s)")
            want.append(("m", 1, 408, "GF_ERR_TIMEOUT", "headers did not arrive"))
            # and of a request line that names no inference: nothing
            s = A.connect(port, "127.0.0.7")
            s.sendall(b"GET /v1/functions HTTP/1.1\r\nHost: x\r\n")
            st, _, _, _ = A.read_reply(s, 10)
            s.close()
            check(st == 408, f"stalled headers of a list call: 408 ({st})")

            st, _, _ = A.infer(port, "m", A.infer_body())
            check(st == 200, "m still answers")
            want.append(("m", 1, 200, "GF_OK", None))

            deadline = time.monotonic() + 10
            n = 0
            while time.monotonic() < deadline:
                n = int(sqlite3(db, "SELECT count(*) FROM invocations"))
                if n >= len(want):
                    break
                time.sleep(0.2)
            time.sleep(1.5)  # anything more would be committed by now
            rows = sqlite3(db, "SELECT function, version, http_code, status,"
                               " coalesce(reason, '') FROM invocations ORDER BY id")
            got_rows = [r.split("|", 4) for r in rows.splitlines()]
            check(len(got_rows) == len(want),
                  f"one invocations row per answered inference ({len(got_rows)} rows, "
                  f"{len(want)} answers):\n{rows}")
            # each answer is one row; the rows need not come in the order the
            # answers went out (the sweeper's 408 is recorded when its connection
            # is closed, which may be after the next check's 429)
            left = list(got_rows)
            for fn, ver, code, status, why in want:
                match = [r for r in left if r[:4] == [fn, str(ver), str(code), status] and (
                    r[4] == "" if why is None else why in r[4])]
                check(len(match) > 0, f"{code} {status} for {fn}: a row among {left}")
                left.remove(match[0])
            total = A.metric(port, "gpufaas_requests_total")
            check(total == len(want), f"gpufaas_requests_total counts the same {len(want)} "
                                      f"requests ({total})")
        finally:
            A.stop(proc, tmp)
    print(f"{len(A.CHECKS)} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
