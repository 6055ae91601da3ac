#!/usr/bin/env python3
"""Copies of tensor bytes per request, in the gateway and in its worker (issue 16).

Starts a real `gpufaas serve` (one cpu worker), deploys a small mlp (32 -> 24
-> 5, FP32) and sends warm requests one at a time with the stock Triton client
(tritonclient[http]): binary inputs and binary outputs, then JSON both ways.
The copies are read from /metrics (gpufaas_tensor_copied_bytes_total, core/
copies.h: user-space passes writing a tensor's values into another buffer;
H2D/D2H and the kernel's socket copies are not counted), before and after,
divided by the tensor bytes sent and received:

  copies_in, copies_out                   gateway + worker, binary requests
  copies_in_gateway, copies_in_worker     the same, apart
  copies_out_gateway, copies_out_worker
  copies_in_json, copies_out_json         gateway + worker, JSON requests
  requested_copies_out_worker,            a request naming one output of three
  requested_copies_out_gateway            (an ONNX graph): copies of that output's
                                          bytes; the others are neither copied
                                          back from the device nor sent
  shm_copies_in_gateway, ..._worker       input and output in system shared memory
  shm_copies_out_gateway, ..._worker      (tritonclient.utils.shared_memory): the
                                          worker reads and writes the region itself
  refused_once                            1: a request that does not match the
                                          manifest gets one 400 with the one
                                          message, from the gateway, and nothing
                                          reaches the worker

Issue 16's target: at most 1 each way in the gateway, 0 in the worker.

  bench_copies.py [--check] [--requests N]

--check (the test http_copies) asserts today's figures exactly, so a change
that adds or removes a copy must say so here and in docs/performance.md.
Run with GF_GPUFAAS, GF_WORKER and GF_SOURCE_ROOT set (meson does). Exits 77
(skipped) without tritonclient.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

try:
    import numpy as np
    import tritonclient.http as httpclient
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # not installed: skipped, not failed
    print(f"skipped: {e} (install tests/requirements.txt into .venv)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gateway"))
from gfserve import serve  # noqa: E402

TOKEN = "copies-token"
IN, OUT, WIDE = 32, 5, 256
# Today's copies per request (see docs/performance.md): in the gateway, the
# body's accumulation (a binary input is a slice of the body, the INFER frame
# is written with writev over it); none in the worker (frames are read
# straight into their payload, the RESULT written with writev from the
# outputs); back in the gateway none (the outputs are slices of the RESULT
# payload, the response an iovec over them). JSON adds the parse in and the
# render out.
EXPECT = {"copies_in_gateway": 1, "copies_in_worker": 0,
          "copies_out_worker": 0, "copies_out_gateway": 0}
EXPECT_JSON = {"copies_in_gateway": 2, "copies_in_worker": 0,
               "copies_out_worker": 0, "copies_out_gateway": 1}
# A request naming one output of three: only its bytes are copied back and
# sent (counted against that output's bytes, as the copies above).
EXPECT_REQUESTED = {"requested_copies_out_worker": 0, "requested_copies_out_gateway": 0}
# Input and output in system shared memory: none at all (the worker's H2D
# reads the region, its D2H writes it; no byte crosses the socket).
EXPECT_SHM = {"shm_copies_in_gateway": 0, "shm_copies_in_worker": 0,
              "shm_copies_out_worker": 0, "shm_copies_out_gateway": 0}


def metrics(addr):
    with urllib.request.urlopen(f"http://{addr}/metrics") as r:
        text = r.read().decode()
    out = {}
    for m in re.finditer(r'^gpufaas_tensor_copied_bytes_total\{process="(\w+)",'
                         r'direction="(in|out)"\} (\S+)$', text, re.M):
        out[(m.group(1), m.group(2))] = float(m.group(3))
    return out


def settled(addr):
    """/metrics once the worker's figures (its STATS, every second) are current."""
    time.sleep(2.2)
    return metrics(addr)


def post_files(addr, fields):
    """POST /v1/functions with multipart fields (name, filename, bytes); the status."""
    boundary = uuid.uuid4().hex
    body = b""
    for name, fn, content in fields:
        body += (f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
                 f'filename="{fn}"\r\nContent-Type: application/octet-stream\r\n\r\n'
                 ).encode() + content + b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    req = urllib.request.Request(
        f"http://{addr}/v1/functions", data=body, method="POST",
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}",
                 "Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req) as r:
        return r.status


def deploy(addr, model):
    with open(os.path.join(model, "manifest.json"), "rb") as f:
        manifest = f.read()
    with open(os.path.join(model, "weights.safetensors"), "rb") as f:
        weights = f.read()
    status = post_files(addr, (("manifest", "m.json", manifest),
                               ("weights", "w.safetensors", weights)))
    assert status == 201, status


