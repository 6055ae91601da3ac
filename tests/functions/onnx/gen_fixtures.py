#!/usr/bin/env python3
"""Make the ONNX fixtures the tests run (committed; rerun by hand).

    /work/venvs/torch/bin/python tests/functions/onnx/gen_fixtures.py [--only ml|models]
                                                               [--model NAME]...

Needs torch, torchvision, transformers, scikit-learn, skl2onnx, onnx and
onnxruntime (heavy: that is why its outputs are committed and CI does not
run it). It writes, next to itself:

  ml/test_*/       ai.onnx.ml ops and scikit-learn pipelines (skl2onnx, no
                   ZipMap) in ONNX's backend test layout: model.onnx and
                   test_data_set_0/{input,output}_K.pb, the outputs computed by
                   onnxruntime. Small: the weights are kept. The conformance
                   runner runs them (meson test functions_onnx_ml).
  ml/logreg_zipmap.onnx  the same pipeline with ZipMap, for the error test.
  models/*.onnx    whole networks with random weights, exported from PyTorch
                   with a dynamic batch axis (and sequence axis for BERT), their
                   large float initializers stripped: each keeps its dtype and
                   dims and says in doc_string how to refill it
                   ("gpufaas-fill normal MEAN STD", the statistics of the
                   weights torch initialised). tests/functions/onnx/
                   onnx_models.py refills them with seeded random values via the
                   onnx package and compares gpufaas with onnxruntime.
"""
import argparse
import os
import shutil
import sys
import warnings

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ML_OPSET = [helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)]


