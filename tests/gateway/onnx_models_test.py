#!/usr/bin/env python3
"""Whole ONNX models through a real `gpufaas serve`, against onnxruntime.

The networks users serve (torchvision's resnet18, mobilenet_v3_small,
efficientnet_b0 and vit_b_16; BERT, RoBERTa and DistilBERT encoders;
scikit-learn pipelines, tree ensembles and SVMs), exported as users export
them (tests/functions/onnx/gen_fixtures.py), are deployed over HTTP as the
docs say (the part `model`, a `name` part or a partial manifest) and invoked
with the stock Triton client (KServe v2, binary tensors). onnxruntime, the
independent reference, runs the same file; the largest difference over the
largest reference value must be at most 1e-4 (FP32), at two batch sizes
(and two sequence lengths for the encoders). resnet18, mobilenet_v3_small
and the BERT encoder are also converted to FP16 (as onnxconverter-common
does) and must match FP32 on the same rounded weights within 2e-3.

The committed graphs have their large weights stripped; fill() gives them
seeded random values with the statistics their doc_string names, via the
onnx package. Run by meson with GF_GPUFAAS, GF_WORKER and GF_SOURCE_ROOT
set; GF_ONNX_MODELS (comma-separated) picks models; the full-size encoders
(bert_base, distilbert_base) run only when it names them. Exits 77 (skipped)
when onnx, onnxruntime or tritonclient is missing.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    import tritonclient.http as httpclient
except ImportError as e:  # not installed: skipped, not failed
    print(f"skipped: {e} (install tests/requirements.txt into .venv)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gfserve import serve  # noqa: E402

TOKEN = "onnx-token"
CHECKS = []
TOL = 1e-4


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    CHECKS.append(what)


def fill(model, seed):
    """Refill the initializers gen_models.py stripped ("gpufaas-fill normal
    MEAN STD"), in file order, from one seeded generator."""
    rng = np.random.default_rng(seed)
    for t in model.graph.initializer:
        if not t.doc_string.startswith("gpufaas-fill "):
            continue
        _, dist, mean, std = t.doc_string.split()
        assert dist == "normal", t.doc_string
        dt = onnx.helper.tensor_dtype_to_np_dtype(t.data_type)
        t.raw_data = rng.normal(float(mean), float(std), size=tuple(t.dims)).astype(dt).tobytes()
        t.doc_string = ""
    return model


def multipart(fields):
    """A multipart/form-data body from {name: bytes}."""
    boundary = uuid.uuid4().hex
    parts = []
    for name, content in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
                     f'filename="{name}"\r\nContent-Type: application/octet-stream\r\n\r\n'
                     .encode() + content + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def post(addr, fields):
    """POST /v1/functions; (status, JSON answer)."""
    body, ctype = multipart(fields)
    req = urllib.request.Request(f"http://{addr}/v1/functions", data=body, method="POST",
                                 headers={"Content-Type": ctype,
                                          "Authorization": f"Bearer {TOKEN}"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def get(addr, path):
    with urllib.request.urlopen(f"http://{addr}{path}", timeout=60) as r:
        return json.loads(r.read())


def rel_err(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def kserve_type(a):
    return {np.dtype(np.float32): "FP32", np.dtype(np.float16): "FP16",
            np.dtype(np.int64): "INT64", np.dtype(np.int32): "INT32"}[a.dtype]


def to_half(m):
    """The model in FP16 as onnxconverter-common's float16 conversion makes it
    (FLOAT initializers, inputs, outputs, Casts and constants as FLOAT16), and
    the FP32 model with the same rounded weights: the reference for a half
    graph computed in FP32."""
    from onnx import TensorProto, numpy_helper
    h, r = onnx.ModelProto(), onnx.ModelProto()
    h.CopyFrom(m)
    r.CopyFrom(m)
    for th, tr in zip(h.graph.initializer, r.graph.initializer):
        if th.data_type == TensorProto.FLOAT:
            # clamped to FP16's range as the converter does (torch's masks use
            # float32's minimum)
            a = np.clip(numpy_helper.to_array(th), -65504, 65504).astype(np.float16)
            th.CopyFrom(numpy_helper.from_array(a, th.name))
            tr.CopyFrom(numpy_helper.from_array(a.astype(np.float32), tr.name))
    for vi in list(h.graph.input) + list(h.graph.output) + list(h.graph.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    for n in h.graph.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(
                    np.clip(numpy_helper.to_array(a.t), -65504, 65504).astype(np.float16),
                    a.t.name))
    return h, r


def run_half(addr, c, name, m, feeds, tol=2e-3):
    """Model m converted to FP16, deployed and invoked with FP16 tensors, against
    onnxruntime on the FP32 model with the same rounded weights and inputs."""
    h, r = to_half(m)
    status, ans = post(addr, {"model": h.SerializeToString(), "name": name.encode()})
    check(status == 201, f"{name}: deploy 201 ({status} {ans})")
    half = {k: a.astype(np.float16) if a.dtype == np.float32 else a for k, a in feeds.items()}
    rounded = {k: a.astype(np.float32) if a.dtype == np.float16 else a for k, a in half.items()}
    sess = ort.InferenceSession(r.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, rounded)
    res = infer(c, name, half, [o.name for o in sess.get_outputs()])
    for o, w in zip(sess.get_outputs(), want):
        got = res.as_numpy(o.name)
        check(got is not None and got.dtype == np.float16 and got.shape == w.shape,
              f"{name}: output {o.name} is FP16 {list(w.shape)}")
        e = rel_err(got, w)
        check(e <= tol, f"{name}: {o.name} within {tol} of FP32 on the same weights ({e:.2e})")
        print(f"{name}: {o.name} max relative error {e:.2e} (FP16 graph, FP32 reference)")


def infer(c, name, feeds, outputs):
    """KServe v2 with binary tensors through the Triton client."""
    ins = []
    for k, a in feeds.items():
        i = httpclient.InferInput(k, list(a.shape), kserve_type(a))
        i.set_data_from_numpy(a, binary_data=True)
        ins.append(i)
    return c.infer(name, ins, outputs=[httpclient.InferRequestedOutput(o, binary_data=True)
                                       for o in outputs])


def compare(c, name, sess, feeds, what):
    want = sess.run(None, feeds)
    r = infer(c, name, feeds, [o.name for o in sess.get_outputs()])
    for o, w in zip(sess.get_outputs(), want):
        got = r.as_numpy(o.name)
        if got is not None and w.dtype == object:  # strings: BYTES, as UTF-8
            got = np.array([b.decode() for b in got.ravel()], object).reshape(got.shape)
        check(got is not None and got.shape == w.shape and got.dtype == w.dtype,
              f"{what}: output {o.name} is {w.dtype} {list(w.shape)}")
        if np.issubdtype(w.dtype, np.floating):
            e = rel_err(got, w)
            check(e <= TOL, f"{what}: {o.name} within {TOL} of onnxruntime (max rel err {e:.2e})")
            print(f"{what}: {o.name} max relative error {e:.2e}")
        else:
            check(np.array_equal(got, w), f"{what}: {o.name} equals onnxruntime's")


def image(batch, seed):
    return {"input": np.random.default_rng(seed).normal(size=(batch, 3, 224, 224))
            .astype(np.float32)}


def tokens(batch, seq, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 1000, size=(batch, seq)).astype(np.int64)
    mask = np.ones((batch, seq), np.int64)
    mask[1:, seq // 2:] = 0  # padded rows, as a tokenizer pads a batch
    return {"input_ids": ids, "attention_mask": mask}


def run_model(addr, c, tmp, name, path, cases, seed, half=False):
    m = onnx.load(path)
    fill(m, seed)
    if half:  # the same network exported in FP16, its first case
        run_half(addr, c, name + "-fp16", m, cases[0][1])
    data = m.SerializeToString()
    t0 = time.monotonic()
    status, ans = post(addr, {"model": data, "name": name.encode()})
    check(status == 201, f"{name}: deploy 201 ({status} {ans})")
    print(f"{name}: deployed {len(data) >> 20} MiB in {time.monotonic() - t0:.1f} s")
    meta = c.get_model_metadata(name)
    for i, gi in zip(meta["inputs"], m.graph.input):
        check(i["name"] == gi.name, f"{name}: metadata input {gi.name}")
        check(i["shape"][0] == -1, f"{name}: the batch dimension is -1")
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for what, feeds in cases:
        compare(c, name, sess, feeds, f"{name} {what}")


def run_checks(addr, tmp, only):
    src = os.environ["GF_SOURCE_ROOT"]
    models = os.path.join(src, "tests/functions/onnx/models")
    c = httpclient.InferenceServerClient(url=addr, network_timeout=600.0,
                                         connection_timeout=600.0)
    plan = {
        "resnet18": [("batch 1", image(1, 1)), ("batch 3", image(3, 2))],
        "mobilenet_v3_small": [("batch 1", image(1, 3)), ("batch 2", image(2, 4))],
        "efficientnet_b0": [("batch 1", image(1, 5)), ("batch 2", image(2, 6))],
        "vit_b_16": [("batch 1", image(1, 7)), ("batch 2", image(2, 8))],
        "bert_encoder": [("batch 2 seq 16", tokens(2, 16, 9)), ("batch 3 seq 7", tokens(3, 7, 10))],
        "roberta_encoder": [("batch 2 seq 12", tokens(2, 12, 12)),
                            ("batch 1 seq 20", tokens(1, 20, 13))],
        "distilbert_encoder": [("batch 2 seq 16", tokens(2, 16, 14)),
                               ("batch 3 seq 9", tokens(3, 9, 15))],
        # full size (bert-base's and distilbert-base's shapes, 110M and 66M
        # parameters): only when GF_ONNX_MODELS names them (docs/performance.md)
        "bert_base": [("batch 2 seq 16", tokens(2, 16, 16)), ("batch 4 seq 64", tokens(4, 64, 17))],
        "distilbert_base": [("batch 2 seq 16", tokens(2, 16, 18)),
                            ("batch 4 seq 64", tokens(4, 64, 19))],
    }
    by_hand = ("bert_base", "distilbert_base")
    for k, (name, cases) in enumerate(plan.items()):
        if (only and name not in only) or (not only and name in by_hand):
            continue
        run_model(addr, c, tmp, name.replace("_", "-"), os.path.join(models, name + ".onnx"),
                  cases, 100 + k, half=name in ("resnet18", "mobilenet_v3_small", "bert_encoder"))
    if not only or "sklearn" in only:
        # a scikit-learn pipeline (StandardScaler + MLPClassifier, skl2onnx without
        # ZipMap), deployed with a partial manifest: a name and max_batch_size only
        path = os.path.join(src, "tests/functions/onnx/ml/test_sklearn_mlp_classifier/model.onnx")
        with open(path, "rb") as f:
            data = f.read()
        mf = json.dumps({"name": "digits-mlp", "max_batch_size": 16}).encode()
        status, ans = post(addr, {"model": data, "manifest": mf})
        check(status == 201, f"sklearn: deploy with a partial manifest ({status} {ans})")
        check(ans.get("max_batch_size") == 16 and ans.get("kind") == "onnx",
              "sklearn: kind onnx, max_batch_size from the manifest")
        check([i["shape"] for i in ans["inputs"]] == [[-1, 64]] and
              [o["name"] for o in ans["outputs"]] == ["label", "probabilities"],
              "sklearn: inputs and outputs derived from the graph")
        sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        x = np.random.default_rng(11).uniform(0, 16, size=(5, 64)).astype(np.float32)
        compare(c, "digits-mlp", sess, {sess.get_inputs()[0].name: x}, "sklearn batch 5")
        # tree ensembles: a random forest pipeline and a binary gradient boosting
        # model (TreeEnsembleClassifier), a gradient boosting regressor; kernel
        # SVMs: an SVC and an SVR pipeline (SVMClassifier, SVMRegressor); nearest
        # neighbours (Scan with skl2onnx's distance body, TopK); a histogram gradient
        # boosting classifier (TreeEnsembleClassifier, NaN in its rows)
        for case in ("random_forest", "gradient_boosting_binary", "gradient_boosting_regressor",
                     "svc_rbf", "svr_rbf", "knn_classifier", "knn_regressor",
                     "hist_gradient_boosting"):
            d = os.path.join(src, f"tests/functions/onnx/ml/test_sklearn_{case}")
            with open(os.path.join(d, "model.onnx"), "rb") as f:
                tdata = f.read()
            fn = case.replace("_", "-")
            status, ans = post(addr, {"model": tdata, "name": fn.encode()})
            check(status == 201, f"{fn}: deploy 201 ({status} {ans})")
            tsess = ort.InferenceSession(tdata, providers=["CPUExecutionProvider"])
            # the rows the model was made from (random ones would sit far from every
            # support vector and split), a few per request
            xt = onnx.numpy_helper.to_array(
                onnx.load_tensor(os.path.join(d, "test_data_set_0", "input_0.pb")))
            compare(c, fn, tsess, {tsess.get_inputs()[0].name: xt[:5]}, f"{fn} batch 5")
        # string class labels: the label output is BYTES (binary through the Triton
        # client, JSON strings through plain KServe v2 JSON)
        for case in ("logreg_strings", "random_forest_strings", "svc_strings",
                     "knn_classifier_strings"):
            d = os.path.join(src, f"tests/functions/onnx/ml/test_sklearn_{case}")
            with open(os.path.join(d, "model.onnx"), "rb") as f:
                tdata = f.read()
            fn = case.replace("_", "-")
            status, ans = post(addr, {"model": tdata, "name": fn.encode()})
            check(status == 201 and ans["outputs"][0]["datatype"] == "BYTES",
                  f"{fn}: deployed, its label output BYTES ({status} {ans})")
            tsess = ort.InferenceSession(tdata, providers=["CPUExecutionProvider"])
            xt = onnx.numpy_helper.to_array(
                onnx.load_tensor(os.path.join(d, "test_data_set_0", "input_0.pb")))
            compare(c, fn, tsess, {tsess.get_inputs()[0].name: xt[:6]}, f"{fn} batch 6")
        body = json.dumps({"inputs": [{"name": tsess.get_inputs()[0].name, "datatype": "FP32",
                                       "shape": [2, 64], "data": xt[:2].ravel().tolist()}],
                           "outputs": [{"name": "label"}]}).encode()
        req = urllib.request.Request(f"http://{addr}/v2/models/{fn}/infer", data=body,
                                     method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            ans = json.loads(r.read())
        want = tsess.run(["label"], {tsess.get_inputs()[0].name: xt[:2]})[0]
        check(ans["outputs"][0]["datatype"] == "BYTES" and
              ans["outputs"][0]["data"] == [str(w) for w in want],
              f"{fn}: JSON labels are the strings ({ans['outputs'][0]})")
        # categorical features (OneHotEncoder); a category the model does not know is a
        # 400 naming the node (skl2onnx's handle_unknown='error': zeros = 0)
        for case in ("onehot_logreg", "column_transformer"):
            d = os.path.join(src, f"tests/functions/onnx/ml/test_sklearn_{case}")
            with open(os.path.join(d, "model.onnx"), "rb") as f:
                tdata = f.read()
            fn = case.replace("_", "-")
            status, ans = post(addr, {"model": tdata, "name": fn.encode()})
            check(status == 201, f"{fn}: deploy 201 ({status} {ans})")
            tsess = ort.InferenceSession(tdata, providers=["CPUExecutionProvider"])
            xt = onnx.numpy_helper.to_array(
                onnx.load_tensor(os.path.join(d, "test_data_set_0", "input_0.pb")))
            compare(c, fn, tsess, {tsess.get_inputs()[0].name: xt[:5]}, f"{fn} batch 5")
        body = json.dumps({"inputs": [{"name": "X", "datatype": "INT64", "shape": [1, 3],
                                       "data": [1, 9, 2]}]}).encode()
        req = urllib.request.Request(f"http://{addr}/v2/models/onehot-logreg/infer", data=body,
                                     method="POST", headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                status, ans = r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            status, ans = e.code, json.loads(e.read())
        check(status == 400 and "OneHotEncoder" in ans.get("error", "") and
              "not one of the 5 categories" in ans.get("error", ""),
              f"onehot-logreg: an unknown category is a 400 naming it ({status} {ans})")
        # the same with the command line, as docs/cli.md says
        env = dict(os.environ, GPUFAAS_SERVER=f"http://{addr}", GPUFAAS_TOKEN=TOKEN)
        p = subprocess.run([os.environ["GF_GPUFAAS"], "deploy", "digits-cli", "--onnx", path,
                            "--max-batch", "4"], env=env, capture_output=True, text=True,
                           timeout=300)
        check(p.returncode == 0 and "deployed digits-cli version 1 (onnx" in p.stdout,
              f"gpufaas deploy --onnx ({p.returncode}: {p.stdout} {p.stderr})")
        check("uploaded" in p.stderr, "gpufaas deploy --onnx reports its upload")
        fn = get(addr, "/v1/functions/digits-cli")
        check(fn.get("max_batch_size", 4) == 4, "gpufaas deploy --onnx --max-batch")
        compare(c, "digits-cli", sess, {sess.get_inputs()[0].name: x[:3]}, "sklearn (CLI) batch 3")
    c.close()


def main():
    only = [s for s in os.environ.get("GF_ONNX_MODELS", "").split(",") if s]
    with tempfile.TemporaryDirectory(prefix="gf-onnx-models-") as tmp:
        serve(tmp, TOKEN, lambda addr: run_checks(addr, tmp, only))
    print(f"{len(CHECKS) + 1} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
