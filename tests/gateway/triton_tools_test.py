#!/usr/bin/env python3
"""Triton's tools against a real `gpufaas serve`, with the stock tritonclient[http].

The parts of Triton's HTTP protocol its clients and tools use beyond
inference (issue 17): the model configuration, the statistics extension,
compressed bodies both ways, model states (unload makes a model UNAVAILABLE
until a load; a model that can never fit is refused at deploy), and that
every bad input gets a 4xx with a JSON error while the server keeps serving.

Run by meson with GF_GPUFAAS, GF_WORKER and GF_SOURCE_ROOT set; exits 77
(skipped) when tritonclient is not installed.
"""
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gfserve import serve  # noqa: E402
from tritonclient_test import (TOKEN, CHECKS, check, expect_fail, http,  # noqa: E402
                               multipart, read_safetensors)

try:
    import numpy as np
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException
except ImportError as e:
    print(f"skipped: {e} (install tests/requirements.txt into .venv)")
    sys.exit(77)

ADMIN = {"Authorization": f"Bearer {TOKEN}"}
ADDR = []



def json_error(status, body, code, words, what):
    """A 4xx with a JSON {"error": ...} naming the problem."""
    check(status == code, f"{what}: {code} (got {status} {body[:200]!r})")
    msg = json.loads(body)["error"]
    for w in words:
        check(w in msg, f"{what}: the message names {w!r} ({msg!r})")


def deploy(addr, model_dir, manifest=None):
    if manifest is None:
        with open(os.path.join(model_dir, "manifest.json"), "rb") as f:
            manifest = f.read()
    with open(os.path.join(model_dir, "weights.safetensors"), "rb") as f:
        weights = f.read()
    body, ctype = multipart({"manifest": ("m.json", manifest),
                             "weights": ("model.safetensors", weights)})
    return http(addr, "POST", "/v1/functions", body, dict(ADMIN, **{"Content-Type": ctype}))


def make_model(tmp, name, dims, batch=2):
    out = os.path.join(tmp, name)
    subprocess.run([sys.executable,
                    os.path.join(os.environ["GF_SOURCE_ROOT"], "tests/functions/ref_models.py"),
                    "--kind", "mlp", "--batch", str(batch), "--mlp-dims", dims,
                    "--mlp-acts", "tanh,identity", "--softmax", "--out", out], check=True)
    return out


def check_config(c, addr):
    cfg = c.get_model_config("ref-mlp")
    check(cfg["name"] == "ref-mlp" and cfg["platform"] == "gpufaas_mlp"
          and cfg["backend"] == "gpufaas", "config: name, platform, backend")
    check(cfg["max_batch_size"] == 64, "config: max_batch_size from the manifest")
    check(cfg["input"] == [{"name": "x", "data_type": "TYPE_FP32", "dims": [32],
                            "is_shape_tensor": False, "format": "FORMAT_NONE",
                            "allow_ragged_batch": False, "optional": False}],
          f"config: input without the batch dim ({cfg['input']})")
    check(cfg["output"][0]["name"] == "y" and cfg["output"][0]["dims"] == [5]
          and cfg["output"][0]["data_type"] == "TYPE_FP32", "config: output")
    check(cfg["dynamic_batching"]["max_queue_delay_microseconds"] == 0, "config: batching")
    check(cfg["instance_group"][0]["count"] == 2 and
          cfg["instance_group"][0]["kind"] == "KIND_CPU", "config: one instance per worker")
    check(cfg["version_policy"] == {"latest": {"num_versions": 1}}, "config: version policy")
    check(json.loads(cfg["parameters"]["config"]["string_value"])["softmax"] is True,
          "config: the kind's config under parameters")
    check(c.get_model_config("ref-mlp", "1")["name"] == "ref-mlp", "config of version 1")
    for model, ver, code in (("nope", "", "404"), ("ref-mlp", "7", "404")):
        try:
            c.get_model_config(model, ver)
            check(False, f"config of {model}/{ver} fails")
        except InferenceServerException as e:
            check(e.status() == code and e.message(), f"config of {model}/{ver}: {code}")


