#!/usr/bin/env python3
"""Three real gateways behind a real nginx with the shipped routing files.

Each gateway has its own loopback address (127.0.0.2-4), state directory and
cpu worker. Checked through nginx: every answer is correct (numpy
reference); a function always lands on the same node, and the functions are
spread over the nodes; deploys and admin calls pass through; a gateway
killed with SIGKILL under load loses no request (nginx retries them on
another node, POSTs included) and, restarted, gets its functions back; a
gateway stopped with SIGTERM under load (the drain) loses none either.

Exits 77 (skipped) when nginx is not installed (deploy/install-deps.sh
--test installs it).
"""
import os
import signal
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

CHECKS = []


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    CHECKS.append(what)


def owners(cluster, fns, rounds=3):
    """{function name: the node that answered it}, asserting correct answers
    and that every round lands on the same node."""
    c = cluster.nginx.client()
    seen = {}
    for r in range(rounds):
        for fn in fns:
            ok, st, up, ans = c.invoke(fn)
            check(ok, f"round {r}: {fn.name} answered correctly through nginx ({st} {ans})")
            node = harness.last_upstream(up)
            check(seen.setdefault(fn.name, node) == node,
                  f"{fn.name} stays on {seen[fn.name]} (round {r}: {node})")
    c.close()
    return seen


class Load:
    """Threads invoking every function through nginx until stopped; each
    answer is checked."""

    def __init__(self, cluster, fns, threads=4):
        self.cluster, self.fns = cluster, fns
        self.stop_ev = threading.Event()
        self.lock = threading.Lock()
        self.sent = self.ok = 0
        self.failures = []
        self.retried = 0
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(threads)]

    def run(self, i):
        c = self.cluster.nginx.client()
        k = i
        while not self.stop_ev.is_set():
            fn = self.fns[k % len(self.fns)]
            k += 1
            ok, st, up, ans = c.invoke(fn)
            with self.lock:
                self.sent += 1
                if ok:
                    self.ok += 1
                else:
                    self.failures.append((fn.name, st, up, str(ans)[:200]))
                if "," in up:
                    self.retried += 1
        c.close()

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop_ev.set()
        for t in self.threads:
            t.join(timeout=120)


def wait_until(pred, timeout, step=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


def run(cluster, fns, tmp):
    g = cluster.gateways
    # deploy: each function on every node, straight to the gateway
    for gw in g:
        c = harness.Client(gw.host, gw.port)
        for fn in fns:
            st, _, b = c.deploy(fn)
            check(st == 201, f"deploy {fn.name} on {gw.addr}: 201 ({b[:200]!r})")
        c.close()

    # a deploy through nginx passes through to one node (round robin: no name in the path)
    extra = harness.Function("through-nginx", 999, tmp=tmp)
    c = cluster.nginx.client()
    st, up, b = c.deploy(extra)
    check(st == 201 and up in {x.addr for x in g}, f"deploy through nginx: 201 from a node ({st})")
    st, h, b = c.request("GET", "/v1/functions/through-nginx")
    check(st in (200, 404), "GET /v1/functions/{name} passes through")
    st, _, _ = c.request("GET", "/v2/health/ready")
    check(st == 200, "health through nginx")
    st, _, _ = c.request("GET", "/v2/models/nope/ready")
    check(st == 404 or st == 400, "an unknown model's ready: the gateway's answer")
    c.close()

    home = owners(cluster, fns)
    used = set(home.values())
    check(used <= {x.addr for x in g}, "every answer came from a gateway")
    check(len(used) >= 2, f"the functions are spread over the nodes ({sorted(used)})")

    # SIGKILL a node that owns functions, under load: no request lost
    victim = cluster.by_addr(sorted(used, key=lambda a: -list(home.values()).count(a))[0])
    mine = [fn for fn in fns if home[fn.name] == victim.addr]
    with Load(cluster, fns) as load:
        time.sleep(1.0)
        before = load.sent
        victim.kill(signal.SIGKILL)
        time.sleep(2.0)
    check(load.sent > before + 10, f"load went on after the kill ({load.sent} requests)")
    check(not load.failures, f"SIGKILL under load: lost_requests=0 (lost {len(load.failures)}: "
          f"{load.failures[:3]})")
    check(load.retried > 0, f"nginx retried requests on another node ({load.retried})")
    print(f"sigkill: requests={load.sent} lost_requests={len(load.failures)} "
          f"retried={load.retried}")
    c = cluster.nginx.client()
    for fn in mine:
        ok, st, up, ans = c.invoke(fn)
        check(ok and harness.last_upstream(up) != victim.addr,
              f"{fn.name} is answered by another node while its own is down")
    c.close()

    # the node comes back (same address, same state): its functions return to it
    victim.start()

    def returned():
        c = cluster.nginx.client()
        res = all(harness.last_upstream(c.invoke(fn)[2]) == victim.addr for fn in mine)
        c.close()
        return res
    check(wait_until(returned, 30, 0.5), f"{len(mine)} functions returned to {victim.addr}")
    check(owners(cluster, fns) == home, "every function is back on its own node")

    # SIGTERM (the drain) under load: in flight finishes, the rest goes elsewhere
    other = next(x for x in g if x is not victim and x.addr in used)
    with Load(cluster, fns) as load:
        time.sleep(1.0)
        code = other.kill(signal.SIGTERM)
        time.sleep(1.5)
    check(code == 0, f"SIGTERM: the gateway drained and exited 0 ({code})")
    check(not load.failures, f"SIGTERM under load: lost_requests=0 ({load.failures[:3]})")
    print(f"sigterm: requests={load.sent} lost_requests={len(load.failures)} "
          f"retried={load.retried}")


def main():
    if harness.find_nginx() is None:
        print("skipped: nginx is not installed (deploy/install-deps.sh --test installs it)")
        return 77
    with tempfile.TemporaryDirectory(prefix="gf-cluster-") as tmp:
        fns = [harness.Function(f"fn{i:02d}", 100 + i, tmp=tmp) for i in range(12)]
        args = ["--devices", "cpu:1", "--device-memory", "64M", "--host-memory", "64M"]
        with harness.Cluster(tmp, 3, args) as cluster:
            run(cluster, fns, tmp)
    print(f"{len(CHECKS)} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
