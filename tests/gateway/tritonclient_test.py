#!/usr/bin/env python3
"""Drive a real `gpufaas serve` with the stock Triton client, tritonclient[http].

Existing KServe v2 / Triton clients must work unchanged: health, server and
model metadata, inference with binary and with JSON tensors (both ways),
request ids, concurrent async requests, the model repository extension
(index, load, unload) and errors. The model and its expected outputs come
from the independent numpy reference (tests/functions/ref_models.py).

Run by meson with GF_GPUFAAS, GF_WORKER and GF_SOURCE_ROOT set. Exits 77
(skipped) when tritonclient is not installed (deploy/install-deps.sh --test
installs tests/requirements.txt into .venv).
"""
import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import uuid

try:
    import numpy as np
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException
except ImportError as e:  # not installed: skipped, not failed
    print(f"skipped: {e} (install tests/requirements.txt into .venv)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gfserve import serve  # noqa: E402

TOKEN = "tc-token"
CHECKS = []


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    CHECKS.append(what)


def read_safetensors(path):
    """The tensors of a safetensors file as numpy arrays (F32, F64 only)."""
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        dt = {"F32": "<f4", "F64": "<f8"}[t["dtype"]]
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype=dt).reshape(t["shape"])
    return out


def http(addr, method, path, body=None, headers=None):
    """(status, headers, body bytes) of one plain HTTP call; an HTTP error
    status is an answer, not an exception."""
    req = urllib.request.Request(f"http://{addr}{path}", data=body, method=method,
                                 headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def expect_fail(what, code, words, fn, *args, **kw):
    """fn(*args, **kw) raises InferenceServerException with status code
    (a string, as tritonclient gives it) and a message naming each of words."""
    try:
        fn(*args, **kw)
        check(False, f"{what} fails")
    except InferenceServerException as e:
        check(e.status() == code, f"{what}: {code} (got {e.status()}: {e.message()})")
        for w in words:
            check(w in e.message(), f"{what}: the message names {w!r} ({e.message()})")


def multipart(fields):
    """A multipart/form-data body from {name: (filename, bytes)}."""
    boundary = uuid.uuid4().hex
    parts = []
    for name, (filename, content) in fields.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
            f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
            + content + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def main():
    src = os.environ["GF_SOURCE_ROOT"]
    with tempfile.TemporaryDirectory(prefix="gf-tritonclient-") as tmp:
        model = os.path.join(tmp, "model")
        subprocess.run([sys.executable, os.path.join(src, "tests/functions/ref_models.py"),
                        "--kind", "mlp", "--batch", "2", "--mlp-dims", "32,24,5",
                        "--mlp-acts", "tanh,identity", "--softmax", "--out", model], check=True)
        x = read_safetensors(os.path.join(model, "inputs.safetensors"))["x"]
        want = read_safetensors(os.path.join(model, "expected.safetensors"))["y"]
        serve(tmp, TOKEN, lambda addr: run_checks(addr, model, x, want), devices="cpu:2",
              device_memory="256M", host_memory="256M")  # then SIGTERM: exit status 0
    print(f"{len(CHECKS) + 1} passed, 0 failed")
    return 0


def run_checks(addr, model, x, want):
    # deploy the way the docs say, over plain HTTP
    with open(os.path.join(model, "manifest.json"), "rb") as f:
        manifest = f.read()
    with open(os.path.join(model, "weights.safetensors"), "rb") as f:
        weights = f.read()
    body, ctype = multipart({"manifest": ("m.json", manifest),
                             "weights": ("model.safetensors", weights)})
    req = urllib.request.Request(f"http://{addr}/v1/functions", data=body, method="POST",
                                 headers={"Content-Type": ctype,
                                          "Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req) as r:
        check(r.status == 201, "deploy: 201")

    c = httpclient.InferenceServerClient(url=addr, concurrency=4)
    admin = {"Authorization": f"Bearer {TOKEN}"}
    check(c.is_server_live(), "server live")
    check(c.is_server_ready(), "server ready")
    meta = c.get_server_metadata()
    check(meta["name"] == "gpufaas", "server metadata: name")
    check({"binary_tensor_data", "model_repository"} <= set(meta["extensions"]),
          "server metadata: extensions")
    mm = c.get_model_metadata("ref-mlp")
    check(mm["name"] == "ref-mlp" and mm["versions"] == ["1"], "model metadata")
    check(mm["inputs"][0]["name"] == "x" and mm["inputs"][0]["datatype"] == "FP32"
          and mm["inputs"][0]["shape"] == [-1, 32], "model metadata: inputs")
    check(mm["outputs"][0]["name"] == "y", "model metadata: outputs")
    check(c.get_model_metadata("ref-mlp", "1")["name"] == "ref-mlp", "version metadata")
    check(c.is_model_ready("ref-mlp"), "model ready")
    check(c.is_model_ready("ref-mlp", "1"), "version ready")
    check(not c.is_model_ready("nope"), "unknown model not ready")
    check(not c.is_model_ready("ref-mlp", "2"), "unknown version not ready")

    def infer(binary_in, binary_out, request_id="", select=True, version=""):
        i = httpclient.InferInput("x", list(x.shape), "FP32")
        i.set_data_from_numpy(x, binary_data=binary_in)
        outs = [httpclient.InferRequestedOutput("y", binary_data=binary_out)] if select else None
        return c.infer("ref-mlp", [i], outputs=outs, request_id=request_id,
                       model_version=version)

    for bi in (True, False):
        for bo in (True, False):
            r = infer(bi, bo, request_id=f"r-{bi}-{bo}")
            y = r.as_numpy("y")
            check(y.dtype == np.float32 and y.shape == want.shape, f"infer {bi}/{bo}: shape")
            check(np.allclose(y, want, rtol=1e-4, atol=1e-5), f"infer {bi}/{bo}: values")
            check(r.get_response()["id"] == f"r-{bi}-{bo}", f"infer {bi}/{bo}: id")
            check(r.get_response()["model_version"] == "1", f"infer {bi}/{bo}: version")
    # no outputs named: the client asks for everything as binary
    r = infer(True, True, select=False, version="1")
    check(np.allclose(r.as_numpy("y"), want, rtol=1e-4, atol=1e-5), "infer, all outputs")
    check(r.get_output("y")["parameters"]["binary_data_size"] == want.size * 4,
          "binary_data_size")

    # concurrent requests: connections wait suspended, answers come back in any order
    i = httpclient.InferInput("x", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    pending = [c.async_infer("ref-mlp", [i], request_id=str(k)) for k in range(16)]
    for k, p in enumerate(pending):
        r = p.get_result()
        check(r.get_response()["id"] == str(k), f"async {k}: id")
        check(np.allclose(r.as_numpy("y"), want, rtol=1e-4, atol=1e-5), f"async {k}: values")

    # the model repository extension
    idx = c.get_model_repository_index()
    check(any(e["name"] == "ref-mlp" and e["state"] == "READY" for e in idx), "repository index")
    try:
        c.unload_model("ref-mlp")
        check(False, "unload without the token is refused")
    except InferenceServerException as e:
        check(e.status() == "401", "unload without the token: 401")
    c.unload_model("ref-mlp", headers=admin)
    c.load_model("ref-mlp", headers=admin)
    r = infer(True, True)
    check(np.allclose(r.as_numpy("y"), want, rtol=1e-4, atol=1e-5), "infer after unload/load")

    # errors reach the client as InferenceServerException with Triton's codes
    for model, status in (("nope", "404"), ("Bad Name", "400")):
        try:
            c.infer(model, [i])
            check(False, f"infer {model!r} fails")
        except InferenceServerException as e:
            check(e.status() == status and e.message(), f"infer {model!r}: {status}, message")
    bad = httpclient.InferInput("x", [2, 3], "FP32")
    bad.set_data_from_numpy(np.zeros((2, 3), dtype=np.float32))
    try:
        c.infer("ref-mlp", [bad])
        check(False, "wrong shape fails")
    except InferenceServerException as e:
        check(e.status() == "400" and "shape" in e.message(), "wrong shape: 400 naming the shape")
    try:
        c.load_model("nope", headers=admin)
        check(False, "loading an unknown model fails")
    except InferenceServerException as e:
        check(e.status() == "404", "load unknown: 404")
    c.close()


if __name__ == "__main__":
    sys.exit(main())
