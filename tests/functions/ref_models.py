#!/usr/bin/env python3
"""Independent numpy references for the built-in function kinds.

Written from the models' definitions (PyTorch's nn.Sequential, torchvision's
ResNet, Hugging Face's BertForSequenceClassification), not from our C code.
For one case it writes into --out:

  weights.safetensors   random weights with the state_dict names PyTorch gives
                        them, in the requested dtype (F32, F16 or BF16)
  manifest.json         a manifest for the kind
  inputs.safetensors    the inputs, named as in the manifest
  expected.safetensors  the outputs (F64), computed in float64 from exactly the
                        weight values stored (after rounding to the dtype)

Only numpy and the standard library are used (safetensors are written by a
small writer here, BF16 rounding is done on the bits).
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

# ---- safetensors -------------------------------------------------------------------

ST_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


def write_safetensors(path, tensors):
    """tensors: list of (name, st_dtype, shape, raw little-endian bytes)."""
    header, off = {}, 0
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, raw in tensors:
            f.write(raw)
    os.replace(tmp, path)


def plain(name, arr, dt):
    arr = np.ascontiguousarray(arr, dtype=ST_DTYPES[dt])
    return (name, dt, arr.shape, arr.tobytes())


def bf16_bits(a32):
    """Round float32 values to bfloat16 (nearest, ties to even) -> uint16 bits."""
    u = np.ascontiguousarray(a32, dtype="<f4").view("<u4").astype(np.uint64)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return r.astype("<u2")


class Weights:
    """A state_dict being built: stored bytes plus the float64 values stored."""

    def __init__(self, dtype, rng):
        self.dtype, self.rng = dtype, rng
        self.tensors, self.values = [], {}

    def add(self, name, a32):
        a32 = np.asarray(a32, dtype=np.float32)
        if self.dtype == "F32":
            raw, val = a32.astype("<f4").tobytes(), a32.astype(np.float64)
        elif self.dtype == "F16":
            h = a32.astype("<f2")
            raw, val = h.tobytes(), h.astype(np.float64)
        else:
            bits = bf16_bits(a32)
            raw = bits.tobytes()
            val = (bits.astype("<u4") << 16).view("<f4").astype(np.float64).reshape(a32.shape)
        self.tensors.append((name, self.dtype, a32.shape, raw))
        self.values[name] = val
        return val

    def extra(self, name, arr, dt):
        """A tensor the kind must ignore (num_batches_tracked, position_ids)."""
        self.tensors.append(plain(name, arr, dt))

    def normal(self, name, shape, std):
        return self.add(name, self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std))

    def uniform(self, name, shape, lo, hi):
        return self.add(name, self.rng.uniform(lo, hi, shape).astype(np.float32))

    def __getitem__(self, name):
        return self.values[name]


# ---- mlp: nn.Sequential(Linear, act, Linear, act, ..., Linear[, Softmax]) ------------

def gelu_erf(x):
    erf = np.frompyfunc(math.erf, 1, 1)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)).astype(np.float64))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


ACTS = {
    "identity": lambda x: x,
    "gelu_tanh": gelu_tanh,
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": gelu_erf,
    "tanh": np.tanh,
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
}


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def case_mlp(a, w):
    dims = [int(d) for d in a.mlp_dims.split(",")]
    acts = a.mlp_acts.split(",")
    assert len(acts) == len(dims) - 1
    x = w.rng.standard_normal((a.batch, dims[0])).astype(np.float32)
    h = x.astype(np.float64)
    for i in range(len(dims) - 1):
        idx = 2 * i  # Sequential index: Linear at even positions, activations between
        W = w.normal(f"{idx}.weight", (dims[i + 1], dims[i]), 1.0 / math.sqrt(dims[i]))
        b = w.normal(f"{idx}.bias", (dims[i + 1],), 0.1)
        h = ACTS[acts[i]](h @ W.T + b)
    if a.softmax:
        h = softmax(h)
    manifest = {
        "name": "ref-mlp", "kind": "mlp",
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, dims[0]]}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, dims[-1]]}],
        "max_batch_size": 64,
        "config": {"activations": acts, "softmax": bool(a.softmax)},
    }
    return manifest, [plain("x", x, "F32")], [("y", h)]


# ---- mlp: any nn.Sequential of Linear, BatchNorm1d, LayerNorm and activations ---------

# PyTorch's class names and str(module) for the activations
TORCH_ACTS = {"identity": ("Identity", "Identity()"), "relu": ("ReLU", "ReLU()"),
              "gelu": ("GELU", "GELU(approximate='none')"),
              "gelu_tanh": ("GELU(approximate='tanh')", "GELU(approximate='tanh')"),
              "silu": ("SiLU", "SiLU()"), "tanh": ("Tanh", "Tanh()"),
              "sigmoid": ("Sigmoid", "Sigmoid()")}


def case_seq(a, w):
    """--modules "linear:4:8,batchnorm1d,relu,linear:8:2": module i of the
    Sequential is the i-th entry (batchnorm1d[-noaffine][:eps],
    layernorm[-noaffine][:eps], dropout, softmax, an activation; a first
    normalisation takes its width as batchnorm1d:4). Tensors are named and
    ordered as the state_dict names them; the forward pass is computed here in
    float64. --modules-config: "layers" (class names), "str" (what str(module)
    prints), "none" (no config) or "activations:relu,identity"."""
    specs = a.modules.split(",")
    first = specs[0].split(":")
    width = int(first[1]) if len(first) > 1 else None
    x32 = w.rng.standard_normal((a.batch, width)).astype(np.float32) * np.float32(1.5)
    h = x32.astype(np.float64)
    names, strs, bn_eps = [], [], None
    for i, spec in enumerate(specs):
        p = spec.split(":")
        kind = p[0]
        if kind == "linear":
            fin, fout = int(p[1]), int(p[2])
            W = w.normal(f"{i}.weight", (fout, fin), 1.0 / math.sqrt(fin))
            b = w.normal(f"{i}.bias", (fout,), 0.1)
            h = h @ W.T + b
            names.append("Linear")
            strs.append(f"Linear(in_features={fin}, out_features={fout}, bias=True)")
        elif kind.startswith("batchnorm1d") or kind.startswith("layernorm"):
            c = h.shape[1]
            affine = not kind.endswith("-noaffine")
            eps = 1e-5  # PyTorch's default; "batchnorm1d:1e-3" sets it
            if len(p) > 1 and any(ch in p[1] for ch in ".e"):
                eps = float(p[1])
            if affine:
                g = w.uniform(f"{i}.weight", (c,), 0.5, 1.5)
                beta = w.normal(f"{i}.bias", (c,), 0.3)
            else:
                g, beta = np.ones(c), np.zeros(c)
            if kind.startswith("batchnorm1d"):
                mean = w.normal(f"{i}.running_mean", (c,), 0.5)
                var = w.uniform(f"{i}.running_var", (c,), 0.5, 2.0)
                w.extra(f"{i}.num_batches_tracked", np.array(100, dtype=np.int64), "I64")
                h = (h - mean) / np.sqrt(var + eps) * g + beta
                bn_eps = eps if eps != 1e-5 else bn_eps
                names.append("BatchNorm1d")
                strs.append(f"BatchNorm1d({c}, eps={eps:g}, momentum=0.1, affine={affine}, "
                            "track_running_stats=True)")
            else:
                h = layernorm(h, g, beta, eps)
                names.append("LayerNorm")
                strs.append(f"LayerNorm(({c},), eps={eps:g}, elementwise_affine={affine})")
        elif kind == "dropout":
            names.append("Dropout")
            strs.append("Dropout(p=0.5, inplace=False)")
        elif kind == "softmax":
            h = softmax(h)
            names.append("Softmax")
            strs.append("Softmax(dim=-1)")
        else:
            h = ACTS[kind](h)
            names.append(TORCH_ACTS[kind][0])
            strs.append(TORCH_ACTS[kind][1])
    if a.modules_config == "layers":
        config = {"layers": names}
    elif a.modules_config == "str":
        config = {"layers": strs}
    elif a.modules_config.startswith("activations:"):
        config = {"activations": a.modules_config.split(":", 1)[1].split(",")}
    else:
        config = {}
    if bn_eps is not None and a.modules_config not in ("str",):
        config["bn_eps"] = bn_eps  # "layers" with bare class names takes it from here too
    manifest = {
        "name": "ref-seq", "kind": "mlp",
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, width]}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, h.shape[1]]}],
        "max_batch_size": 64, "config": config,
    }
    return manifest, [plain("x", x32, "F32")], [("y", h)]


# ---- torchvision ResNet ------------------------------------------------------------

def conv2d(x, wt, stride, pad):
    """y[n,o,i,j] = sum_{c,p,q} w[o,c,p,q] * xpad[n,c,i*stride+p,j*stride+q]."""
    n, c, h, wd = x.shape
    o, _, kh, kw = wt.shape
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    y = np.zeros((n, o, oh, ow))
    for p in range(kh):
        for q in range(kw):
            patch = xp[:, :, p:p + stride * (oh - 1) + 1:stride, q:q + stride * (ow - 1) + 1:stride]
            y += np.einsum("nchw,oc->nohw", patch, wt[:, :, p, q], optimize=True)
    return y


def batchnorm(x, w, prefix, eps=1e-5):
    g, b = w[prefix + ".weight"], w[prefix + ".bias"]
    m, v = w[prefix + ".running_mean"], w[prefix + ".running_var"]
    sh = (1, -1, 1, 1)
    return (x - m.reshape(sh)) / np.sqrt(v.reshape(sh) + eps) * g.reshape(sh) + b.reshape(sh)


def maxpool_3x3_s2_p1(x):
    n, c, h, wd = x.shape
    oh, ow = (h - 1) // 2 + 1, (wd - 1) // 2 + 1
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    y = np.full((n, c, oh, ow), -np.inf)
    for p in range(3):
        for q in range(3):
            y = np.maximum(y, xp[:, :, p:p + 2 * (oh - 1) + 1:2, q:q + 2 * (ow - 1) + 1:2])
    return y


RESNETS = {18: ("basic", [2, 2, 2, 2]), 34: ("basic", [3, 4, 6, 3]),
           50: ("bottleneck", [3, 4, 6, 3])}


def make_conv_bn(w, conv, bn, oc, ic, k):
    w.normal(conv + ".weight", (oc, ic, k, k), math.sqrt(2.0 / (ic * k * k)))
    w.uniform(bn + ".weight", (oc,), 0.5, 1.2)
    w.normal(bn + ".bias", (oc,), 0.1)
    w.normal(bn + ".running_mean", (oc,), 0.2)
    w.uniform(bn + ".running_var", (oc,), 0.5, 2.0)
    w.extra(bn + ".num_batches_tracked", np.array(100, dtype=np.int64), "I64")


def case_resnet(a, w):
    kind, blocks = RESNETS[a.depth]
    e = 4 if kind == "bottleneck" else 1
    make_conv_bn(w, "conv1", "bn1", 64, 3, 7)
    inplanes = 64
    plan = []
    for li, nb in enumerate(blocks):
        planes = 64 << li
        for bi in range(nb):
            s = 2 if (bi == 0 and li > 0) else 1
            pre = f"layer{li + 1}.{bi}"
            if kind == "basic":
                make_conv_bn(w, pre + ".conv1", pre + ".bn1", planes, inplanes, 3)
                make_conv_bn(w, pre + ".conv2", pre + ".bn2", planes, planes, 3)
            else:
                make_conv_bn(w, pre + ".conv1", pre + ".bn1", planes, inplanes, 1)
                make_conv_bn(w, pre + ".conv2", pre + ".bn2", planes, planes, 3)
                make_conv_bn(w, pre + ".conv3", pre + ".bn3", planes * 4, planes, 1)
            ds = s != 1 or inplanes != planes * e
            if ds:
                make_conv_bn(w, pre + ".downsample.0", pre + ".downsample.1", planes * e,
                             inplanes, 1)
            plan.append((pre, s, ds))
            inplanes = planes * e
    w.normal("fc.weight", (a.classes, inplanes), 1.0 / math.sqrt(inplanes))
    w.normal("fc.bias", (a.classes,), 0.1)

    x32 = w.rng.standard_normal((a.batch, 3, a.size, a.size)).astype(np.float32)
    relu = ACTS["relu"]
    x = x32.astype(np.float64)
    x = relu(batchnorm(conv2d(x, w["conv1.weight"], 2, 3), w, "bn1"))
    x = maxpool_3x3_s2_p1(x)
    for pre, s, ds in plan:
        if kind == "basic":
            out = relu(batchnorm(conv2d(x, w[pre + ".conv1.weight"], s, 1), w, pre + ".bn1"))
            out = batchnorm(conv2d(out, w[pre + ".conv2.weight"], 1, 1), w, pre + ".bn2")
        else:
            out = relu(batchnorm(conv2d(x, w[pre + ".conv1.weight"], 1, 0), w, pre + ".bn1"))
            out = relu(batchnorm(conv2d(out, w[pre + ".conv2.weight"], s, 1), w, pre + ".bn2"))
            out = batchnorm(conv2d(out, w[pre + ".conv3.weight"], 1, 0), w, pre + ".bn3")
        idn = x
        if ds:
            idn = batchnorm(conv2d(x, w[pre + ".downsample.0.weight"], s, 0), w,
                            pre + ".downsample.1")
        x = relu(out + idn)
    feat = x.mean(axis=(2, 3))
    logits = feat @ w["fc.weight"].T + w["fc.bias"]
    config = {} if a.infer_depth else {"depth": a.depth, "num_classes": a.classes}
    manifest = {
        "name": f"ref-resnet{a.depth}", "kind": "resnet",
        "inputs": [{"name": "input", "datatype": "FP32", "shape": [-1, 3, a.size, a.size]}],
        "outputs": [{"name": "logits", "datatype": "FP32", "shape": [-1, a.classes]}],
        "max_batch_size": 8, "config": config,
    }
    return manifest, [plain("input", x32, "F32")], [("logits", logits)]


# ---- Hugging Face BertForSequenceClassification --------------------------------------

def layernorm(x, g, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def case_bert(a, w):
    H, nh, I, L = a.hidden, a.heads, a.inter, a.layers
    d = H // nh
    eps = 1e-12
    w.normal("bert.embeddings.word_embeddings.weight", (a.vocab, H), 1.0)
    w.normal("bert.embeddings.position_embeddings.weight", (a.max_pos, H), 0.5)
    w.normal("bert.embeddings.token_type_embeddings.weight", (2, H), 0.5)
    w.extra("bert.embeddings.position_ids", np.arange(a.max_pos, dtype=np.int64)[None, :], "I64")

    def lin(name, o, i):
        w.normal(name + ".weight", (o, i), 1.0 / math.sqrt(i))
        w.normal(name + ".bias", (o,), 0.1)

    def ln(name):
        w.uniform(name + ".weight", (H,), 0.8, 1.2)
        w.normal(name + ".bias", (H,), 0.1)

    ln("bert.embeddings.LayerNorm")
    for i in range(L):
        p = f"bert.encoder.layer.{i}."
        for part in ("query", "key", "value"):
            lin(p + "attention.self." + part, H, H)
        lin(p + "attention.output.dense", H, H)
        ln(p + "attention.output.LayerNorm")
        lin(p + "intermediate.dense", I, H)
        lin(p + "output.dense", H, I)
        ln(p + "output.LayerNorm")
    lin("bert.pooler.dense", H, H)
    lin("classifier", a.labels, H)

    N, S = a.batch, a.seq
    ids = w.rng.integers(0, a.vocab, (N, S))
    ids[:, 0] = 101 % a.vocab  # a [CLS]-like first token
    mask = np.ones((N, S), dtype=np.int64)
    for n in range(1, N):  # later sequences are shorter: padded on the right
        keep = max(1, S - 2 * n)
        mask[n, keep:] = 0
        ids[n, keep:] = 0

    def dense(x, name):
        return x @ w[name + ".weight"].T + w[name + ".bias"]

    def norm(x, name):
        return layernorm(x, w[name + ".weight"], w[name + ".bias"], eps)

    x = (w["bert.embeddings.word_embeddings.weight"][ids]
         + w["bert.embeddings.position_embeddings.weight"][np.arange(S)][None, :, :]
         + w["bert.embeddings.token_type_embeddings.weight"][0][None, None, :])
    x = norm(x, "bert.embeddings.LayerNorm")
    additive = (1.0 - mask[:, None, None, :]) * -1e30  # HF: (1 - mask) * dtype min
    for i in range(L):
        p = f"bert.encoder.layer.{i}."

        def heads(t):
            return t.reshape(N, S, nh, d).transpose(0, 2, 1, 3)

        q = heads(dense(x, p + "attention.self.query"))
        k = heads(dense(x, p + "attention.self.key"))
        v = heads(dense(x, p + "attention.self.value"))
        probs = softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + additive)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(N, S, H)
        x1 = norm(dense(ctx, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        inter = gelu_erf(dense(x1, p + "intermediate.dense"))
        x = norm(dense(inter, p + "output.dense") + x1, p + "output.LayerNorm")
    pooled = np.tanh(dense(x[:, 0], "bert.pooler.dense"))
    logits = dense(pooled, "classifier")

    idt, mdt = a.id_dtype, a.mask_dtype
    kserve = {"I32": "INT32", "I64": "INT64"}
    config = {  # as Hugging Face writes config.json (extra fields are ignored)
        "architectures": ["BertForSequenceClassification"], "model_type": "bert",
        "hidden_size": H, "num_attention_heads": nh, "num_hidden_layers": L,
        "intermediate_size": I, "hidden_act": "gelu", "layer_norm_eps": eps,
        "max_position_embeddings": a.max_pos, "vocab_size": a.vocab, "type_vocab_size": 2,
        "hidden_dropout_prob": 0.1, "position_embedding_type": "absolute",
        "id2label": {str(j): f"LABEL_{j}" for j in range(a.labels)},
    }
    manifest = {
        "name": "ref-bert", "kind": "bert",
        "inputs": [{"name": "input_ids", "datatype": kserve[idt], "shape": [-1, -1]},
                   {"name": "attention_mask", "datatype": kserve[mdt], "shape": [-1, -1]}],
        "outputs": [{"name": "logits", "datatype": "FP32", "shape": [-1, a.labels]}],
        "max_batch_size": 8, "config": config,
    }
    inputs = [plain("input_ids", ids, idt), plain("attention_mask", mask, mdt)]
    return manifest, inputs, [("logits", logits)]


# ---- main ------------------------------------------------------------------------------

def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--kind", required=True, choices=["mlp", "seq", "resnet", "bert"])
    ap.add_argument("--dtype", default="F32", choices=["F32", "F16", "BF16"])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mlp-dims", default="64,48,32,10")
    ap.add_argument("--mlp-acts", default="relu,gelu,identity")
    ap.add_argument("--softmax", action="store_true")
    ap.add_argument("--modules", default="linear:4:8,batchnorm1d,relu,linear:8:2")
    ap.add_argument("--modules-config", default="layers")
    ap.add_argument("--depth", type=int, default=18, choices=sorted(RESNETS))
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--infer-depth", action="store_true", help="leave depth out of the config")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--inter", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--max-pos", type=int, default=64)
    ap.add_argument("--labels", type=int, default=3)
    ap.add_argument("--seq", type=int, default=12)
    ap.add_argument("--id-dtype", default="I64", choices=["I32", "I64"])
    ap.add_argument("--mask-dtype", default="I64", choices=["I32", "I64"])
    a = ap.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    w = Weights(a.dtype, rng)
    manifest, inputs, outputs = {"mlp": case_mlp, "seq": case_seq, "resnet": case_resnet,
                                 "bert": case_bert}[a.kind](a, w)
    os.makedirs(a.out, exist_ok=True)
    write_safetensors(os.path.join(a.out, "weights.safetensors"), w.tensors)
    write_safetensors(os.path.join(a.out, "inputs.safetensors"), inputs)
    write_safetensors(os.path.join(a.out, "expected.safetensors"),
                      [plain(n, v, "F64") for n, v in outputs])
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