def per_request(addr, c, n, binary):
    x = np.linspace(-1, 1, IN, dtype=np.float32).reshape(1, IN)
    before = settled(addr)
    for _ in range(n):
        i = httpclient.InferInput("x", [1, IN], "FP32")
        i.set_data_from_numpy(x, binary_data=binary)
        o = httpclient.InferRequestedOutput("y", binary_data=binary)
        r = c.infer("ref-mlp", [i], outputs=[o])
        assert r.as_numpy("y").shape == (1, OUT)
    after = settled(addr)

    def d(proc, way):
        return after.get((proc, way), 0) - before.get((proc, way), 0)
    nin, nout = n * IN * 4, n * OUT * 4
    return {"copies_in_gateway": d("gateway", "in") / nin,
            "copies_in_worker": d("worker0", "in") / nin,
            "copies_out_worker": d("worker0", "out") / nout,
            "copies_out_gateway": d("gateway", "out") / nout}


def multi_model():
    """x [batch, 32] -> h = x W (256 wide), y = relu(h), z = h + 1: three outputs."""
    w = np.linspace(-1, 1, IN * WIDE, dtype=np.float32).reshape(IN, WIDE)
    one = np.ones(WIDE, np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["y"]),
         helper.make_node("Add", ["h", "one"], ["z"])], "multi",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", IN])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", WIDE])
         for n in ("h", "y", "z")],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(one, "one")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return m.SerializeToString(), w


def requested_outputs(addr, c, n, fig):
    """Only the outputs a request names are copied back and shipped: one of three."""
    data, w = multi_model()
    status = post_files(addr, (("model", "multi.onnx", data), ("name", "name", b"multi")))
    assert status == 201, status
    x = np.linspace(-1, 1, IN, dtype=np.float32).reshape(1, IN)
    want = np.maximum(x @ w, 0)

    def ask(outputs):
        i = httpclient.InferInput("x", [1, IN], "FP32")
        i.set_data_from_numpy(x, binary_data=True)
        return c.infer("multi", [i], outputs=[httpclient.InferRequestedOutput(o, binary_data=True)
                                              for o in outputs])
    r = ask(["y", "z"])  # warm; two of three
    names = [o["name"] for o in r.get_response()["outputs"]]
    assert names == ["y", "z"], names
    before = settled(addr)
    for _ in range(n):
        r = ask(["y"])
        names = [o["name"] for o in r.get_response()["outputs"]]
        assert names == ["y"], f"asked for y, got {names}"
        got = r.as_numpy("y")
        assert got.shape == (1, WIDE) and np.abs(got - want).max() < 1e-4 * np.abs(want).max()
    after = settled(addr)
    nout = n * WIDE * 4  # the bytes of y alone
    fig["requested_copies_out_worker"] = (after[("worker0", "out")] -
                                          before[("worker0", "out")]) / nout
    fig["requested_copies_out_gateway"] = (after[("gateway", "out")] -
                                           before[("gateway", "out")]) / nout


def refused_once(addr, c, fig):
    """A request that does not match the manifest is refused by the gateway, the one place
    that checks a request against its manifest: one 400 with the one message (the worker and
    the function runtime do not derive the manifest's rules again), and nothing reaches the
    worker."""
    def count_400():
        with urllib.request.urlopen(f"http://{addr}/metrics") as r:
            text = r.read().decode()
        m = re.search(r'^gpufaas_requests_total\{function="ref-mlp",version="1",code="400"\} '
                      r'(\S+)$', text, re.M)
        return float(m.group(1)) if m else 0.0
    before, copied = count_400(), settled(addr)
    i = httpclient.InferInput("x", [1, IN - 1], "FP32")
    i.set_data_from_numpy(np.zeros((1, IN - 1), np.float32), binary_data=True)
    try:
        c.infer("ref-mlp", [i])
        msg = "accepted"
    except Exception as e:  # InferenceServerException: the server's message
        msg = str(e)
    want = f"input 'x': shape [1, {IN - 1}] does not match [-1, {IN}]"
    fig["refused_once"] = int(msg.count(want) == 1 and msg.count("does not match") == 1 and
                              count_400() - before == 1 and
                              settled(addr).get(("worker0", "in")) == copied.get(("worker0", "in")))
    if not fig["refused_once"]:
        print(f"refused_once: the answer was {msg!r}")


