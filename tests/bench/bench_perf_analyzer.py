#!/usr/bin/env python3
"""Triton's own perf_analyzer, unchanged, against a real `gpufaas serve`.

    ./deploy/install-deps.sh --perf     # perf_analyzer into .venv (once)
    GF_GPUFAAS=build/gateway/gpufaas GF_WORKER=build/runtime/worker/gpufaas-worker \\
      GF_SOURCE_ROOT=$PWD .venv/bin/python3 tests/bench/bench_perf_analyzer.py [--quick]

Deploys the reference MLP (32-24-5, tanh, softmax) and runs
`perf_analyzer -m ref-mlp -u HOST:PORT -i http --concurrency-range 1:8:CSTEP`,
then the same with `--shared-memory system`, and prints key=value figures:
pa_<mode>_c<N>_infer_per_sec, pa_<mode>_c<N>_p99_us (mode http or shm). Exits
77 when perf_analyzer is not installed. --quick measures a few hundred
requests per step (what the test suite runs to see that it works).
"""
import csv
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "gateway"))
from gfserve import serve  # noqa: E402
from tritonclient_test import TOKEN  # noqa: E402
from triton_tools_test import deploy, make_model  # noqa: E402


def perf_analyzer():
    exe = os.path.join(sys.prefix, "bin", "perf_analyzer")
    return exe if os.access(exe, os.X_OK) else None


def run_pa(exe, addr, tmp, mode, quick):
    out = os.path.join(tmp, f"pa-{mode}.csv")
    args = [exe, "-m", "ref-mlp", "-u", addr, "-i", "http", "-f", out]
    if quick:
        args += ["--concurrency-range", "1:8:7", "--measurement-mode", "count_windows",
                 "--measurement-request-count", "200", "--stability-percentage", "100"]
    else:
        # count windows of 2000 requests; a shared 2-core machine needs the 50% band
        args += ["--concurrency-range", "1:8", "--measurement-mode", "count_windows",
                 "--measurement-request-count", "2000", "--stability-percentage", "50",
                 "--max-trials", "20"]
    if mode == "shm":  # registering regions is an admin call: perf_analyzer sends the token
        args += ["--shared-memory", "system", "-H", f"Authorization: Bearer {TOKEN}"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
        raise AssertionError(f"perf_analyzer ({mode}) exited {p.returncode}")
    with open(out) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise AssertionError(f"perf_analyzer ({mode}) wrote no measurement")
    for r in sorted(rows, key=lambda r: int(r["Concurrency"])):  # the CSV is by throughput
        c = r["Concurrency"]
        print(f"pa_{mode}_c{c}_infer_per_sec={float(r['Inferences/Second']):.1f}")
        print(f"pa_{mode}_c{c}_p99_us={r['p99 latency']}")
    return rows


def main():
    quick = "--quick" in sys.argv
    exe = perf_analyzer()
    if exe is None:
        print("skipped: perf_analyzer is not installed (./deploy/install-deps.sh --perf)")
        return 77
    modes = [m for m in ("http", "shm") if f"--no-{m}" not in sys.argv]
    with tempfile.TemporaryDirectory(prefix="gf-perfanalyzer-") as tmp:
        model = make_model(tmp, "model", "32,24,5")

        def body(addr):
            st, _, b = deploy(addr, model)
            if st != 201:
                raise AssertionError(f"deploy: {st} {b[:200]!r}")
            print("pa_server_devices=cpu:2")
            for mode in modes:
                run_pa(exe, addr, tmp, mode, quick)

        serve(tmp, TOKEN, body, devices="cpu:2", device_memory="256M", host_memory="256M")
    print(f"{len(modes)} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
