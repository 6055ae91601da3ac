#!/usr/bin/env python3
"""Write the fuzz targets' seed corpus (tests/fuzz/corpus/NAME/*), small
valid inputs of each format written independently of our code (json,
struct, the onnx package). Run once; the output is committed:
    .venv/bin/python3 tests/fuzz/make_seeds.py
"""
import json
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, meta=None):
    header, blob = {}, b""
    if meta:
        header["__metadata__"] = meta
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + blob


put("fuzz_safetensors", "two", safetensors(
    {"w": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)), "b": ("F16", [2], b"\x00\x3c\x00\xbc")},
    {"format": "pt"}))
put("fuzz_safetensors", "scalar_empty", safetensors(
    {"s": ("U8", [], b"\x07"), "e": ("BF16", [0, 3], b"")}))
put("fuzz_safetensors", "empty", safetensors({}))

for i, doc in enumerate([
        {"a": [1, -2, 3.5, True, False, None, "x\"y"], "b": {}, "big": 18446744073709551615},
        [1e300, -0.0, 1e-300, "\u00e9\ud83d\ude00", {"k": [[[]]]}],
        "plain", 12345678901234567890123, {"inputs": [{"name": "x", "data": [1, 2]}]}]):
    put("fuzz_json", f"doc{i}", json.dumps(doc))

mlp = {"name": "digits", "kind": "mlp", "version": 2,
       "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 64]}],
       "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 10]}],
       "max_batch_size": 32, "max_queue_delay_us": 500, "slo_ms": 12.5,
       "config": {"activations": ["relu", "identity"], "softmax": True},
       "ignore_weights": ["aux.*"]}
put("fuzz_manifest", "mlp", json.dumps(mlp))
put("fuzz_manifest", "bert", json.dumps({
    "name": "b", "kind": "bert",
    "inputs": [{"name": "input_ids", "datatype": "INT64", "shape": [-1, 8]},
               {"name": "attention_mask", "datatype": "INT64", "shape": [-1, 8]}],
    "outputs": [{"name": "logits", "datatype": "FP32", "shape": [-1, 2]}],
    "config": {"num_attention_heads": 2, "big": 1e400}}))

v2 = {"id": "r1", "inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 2],
                              "data": [[1, 2], [3, 4]]},
                             {"name": "m", "datatype": "INT64", "shape": [1], "data": [7]},
                             {"name": "b", "datatype": "BOOL", "shape": [2], "data": [True, False]}],
      "outputs": [{"name": "y", "parameters": {"binary_data": True}}],
      "parameters": {"binary_data_output": False, "timeout": 500000}}
put("fuzz_v2_codec", "json", b"\x00\x00\x00" + json.dumps(v2).encode())
hdr = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 2],
                              "parameters": {"binary_data_size": 8}}]}).encode()
# mode byte (bit 0: the header length follows, 2 bytes LE; bit 1: v1), then the body
put("fuzz_v2_codec", "binary", b"\x01" + struct.pack("<H", len(hdr)) + hdr + struct.pack("<2f", 1, 2))
put("fuzz_v2_codec", "half_v1", b"\x02\x00\x00" + json.dumps(
    {"inputs": [{"name": "h", "datatype": "FP16", "shape": [2], "data": [1, 0.5]}]}).encode())


def frame(typ, payload=b"", rid=1):
    return struct.pack("<IHHQQ", 0x31574647, 1, typ, rid, len(payload)) + payload


put("fuzz_ipc", "empty_frames", b"".join(frame(t) for t in range(1, 24)))
put("fuzz_ipc", "payloads", b"".join(frame(t, bytes(range(t * 3)), t) for t in range(1, 24)))


def part(k, data):
    return bytes([k]) + struct.pack("<H", len(data)) + data


m = json.dumps(mlp).encode()
w = safetensors({"0.weight": ("F32", [10, 64], b"\0" * 2560), "0.bias": ("F32", [10], b"\0" * 40)})
put("fuzz_upload", "deploy", part(0, m) + part(1, w[:1000]) + part(1, w[1000:]))
put("fuzz_upload", "model", part(4, b"mymodel") + part(2, b"\x08\x08") + part(3, b"\0" * 16))

try:
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["y"]),
         helper.make_node("Relu", ["y"], ["z"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor("w", TensorProto.FLOAT, [3, 2], [1, 2, 3, 4, 5, 6]),
         helper.make_tensor("b", TensorProto.FLOAT, [2], [0.5, -0.5])])
    put("fuzz_onnx", "mlp", helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        .SerializeToString())
    g2 = helper.make_graph(
        [helper.make_node("Conv", ["x", "k"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Reshape", ["c", "s"], ["r"])],
        "g2", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor("k", TensorProto.FLOAT, [1, 1, 3, 3], [0.1] * 9),
         helper.make_tensor("s", TensorProto.INT64, [2], [1, 16])])
    put("fuzz_onnx", "conv", helper.make_model(g2, opset_imports=[helper.make_opsetid("", 13)])
        .SerializeToString())
except ImportError:
    print("onnx not installed: no seeds for fuzz_onnx")
