#!/usr/bin/env python3
"""Routing by function name, measured: three real gateways behind a real nginx.

50 MLP functions (each its own weights; every answer checked against the
numpy reference) deployed through nginx into a shared store (--shared-store)
that every gateway copies them from; each gateway has one cpu worker whose
device tier holds about half of them. The same Zipf(0.9) sequence of invocations is sent
through nginx twice, on fresh gateways each time: with the shipped
`hash $gpufaas_function consistent` upstream, and with round robin. A request
is warm when its parameters were already on the device (the answer's "cold").
Then, with hashing, one gateway is SIGKILLed under load and restarted: every
request must still be answered correctly, and its functions must come back.

Prints key=value lines:
  warm_hit_fraction_hash=   warm_hit_fraction_rr=
  cold_starts_per_1k_hash=  cold_starts_per_1k_rr=
  lost_requests=            (during the kill and the restart, hashing)
  functions_returned=       (of the killed node's functions, back on it)

Run: meson test -C build --benchmark bench_cluster   (or directly, with
GF_GPUFAAS, GF_WORKER and GF_SOURCE_ROOT set). Exits 77 without nginx.
"""
import json
import os
import signal
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))
import harness  # noqa: E402

N_FUNCTIONS = 50
REQUESTS = int(os.environ.get("GF_BENCH_REQUESTS", "3000"))
THREADS = 4
ZIPF_S = 0.9
DIMS = (256, 768, 256, 16)          # 1.6 MB of F32 weights: one 2 MiB device page each
GATEWAY_ARGS = ["--devices", "cpu:1", "--device-memory", "56M", "--host-memory", "256M"]


def zipf_order(n_items, count, s, seed):
    p = 1.0 / np.arange(1, n_items + 1) ** s
    p /= p.sum()
    rng = np.random.default_rng(seed)
    ranks = rng.permutation(n_items)          # which function is the most popular
    return [int(ranks[i]) for i in rng.choice(n_items, size=count, p=p)]


def deploy_all(cluster, fns):
    """Deploy through nginx (round robin: no name in the path), then wait until
    every node has copied every function from the shared store."""
    c = cluster.nginx.client()
    for fn in fns:
        st, _, b = c.deploy(fn)
        if st != 201:
            raise RuntimeError(f"deploy {fn.name} through nginx: {st} {b[:200]!r}")
    c.close()
    names = {fn.name for fn in fns}
    deadline = time.monotonic() + 60
    for g in cluster.gateways:
        while True:
            st, _, b = g.client(timeout=10).request("GET", "/v1/functions")
            have = {f["name"] for f in json.loads(b)["functions"]} if st == 200 else set()
            if names <= have:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{g.addr} has {len(have & names)} of {len(names)} functions")
            time.sleep(0.2)


def run_sequence(cluster, fns, order, during=None):
    """Send order (function indices) through nginx from THREADS threads, in
    order. Returns (answers, failures): answers = [(index, upstream, cold)]."""
    lock = threading.Lock()
    pos = [0]
    answers, failures = [], []

    def worker():
        c = cluster.nginx.client()
        while True:
            with lock:
                k = pos[0]
                pos[0] += 1
            if k >= len(order):
                break
            if during is not None:
                during(k)
            fn = fns[order[k]]
            ok, st, up, ans = c.invoke(fn)
            with lock:
                if ok:
                    answers.append((k, harness.last_upstream(up), bool(ans.get("cold"))))
                else:
                    failures.append((fn.name, st, up, str(ans)[:200]))
        c.close()

    threads = [threading.Thread(target=worker) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers, failures


def measure(tmp, fns, order, balance):
    root = os.path.join(tmp, balance)
    os.makedirs(root)
    with harness.Cluster(root, 3, GATEWAY_ARGS, balance=balance, shared=True) as cluster:
        deploy_all(cluster, fns)
        answers, failures = run_sequence(cluster, fns, order)
    if failures:
        raise RuntimeError(f"{balance}: {len(failures)} failed: {failures[:3]}")
    cold = sum(1 for a in answers if a[2])
    return 1.0 - cold / len(answers), 1000.0 * cold / len(answers)


def kill_and_return(tmp, fns, order):
    root = os.path.join(tmp, "kill")
    os.makedirs(root)
    with harness.Cluster(root, 3, GATEWAY_ARGS, shared=True) as cluster:
        deploy_all(cluster, fns)
        answers, failures = run_sequence(cluster, fns, order[:300])
        home = {}
        for k, up, _ in answers:
            home.setdefault(order[k], up)
        victim = max(cluster.gateways, key=lambda g: sum(1 for u in home.values() if u == g.addr))
        mine = sorted(i for i, u in home.items() if u == victim.addr)
        n = len(order)
        events = {n // 3: "kill", (2 * n) // 3: "start"}
        ev_lock = threading.Lock()

        def during(k):
            with ev_lock:
                what = events.pop(k, None)
            if what == "kill":
                victim.kill(signal.SIGKILL)
            elif what == "start":
                victim.start()
        answers, failures = run_sequence(cluster, fns, order, during)
        time.sleep(1.5)                      # past nginx's fail_timeout (1 s here)
        c = cluster.nginx.client()
        back = 0
        for i in mine:
            for _ in range(20):              # the first try may be the one that probes it
                ok, st, up, ans = c.invoke(fns[i])
                if ok and harness.last_upstream(up) == victim.addr:
                    back += 1
                    break
        c.close()
    return len(failures), back, len(mine), failures


def main():
    if harness.find_nginx() is None:
        print("skipped: nginx is not installed (deploy/install-deps.sh --test installs it)")
        return 77
    with tempfile.TemporaryDirectory(prefix="gf-bench-cluster-") as tmp:
        fns = [harness.Function(f"z{i:02d}", 1000 + i, dims=DIMS, batch=1, tmp=tmp)
               for i in range(N_FUNCTIONS)]
        order = zipf_order(N_FUNCTIONS, REQUESTS, ZIPF_S, seed=19)
        t0 = time.monotonic()
        wh, ch = measure(tmp, fns, order, "hash")
        wr, cr = measure(tmp, fns, order, "rr")
        lost, back, mine, failures = kill_and_return(tmp, fns, order)
        print(f"functions={N_FUNCTIONS} requests={REQUESTS} zipf_s={ZIPF_S} gateways=3 "
              f"device_memory_per_gateway=56M model_bytes={len(fns[0].weights)}")
        print(f"warm_hit_fraction_hash={wh:.3f}")
        print(f"warm_hit_fraction_rr={wr:.3f}")
        print(f"cold_starts_per_1k_hash={ch:.1f}")
        print(f"cold_starts_per_1k_rr={cr:.1f}")
        print(f"lost_requests={lost}")
        print(f"functions_returned={back}/{mine}")
        print(f"bench_seconds={time.monotonic() - t0:.1f}")
        if failures:
            print(f"failures: {failures[:5]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