def write_case(dirname, model, inputs):
    """ONNX's backend test layout, outputs from onnxruntime."""
    if os.path.isdir(dirname):
        shutil.rmtree(dirname)
    os.makedirs(os.path.join(dirname, "test_data_set_0"))
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(dirname, "model.onnx"))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in model.graph.input]
    outs = sess.run(None, dict(zip(names, inputs)))
    ds = os.path.join(dirname, "test_data_set_0")
    for k, (n, a) in enumerate(zip(names, inputs)):
        with open(os.path.join(ds, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())
    for k, (o, a) in enumerate(zip(model.graph.output, outs)):
        with open(os.path.join(ds, f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(a), o.name).SerializeToString())


def one_node(op, inputs, outputs, **attrs):
    """A model of one ai.onnx.ml node; inputs/outputs are (name, type, shape)."""
    node = helper.make_node(op, [i[0] for i in inputs], [o[0] for o in outputs],
                            domain="ai.onnx.ml", **attrs)
    g = helper.make_graph([node], op.lower(),
                          [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs])
    return helper.make_model(g, opset_imports=ML_OPSET, ir_version=8)


def gen_ml(out):
    if os.path.isdir(out):
        shutil.rmtree(out)
    rng = np.random.default_rng(12)
    F = TensorProto.FLOAT
    cases = {}
    x = rng.normal(size=(5, 4)).astype(np.float32)
    cases["scaler"] = (one_node("Scaler", [("x", F, [None, 4])], [("y", F, [None, 4])],
                                offset=[0.5, -1.0, 2.0, 0.0], scale=[2.0, 0.5, -1.0, 3.0]), [x])
    cases["scaler_one_value"] = (one_node("Scaler", [("x", F, [None, 4])], [("y", F, [None, 4])],
                                          offset=[0.25], scale=[4.0]), [x])
    cases["scaler_double"] = (one_node("Scaler", [("x", TensorProto.DOUBLE, [None, 4])],
                                       [("y", F, [None, 4])], offset=[1.0, 2, 3, 4],
                                       scale=[0.5, 0.5, 2, 2]), [x.astype(np.float64)])
    cases["scaler_int64"] = (one_node("Scaler", [("x", TensorProto.INT64, [None, 3])],
                                      [("y", F, [None, 3])], offset=[1.0, 2, 3],
                                      scale=[0.5, 0.25, 2]),
                             [np.array([[1, 2, 3], [-4, 5, 60]], np.int64)])
    xn = np.array([[-3, 1, 2], [-1, -2, -4], [0, 0, 0], [5, 0.5, -0.25]], np.float32)
    for norm in ("MAX", "L1", "L2"):
        cases[f"normalizer_{norm.lower()}"] = (
            one_node("Normalizer", [("x", F, [None, 3])], [("y", F, [None, 3])], norm=norm), [xn])
    xc = rng.normal(size=(6, 5)).astype(np.float32)
    xc[0] = 0
    coef3 = rng.normal(size=15).astype(np.float32).tolist()
    for pt in ("NONE", "LOGISTIC", "SOFTMAX"):
        cases[f"linearclassifier_{pt.lower()}"] = (
            one_node("LinearClassifier", [("x", F, [None, 5])],
                     [("label", TensorProto.INT64, [None]), ("scores", F, [None, 3])],
                     coefficients=coef3, intercepts=[0.1, -0.2, 0.3],
                     classlabels_ints=[10, 20, 30], post_transform=pt, multi_class=0), [xc])
        cases[f"linearclassifier_binary_{pt.lower()}"] = (
            one_node("LinearClassifier", [("x", F, [None, 5])],
                     [("label", TensorProto.INT64, [None]), ("scores", F, [None, 2])],
                     coefficients=coef3[:5], intercepts=[0.25], classlabels_ints=[3, 7],
                     post_transform=pt), [xc])
    cases["linearregressor"] = (
        one_node("LinearRegressor", [("x", F, [None, 5])], [("y", F, [None, 1])],
                 coefficients=coef3[:5], intercepts=[0.5]), [xc])
    cases["linearregressor_targets"] = (
        one_node("LinearRegressor", [("x", F, [None, 5])], [("y", F, [None, 3])],
                 coefficients=coef3, intercepts=[0.5, 1, 2], targets=3), [xc])
    idx = numpy_helper.from_array(np.array([[3, 0, 3]], np.int64), "idx")
    node = helper.make_node("ArrayFeatureExtractor", ["x", "idx"], ["y"], domain="ai.onnx.ml")
    g = helper.make_graph([node], "afe", [helper.make_tensor_value_info("x", F, [None, 5])],
                          [helper.make_tensor_value_info("y", F, [None, 3])], [idx])
    cases["arrayfeatureextractor"] = (helper.make_model(g, opset_imports=ML_OPSET,
                                                        ir_version=8), [xc])
    cases["binarizer"] = (one_node("Binarizer", [("x", F, [None, 5])], [("y", F, [None, 5])],
                                   threshold=0.3), [xc])
    xi = xc.copy()
    xi[1, 2] = np.nan
    xi[3, 0] = np.nan
    cases["imputer_nan"] = (one_node("Imputer", [("x", F, [None, 5])], [("y", F, [None, 5])],
                                     imputed_value_floats=[1.0, 2, 3, 4, 5],
                                     replaced_value_float=float("nan")), [xi])
    cases["imputer_value"] = (one_node("Imputer", [("x", F, [None, 5])], [("y", F, [None, 5])],
                                       imputed_value_floats=[-7.0],
                                       replaced_value_float=0.0), [xc])
    cases.update(tree_cases(rng))
    # SVMRegressor in liblinear's form (no support vectors) and one_class
    cases["svmregressor_linear"] = (
        one_node("SVMRegressor", [("x", F, [None, 5])], [("y", F, [None, 1])],
                 coefficients=coef3[:5], rho=[0.25], kernel_type="LINEAR",
                 kernel_params=[0.0, 0.0, 0.0]), [xc])
    sv = rng.normal(size=(4, 5)).astype(np.float32)
    cases["svmregressor_rbf_one_class"] = (
        one_node("SVMRegressor", [("x", F, [None, 5])], [("y", F, [None, 1])],
                 coefficients=[0.5, -0.25, 1.0, 0.75], rho=[-0.4], kernel_type="RBF",
                 kernel_params=[0.3, 0.0, 3.0], n_supports=4, one_class=1,
                 support_vectors=sv.ravel().tolist()), [xc])
    # LabelEncoder, numbers to numbers (IsolationForest maps its trees' leaves with it)
    I64 = TensorProto.INT64
    cases["labelencoder_int_float"] = (
        one_node("LabelEncoder", [("x", I64, [None, 3])], [("y", F, [None, 3])],
                 keys_int64s=[3, -1, 7, 3, 12], values_floats=[0.5, -2.0, 7.25, 9.0, 1e6],
                 default_float=-4.5),
        [np.array([[3, 7, 5], [-1, 12, 0], [7, 7, 3]], np.int64)])
    cases["labelencoder_float_int"] = (
        one_node("LabelEncoder", [("x", F, [None])], [("y", I64, [None])],
                 keys_floats=[0.5, -1.25, 3.0], values_int64s=[10, 20, 30]),
        [np.array([3.0, 0.5, 0.25, -1.25, 3.0, 8.0], np.float32)])
    # OneHotEncoder: unknown values give a row of zeros (zeros = 1)
    cases["onehotencoder"] = (
        one_node("OneHotEncoder", [("x", I64, [None, 2])], [("y", F, [None, 2, 4])],
                 cats_int64s=[7, 2, -1, 30], zeros=1),
        [np.array([[2, 7], [30, 5], [-1, 2]], np.int64)])
    cases.update(scan_topk_cases(rng))
    for name, (m, ins) in cases.items():
        write_case(os.path.join(out, "test_" + name), m, ins)
    gen_sklearn(out)


def scan_topk_cases(rng):
    """TopK with ties and infinities (ONNX: the lower index first), and Scan
    with the pairwise-distance body skl2onnx writes for KNeighbors models
    (the attribute form of axes, and opset 18's input form)."""
    F, I64 = TensorProto.FLOAT, TensorProto.INT64
    out = {}
    xt = np.array([[1, 3, 3, -np.inf, 3, 0, -np.inf, 1],
                   [2, 2, 2, 2, -1, 5, np.inf, 0],
                   [-np.inf, -np.inf, -np.inf, 4, -np.inf, 4, 4, -np.inf]], np.float32)
    for name, k, axis, largest in (("topk_ties", 6, 1, 1), ("topk_ties_smallest", 7, -1, 0),
                                   ("topk_axis0", 2, 0, 1), ("topk_all", 8, 1, 1)):
        node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=axis,
                                largest=largest)
        n = xt.shape[axis]
        shape = [3, k] if axis != 0 else [k, 8]
        g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", F, [3, 8])],
                              [helper.make_tensor_value_info("values", F, shape),
                               helper.make_tensor_value_info("indices", I64, shape)],
                              [numpy_helper.from_array(np.array([k], np.int64), "k")])
        assert k <= n
        out[name] = (helper.make_model(g, opset_imports=ML_OPSET, ir_version=8), [xt])
    # integers (exact, through halving steps of Max/Min): ties, the extremes, odd lengths
    big = np.iinfo(np.int64)
    xi = np.array([[5, big.min, 5, 9, big.max, 5, -3], [0, 0, 0, 0, 0, 0, 0],
                   [big.min, 2, big.min, 7, 1 << 40, (1 << 40) + 1, 2]], np.int64)
    for name, x, k, axis, largest in (("topk_int64", xi, 5, 1, 1),
                                      ("topk_int32_smallest", (xi % 1000).astype(np.int32), 2,
                                       0, 0)):
        node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=axis,
                                largest=largest)
        dt = helper.np_dtype_to_tensor_dtype(x.dtype)
        shape = [3, k] if axis != 0 else [k, 7]
        g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", dt, [3, 7])],
                              [helper.make_tensor_value_info("values", dt, shape),
                               helper.make_tensor_value_info("indices", I64, shape)],
                              [numpy_helper.from_array(np.array([k], np.int64), "k")])
        out[name] = (helper.make_model(g, opset_imports=ML_OPSET, ir_version=8), [x])
    ref = rng.normal(size=(9, 5)).astype(np.float32)
    xq = rng.normal(size=(4, 5)).astype(np.float32)
    for name, opset in (("scan_sqeuclidean", 17), ("scan_sqeuclidean_opset18", 18)):
        sub = (["next_in", "next"] if opset == 17 else ["next", "next_in"])
        nodes = [helper.make_node("Identity", ["next_in"], ["next_out"]),
                 helper.make_node("Sub", sub, ["diff"])]
        inits = []
        if opset == 17:
            nodes.append(helper.make_node("ReduceSumSquare", ["diff"], ["red"], axes=[1],
                                          keepdims=0))
        else:
            inits.append(numpy_helper.from_array(np.array([-1], np.int64), "axes"))
            nodes.append(helper.make_node("ReduceSumSquare", ["diff", "axes"], ["red"],
                                          keepdims=0))
        nodes.append(helper.make_node("Identity", ["red"], ["scan_out"]))
        body = helper.make_graph(nodes, "body",
                                 [helper.make_tensor_value_info("next_in", F, [None, 5]),
                                  helper.make_tensor_value_info("next", F, [5])],
                                 [helper.make_tensor_value_info("next_out", F, [None, 5]),
                                  helper.make_tensor_value_info("scan_out", F, [None])], inits)
        scan = helper.make_node("Scan", ["x", "ref"], ["state", "dist"], body=body,
                                num_scan_inputs=1)
        g = helper.make_graph([scan], name, [helper.make_tensor_value_info("x", F, [None, 5])],
                              [helper.make_tensor_value_info("state", F, [None, 5]),
                               helper.make_tensor_value_info("dist", F, [9, None])],
                              [numpy_helper.from_array(ref, "ref")])
        ops = [helper.make_opsetid("", opset)]
        out[name] = (helper.make_model(g, opset_imports=ops, ir_version=8), [xq])
    return out


