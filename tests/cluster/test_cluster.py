#!/usr/bin/env python3
"""Three real gateways behind a real nginx with the shipped routing files,
sharing one store directory (--shared-store).

Each gateway has its own loopback address (127.0.0.2-4), state directory and
cpu worker, and sees the store through a symbolic link of its own. Checked
through nginx: deploys pass through to any node and every node learns of
them; every answer is correct (numpy reference); a function always lands on
the same node, and the functions are spread over the nodes; two nodes
deploying one name at once end with distinct versions and the same current
version everywhere; versions are managed through any node by a single node's
rules (next numbers, idempotent redeploys, interface changes, activate,
per-version delete, numbers going on after a delete), the same in every
node's memory and SQLite; a delete reaches every node; a gateway killed with
SIGKILL under load loses no request (nginx retries them on another node,
POSTs included) and, restarted, gets its functions back; a gateway stopped
with SIGTERM under load (the drain) loses none either; a node that loses
sight of the store answers what it holds, passes what it cannot fetch to the
next node (503, retried by nginx), stays ready while it holds something and
is not ready when it holds nothing, until it sees the store again.

Exits 77 (skipped) when nginx is not installed (deploy/install-deps.sh
--test installs it).
"""
import json
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


def placement(cluster, fns):
    """{function name: the node that answered it now}, None for a wrong answer."""
    c = cluster.nginx.client()
    res = {}
    for fn in fns:
        ok, st, up, ans = c.invoke(fn)
        res[fn.name] = harness.last_upstream(up) if ok else None
    c.close()
    return res


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


def node_functions(gw):
    c = gw.client(timeout=10)
    st, _, b = c.request("GET", "/v1/functions")
    c.close()
    return {f["name"]: f for f in json.loads(b)["functions"]} if st == 200 else None


def gauge(gw, name):
    c = gw.client(timeout=10)
    st, _, b = c.request("GET", "/metrics")
    c.close()
    for line in b.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def deploy_everywhere(cluster, fns):
    """Deploy through nginx: round robin over the nodes (no name in the path);
    every node learns of every function through the shared store."""
    c = cluster.nginx.client()
    took = set()
    for fn in fns:
        st, up, b = c.deploy(fn)
        check(st == 201, f"deploy {fn.name} through nginx: 201 ({st} {b[:200]!r})")
        took.add(up)
    c.close()
    check(len(took) == len(cluster.gateways), f"the deploys went to every node ({sorted(took)})")
    names = {fn.name for fn in fns}
    for gw in cluster.gateways:
        check(wait_until(lambda: names <= set(node_functions(gw) or {}), 10),
              f"{gw.addr} knows every function deployed through the others")


