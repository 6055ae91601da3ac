#!/usr/bin/env python3
"""Bad ONNX files deployed to a real `gpufaas serve`: each one a 400 whose
message names the problem, nothing published, nothing left behind, and the
server keeps serving.

The files are made here with the onnx package from a small good model:
truncated protobuf, fields of the wrong wire type, an attribute and a
tensor of the wrong type, a cycle, an input consumed but never produced,
unsupported ops (unknown, onnxruntime's contrib domain, skl2onnx's ZipMap),
opsets too old, too new or not imported, tree ensembles that are not trees,
an SVC whose probability estimates do not fit its classes,
absurd dims, external data missing or shorter than the tensors claim, and
misuse of the parts; then graphs that take a shape or a scalar as an input
deploy and run. Run by meson with GF_GPUFAAS, GF_WORKER and
GF_SOURCE_ROOT set; exits 77 (skipped) without onnx or numpy.
"""
import os
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    print(f"skipped: {e} (install tests/requirements.txt into .venv)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gfserve import serve  # noqa: E402
from onnx_models_test import CHECKS, TOKEN, check, get, post  # noqa: E402

F = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opsets=(("", 17),)):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
                             ir_version=8)


def good():
    """y = relu(x W + b): the model the bad ones are made from."""
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, "W")
    b = numpy_helper.from_array(np.ones(3, np.float32), "b")
    return model([helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
                  helper.make_node("Add", ["h", "b"], ["z"], name="add"),
                  helper.make_node("Relu", ["z"], ["y"], name="relu")],
                 [helper.make_tensor_value_info("x", F, ["batch", 4])],
                 [helper.make_tensor_value_info("y", F, ["batch", 3])], [w, b])


def retag(data, old_tag, new_tag):
    """Replace the first top-level field with key old_tag by new_tag (bytes)."""
    i = data.index(bytes([old_tag]))
    return data[:i] + bytes([new_tag]) + data[i + 1:]