def tree_cases(rng):
    """Hand-made tree ensembles: every rule, missing values tracked both
    ways, several trees, the regressor's aggregates and the classifier's
    post transforms (skl2onnx's exports below use only BRANCH_LEQ)."""
    F, I64 = TensorProto.FLOAT, TensorProto.INT64
    # two trees over 3 features; tree 0: node 0 (f0 < 0.5) -> 1 | 2, node 2
    # (f1 >= -0.25) -> 3 | 4; tree 1: node 0 (f2 > 0) -> 1 | 2; node 1 (f0 <= 1) -> 3 | 4
    nodes = dict(
        nodes_treeids=[0, 0, 0, 0, 0, 1, 1, 1, 1, 1],
        nodes_nodeids=[0, 1, 2, 3, 4, 0, 1, 2, 3, 4],
        nodes_featureids=[0, 0, 1, 0, 0, 2, 0, 0, 0, 0],
        nodes_values=[0.5, 0, -0.25, 0, 0, 0.0, 1.0, 0, 0, 0],
        nodes_modes=["BRANCH_LT", "LEAF", "BRANCH_GTE", "LEAF", "LEAF",
                     "BRANCH_GT", "BRANCH_LEQ", "LEAF", "LEAF", "LEAF"],
        nodes_truenodeids=[1, 0, 3, 0, 0, 1, 3, 0, 0, 0],
        nodes_falsenodeids=[2, 0, 4, 0, 0, 2, 4, 0, 0, 0],
        nodes_missing_value_tracks_true=[1, 0, 0, 0, 0, 0, 1, 0, 0, 0])
    leaves = [(0, 1), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4)]
    x = rng.normal(size=(12, 3)).astype(np.float32)
    x[0] = [0.5, -0.25, 0.0]  # on every threshold
    x[1] = [np.nan, 0.3, np.nan]
    x[2] = [0.2, np.nan, 1.0]
    x[3] = [1.0, -0.25, 0.5]
    out = {}
    for pt in ("NONE", "LOGISTIC", "SOFTMAX"):
        ids, tids, nids, ws = [], [], [], []
        for k, (t, n) in enumerate(leaves):
            for c in range(3):
                tids.append(t)
                nids.append(n)
                ids.append(c)
                ws.append(float(rng.normal()))
        out[f"treeensembleclassifier_{pt.lower()}"] = (one_node(
            "TreeEnsembleClassifier", [("x", F, [None, 3])],
            [("label", I64, [None]), ("scores", F, [None, 3])], class_ids=ids,
            class_treeids=tids, class_nodeids=nids, class_weights=ws,
            classlabels_int64s=[4, 5, 6], base_values=[0.1, -0.2, 0.3], post_transform=pt,
            **nodes), [x])
        # binary: weights for one class only, of both signs or all >= 0
        # (onnxruntime makes the two scores and the label differently)
        for sign, w in (("", rng.normal(size=len(leaves))),
                        ("_positive", rng.uniform(0, 0.5, size=len(leaves)))):
            out[f"treeensembleclassifier_binary{sign}_{pt.lower()}"] = (one_node(
                "TreeEnsembleClassifier", [("x", F, [None, 3])],
                [("label", I64, [None]), ("scores", F, [None, 2])],
                class_ids=[0] * len(leaves), class_treeids=[t for t, _ in leaves],
                class_nodeids=[n for _, n in leaves], class_weights=[float(v) for v in w],
                classlabels_int64s=[0, 1], base_values=[0.05], post_transform=pt, **nodes),
                [x])
    for agg in ("SUM", "AVERAGE", "MIN", "MAX"):
        tids, nids, ids, ws = [], [], [], []
        for t, n in leaves:
            for c in range(2):
                tids.append(t)
                nids.append(n)
                ids.append(c)
                ws.append(float(rng.normal()))
        out[f"treeensembleregressor_{agg.lower()}"] = (one_node(
            "TreeEnsembleRegressor", [("x", F, [None, 3])], [("y", F, [None, 2])],
            n_targets=2, target_ids=ids, target_treeids=tids, target_nodeids=nids,
            target_weights=ws, aggregate_function=agg,
            base_values=[0.5, -1.0] if agg != "MIN" else None, **nodes), [x])
    return out