def check_stats(c, x, n_requests):
    # the workers' LOADED events travel apart from the answers: wait for them
    deadline = time.monotonic() + 10
    while True:
        st = c.get_inference_statistics("ref-mlp")["model_stats"]
        if st[0]["gpufaas"]["swap_in"]["count"] >= 1 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    check(len(st) == 1 and st[0]["name"] == "ref-mlp" and st[0]["version"] == "1",
          "stats: one entry for the one version")
    s = st[0]
    rows = x.shape[0]
    check(s["inference_count"] == n_requests * rows,
          f"stats: inference_count counts rows ({s['inference_count']})")
    inf = s["inference_stats"]
    check(inf["success"]["count"] == n_requests and inf["success"]["ns"] > 0, "stats: success")
    check(inf["fail"]["count"] == 0, "stats: no failure yet")
    for ph in ("queue", "compute_input", "compute_infer", "compute_output"):
        check(inf[ph]["count"] == n_requests, f"stats: {ph} counted per request")
    check(inf["compute_infer"]["ns"] > 0, "stats: compute_infer timed")
    check(1 <= s["execution_count"] <= n_requests, "stats: execution_count")
    bs = {b["batch_size"]: b for b in s["batch_stats"]}
    check(sum(b["compute_infer"]["count"] for b in bs.values()) == s["execution_count"],
          "stats: batch_stats add up to execution_count")
    check(s["last_inference"] > 1.6e12, "stats: last_inference in ms since the epoch")
    ours = s["gpufaas"]
    check(ours["swap_in"]["count"] >= 1 and ours["swap_in_bytes"] > 0,
          "stats: swap-ins and their bytes")
    check(any(t["tier"] == "device" for t in ours["tiers"]), "stats: the current tier")
    check("cold_starts" in ours, "stats: cold starts")
    every = c.get_inference_statistics()["model_stats"]
    check(any(e["name"] == "ref-mlp" for e in every), "stats of every model")
    try:
        c.get_inference_statistics("nope")
        check(False, "stats of an unknown model fail")
    except InferenceServerException as e:
        check(e.status() == "404", "stats of an unknown model: 404")


def check_compression(c, addr, x, want):
    i = httpclient.InferInput("x", list(x.shape), "FP32")
    i.set_data_from_numpy(x, binary_data=True)
    for req_alg in (None, "gzip", "deflate"):
        for resp_alg in (None, "gzip", "deflate"):
            r = c.infer("ref-mlp", [i], request_compression_algorithm=req_alg,
                        response_compression_algorithm=resp_alg)
            check(np.allclose(r.as_numpy("y"), want, rtol=1e-4, atol=1e-5),
                  f"compressed {req_alg}/{resp_alg}: values")
    j = httpclient.InferInput("x", list(x.shape), "FP32")
    j.set_data_from_numpy(x, binary_data=False)
    r = c.infer("ref-mlp", [j], request_compression_algorithm="gzip",
                response_compression_algorithm="gzip")
    check(np.allclose(r.as_numpy("y"), want, rtol=1e-4, atol=1e-5), "compressed JSON body")
    # a response is compressed only when asked, and says so
    body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape),
                                   "data": x.flatten().tolist()}]}).encode()
    st, h, b = http(addr, "POST", "/v2/models/ref-mlp/infer", gzip.compress(body),
                    {"Content-Encoding": "gzip", "Accept-Encoding": "gzip"})
    check(st == 200 and h.get("Content-Encoding") == "gzip", "gzip response announced")
    check(json.loads(gzip.decompress(b))["outputs"][0]["name"] == "y", "gzip response reads")
    st, h, b = http(addr, "POST", "/v2/models/ref-mlp/infer", zlib.compress(body),
                    {"Content-Encoding": "deflate"})
    check(st == 200 and h.get("Content-Encoding") is None, "no Accept-Encoding: plain reply")
    # bad streams: 4xx with a JSON error, and the server keeps serving
    st, _, b = http(addr, "POST", "/v2/models/ref-mlp/infer", gzip.compress(body)[:-12],
                    {"Content-Encoding": "gzip"})
    json_error(st, b, 400, ["gzip"], "truncated gzip")
    bad = bytearray(gzip.compress(body))
    bad[len(bad) - 8] ^= 0xFF  # the CRC-32 no longer matches
    st, _, b = http(addr, "POST", "/v2/models/ref-mlp/infer", bytes(bad),
                    {"Content-Encoding": "gzip"})
    json_error(st, b, 400, ["corrupt"], "corrupt gzip")
    st, _, b = http(addr, "POST", "/v2/models/ref-mlp/infer", body, {"Content-Encoding": "br"})
    json_error(st, b, 415, ["br"], "unknown coding")
    bomb = gzip.compress(b"\0" * (80 << 20), compresslevel=9)  # 80 MiB > --max-body 64M
    st, _, b = http(addr, "POST", "/v2/models/ref-mlp/infer", bomb, {"Content-Encoding": "gzip"})
    json_error(st, b, 413, ["max-body"], "a zip bomb")
    r = c.infer("ref-mlp", [i])
    check(np.allclose(r.as_numpy("y"), want, rtol=1e-4, atol=1e-5), "serving after bad bodies")


