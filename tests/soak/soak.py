#!/usr/bin/env python3
"""Soak: a mixed load on a real `gpufaas serve` for N minutes.

Inference from several threads on three functions, a deploy and a delete of
a fourth every few seconds, and a worker SIGKILLed every --kill-every
seconds. At the end it prints key=value figures:

  requests=  ok=  refused=  lost_requests=  worker_kills=  deploys=
  rss_start_kb=  rss_end_kb=  rss_growth_pct=  rss_kib_per_cycle=

lost_requests counts requests that got no HTTP answer at all (a reset, a
timeout) or a 500; a 503/429 with Retry-After while a worker restarts is a
refusal, not a loss. rss_growth_pct compares the gateway's resident memory
after the first fifth of the run (warm) with the end (target < 5 over 30
minutes); rss_kib_per_cycle divides that growth by the deploy+delete cycles
of the same span. Usage (from the repository root, after a build):

  tests/soak/soak.py --minutes 30 [--build build] [--threads 8]
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def children(pid):
    kids = []
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            kids += [int(k) for k in open(f"/proc/{pid}/task/{t}/children").read().split()]
        except OSError:
            pass
    return kids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--kill-every", type=float, default=10)
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    gpufaas = os.path.join(root, a.build, "gateway", "gpufaas")
    worker = os.path.join(root, a.build, "runtime", "worker", "gpufaas-worker")
    tmp = tempfile.mkdtemp(prefix="gf-soak-")
    log = open(os.path.join(tmp, "serve.log"), "wb")
    proc = subprocess.Popen([gpufaas, "serve", "--listen", "127.0.0.1:0", "--state-dir",
                             os.path.join(tmp, "var"), "--devices", "cpu:2",
                             "--device-memory", "64M", "--host-memory", "128M",
                             "--worker", worker, "--log-level", "warn"],
                            stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL)
    line = proc.stdout.readline().decode().strip()
    url = line.rsplit(" ", 1)[-1]
    env = dict(os.environ, GPUFAAS_SERVER=url)

    def deploy(name, sizes):
        w = os.path.join(tmp, f"{name}.safetensors")
        subprocess.run([gpufaas, "mkmodel", "mlp", "--sizes", sizes, "--name", name,
                        "--max-batch", "32", "--max-delay-us", "500", w], check=True,
                       capture_output=True)
        subprocess.run([gpufaas, "deploy", name, "--weights", w, "--manifest", w[:-12] + ".json"],
                       check=True, capture_output=True, env=env)

    fns = {"a": 64, "b": 128, "c": 256}
    for n, d in fns.items():
        deploy(n, f"{d},512,10")
    bodies = {n: json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, d],
                                         "data": [0.1] * d}]}).encode() for n, d in fns.items()}
    stop = time.monotonic() + a.minutes * 60
    lock = threading.Lock()
    c = {"requests": 0, "ok": 0, "refused": 0, "lost_requests": 0, "worker_kills": 0,
         "deploys": 0}

    def count(k):
        with lock:
            c[k] += 1

    def inferrer():
        while time.monotonic() < stop:
            n = random.choice(list(fns))
            req = urllib.request.Request(f"{url}/v2/models/{n}/infer", data=bodies[n],
                                         headers={"Content-Type": "application/json"})
            count("requests")
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    r.read()
                    count("ok")
            except urllib.error.HTTPError as e:
                e.read()
                count("refused" if e.code in (429, 503) else "lost_requests")
            except Exception:
                count("lost_requests")

    def churn():
        i = 0
        while time.monotonic() < stop:
            try:
                deploy("churn", f"{32 + (i % 4) * 16},64,4")
                count("deploys")
                subprocess.run([gpufaas, "rm", "churn"], capture_output=True, env=env)
            except subprocess.CalledProcessError:
                pass
            i += 1
            time.sleep(2)

    def killer():
        while time.monotonic() < stop:
            time.sleep(a.kill_every)
            kids = children(proc.pid)
            if kids and time.monotonic() < stop:
                try:
                    os.kill(random.choice(kids), signal.SIGKILL)
                    count("worker_kills")
                except OSError:
                    pass

    ts = [threading.Thread(target=inferrer) for _ in range(a.threads)]
    ts += [threading.Thread(target=churn), threading.Thread(target=killer)]
    for t in ts:
        t.start()
    warm_at = time.monotonic() + a.minutes * 60 / 5
    while time.monotonic() < warm_at:
        time.sleep(0.5)
    rss0 = rss_kb(proc.pid)
    with lock:
        deploys0 = c["deploys"]
    for t in ts:
        t.join()
    rss1 = rss_kb(proc.pid)
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=120)
    c["rss_start_kb"] = rss0
    c["rss_end_kb"] = rss1
    c["rss_growth_pct"] = round(100.0 * (rss1 - rss0) / max(rss0, 1), 2)
    # the growth per deploy+delete cycle after the warm-up: what a leak per version costs
    c["rss_kib_per_cycle"] = round((rss1 - rss0) / max(c["deploys"] - deploys0, 1), 2)
    c["minutes"] = a.minutes
    c["exit_status"] = rc
    for k, v in c.items():
        print(f"{k}={v}")
    return 0 if c["lost_requests"] == 0 and rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