def cases(src, tmp):
    """(name, fields, status, words the message must contain)."""
    ok = good().SerializeToString()
    out = []
    out.append(("truncated", {"model": ok[: len(ok) // 2]}, 400, ["not a valid ONNX protobuf"]))
    out.append(("empty", {"model": b""}, 400, ["empty"]))
    # ModelProto.graph is field 7, length-delimited (key 0x3a): sent as a varint (0x38)
    out.append(("wire-type", {"model": retag(ok, 0x3A, 0x38)}, 400,
                ["not a valid ONNX protobuf"]))
    m = good()
    m.graph.node[2].attribute.append(helper.make_attribute("alpha", 0.5))
    out.append(("unknown-attr", {"model": m.SerializeToString()}, 400,
                ["relu", "alpha", "not understood"]))
    conv = model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", group=1.5)],
                 [helper.make_tensor_value_info("x", F, ["n", 1, 8, 8])],
                 [helper.make_tensor_value_info("y", F, ["n", 1, 6, 6])],
                 [numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")])
    out.append(("attr-type", {"model": conv.SerializeToString()}, 400,
                ["conv", "group", "must be an int"]))
    m = good()
    m.graph.initializer[0].raw_data = m.graph.initializer[0].raw_data[:20]
    out.append(("short-tensor", {"model": m.SerializeToString()}, 400, ["'W'", "bytes"]))
    cyc = model([helper.make_node("Add", ["x", "b2"], ["a"], name="first"),
                 helper.make_node("Relu", ["a"], ["b2"], name="second")],
                [helper.make_tensor_value_info("x", F, ["n", 4])],
                [helper.make_tensor_value_info("a", F, ["n", 4])])
    out.append(("cycle", {"model": cyc.SerializeToString()}, 400, ["cycle"]))
    dangling = model([helper.make_node("Relu", ["ghost"], ["y"], name="r")],
                     [helper.make_tensor_value_info("x", F, ["n", 4])],
                     [helper.make_tensor_value_info("y", F, ["n", 4])])
    out.append(("dangling", {"model": dangling.SerializeToString()}, 400,
                ["'ghost'", "never produced"]))
    m = good()
    m.graph.node[2].op_type = "Frobnicate"
    out.append(("unsupported-op", {"model": m.SerializeToString()}, 400,
                ["Frobnicate", "relu", "ai.onnx", "opset 17"]))
    m = good()
    m.graph.node[0].op_type = "FusedMatMul"
    m.graph.node[0].domain = "com.microsoft"
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    out.append(("contrib-op", {"model": m.SerializeToString()}, 400,
                ["FusedMatMul", "com.microsoft", "contrib"]))
    with open(os.path.join(src, "tests/functions/onnx/ml/logreg_zipmap.onnx"), "rb") as f:
        out.append(("zipmap", {"model": f.read()}, 400, ["ZipMap", "'zipmap': False"]))
    # a Scan whose body is not the pairwise distances gpufaas runs (a running sum)
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "r"], ["s2"]), helper.make_node("Identity", ["s2"], ["o"])],
        "body", [helper.make_tensor_value_info("s", F, [4]),
                 helper.make_tensor_value_info("r", F, [4])],
        [helper.make_tensor_value_info("s2", F, [4]),
         helper.make_tensor_value_info("o", F, [4])])
    scan = model([helper.make_node("Scan", ["x0", "xs"], ["sum", "sums"], name="scan", body=body,
                                   num_scan_inputs=1)],
                 [helper.make_tensor_value_info("x0", F, [4]),
                  helper.make_tensor_value_info("xs", F, ["n", 4])],
                 [helper.make_tensor_value_info("sum", F, [4]),
                  helper.make_tensor_value_info("sums", F, ["n", 4])])
    out.append(("scan-body", {"model": scan.SerializeToString()}, 400,
                ["'scan' (Scan)", "pairwise squared Euclidean", "node 's2', Add"]))
    # strings: only class labels (moved, never computed on), never inputs
    S = TensorProto.STRING
    names = helper.make_tensor("names", S, [3], [b"a", b"b", b"c"])
    strop = model([helper.make_node("Gather", ["names", "i"], ["g"], name="pick"),
                   helper.make_node("Equal", ["g", "names"], ["y"], name="same")],
                  [helper.make_tensor_value_info("i", TensorProto.INT64, ["n"])],
                  [helper.make_tensor_value_info("y", TensorProto.BOOL, ["n"])], [names])
    out.append(("string-op", {"model": strop.SerializeToString()}, 400,
                ["'same' (Equal)", "reads strings", "class labels"]))
    strin = model([helper.make_node("Identity", ["s"], ["y"], name="id")],
                  [helper.make_tensor_value_info("s", S, ["n"])],
                  [helper.make_tensor_value_info("y", S, ["n"])])
    out.append(("string-input", {"model": strin.SerializeToString()}, 400,
                ["input 's' is tensor(string)", "does not take them as inputs"]))
    # opsets: older than any version implemented, newer than any known, not imported
    m = good()
    m.opset_import[0].version = 5
    out.append(("old-opset", {"model": m.SerializeToString()}, 400,
                ["opset 5", "Add", "Relu", "older than those implemented"]))
    m = good()
    m.opset_import[0].version = 99
    out.append(("future-opset", {"model": m.SerializeToString()}, 400,
                ["opset 99", "newer than the newest", "at most 28"]))
    sc = model([helper.make_node("Scaler", ["x"], ["y"], name="sc", domain="ai.onnx.ml",
                                 offset=[0.0], scale=[2.0])],
               [helper.make_tensor_value_info("x", F, ["n", 4])],
               [helper.make_tensor_value_info("y", F, ["n", 4])])
    out.append(("no-ml-opset", {"model": sc.SerializeToString()}, 400,
                ["Scaler", "ai.onnx.ml", "imports no opset"]))
    # tree ensembles whose ids do not make trees
    for name, change, words in (
            ("tree-cycle", {"nodes_truenodeids": [1, 0, 0], "nodes_falsenodeids": [2, 0, 0],
                            "nodes_modes": ["BRANCH_LEQ", "BRANCH_LEQ", "LEAF"]},
             ["trees", "not a tree"]),
            ("tree-child", {"nodes_falsenodeids": [7, 0, 0]}, ["trees", "child", "not in the tree"]),
            ("tree-rule", {"nodes_modes": ["BRANCH_EQ", "LEAF", "LEAF"]},
             ["trees", "BRANCH_EQ", "supported"])):
        attrs = dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[1, 0, 0],
                     nodes_values=[0.5, 0, 0], nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"],
                     nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0],
                     target_ids=[0, 0], target_treeids=[0, 0], target_nodeids=[1, 2],
                     target_weights=[1.0, 2.0], n_targets=1)
        attrs.update(change)
        tm = model([helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], name="trees",
                                     domain="ai.onnx.ml", **attrs)],
                   [helper.make_tensor_value_info("x", F, ["n", 4])],
                   [helper.make_tensor_value_info("y", F, ["n", 1])],
                   opsets=(("", 17), ("ai.onnx.ml", 3)))
        out.append((name, {"model": tm.SerializeToString()}, 400, words))
    # an SVC whose probability estimates (Platt's prob_a, prob_b) are not one per pair of classes
    svc = model([helper.make_node(
        "SVMClassifier", ["x"], ["label", "scores"], name="svc", domain="ai.onnx.ml",
        classlabels_ints=[0, 1], coefficients=[1.0, -1.0], vectors_per_class=[1, 1],
        support_vectors=[0.0] * 8, rho=[0.1], kernel_type="RBF", kernel_params=[0.5, 0, 3],
        prob_a=[-1.0, 2.0], prob_b=[0.1, 0.2])],
        [helper.make_tensor_value_info("x", F, ["n", 4])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, ["n"]),
         helper.make_tensor_value_info("scores", F, ["n", 2])],
        opsets=(("", 17), ("ai.onnx.ml", 3)))
    out.append(("svc-probability", {"model": svc.SerializeToString()}, 400,
                ["svc", "prob_a", "pair of classes"]))
    m = good()
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 1 << 50
    out.append(("absurd-dim", {"model": m.SerializeToString()}, 400, ["absurd"]))
    m = good()
    big = m.graph.initializer[0]
    del big.dims[:]
    big.dims.extend([1 << 30, 1 << 30])
    out.append(("absurd-tensor", {"model": m.SerializeToString()}, 400, ["'W'"]))
    # external data: the weights in a second file
    m = good()
    ext = os.path.join(tmp, "ext")
    os.makedirs(ext)
    onnx.save(m, os.path.join(ext, "m.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="m.onnx.data", size_threshold=0)
    with open(os.path.join(ext, "m.onnx"), "rb") as f:
        ext_model = f.read()
    with open(os.path.join(ext, "m.onnx.data"), "rb") as f:
        ext_data = f.read()
    out.append(("ext-missing", {"model": ext_model}, 400, ["m.onnx.data", "model_data"]))
    out.append(("ext-short", {"model": ext_model, "model_data": ext_data[:-8]}, 400,
                ["shorter"]))
    # the parts themselves
    out.append(("both-files", {"model": ok, "weights": b"x"}, 400, ["model", "weights"]))
    out.append(("data-alone", {"model_data": ext_data}, 400, ["missing", "'model'"]))
    out.append(("no-name", {"model": ok}, 400, ["name"]))
    out.append(("bad-name", {"model": ok, "name": b"Not A Name"}, 400, ["name"]))
    out.append(("kind-mismatch", {"model": ok, "manifest": b'{"name": "k", "kind": "mlp"}'}, 400,
                ["mlp", "onnx"]))
    return out, ext_model, ext_data


def infer_json(addr, fn, inputs):
    """KServe v2 JSON inference; the outputs by name as (shape, data)."""
    import json
    import urllib.request
    body = json.dumps({"inputs": inputs}).encode()
    with urllib.request.urlopen(urllib.request.Request(
            f"http://{addr}/v2/models/{fn}/infer", data=body, method="POST")) as r:
        return {o["name"]: (o["shape"], o["data"]) for o in json.loads(r.read())["outputs"]}


def graph_inputs_checks(addr):
    """Inputs a graph reads for their values (a Reshape's target shape) and
    scalar inputs: deployed, and planned per request."""
    I64 = TensorProto.INT64
    m = model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="r")],
              [helper.make_tensor_value_info("x", F, [2, 6]),
               helper.make_tensor_value_info("shape", I64, [2])],
              [helper.make_tensor_value_info("y", F, [None, None])])
    st, ans = post(addr, {"model": m.SerializeToString(), "name": b"reshape-input"})
    check(st == 201, f"a graph shaped by an input deploys ({st} {ans})")
    x = list(range(12))
    for target in ([3, 4], [6, -1], [12, 1]):
        out = infer_json(addr, "reshape-input", [
            {"name": "x", "shape": [2, 6], "datatype": "FP32", "data": x},
            {"name": "shape", "shape": [2], "datatype": "INT64", "data": target}])
        want = list(np.arange(12, dtype=np.float32).reshape(target).shape)
        check(out["y"][0] == want and out["y"][1] == x, f"Reshape to {target}: shape {want}")
    m = model([helper.make_node("Mul", ["x", "s"], ["y"], name="scale")],
              [helper.make_tensor_value_info("x", F, [None, 3]),
               helper.make_tensor_value_info("s", F, [])],
              [helper.make_tensor_value_info("y", F, [None, 3])])
    st, ans = post(addr, {"model": m.SerializeToString(), "name": b"scalar-input"})
    check(st == 201 and ans["inputs"][1]["shape"] == [],
          f"a graph with a scalar input deploys ({st} {ans})")
    out = infer_json(addr, "scalar-input", [
        {"name": "x", "shape": [2, 3], "datatype": "FP32", "data": [1, 2, 3, 4, 5, 6]},
        {"name": "s", "shape": [], "datatype": "FP32", "data": [0.5]}])
    check(out["y"][1] == [0.5, 1, 1.5, 2, 2.5, 3], "a scalar input: x * s")