def patch_skl2onnx():
    """skl2onnx 1.20 hands HistGradientBoosting's missing_go_to_left to onnx as a
    numpy bool, which scikit-learn 1.9 made it and onnx's make_attribute refuses
    ("Expected an int, got a boolean"): give it the int the attribute holds."""
    import skl2onnx.common.tree_ensemble as te
    orig = te.add_node

    def add_node(*a, **kw):
        if "nodes_missing_value_tracks_true" in kw:
            kw["nodes_missing_value_tracks_true"] = int(kw["nodes_missing_value_tracks_true"])
        return orig(*a, **kw)
    te.add_node = add_node


def gen_sklearn(out):
    """scikit-learn pipelines as skl2onnx exports them (no ZipMap)."""
    patch_skl2onnx()
    from skl2onnx import to_onnx
    from sklearn.datasets import load_digits, make_regression
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge, SGDClassifier
    from sklearn.neural_network import MLPClassifier, MLPRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import (MinMaxScaler, Normalizer, RobustScaler,
                                       StandardScaler)
    from sklearn.svm import LinearSVR

    warnings.filterwarnings("ignore")
    rng = np.random.default_rng(5)
    X, y = load_digits(return_X_y=True)
    X = X.astype(np.float32)
    Xr, yr = make_regression(200, 10, random_state=0)
    Xr = Xr.astype(np.float32)
    models = {
        "logreg": (make_pipeline(StandardScaler(), LogisticRegression(max_iter=300)), X, y),
        "logreg_binary": (make_pipeline(StandardScaler(), LogisticRegression(max_iter=300)), X,
                          (y > 4).astype(np.int64)),
        "mlp_classifier": (make_pipeline(StandardScaler(), MLPClassifier(
            hidden_layer_sizes=(32,), max_iter=60, random_state=0)), X, y),
        "mlp_classifier_binary": (make_pipeline(MinMaxScaler(), MLPClassifier(
            hidden_layer_sizes=(16,), max_iter=60, random_state=0)), X, (y > 4).astype(np.int64)),
        "mlp_regressor": (make_pipeline(StandardScaler(), MLPRegressor(
            hidden_layer_sizes=(16,), max_iter=60, random_state=0)), Xr, yr),
        "linear_regression": (LinearRegression(), Xr, yr),
        "ridge": (make_pipeline(RobustScaler(), Ridge()), Xr, yr),
        "linear_svr": (LinearSVR(random_state=0), Xr, yr),
        "sgd_classifier": (make_pipeline(Normalizer(), SGDClassifier(random_state=0)), X, y),
        "pca_logreg": (make_pipeline(PCA(8, random_state=0), LogisticRegression(max_iter=300)),
                       X, y),
    }
    from sklearn.ensemble import (ExtraTreesRegressor, GradientBoostingClassifier,
                                  GradientBoostingRegressor, RandomForestClassifier)
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
    yb = (y > 4).astype(np.int64)
    models.update({
        "decision_tree": (DecisionTreeClassifier(max_depth=8, random_state=0), X, y),
        "random_forest": (make_pipeline(StandardScaler(), RandomForestClassifier(
            n_estimators=8, max_depth=6, random_state=0)), X, y),
        "random_forest_binary": (RandomForestClassifier(n_estimators=6, max_depth=5,
                                                        random_state=0), X, yb),
        "gradient_boosting": (GradientBoostingClassifier(n_estimators=4, max_depth=3,
                                                         random_state=0), X, y),
        "gradient_boosting_binary": (GradientBoostingClassifier(n_estimators=6, max_depth=3,
                                                                random_state=0), X, yb),
        "gradient_boosting_regressor": (GradientBoostingRegressor(n_estimators=10, max_depth=3,
                                                                  random_state=0), Xr, yr),
        "extra_trees_regressor": (ExtraTreesRegressor(n_estimators=5, max_depth=6,
                                                      random_state=0), Xr, yr),
        "decision_tree_regressor_2": (DecisionTreeRegressor(max_depth=5, random_state=0), Xr,
                                      np.stack([yr, -yr / 2], axis=1)),
    })
    from sklearn.svm import SVC, SVR, NuSVC, NuSVR, OneClassSVM
    Xs = StandardScaler().fit_transform(Xr).astype(np.float32)
    models.update({
        "svr_rbf": (make_pipeline(StandardScaler(), SVR(C=10.0)), Xr, yr),
        "svr_poly": (SVR(kernel="poly", degree=3, coef0=1.0, C=5.0), Xs, yr),
        "svr_sigmoid": (SVR(kernel="sigmoid", gamma=0.01, coef0=0.5), Xs, yr),
        "svr_linear_kernel": (SVR(kernel="linear"), Xs, yr),
        "nusvr": (NuSVR(nu=0.3), Xs, yr),
        "one_class_svm": (OneClassSVM(nu=0.2, gamma=0.05), Xs, None),
        # SVMClassifier, one-vs-one (a subset of the digits: fewer support vectors)
        "svc_rbf": (make_pipeline(StandardScaler(), SVC()), X[:240], y[:240] % 4),
        "svc_binary": (SVC(gamma="scale"), X[:200], (y[:200] > 4).astype(np.int64)),
        "svc_poly": (SVC(kernel="poly", degree=2, decision_function_shape="ovo"), X[:200],
                     y[:200] % 3),
        "nusvc_linear": (NuSVC(kernel="linear", nu=0.3), X[:200], y[:200] % 3),
        # with probability estimates (Platt scaling per pair, coupled as libsvm does)
        "svc_proba": (SVC(probability=True, random_state=0), X[:240], y[:240] % 4),
        "svc_proba_binary": (make_pipeline(StandardScaler(), SVC(probability=True,
                                                                 random_state=0)),
                             X[:200], (y[:200] > 4).astype(np.int64)),
    })
    # KNeighbors*: Scan (pairwise distances, the body import_scan.c runs) and TopK
    from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
    models.update({
        "knn_classifier": (KNeighborsClassifier(3), X[:150], y[:150]),
        "knn_classifier_binary": (make_pipeline(StandardScaler(), KNeighborsClassifier(5)),
                                  X[:120], (y[:120] > 4).astype(np.int64)),
        # 1000 reference rows: two blocks of ops_scan.c's distances at batch 7
        "knn_classifier_distance": (KNeighborsClassifier(4, weights="distance"), X[:1000],
                                    y[:1000] % 3),
        "knn_regressor": (KNeighborsRegressor(4), Xr[:120], yr[:120]),
    })
    # HistGradientBoosting*: TreeEnsemble ops whose nodes send missing values (NaN) one
    # way or the other (nodes_missing_value_tracks_true); NaN in the rows tested
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    Xn = X.copy()
    Xn[::7, 3] = np.nan
    Xn[1::5, 10] = np.nan
    Xrn = Xr.copy()
    Xrn[::3, 2] = np.nan
    models.update({
        "hist_gradient_boosting": (HistGradientBoostingClassifier(max_iter=4, random_state=0),
                                   Xn, y),
        "hist_gradient_boosting_binary": (HistGradientBoostingClassifier(
            max_iter=6, random_state=0), Xn, (y > 4).astype(np.int64)),
        "hist_gradient_boosting_regressor": (HistGradientBoostingRegressor(
            max_iter=8, random_state=0), Xrn, yr),
    })
    # more of what skl2onnx exports from standard ops: clustering, naive Bayes,
    # discriminant analysis, boosting and bagging, calibration
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.cluster import KMeans
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.ensemble import AdaBoostClassifier, BaggingClassifier
    from sklearn.naive_bayes import GaussianNB, MultinomialNB
    from sklearn.svm import LinearSVC
    models.update({
        "kmeans": (KMeans(4, random_state=0, n_init=2), X, None),
        "gaussian_nb": (GaussianNB(), X, y),
        "multinomial_nb": (MultinomialNB(), X, y),
        "lda": (LinearDiscriminantAnalysis(), X, y),
        "adaboost": (AdaBoostClassifier(n_estimators=5, random_state=0), X, y),
        "bagging": (BaggingClassifier(n_estimators=3, random_state=0), X, y),
        "calibrated_linear_svc": (CalibratedClassifierCV(LinearSVC(random_state=0), cv=2), X, y),
    })
    # categorical features: OneHotEncoder (skl2onnx: zeros = 0 for handle_unknown='error'),
    # alone on integer columns and in a ColumnTransformer beside a scaler
    from sklearn.compose import ColumnTransformer
    from sklearn.preprocessing import OneHotEncoder
    Xc = rng.integers(0, 5, size=(120, 3)).astype(np.int64)
    yc = ((Xc[:, 0] + Xc[:, 2]) % 3).astype(np.int64)
    Xm = np.concatenate([Xc[:, :2], rng.normal(size=(120, 2))], axis=1).astype(np.float32)
    models.update({
        "onehot_logreg": (make_pipeline(OneHotEncoder(), LogisticRegression(max_iter=300)), Xc,
                          yc),
        "column_transformer": (make_pipeline(ColumnTransformer(
            [("cat", OneHotEncoder(handle_unknown="ignore"), [0, 1]),
             ("num", StandardScaler(), [2, 3])]), LogisticRegression(max_iter=300)), Xm, yc),
    })
    # IsolationForest: tree ensembles, LabelEncoder (leaf -> path length), Log, Pow
    from sklearn.ensemble import IsolationForest
    models["isolation_forest"] = (IsolationForest(n_estimators=5, random_state=0), X, None)
    # string class labels (tensor(string) outputs: BYTES)
    names = np.array(["zero", "one", "two", "three", "four", "f\u00fcnf", "six", "seven",
                      "eight", "nine"])
    ys = names[y]
    models.update({
        "logreg_strings": (make_pipeline(StandardScaler(), LogisticRegression(max_iter=300)), X,
                           ys),
        "logreg_binary_strings": (LogisticRegression(max_iter=300), X, names[(y > 4) * 5]),
        "random_forest_strings": (RandomForestClassifier(n_estimators=4, max_depth=5,
                                                         random_state=0), X, ys),
        "svc_strings": (SVC(), X[:200], names[y[:200] % 4]),
        "knn_classifier_strings": (KNeighborsClassifier(3), X[:150], ys[:150]),
    })
    for name, (m, XX, yy) in models.items():
        if yy is None:
            m.fit(XX)
        else:
            m.fit(XX, yy)
        try:
            onx = to_onnx(m, XX[:1], options={"zipmap": False},
                          target_opset={"": 17, "ai.onnx.ml": 3})
        except NameError:  # a model without probabilities has no ZipMap option
            onx = to_onnx(m, XX[:1], target_opset={"": 17, "ai.onnx.ml": 3})
        write_case(os.path.join(out, "test_sklearn_" + name), onx, [XX[:7]])
    m = models["logreg"][0]
    onx = to_onnx(m, X[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    onnx.save(onx, os.path.join(out, "logreg_zipmap.onnx"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=["ml", "models"])
    ap.add_argument("--model", action="append", help="with --only models: just these")
    a = ap.parse_args()
    if a.only in (None, "ml"):
        gen_ml(os.path.join(HERE, "ml"))
    if a.only in (None, "models"):
        import gen_models
        gen_models.gen(os.path.join(HERE, "models"), a.model)


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    main()