def check_states(c, addr, x, want):
    i = httpclient.InferInput("x", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    c.unload_model("ref-mlp", headers=ADMIN)
    check(not c.is_model_ready("ref-mlp"), "unloaded: not ready")
    check(not c.is_model_ready("ref-mlp", "1"), "unloaded: version not ready")
    idx = {e["name"]: e for e in c.get_model_repository_index()}
    check(idx["ref-mlp"]["state"] == "UNAVAILABLE" and "unloaded" in idx["ref-mlp"]["reason"],
          f"unloaded: UNAVAILABLE with a reason in the index ({idx['ref-mlp']})")
    st, _, b = http(addr, "POST", "/v2/repository/index", b'{"ready": true}')
    check(all(e["name"] != "ref-mlp" for e in json.loads(b)), "ready index leaves it out")
    try:
        c.infer("ref-mlp", [i])
        check(False, "infer on an unloaded model fails")
    except InferenceServerException as e:
        check(e.status() in ("400", "503") and "unloaded" in e.message(),
              f"unloaded: infer {e.status()} naming the reason ({e.message()})")
    c.load_model("ref-mlp", headers=ADMIN)
    check(c.is_model_ready("ref-mlp"), "loaded again: ready")
    r = c.infer("ref-mlp", [i])
    check(np.allclose(r.as_numpy("y"), want, rtol=1e-4, atol=1e-5), "loaded again: infers")
    idx = {e["name"]: e for e in c.get_model_repository_index()}
    check(idx["ref-mlp"]["state"] == "READY" and idx["ref-mlp"]["reason"] == "",
          "loaded again: READY in the index")


def check_logging(c, addr):
    ls = c.get_log_settings()
    check(ls["log_info"] is True and ls["log_verbose_level"] == 0 and ls["log_file"] == "",
          f"logging: the settings ({ls})")
    ls = c.update_log_settings({"log_verbose_level": 1}, headers=ADMIN)
    check(ls["log_verbose_level"] == 1 and ls["log_info"] is True, "logging: verbose 1")
    ls = c.update_log_settings({"log_verbose_level": 0, "log_info": False}, headers=ADMIN)
    check(ls["log_info"] is False and ls["log_warning"] is True, "logging: warnings only")
    check(c.get_log_settings() == ls, "logging: read back")
    for body, code, words in ((b'{"log_colour": true}', 400, ["log_colour"]),
                              (b'{"log_file": "/tmp/x.log"}', 400, ["log_file"]),
                              (b'{"log_info": 1}', 400, ["log_info"]),
                              (b'{"log_verbose_level": -1}', 400, ["log_verbose_level"]),
                              (b'[1]', 400, ["object"])):
        st, _, b = http(addr, "POST", "/v2/logging", body, ADMIN)
        json_error(st, b, code, words, f"logging {body!r}")
    st, _, b = http(addr, "POST", "/v2/logging", b'{"log_info": true}')
    json_error(st, b, 401, ["admin token"], "logging without the token")
    check(c.update_log_settings({"log_info": True}, headers=ADMIN)["log_info"] is True,
          "logging: info again")


def check_load(c, model, x, want):
    """load_model(config=..., files=...) deploys through the v2 API alone."""
    i = httpclient.InferInput("x", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    # both ways: the config we answer, loaded back, is the same model
    cfg = c.get_model_config("ref-mlp")
    c.load_model("ref-mlp", config=json.dumps(cfg), headers=ADMIN)
    again = c.get_model_config("ref-mlp")
    # the same weights and manifest: an idempotent redeploy, no new version
    check(again["parameters"]["version"]["string_value"] == "1",
          f"config round trip: still version 1 ({again['parameters']['version']})")
    del cfg["parameters"]["version"], again["parameters"]["version"]
    check(again == cfg, "config round trip: the same configuration")
    # a config overrides batching settings
    cfg["max_batch_size"] = 16
    cfg["dynamic_batching"]["max_queue_delay_microseconds"] = 1500
    c.load_model("ref-mlp", config=json.dumps(cfg), headers=ADMIN)
    now = c.get_model_config("ref-mlp")
    check(now["max_batch_size"] == 16 and
          now["dynamic_batching"]["max_queue_delay_microseconds"] == 1500,
          "load with a config: batching settings applied")
    r = c.infer("ref-mlp", [i])
    check(np.allclose(r.as_numpy("y"), want, rtol=1e-4, atol=1e-5), "after the config: infers")
    # a new model through v2 alone: a config and its weights
    with open(os.path.join(model, "weights.safetensors"), "rb") as f:
        weights = f.read()
    new = {k: cfg[k] for k in ("platform", "max_batch_size", "input", "output", "parameters")}
    new["name"] = "v2-mlp"
    c.load_model("v2-mlp", config=json.dumps(new), files={"file:1/model.safetensors": weights},
                 headers=ADMIN)
    check(c.is_model_ready("v2-mlp"), "v2 deploy: ready")
    r = c.infer("v2-mlp", [i])
    check(np.allclose(r.as_numpy("y"), want, rtol=1e-4, atol=1e-5), "v2 deploy: infers")
    # an ONNX model through v2 alone: its inputs and outputs come from the graph
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        onnx = None
    if onnx is not None:
        W = (np.arange(12, dtype=np.float32).reshape(4, 3) - 5) / 10
        g = helper.make_graph(
            [helper.make_node("MatMul", ["in0", "W"], ["out0"])], "g",
            [helper.make_tensor_value_info("in0", TensorProto.FLOAT, ["batch", 4])],
            [helper.make_tensor_value_info("out0", TensorProto.FLOAT, ["batch", 3])],
            [numpy_helper.from_array(W, "W")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        c.load_model("v2-onnx", files={"file:1/model.onnx": m.SerializeToString()},
                     config=json.dumps({"max_batch_size": 8}), headers=ADMIN)
        oc = c.get_model_config("v2-onnx")
        check(oc["platform"] == "gpufaas_onnx" and oc["max_batch_size"] == 8,
              f"onnx v2 deploy: platform and batch ({oc['platform']}, {oc['max_batch_size']})")
        check(oc["input"][0]["name"] == "in0" and oc["input"][0]["dims"] == [4] and
              oc["output"][0]["name"] == "out0" and oc["output"][0]["dims"] == [3],
              f"onnx v2 deploy: derived input and output in the config ({oc['input']})")
        a = np.arange(8, dtype=np.float32).reshape(2, 4)
        j = httpclient.InferInput("in0", [2, 4], "FP32")
        j.set_data_from_numpy(a)
        r = c.infer("v2-onnx", [j])
        check(np.allclose(r.as_numpy("out0"), a @ W, rtol=1e-5, atol=1e-5),
              "onnx v2 deploy: infers")
    # bad loads: a 4xx naming the problem
    bad = dict(cfg, instance_group_count=2)
    expect_fail("a config naming an unknown field", "400", ["instance_group_count"],
                c.load_model, "ref-mlp", config=json.dumps(bad), headers=ADMIN)
    expect_fail("a config that is not JSON", "400", ["not JSON"],
                c.load_model, "ref-mlp", config="{max_batch_size: 2", headers=ADMIN)
    expect_fail("an unknown data type", "400", ["TYPE_FP33"], c.load_model, "ref-mlp",
                config=json.dumps(dict(cfg, input=[dict(cfg["input"][0],
                                                        data_type="TYPE_FP32".replace("2", "3"))])),
                headers=ADMIN)
    expect_fail("a config alone for an unknown model", "404", ["not deployed"],
                c.load_model, "nope", config=json.dumps(new), headers=ADMIN)
    expect_fail("a file of no known kind", "400", ["safetensors", "onnx"], c.load_model,
                "v2-mlp", files={"file:1/model.pt": b"x"}, headers=ADMIN)
    expect_fail("weights that do not fit the manifest", "400", [], c.load_model, "v2-mlp",
                files={"file:1/model.safetensors": weights[:100]}, headers=ADMIN)
    st, _, b = http(ADDR[0], "POST", "/v2/repository/models/v2-mlp/load",
                    b'{"parameters": {"file:1/model.safetensors": "@@not base64@@"}}', ADMIN)
    json_error(st, b, 400, ["base64"], "a file that is not base64")
    check(c.is_model_ready("v2-mlp") and c.is_model_ready("ref-mlp"), "still serving")


def check_shm(c, addr, x, want):
    """Inputs and outputs in system shared memory (tritonclient.utils.shared_memory)."""
    import tritonclient.utils.shared_memory as shm
    key_in, key_out = f"/gf_in_{os.getpid()}", f"/gf_out_{os.getpid()}"
    h_in = shm.create_shared_memory_region("in", key_in, x.nbytes + 64)
    h_out = shm.create_shared_memory_region("out", key_out, want.size * 4 + 64)
    try:
        shm.set_shared_memory_region(h_in, [x], offset=64)
        c.register_system_shared_memory("in", key_in, x.nbytes + 64, headers=ADMIN)
        c.register_system_shared_memory("out", key_out, want.size * 4 + 64, headers=ADMIN)
        st = {e["name"]: e for e in c.get_system_shared_memory_status()}
        check(st["in"]["key"] == key_in and int(st["in"]["byte_size"]) == x.nbytes + 64,
              f"shm: status ({st})")
        i = httpclient.InferInput("x", list(x.shape), "FP32")
        i.set_shared_memory("in", x.nbytes, offset=64)
        o = httpclient.InferRequestedOutput("y")
        o.set_shared_memory("out", want.size * 4, offset=0)
        r = c.infer("ref-mlp", [i], outputs=[o])
        out = r.get_output("y")
        check(out["shape"] == list(want.shape) and "data" not in out,
              f"shm: the output comes without data ({out})")
        y = shm.get_contents_as_numpy(h_out, np.float32, list(want.shape))
        check(np.allclose(y, want, rtol=1e-4, atol=1e-5), "shm: input read and output written")
        # mixed: input from shm, output over HTTP
        r = c.infer("ref-mlp", [i])
        check(np.allclose(r.as_numpy("y"), want, rtol=1e-4, atol=1e-5), "shm input, HTTP output")
        # bad input: a 4xx naming the problem, and the server keeps serving
        def bad_infer(region, size, offset, what, words, code="400"):
            j = httpclient.InferInput("x", list(x.shape), "FP32")
            j.set_shared_memory(region, size, offset=offset)
            expect_fail(what, code, words, c.infer, "ref-mlp", [j])
        # HTTP input, output into shm
        r = c.infer("ref-mlp", [_inp(x)], outputs=[o])
        y = shm.get_contents_as_numpy(h_out, np.float32, list(want.shape))
        check(np.allclose(y, want, rtol=1e-4, atol=1e-5), "HTTP input, shm output")
        check_shm_concurrent(addr, x, want)
        check_shm_gone(c, x, want)
        bad_infer("nope", x.nbytes, 0, "shm: unknown region", ["nope", "registered"])
        bad_infer("in", x.nbytes, 128, "shm: offset past the end", ["past the end", "in"])
        bad_infer("in", x.nbytes - 4, 0, "shm: wrong byte size", ["shared_memory_byte_size"])
        bad_infer("in", x.nbytes, 2**64 - 8, "shm: offset overflow", ["past the end"])
        small = httpclient.InferRequestedOutput("y")
        small.set_shared_memory("out", 8)
        expect_fail("shm: output larger than its span", "400", ["shared_memory_byte_size"],
                    c.infer, "ref-mlp", [i], outputs=[small])
        expect_fail("shm: register twice", "400", ["already registered"],
                    c.register_system_shared_memory, "in", key_in, 16, headers=ADMIN)
        expect_fail("shm: a key that does not exist", "400", ["/gf_no_such_key"],
                    c.register_system_shared_memory, "x2", "/gf_no_such_key", 16, headers=ADMIN)
        expect_fail("shm: a range past the object", "400", ["past the end"],
                    c.register_system_shared_memory, "x3", key_in, 1 << 30, headers=ADMIN)
        expect_fail("shm: unregister unknown", "404", ["nope"],
                    c.unregister_system_shared_memory, "nope", headers=ADMIN)
        expect_fail("cuda shm: not supported", "400", ["not supported"],
                    c.get_cuda_shared_memory_status)
        st, _, b = http(addr, "POST", "/v2/systemsharedmemory/region/bad%20name/register",
                        b'{"key": "/x", "byte_size": 4}', ADMIN)
        check(400 <= st < 500, "shm: a bad region name is a 4xx")
        c.unregister_system_shared_memory("in", headers=ADMIN)
        bad_infer("in", x.nbytes, 64, "shm: unregistered region", ["in", "registered"])
        c.unregister_system_shared_memory(headers=ADMIN)
        check(c.get_system_shared_memory_status() == [], "shm: every region unregistered")
        r = c.infer("ref-mlp", [_inp(x)])
        check(np.allclose(r.as_numpy("y"), want, rtol=1e-4, atol=1e-5), "shm: serving after")
    finally:
        shm.destroy_shared_memory_region(h_in)
        shm.destroy_shared_memory_region(h_out)


def check_shm_concurrent(addr, x, want):
    """Requests in flight together, each reading and writing its own spans of
    one region pair: each gets its own answer (never batched together), and an
    unregister while some are in flight answers them or refuses them cleanly."""
    import tritonclient.utils.shared_memory as shm
    n, row = 6, x.nbytes
    key = f"/gf_cc_{os.getpid()}"
    xs = [x * (k + 1) for k in range(n)]
    h = shm.create_shared_memory_region("cc", key, 2 * n * row + n * want.nbytes)
    c = httpclient.InferenceServerClient(url=addr, concurrency=n)
    try:
        for k in range(n):
            shm.set_shared_memory_region(h, [xs[k]], offset=k * row)
        c.register_system_shared_memory("cc", key, 2 * n * row + n * want.nbytes, headers=ADMIN)

        def send(k):
            i = httpclient.InferInput("x", list(x.shape), "FP32")
            i.set_shared_memory("cc", row, offset=k * row)
            o = httpclient.InferRequestedOutput("y")
            o.set_shared_memory("cc", want.nbytes, offset=2 * n * row + k * want.nbytes)
            return c.async_infer("ref-mlp", [i], outputs=[o])
        refs = [c.infer("ref-mlp", [_inp(xs[k])]).as_numpy("y") for k in range(n)]
        for f in [send(k) for k in range(n)]:
            f.get_result()
        ok = all(np.allclose(shm.get_contents_as_numpy(h, np.float32, list(want.shape),
                                                       offset=2 * n * row + k * want.nbytes),
                             refs[k], rtol=1e-5, atol=1e-6) for k in range(n))
        check(ok, "shm: concurrent requests each read and wrote their own spans")
        # unregistered while in flight: each answered (200) or refused with a 4xx
        futs = [send(k) for k in range(n)]
        c.unregister_system_shared_memory("cc", headers=ADMIN)
        codes = []
        for f in futs:
            try:
                f.get_result()
                codes.append("200")
            except InferenceServerException as e:
                codes.append(e.status())
        check(all(k == "200" or k.startswith("4") for k in codes),
              f"shm: unregister mid-flight answers 200 or 4xx ({codes})")
        r = c.infer("ref-mlp", [_inp(x)])
        check(np.allclose(r.as_numpy("y"), want, rtol=1e-4, atol=1e-5),
              "shm: serving after an unregister mid-flight")
    finally:
        c.close()
        shm.destroy_shared_memory_region(h)


def check_shm_gone(c, x, want):
    """A registered object unlinked by its client: the worker cannot open it,
    the request gets a 400 naming it, and the server keeps serving."""
    import tritonclient.utils.shared_memory as shm
    key = f"/gf_gone_{os.getpid()}"
    h = shm.create_shared_memory_region("gone", key, x.nbytes)
    shm.set_shared_memory_region(h, [x])
    c.register_system_shared_memory("gone", key, x.nbytes, headers=ADMIN)
    shm.destroy_shared_memory_region(h)  # unlinked (the gateway's mapping stays)
    i = httpclient.InferInput("x", list(x.shape), "FP32")
    i.set_shared_memory("gone", x.nbytes)
    expect_fail("shm: an object unlinked since it was registered", "400", [key, "cannot open"],
                c.infer, "ref-mlp", [i])
    c.unregister_system_shared_memory("gone", headers=ADMIN)
    r = c.infer("ref-mlp", [_inp(x)])
    check(np.allclose(r.as_numpy("y"), want, rtol=1e-4, atol=1e-5), "shm: serving after")


def _inp(x):
    i = httpclient.InferInput("x", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    return i


def check_classification(c, x, want):
    """class_count=K: the top K as BYTES "score:index", best first."""
    i = _inp(x)
    for binary in (True, False):
        o = httpclient.InferRequestedOutput("y", binary_data=binary, class_count=3)
        r = c.infer("ref-mlp", [i], outputs=[o])
        got = r.as_numpy("y")
        check(got.shape == (want.shape[0], 3) and r.get_output("y")["datatype"] == "BYTES",
              f"classification ({binary}): BYTES of shape [rows, 3] ({got.shape})")
        for row in range(want.shape[0]):
            best = np.argsort(-want[row], kind="stable")[:3]
            for k in range(3):
                e = got[row][k]
                e = e.decode() if isinstance(e, bytes) else e
                score, index = e.split(":")
                check(int(index) == best[k] and abs(float(score) - want[row][best[k]]) < 1e-5,
                      f"classification ({binary}): row {row} rank {k} is {e}")
    o = httpclient.InferRequestedOutput("y", class_count=50)  # more than the classes: all
    check(c.infer("ref-mlp", [i], outputs=[o]).as_numpy("y").shape == (want.shape[0], 5),
          "classification: K past the classes gives them all")
    # labels: a labels file loaded with the function (Triton's label_filename)
    cfg = c.get_model_config("ref-mlp")
    cfg["output"][0]["label_filename"] = "classes.txt"
    names = ["zero", "one", "two", "three", "four"]
    c.load_model("ref-mlp", config=json.dumps(cfg), headers=ADMIN,
                 files={"file:1/classes.txt": ("\n".join(names) + "\n").encode()})
    check(c.get_model_config("ref-mlp")["output"][0]["label_filename"] == "y_labels.txt",
          "labels: the config names them")
    o = httpclient.InferRequestedOutput("y", class_count=2)
    got = c.infer("ref-mlp", [i], outputs=[o]).as_numpy("y")
    for row in range(want.shape[0]):
        best = np.argsort(-want[row], kind="stable")[:2]
        e = got[row][0].decode()
        check(e.split(":")[1:] == [str(best[0]), names[best[0]]],
              f"labels: row {row} answers score:index:label ({e})")
    # loaded back unchanged, the labels stay
    c.load_model("ref-mlp", config=json.dumps(c.get_model_config("ref-mlp")), headers=ADMIN)
    got = c.infer("ref-mlp", [i], outputs=[o]).as_numpy("y")
    check(got[0][0].decode().count(":") == 2, "labels: kept by a config round trip")
    cfg["output"][0]["label_filename"] = "missing.txt"
    expect_fail("labels: a label_filename naming no file", "400", ["missing.txt"],
                c.load_model, "ref-mlp", config=json.dumps(cfg), headers=ADMIN)
    for body, words in ((b'"classification": 0', ["classification"]),
                        (b'"classification": "3"', ["classification"])):
        req = (b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 32], "data": '
               + json.dumps([0.0] * 32).encode() + b'}], "outputs": [{"name": "y", '
               b'"parameters": {' + body + b'}}]}')
        st, _, b = http(ADDR[0], "POST", "/v2/models/ref-mlp/infer", req)
        json_error(st, b, 400, words, f"classification {body!r}")


def check_fit(addr, big):
    """A model larger than every worker's device budget is refused at deploy."""
    st, _, b = deploy(addr, big)
    json_error(st, b, 400, ["device budget", "never"], "a model that can never fit")
    st, _, _ = http(addr, "GET", "/v2/models/ref-big/ready")
    check(st == 404 or st == 400, "the refused model is not there")


def run_checks(addr, model, big, x, want):
    st, _, b = deploy(addr, model)
    check(st == 201, f"deploy: 201 ({b[:200]!r})")
    c = httpclient.InferenceServerClient(url=addr)
    meta = c.get_server_metadata()
    check({"binary_tensor_data", "model_repository", "model_configuration",
           "statistics", "logging", "system_shared_memory",
           "classification"} <= set(meta["extensions"]), "server metadata: extensions")
    check_config(c, addr)
    i = httpclient.InferInput("x", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    for _ in range(5):
        c.infer("ref-mlp", [i])
    check_stats(c, x, 5)
    check_compression(c, addr, x, want)
    check_states(c, addr, x, want)
    check_fit(addr, big)
    check_logging(c, addr)
    ADDR[:] = [addr]
    check_load(c, model, x, want)
    check_shm(c, addr, x, want)
    check_classification(c, x, want)
    check(c.is_server_live() and c.is_model_ready("ref-mlp"), "still serving")
    # for the restart: a model that fits these 8 MiB budgets but not 4 MiB, and
    # an unload that must outlive the process
    st, _, b = deploy(addr, MID[0])
    check(st == 201, f"deploy ref-mid (4.5 MiB): 201 ({b[:200]!r})")
    check(c.is_model_ready("ref-mid"), "ref-mid fits 8 MiB: ready")
    c.unload_model("ref-mlp", headers=ADMIN)
    check(not c.is_model_ready("ref-mlp"), "unloaded before the restart")
    c.close()


MID = []


def check_restart(addr, x, want, db):
    """After a restart with --device-memory 4M: the unload lasted, and a model
    that no longer fits any worker is UNAVAILABLE with the reason (items 3, 6)."""
    import sqlite3
    c = httpclient.InferenceServerClient(url=addr)
    idx = {e["name"]: e for e in c.get_model_repository_index()}
    check(not c.is_model_ready("ref-mlp") and idx["ref-mlp"]["state"] == "UNAVAILABLE" and
          "unloaded" in idx["ref-mlp"]["reason"],
          f"restart: the unloaded model stays unloaded ({idx['ref-mlp']})")
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as q:
        row = q.execute("SELECT unloaded_at IS NOT NULL FROM functions WHERE name = 'ref-mlp'")
        check(row.fetchone() == (1,), "restart: functions.unloaded_at is set in the store")
    i = httpclient.InferInput("x", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    try:
        c.infer("ref-mlp", [i])
        check(False, "restart: infer on the unloaded model fails")
    except InferenceServerException as ex:
        check(ex.status() in ("400", "503") and "unloaded" in ex.message(),
              f"restart: infer on the unloaded model {ex.status()} naming why ({ex.message()})")
    c.load_model("ref-mlp", headers=ADMIN)
    check(c.is_model_ready("ref-mlp"), "restart: loaded again: ready")
    r = c.infer("ref-mlp", [i])
    check(np.allclose(r.as_numpy("y"), want, rtol=1e-4, atol=1e-5), "restart: loaded: infers")
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as q:
        row = q.execute("SELECT unloaded_at FROM functions WHERE name = 'ref-mlp'")
        check(row.fetchone() == (None,), "restart: the load cleared functions.unloaded_at")
    # ref-mid (4.5 MiB of parameters) fitted 8 MiB; no worker has that now
    check(not c.is_model_ready("ref-mid"), "restart: the model that no longer fits is not ready")
    e = idx["ref-mid"]
    check(e["state"] == "UNAVAILABLE" and "device budget" in e["reason"],
          f"restart: UNAVAILABLE naming the device budget in the index ({e})")
    expect_fail("restart: load of a model that no longer fits", "400", ["device budget"],
                c.load_model, "ref-mid", headers=ADMIN)
    j = httpclient.InferInput("x", [1, 1536], "FP32")
    j.set_data_from_numpy(np.zeros((1, 1536), np.float32))
    try:
        c.infer("ref-mid", [j])
        check(False, "restart: infer on a model that no longer fits fails")
    except InferenceServerException as ex:
        check(ex.status() in ("400", "503") and "device budget" in ex.message(),
              f"restart: infer {ex.status()} naming the device budget ({ex.message()})")
    check(c.is_server_live() and c.is_model_ready("ref-mlp"), "restart: still serving")
    c.close()


def main():
    with tempfile.TemporaryDirectory(prefix="gf-tritontools-") as tmp:
        model = make_model(tmp, "model", "32,24,5")
        x = read_safetensors(os.path.join(model, "inputs.safetensors"))["x"]
        want = read_safetensors(os.path.join(model, "expected.safetensors"))["y"]
        # 2048*2048*4 bytes = 16 MiB of weights against 8 MiB device budgets
        big = make_model(tmp, "big", "2048,2048,2")
        with open(os.path.join(big, "manifest.json")) as f:
            m = json.load(f)
        m["name"] = "ref-big"
        with open(os.path.join(big, "manifest.json"), "w") as f:
            json.dump(m, f)
        mid = make_model(tmp, "mid", "1536,768,2")  # 4.5 MiB of FP32 weights
        with open(os.path.join(mid, "manifest.json")) as f:
            m = json.load(f)
        m["name"] = "ref-mid"
        with open(os.path.join(mid, "manifest.json"), "w") as f:
            json.dump(m, f)
        MID[:] = [mid]
        serve(tmp, TOKEN, lambda addr: run_checks(addr, model, big, x, want),
              devices="cpu:2", device_memory="8M", host_memory="256M")
        # the same state directory, smaller device budgets
        db = os.path.join(tmp, "var", "gpufaas.db")
        check(os.path.exists(db), f"the store is {db}")
        serve(tmp, TOKEN, lambda addr: check_restart(addr, x, want, db),
              devices="cpu:2", device_memory="4M", host_memory="256M")
    print(f"{len(CHECKS)} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