def run_checks(addr, tmp):
    src = os.environ["GF_SOURCE_ROOT"]
    bad, ext_model, ext_data = cases(src, tmp)
    for name, fields, status, words in bad:
        fields = dict(fields)
        if "name" not in fields and name not in ("no-name", "kind-mismatch") and \
                "model" in fields:
            fields["name"] = f"bad-{name}".encode()
        st, ans = post(addr, fields)
        msg = ans.get("error", "")
        check(st == status, f"{name}: HTTP {status} (got {st}: {msg})")
        for w in words:
            check(w.lower() in msg.lower(), f"{name}: the message names {w!r} ({msg})")
        print(f"{name}: {st} {msg}")
    # nothing published, nothing staged, and the server still deploys and serves
    fns = get(addr, "/v1/functions")
    names = [f["name"] for f in fns.get("functions", fns if isinstance(fns, list) else [])]
    check(not any(n.startswith("bad-") for n in names), "no bad model was published")
    var = os.path.join(tmp, "var")
    for root, _, files in os.walk(var):
        for f in files:
            check(not f.endswith(".part") and "validate-" not in root,
                  f"nothing left behind ({os.path.join(root, f)})")
    graph_inputs_checks(addr)
    st, ans = post(addr, {"model": ext_model, "model_data": ext_data, "name": b"ext-ok"})
    check(st == 201, f"a model with its external data deploys ({st} {ans})")
    st, ans = post(addr, {"model": good().SerializeToString(), "name": b"still-serving"})
    check(st == 201, f"the server still deploys ({st} {ans})")
    for fn in ("ext-ok", "still-serving"):
        y = infer_json(addr, fn, [{"name": "x", "shape": [1, 4], "datatype": "FP32",
                                   "data": [1, 2, 3, 4]}])["y"][1]
        want = np.maximum(np.array([1, 2, 3, 4], np.float32) @
                          (np.arange(12, dtype=np.float32).reshape(4, 3) / 10) + 1, 0)
        check(np.allclose(y, want, rtol=1e-6), f"{fn}: serves the right answer")


def main():
    with tempfile.TemporaryDirectory(prefix="gf-onnx-bad-") as tmp:
        serve(tmp, TOKEN, lambda addr: run_checks(addr, tmp))
    print(f"{len(CHECKS) + 1} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