def concurrent_deploys(cluster, tmp):
    """Two nodes deploy one name at once: distinct versions, one current one
    on every node."""
    g = cluster.gateways
    a = harness.Function("same", 501, tmp=tmp)
    b = harness.Function("same", 502, tmp=tmp)
    barrier = threading.Barrier(2)
    got = {}

    def deploy(gw, fn):
        c = gw.client()
        barrier.wait()
        got[gw.addr] = c.deploy(fn)
        c.close()
    ts = [threading.Thread(target=deploy, args=(g[0], a)),
          threading.Thread(target=deploy, args=(g[1], b))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    vs = sorted(json.loads(got[x.addr][2])["version"] for x in g[:2]
                if got[x.addr][0] == 201)
    check(len(vs) == 2 and vs[0] != vs[1], f"two deploys at once: two versions ({got})")

    def agreed():
        views = [node_functions(gw).get("same") for gw in g]
        return all(v is not None and v["version"] == vs[1] and
                   sorted(v["versions"]) == vs for v in views)
    check(wait_until(agreed, 10), f"every node has versions {vs}, {vs[1]} current")
    c = cluster.nginx.client()
    ok, st, up, ans = c.invoke(b if vs[1] == json.loads(got[g[1].addr][2])["version"] else a)
    check(ok, "the current version answers through nginx")
    # a delete through nginx reaches every node
    st, _, _ = c.request("DELETE", "/v1/functions/same")
    check(st == 200, "delete through nginx")
    def gone(gw):  # one look per node: the delete may land between two
        fs = node_functions(gw)
        return fs is not None and ("same" not in fs or fs["same"]["state"] == "deleted")
    check(wait_until(lambda: all(gone(gw) for gw in g), 10) and
          all(gw.client().request("GET", "/v2/models/same/ready")[0] != 200 for gw in g),
          "the delete reached every node")
    ok, st, up, ans = c.invoke(a)
    check(st == 404, f"a deleted function: 404 through nginx ({st})")
    c.close()


def node_versions(gw, name):
    """(current version, sorted live versions) of name on gw, or None."""
    f = (node_functions(gw) or {}).get(name)
    if f is None or f.get("state") == "deleted":
        return None
    return f["version"], sorted(f["versions"])


def db_versions(gw, name):
    """{version: state} of name in gw's own SQLite (read as an operator would)."""
    import sqlite3
    db = sqlite3.connect(f"file:{os.path.join(gw.state, 'gpufaas.db')}?mode=ro", uri=True,
                         timeout=10)
    try:
        rows = db.execute("SELECT version, state FROM function_versions WHERE function = ? "
                          "ORDER BY version", (name,)).fetchall()
    finally:
        db.close()
    return dict(rows)


def versions_through_store(cluster, tmp):
    """A function's versions managed through any node: every node applies a
    single node's rules (gateway/core/versions.c) to the store's log, so the
    numbers, refusals, idempotent redeploys, activations and per-version
    deletes are the same everywhere, in memory and in each node's SQLite."""
    g = cluster.gateways
    f1 = harness.Function("ver", 601, tmp=tmp)
    f2 = harness.Function("ver", 602, tmp=tmp)               # other weights, same interface
    f3 = harness.Function("ver", 603, dims=(32, 48, 4), tmp=tmp)  # another output shape

    def on_all(want, what, timeout=10):
        check(wait_until(lambda: all(node_versions(gw, "ver") == want for gw in g), timeout),
              f"{what}: every node has {want} ({[node_versions(gw, 'ver') for gw in g]})")

    def answers(fn, what):
        for gw in g:
            ok, st, up, ans = gw.client().invoke(fn)
            check(ok, f"{what}: {gw.addr} answers with that version's weights ({st} {ans})")

    st, _, b = g[0].client().deploy(f1)
    check(st == 201, f"deploy on node 0: 201 ({st} {b[:200]!r})")
    v1 = json.loads(b)["version"]
    st, _, b = g[1].client().deploy(f1)  # the same weights and manifest, elsewhere
    check(st == 200 and json.loads(b)["version"] == v1 and json.loads(b)["created"] is False,
          f"an identical redeploy on node 1 returns version {v1}, created false ({st} {b[:200]!r})")
    st, _, b = g[2].client().deploy(f2)
    check(st == 201 and json.loads(b)["version"] == v1 + 1,
          f"new weights on node 2: the next number ({st} {b[:200]!r})")
    v2 = v1 + 1
    on_all((v2, [v1, v2]), "two versions")
    answers(f2, f"version {v2} current")

    st, _, b = g[0].client().deploy(f3)
    check(st == 409 and b"interface_change=allow" in b,
          f"an interface change without allow: 409 naming the way ({st} {b[:300]!r})")
    body, ctype = f3.multipart()
    st, _, b = g[1].client().request("POST", "/v1/functions?interface_change=allow", body,
                                     {"Content-Type": ctype})
    check(st == 201 and json.loads(b)["version"] == v2 + 1,
          f"... allowed: version {v2 + 1} ({st} {b[:200]!r})")
    v3 = v2 + 1
    on_all((v3, [v1, v2, v3]), "the interface change")
    answers(f3, f"version {v3} current")

    c = cluster.nginx.client()
    st, _, b = c.request("POST", f"/v1/functions/ver/versions/{v2}/activate")
    check(st == 200 and json.loads(b)["version"] == v2,
          f"activate {v2} through nginx: 200 ({st} {b[:200]!r})")
    on_all((v2, [v1, v2, v3]), f"rolled back to {v2}")
    answers(f2, f"version {v2} current again")
    st, _, b = c.request("DELETE", f"/v1/functions/ver/versions/{v2}")
    check(st == 409 and b"activate another" in b,
          f"deleting the current version: 409 ({st} {b[:300]!r})")
    st, _, b = g[2].client().request("DELETE", f"/v1/functions/ver/versions/{v1}")
    check(st == 200, f"delete version {v1} on node 2: 200 ({st} {b[:200]!r})")
    on_all((v2, [v2, v3]), f"version {v1} deleted")
    st, _, b = g[0].client().request("POST", f"/v1/functions/ver/versions/{v1}/activate")
    check(st == 404, f"activating the deleted version {v1}: 404 ({st} {b[:200]!r})")
    for gw in g:
        check(wait_until(lambda: db_versions(gw, "ver") ==
                         {v1: "deleted", v2: "ready", v3: "ready"}, 10),
              f"{gw.addr}'s SQLite has the same versions ({db_versions(gw, 'ver')})")

    st, _, _ = c.request("DELETE", "/v1/functions/ver")
    check(st == 200, "delete the function through nginx")
    check(wait_until(lambda: all(node_versions(gw, "ver") is None for gw in g), 10),
          "the delete reached every node")
    st, _, b = g[1].client().deploy(f1)
    check(st == 201 and json.loads(b)["version"] == v3 + 1,
          f"the name is free again and numbers go on: {v3 + 1} ({st} {b[:200]!r})")
    on_all((v3 + 1, [v3 + 1]), "the redeploy after the delete")
    answers(f1, "the redeploy")
    c.request("DELETE", "/v1/functions/ver")
    c.close()


def store_unreadable(cluster, fns, home, tmp):
    """One node loses sight of the shared store."""
    g = cluster.gateways
    b = max(g, key=lambda x: sum(1 for u in home.values() if u == x.addr))
    mine = [fn for fn in fns if home[fn.name] == b.addr]
    b.store_visible(False)
    check(wait_until(lambda: gauge(b, "gpufaas_shared_store_up") == 0, 10),
          "the node reports the store unreadable in /metrics")
    c = cluster.nginx.client()
    for fn in mine:
        ok, st, up, ans = c.invoke(fn)
        check(ok and up == b.addr, f"{fn.name}: answered by its node from what it holds ({up})")
    st, _, _ = b.client().request("GET", "/v2/health/ready")
    check(st == 200, "a node that holds functions stays ready without the store")

    # a function deployed meanwhile, whose name lands on that node
    name = None
    for k in range(200):
        st, h, _ = c.request("GET", f"/v2/models/late{k}/ready")
        if harness.last_upstream(h.get("x-gpufaas-upstream", "")) == b.addr:
            name = f"late{k}"
            break
    check(name is not None, "a name that hashes to the node")
    late = harness.Function(name, 777, tmp=tmp)
    other = next(x for x in g if x is not b)
    st, _, body = other.client().deploy(late)
    check(st == 201, f"deploy {name} on another node ({st})")
    ok, st, up, ans = c.invoke(late)
    check(ok and up.startswith(b.addr + ",") and harness.last_upstream(up) != b.addr,
          f"{name}: the node without the store passed it on (503), nginx retried ({up} {st} "
          f"{str(ans)[:300]})")
    for _ in range(3):  # nginx skips the node for fail_timeout, then tries it again
        ok, st, up, ans = c.invoke(late)
        check(ok and harness.last_upstream(up) != b.addr, f"{name}: answered elsewhere ({up})")
    c.close()

    # restarted with nothing, still without the store: not ready
    b.kill(signal.SIGTERM)
    b.state = os.path.join(tmp, "node-empty")
    b.start(ready=False)
    time.sleep(1.5)
    bc = b.client()
    st, _, _ = bc.request("GET", "/v2/health/ready")
    # Triton's answer for "not ready" is 400 (and a Kubernetes probe fails on >= 400)
    check(st == 400, f"a node that holds nothing and cannot read the store is not ready ({st})")
    st, _, _ = bc.request("GET", "/v2/health/live")
    check(st == 200, "... but live")
    # the store comes back: it copies what it serves, and is ready
    b.store_visible(True)
    check(wait_until(lambda: bc.request("GET", "/v2/health/ready")[0] == 200, 15),
          "ready again once it reads the store")
    bc.close()
    names = {fn.name for fn in fns} | {name}
    check(wait_until(lambda: names <= set(node_functions(b) or {}), 15),
          "it copied every function from the store")
    time.sleep(1.2)  # past nginx's fail_timeout
    c = cluster.nginx.client()
    check(wait_until(lambda: all(harness.last_upstream(c.invoke(fn)[2]) == b.addr
                                 for fn in mine), 10),
          "its functions are answered by it again")
    for fn in mine:
        ok, st, up, ans = c.invoke(fn)
        check(ok, f"{fn.name} correct after the store came back")
    c.close()


def run(cluster, fns, tmp):
    g = cluster.gateways
    deploy_everywhere(cluster, fns)
    c = cluster.nginx.client()
    st, _, _ = c.request("GET", "/v2/health/ready")
    check(st == 200, "health through nginx")
    st, _, _ = c.request("GET", "/v2/models/nope/ready")
    check(st in (400, 404), "an unknown model's ready: the gateway's answer")
    c.close()

    home = owners(cluster, fns)
    used = set(home.values())
    check(used <= {x.addr for x in g}, "every answer came from a gateway")
    check(len(used) >= 2, f"the functions are spread over the nodes ({sorted(used)})")
    concurrent_deploys(cluster, tmp)
    versions_through_store(cluster, tmp)

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
    other.start()
    check(wait_until(lambda: placement(cluster, fns) == home, 15, 0.5),
          "every function is on its own node again")

    store_unreadable(cluster, fns, home, tmp)


def main():
    if harness.find_nginx() is None:
        print("skipped: nginx is not installed (deploy/install-deps.sh --test installs it)")
        return 77
    with tempfile.TemporaryDirectory(prefix="gf-cluster-") as tmp:
        fns = [harness.Function(f"fn{i:02d}", 100 + i, tmp=tmp) for i in range(12)]
        args = ["--devices", "cpu:1", "--device-memory", "64M", "--host-memory", "64M"]
        with harness.Cluster(tmp, 3, args, shared=True) as cluster:
            run(cluster, fns, tmp)
    print(f"{len(CHECKS)} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
