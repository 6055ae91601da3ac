#!/usr/bin/env python3
"""onnxruntime's side of tests/bench/bench_onnx (run by it with GF_PYTHON).

    onnx_ref.py fill MODEL OUT SEED        refill a stripped graph's weights
                                           (tests/gateway/onnx_models_test.fill)
    onnx_ref.py case MODEL DIR SEED BATCH  a test in ONNX's backend-test layout (the
                                           refilled model, inputs, onnxruntime's
                                           outputs), for onnx_conformance
    onnx_ref.py serve MODEL BATCH THREADS  an onnxruntime session on the cpu with
                                           THREADS intra-op threads: prints "ready"
                                           after a warm-up, then for each line read
                                           one run's "WALL_MS CPU_MS" (bench_onnx
                                           interleaves them with its own runs)
"""
import os
import sys
import time

import numpy as np
import onnx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gateway"))


def case(model, out, seed, batch):
    import onnxruntime as ort
    from onnx import numpy_helper
    from onnx_models_test import fill, image, tokens
    m = fill(onnx.load(model), seed)
    os.makedirs(os.path.join(out, "test_data_set_0"), exist_ok=True)
    onnx.save(m, os.path.join(out, "model.onnx"))
    names = [i.name for i in m.graph.input]
    feeds = tokens(batch, 12, seed) if "input_ids" in names else image(batch, seed)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = sess.run(None, feeds)
    for k, n in enumerate(names):
        with open(os.path.join(out, "test_data_set_0", f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[n], n).SerializeToString())
    for k, (o, a) in enumerate(zip(m.graph.output, outs)):
        with open(os.path.join(out, "test_data_set_0", f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, o.name).SerializeToString())
    return 0


def main():
    if sys.argv[1] == "fill":
        from onnx_models_test import fill
        m = fill(onnx.load(sys.argv[2]), int(sys.argv[4]))
        onnx.save(m, sys.argv[3])
        return 0
    if sys.argv[1] == "case":
        return case(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    import onnxruntime as ort
    path, batch, threads = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    i = sess.get_inputs()[0]
    x = np.random.default_rng(0).normal(size=(batch, *i.shape[1:])).astype(np.float32)
    sess.run(None, {i.name: x})
    print("ready", flush=True)
    for _ in sys.stdin:
        t, c = time.perf_counter(), time.process_time()
        sess.run(None, {i.name: x})
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        print(f"{wall * 1e3:.3f} {cpu * 1e3:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