def shm_requests(addr, c, n, fig):
    """Input and output in system shared memory, registered as tritonclient does."""
    import tritonclient.utils.shared_memory as shm
    admin = {"Authorization": f"Bearer {TOKEN}"}
    x = np.linspace(-1, 1, IN, dtype=np.float32).reshape(1, IN)
    key_in, key_out = f"/gf_copies_in_{os.getpid()}", f"/gf_copies_out_{os.getpid()}"
    h_in = shm.create_shared_memory_region("cin", key_in, x.nbytes)
    h_out = shm.create_shared_memory_region("cout", key_out, OUT * 4)
    try:
        shm.set_shared_memory_region(h_in, [x])
        c.register_system_shared_memory("cin", key_in, x.nbytes, headers=admin)
        c.register_system_shared_memory("cout", key_out, OUT * 4, headers=admin)
        i = httpclient.InferInput("x", [1, IN], "FP32")
        i.set_shared_memory("cin", x.nbytes)
        o = httpclient.InferRequestedOutput("y")
        o.set_shared_memory("cout", OUT * 4)
        r = c.infer("ref-mlp", [i], outputs=[o])  # warm, and checked below
        ref = shm.get_contents_as_numpy(h_out, np.float32, [1, OUT]).copy()
        out = r.get_output("y")
        assert "data" not in out and "parameters" not in out, f"no data for shm: {out}"
        j = httpclient.InferInput("x", [1, IN], "FP32")
        j.set_data_from_numpy(x, binary_data=True)
        inline = c.infer("ref-mlp", [j]).as_numpy("y")
        assert np.allclose(ref, inline, rtol=1e-6, atol=1e-7), (ref, inline)
        before = settled(addr)
        for _ in range(n):
            c.infer("ref-mlp", [i], outputs=[o])
        after = settled(addr)
        got = shm.get_contents_as_numpy(h_out, np.float32, [1, OUT])
        assert np.allclose(got, inline, rtol=1e-6, atol=1e-7)
        c.unregister_system_shared_memory(headers=admin)
    finally:
        shm.destroy_shared_memory_region(h_in)
        shm.destroy_shared_memory_region(h_out)

    def d(proc, way):
        return after.get((proc, way), 0) - before.get((proc, way), 0)
    fig["shm_copies_in_gateway"] = d("gateway", "in") / (n * IN * 4)
    fig["shm_copies_in_worker"] = d("worker0", "in") / (n * IN * 4)
    fig["shm_copies_out_worker"] = d("worker0", "out") / (n * OUT * 4)
    fig["shm_copies_out_gateway"] = d("gateway", "out") / (n * OUT * 4)


def run(addr, model, a, fig):
    deploy(addr, model)
    refused_once(addr, httpclient.InferenceServerClient(url=addr), fig)
    requested_outputs(addr, httpclient.InferenceServerClient(url=addr), a.requests, fig)
    c = httpclient.InferenceServerClient(url=addr)
    per_request(addr, c, 2, True)  # warm: the model is loaded
    b = per_request(addr, c, a.requests, True)
    j = per_request(addr, c, a.requests, False)
    shm_requests(addr, c, a.requests, fig)
    fig.update(b)
    fig["copies_in"] = b["copies_in_gateway"] + b["copies_in_worker"]
    fig["copies_out"] = b["copies_out_gateway"] + b["copies_out_worker"]
    fig["copies_in_json"] = j["copies_in_gateway"] + j["copies_in_worker"]
    fig["copies_out_json"] = j["copies_out_gateway"] + j["copies_out_worker"]
    for k, v in b.items():
        fig[f"{k}_json"] = j[k]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--requests", type=int, default=200)
    a = ap.parse_args()
    src = os.environ["GF_SOURCE_ROOT"]
    fig = {}
    with tempfile.TemporaryDirectory(prefix="gf-copies-") as tmp:
        model = os.path.join(tmp, "model")
        subprocess.run([sys.executable, os.path.join(src, "tests/functions/ref_models.py"),
                        "--kind", "mlp", "--mlp-dims", f"{IN},24,{OUT}",
                        "--mlp-acts", "tanh,identity", "--out", model], check=True,
                       stdout=subprocess.DEVNULL)
        serve(tmp, TOKEN, lambda addr: run(addr, model, a, fig), devices="cpu:1",
              device_memory="256M", host_memory="256M")
    for k in ("copies_in", "copies_out", "copies_in_gateway", "copies_in_worker",
              "copies_out_gateway", "copies_out_worker", "copies_in_json", "copies_out_json",
              "requested_copies_out_worker", "requested_copies_out_gateway",
              "shm_copies_in_gateway", "shm_copies_in_worker", "shm_copies_out_worker",
              "shm_copies_out_gateway", "refused_once"):
        print(f"{k}={fig[k]:g}")
    if a.check:
        bad = [f"{k}: {fig[k]:g}, expected {v}" for k, v in EXPECT.items() if fig[k] != v]
        bad += [f"{k}_json: {fig[k + '_json']:g}, expected {v}" for k, v in EXPECT_JSON.items()
                if fig[k + "_json"] != v]
        bad += [f"{k}: {fig[k]:g}, expected {v}" for k, v in
                list(EXPECT_REQUESTED.items()) + list(EXPECT_SHM.items()) if fig[k] != v]
        if fig["refused_once"] != 1:
            bad.append("a request that does not match the manifest was not refused once, by "
                       "the gateway, with the one message")
        if bad:
            print("FAILED: " + "; ".join(bad))
            return 1
        print("copies per request as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
