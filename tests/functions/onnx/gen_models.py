"""Whole networks for the ONNX tests, exported the way users export them
(gen_fixtures.py --only models runs this; needs torch, torchvision and
transformers).

Each model gets random weights (torch's own initialisation), is exported
with torch.onnx.export with a dynamic batch axis (and a dynamic sequence
axis for BERT), and is written with its large float initializers stripped:
a stripped initializer keeps its name, dtype and dims, has no data, and its
doc_string says how to refill it: "gpufaas-fill normal MEAN STD" (see
fill_spec: statistics that keep a deep random network's activations in
range). The small ones (shape constants, biases of a few values) are kept
as they are. A model of a few
hundred kilobytes instead of up to 330 MB.
"""
import os

import numpy as np
import onnx
import torch
from onnx import numpy_helper

KEEP = 64  # initializers with at most this many elements keep their values
FILL = "gpufaas-fill"


def fill_spec(model):
    """name -> (mean, std) for the random values each stripped initializer
    gets: weights keep the variance of activations (He: sqrt(2 / fan_in),
    fan_in from how the consuming op reads them), so deep random networks
    neither vanish nor explode; vectors (biases, norms' scales) get small
    noise around torch's mean, so none is a constant that hides an error."""
    uses = {}
    for n in model.graph.node:
        for k, i in enumerate(n.input):
            uses.setdefault(i, (n, k))
    spec = {}
    for t in model.graph.initializer:
        dims = list(t.dims)
        a = numpy_helper.to_array(t).astype(np.float64)
        n, k = uses.get(t.name, (None, -1))
        op = n.op_type if n is not None else ""
        fan_in = None
        if op == "Conv" and k == 1:
            fan_in = int(np.prod(dims[1:]))
        elif op == "Gemm" and k == 1:
            tb = [x.i for x in n.attribute if x.name == "transB"]
            fan_in = dims[1] if tb and tb[0] else dims[0]
        elif op == "MatMul" and len(dims) >= 2:
            fan_in = dims[-2] if k == 1 else dims[-1]
        if fan_in:
            spec[t.name] = (0.0, float(np.sqrt(2.0 / fan_in)))
        elif op == "Gather" and k == 0:
            spec[t.name] = (0.0, 1.0)  # embeddings
        else:
            spec[t.name] = (float(a.mean()), max(float(a.std()), 0.05))
    return spec


def strip(model):
    spec = fill_spec(model)
    for node in model.graph.node:  # the exporter's stack traces: bulk, no meaning here
        del node.metadata_props[:]
        node.doc_string = ""
    for t in model.graph.initializer:
        a = numpy_helper.to_array(t)
        if a.size <= KEEP or a.dtype not in (np.float32, np.float16):
            continue
        mean, std = spec[t.name]
        dims, dtype, name = list(t.dims), t.data_type, t.name
        t.Clear()
        t.name = name
        t.data_type = dtype
        t.dims.extend(dims)
        t.doc_string = f"{FILL} normal {mean!r} {std!r}"
    return model


def export(module, args, path, input_names, output_names, dynamic_axes):
    module.eval()
    tmp = path + ".tmp"
    with torch.no_grad():
        torch.onnx.export(module, args, tmp, input_names=input_names, output_names=output_names,
                          dynamic_axes=dynamic_axes, opset_version=18)
    m = onnx.load(tmp, load_external_data=True)
    for f in os.listdir(os.path.dirname(tmp)):
        if f.startswith(os.path.basename(tmp)):
            os.remove(os.path.join(os.path.dirname(tmp), f))
    onnx.save(strip(m), path)
    print(f"{path}: {os.path.getsize(path)} bytes, "
          f"{sorted({n.op_type for n in m.graph.node})}")


def gen(out, only=None):
    import torchvision
    from transformers import (BertConfig, BertModel, DistilBertConfig, DistilBertModel,
                              RobertaConfig, RobertaModel)

    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    img = torch.randn(2, 3, 224, 224)
    for name in ("resnet18", "mobilenet_v3_small", "efficientnet_b0", "vit_b_16", "resnet50"):
        if only and name not in only:
            continue
        m = getattr(torchvision.models, name)(weights=None)
        export(m, (img,), os.path.join(out, name + ".onnx"), ["input"], ["logits"],
               {"input": {0: "batch"}, "logits": {0: "batch"}})

    class Encoder(torch.nn.Module):
        """An encoder's last hidden state: what sentence-embedding models pool."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            return self.model(input_ids=input_ids,
                              attention_mask=attention_mask).last_hidden_state

    small = dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=128, max_position_embeddings=128)
    encoders = {
        "bert_encoder": lambda: BertModel(BertConfig(**small), add_pooling_layer=False),
        # RoBERTa numbers positions from the input ids (CumSum, a data-dependent gather)
        "roberta_encoder": lambda: RobertaModel(RobertaConfig(**small, pad_token_id=1),
                                                add_pooling_layer=False),
        "distilbert_encoder": lambda: DistilBertModel(DistilBertConfig(
            vocab_size=1000, dim=64, n_layers=2, n_heads=4, hidden_dim=128,
            max_position_embeddings=128)),
        # full size (bert-base-uncased's and distilbert-base-uncased's shapes), run by
        # hand: GF_ONNX_MODELS=bert_base,distilbert_base (docs/performance.md)
        "bert_base": lambda: BertModel(BertConfig(), add_pooling_layer=False),
        "distilbert_base": lambda: DistilBertModel(DistilBertConfig()),
    }
    ids = torch.randint(0, 1000, (2, 16))  # within every vocabulary above
    mask = torch.ones(2, 16, dtype=torch.int64)
    for name, make in encoders.items():
        if only and name not in only:
            continue
        export(Encoder(make()), (ids, mask), os.path.join(out, name + ".onnx"),
               ["input_ids", "attention_mask"], ["last_hidden_state"],
               {"input_ids": {0: "batch", 1: "sequence"},
                "attention_mask": {0: "batch", 1: "sequence"},
                "last_hidden_state": {0: "batch", 1: "sequence"}})
