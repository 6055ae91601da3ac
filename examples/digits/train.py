#!/usr/bin/env python3
"""Train the digits example function: an MLP on scikit-learn's 8x8 digits.

    python3 examples/digits/train.py OUTDIR

writes into OUTDIR:

  digits.safetensors  the trained weights, named as PyTorch names the
                      state_dict of nn.Sequential(Linear(64, 64), ReLU(),
                      Linear(64, 10)): 0.weight [64,64], 0.bias, 2.weight
                      [10,64], 2.bias (F32)
  digits.json         the manifest for the built-in `mlp` kind: input
                      "pixels" FP32 [-1, 64] (raw pixel values 0..16, row by
                      row), output "probs" FP32 [-1, 10] (softmax)
  test.safetensors    the held-out split: x F32 [n, 64] raw pixels, y I64 [n]
  request.json        one held-out image as a KServe v2 inference request

The data set (1797 images, shipped inside scikit-learn) is split 75/25 with a
fixed seed, stratified by digit. The training inputs are scaled by 1/16; the
scale is folded into the first layer's weights on export, so the deployed
function takes raw pixel values.
"""
import json
import os
import struct
import sys

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier


def save_safetensors(path, tensors):
    """tensors: dict name -> numpy array (float32 or int64), written in order."""
    kinds = {np.dtype("float32"): "F32", np.dtype("int64"): "I64"}
    header, blobs, offset = {}, [], 0
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        raw = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": kinds[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main(argv):
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    out = argv[0]
    os.makedirs(out, exist_ok=True)
    digits = load_digits()
    x, y = digits.data.astype(np.float32), digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.25, random_state=0, stratify=y)

    clf = MLPClassifier(hidden_layer_sizes=(64,), activation="relu", alpha=1e-4,
                        max_iter=600, random_state=0)
    clf.fit(x_train / 16.0, y_train)
    acc = clf.score(x_test / 16.0, y_test)

    # sklearn keeps coefs_[i] as [in, out]; PyTorch's Linear.weight is [out, in].
    w0 = (clf.coefs_[0].T / 16.0).astype(np.float32)
    w2 = clf.coefs_[1].T.astype(np.float32)
    save_safetensors(os.path.join(out, "digits.safetensors"), {
        "0.weight": w0, "0.bias": clf.intercepts_[0].astype(np.float32),
        "2.weight": w2, "2.bias": clf.intercepts_[1].astype(np.float32),
    })
    manifest = {
        "name": "digits", "kind": "mlp",
        "inputs": [{"name": "pixels", "datatype": "FP32", "shape": [-1, 64]}],
        "outputs": [{"name": "probs", "datatype": "FP32", "shape": [-1, 10]}],
        "max_batch_size": 64, "max_queue_delay_us": 1000,
        "config": {"activations": ["relu", "identity"], "softmax": True},
    }
    with open(os.path.join(out, "digits.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    save_safetensors(os.path.join(out, "test.safetensors"), {"x": x_test, "y": y_test})
    request = {"inputs": [{"name": "pixels", "shape": [1, 64], "datatype": "FP32",
                           "data": [float(v) for v in x_test[0]]}]}
    with open(os.path.join(out, "request.json"), "w") as f:
        json.dump(request, f)
        f.write("\n")
    print(f"digits: trained on {len(y_train)} images, held-out accuracy {acc:.4f} "
          f"({len(y_test)} images; request.json shows a {y_test[0]}); wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
