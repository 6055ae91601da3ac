#!/usr/bin/env python3
"""BYTES tensors through a real `gpufaas serve`, with the stock tritonclient[http].

Issue 17 item 5: a Triton client's BYTES (TYPE_STRING) tensor reaches a
function and the function answers BYTES, over JSON and the binary tensor
data extension (4-byte little-endian length prefixes, as tritonclient's
serialize_byte_tensor writes them), batched, and through system shared
memory; every malformed serialization is a 400 naming the input while the
server keeps serving. The function is the example plugin
functions/examples/strings_plugin.c (each byte mapped through a table, here
upper-casing; and each string's length), so the reference is Python's own
bytes.upper() and len().

Run by meson with GF_GPUFAAS, GF_WORKER, GF_PLUGIN_STRINGS and GF_SOURCE_ROOT
set; exits 77 (skipped) when tritonclient is not installed.
"""
import json
import os
import struct
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gfserve import serve  # noqa: E402
from tritonclient_test import (TOKEN, CHECKS, check, expect_fail, http,  # noqa: E402
                               multipart)

try:
    import numpy as np
    import tritonclient.http as httpclient
    import tritonclient.utils.shared_memory as shm
    from tritonclient.utils import deserialize_bytes_tensor, serialize_byte_tensor
except ImportError as e:
    print(f"skipped: {e} (install tests/requirements.txt into .venv)")
    sys.exit(77)

ADMIN = {"Authorization": f"Bearer {TOKEN}"}
MODEL = "strings"



def safetensors_u8(name, values):
    """A safetensors file of one U8 tensor, written by hand (the format is a
    JSON header of dtype, shape and offsets, then the bytes)."""
    header = json.dumps({name: {"dtype": "U8", "shape": [len(values)],
                                "data_offsets": [0, len(values)]}}).encode()
    header += b" " * ((8 - len(header) % 8) % 8)
    return struct.pack("<Q", len(header)) + header + bytes(values)


def deploy(addr):
    table = [b - 32 if 97 <= b <= 122 else b for b in range(256)]  # a-z -> A-Z
    manifest = json.dumps({
        "name": MODEL, "kind": "strings", "max_batch_size": 16, "max_queue_delay_us": 20000,
        "inputs": [{"name": "text", "datatype": "BYTES", "shape": [-1]}],
        "outputs": [{"name": "mapped", "datatype": "BYTES", "shape": [-1]},
                    {"name": "length", "datatype": "INT32", "shape": [-1]}]}).encode()
    body, ctype = multipart({"manifest": ("m.json", manifest),
                             "weights": ("w.safetensors", safetensors_u8("table", table))})
    st, _, b = http(addr, "POST", "/v1/functions", body, dict(ADMIN, **{"Content-Type": ctype}))
    check(st == 201, f"deploy the strings function: 201 ({b[:300]!r})")


def infer(c, texts, binary_in=True, binary_out=True):
    x = httpclient.InferInput("text", [len(texts)], "BYTES")
    x.set_data_from_numpy(np.array(texts, dtype=np.object_), binary_data=binary_in)
    outs = [httpclient.InferRequestedOutput("mapped", binary_data=binary_out),
            httpclient.InferRequestedOutput("length", binary_data=binary_out)]
    r = c.infer(MODEL, [x], outputs=outs)
    return r.as_numpy("mapped"), r.as_numpy("length")


def check_basic(c):
    meta = c.get_model_metadata(MODEL)
    check([i["datatype"] for i in meta["inputs"]] == ["BYTES"] and
          [o["datatype"] for o in meta["outputs"]] == ["BYTES", "INT32"],
          f"metadata: BYTES in and out ({meta})")
    cfg = c.get_model_config(MODEL)
    check(cfg["input"][0]["data_type"] == "TYPE_STRING" and
          cfg["output"][0]["data_type"] == "TYPE_STRING", f"config: TYPE_STRING ({cfg})")
    texts = [b"hello", b"", b"Mixed Case 123", "caf\u00e9".encode(), b"x" * 5000]
    for bin_in in (True, False):
        for bin_out in (True, False):
            mapped, length = infer(c, texts, bin_in, bin_out)
            got = [bytes(m) if not isinstance(m, str) else m.encode() for m in mapped]
            check(got == [t.upper() for t in texts],
                  f"strings mapped (binary in {bin_in}, out {bin_out}): {got[:3]}")
            check(length.dtype == np.int32 and list(length) == [len(t) for t in texts],
                  f"lengths (binary in {bin_in}, out {bin_out}): {list(length)}")
    # any bytes, exactly, through the binary extension (JSON cannot carry them)
    raw = [b"\xff\x00ab\x80", b"\x00", bytes(range(256))]
    mapped, length = infer(c, raw)
    check([bytes(m) for m in mapped] == [t.upper() for t in raw], "binary strings exact")
    check(list(length) == [5, 1, 256], "binary strings' lengths")
    # as JSON, the bytes that are not UTF-8 come back as U+FFFD
    mapped, _ = infer(c, [b"ok\xff"], binary_in=True, binary_out=False)
    m0 = mapped[0] if isinstance(mapped[0], bytes) else mapped[0].encode()
    check(m0 == "OK\ufffd".encode(), f"JSON output of a non-UTF-8 string ({m0!r})")
    # an empty batch dimension is an empty answer... of rows: one string per request
    mapped, length = infer(c, [b"a"])
    check(list(length) == [1], "one string")


def check_batched(c, addr):
    """Concurrent requests are batched; each gets its own strings back."""
    before = c.get_inference_statistics(MODEL)["model_stats"][0]
    def one(k):
        cc = httpclient.InferenceServerClient(url=addr)
        try:
            texts = [f"req{k}-{j}".encode() * (1 + k % 3) for j in range(1 + k % 4)]
            mapped, length = infer(cc, texts)
            return [bytes(m) for m in mapped] == [t.upper() for t in texts] and \
                list(length) == [len(t) for t in texts]
        finally:
            cc.close()
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(one, range(32)))
    check(all(results), f"32 concurrent requests, each its own answer ({results.count(False)} wrong)")
    after = c.get_inference_statistics(MODEL)["model_stats"][0]
    execs = int(after["execution_count"]) - int(before["execution_count"])
    infers = int(after["inference_count"]) - int(before["inference_count"])
    check(infers >= 32, f"statistics count the requests ({infers})")
    check(execs < 32, f"some requests were batched together ({execs} executions for 32)")


def check_shm(c):
    texts = np.array([b"shared", b"memory", b""], dtype=np.object_)
    ser = serialize_byte_tensor(texts)
    size = len(ser.item())  # a 0-d object array holding the serialization
    key_in, key_out = f"/gf_bin_{os.getpid()}", f"/gf_bout_{os.getpid()}"
    h_in = shm.create_shared_memory_region("bin", key_in, size + 16)
    h_out = shm.create_shared_memory_region("bout", key_out, 256)
    try:
        shm.set_shared_memory_region(h_in, [ser], offset=16)  # as Triton's examples do
        c.register_system_shared_memory("bin", key_in, size + 16, headers=ADMIN)
        c.register_system_shared_memory("bout", key_out, 256, headers=ADMIN)
        x = httpclient.InferInput("text", [3], "BYTES")
        x.set_shared_memory("bin", size, offset=16)
        o = httpclient.InferRequestedOutput("mapped")
        o.set_shared_memory("bout", 256)
        r = c.infer(MODEL, [x], outputs=[o, httpclient.InferRequestedOutput("length")])
        check(list(r.as_numpy("length")) == [6, 6, 0], "shm: BYTES input read from the region")
        got = shm.get_contents_as_numpy(h_out, np.object_, [3])
        check([bytes(g) for g in got] == [b"SHARED", b"MEMORY", b""],
              f"shm: BYTES output written to the region ({got})")
        # a byte size that cuts the serialization
        bad = httpclient.InferInput("text", [3], "BYTES")
        bad.set_shared_memory("bin", size - 1, offset=16)
        expect_fail("shm: a cut BYTES serialization", "400", ["input 'text'", "BYTES"],
                    c.infer, MODEL, [bad])
        c.unregister_system_shared_memory(headers=ADMIN)
    finally:
        shm.destroy_shared_memory_region(h_in)
        shm.destroy_shared_memory_region(h_out)


def raw_infer(addr, header, binary):
    body = json.dumps(header).encode()
    return http(addr, "POST", f"/v2/models/{MODEL}/infer", body + binary,
                {"Inference-Header-Content-Length": str(len(body)),
                 "Content-Type": "application/octet-stream"})


def check_bad(c, addr):
    """Every malformed BYTES input is a 400 naming it; the server keeps serving."""
    def req(shape, size):
        return {"inputs": [{"name": "text", "datatype": "BYTES", "shape": shape,
                            "parameters": {"binary_data_size": size}}]}
    cases = [
        ([1], struct.pack("<I", 9) + b"abcd", ["input 'text'", "says 9 bytes but only 4"]),
        ([1], struct.pack("<I", 0xFFFFFFFF) + b"abcd", ["says 4294967295 bytes"]),
        ([3], struct.pack("<I", 1) + b"a", ["ends after 1 of its 3 elements"]),
        ([1], struct.pack("<I", 1) + b"ab", ["1 bytes after the 1 elements"]),
        ([1], b"\x01\x00", ["ends after 0 of its 1 elements"]),
        ([2**40], struct.pack("<I", 1) + b"a", ["ends after 1 of its 1099511627776"]),
    ]
    for shape, binary, words in cases:
        st, _, b = raw_infer(addr, req(shape, len(binary)), binary)
        check(st == 400, f"bad BYTES {binary[:8]!r}: 400 (got {st} {b[:200]!r})")
        msg = json.loads(b)["error"]
        for w in words:
            check(w in msg, f"bad BYTES {binary[:8]!r}: the message names {w!r} ({msg!r})")
    # binary_data_size past the body
    st, _, b = raw_infer(addr, req([1], 100), struct.pack("<I", 1) + b"a")
    check(st == 400 and "exceeds" in json.loads(b)["error"], f"binary_data_size too big ({b!r})")
    # JSON: a number where a string belongs, and a string for a numeric type
    st, _, b = http(addr, "POST", f"/v2/models/{MODEL}/infer", json.dumps(
        {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [2],
                     "data": ["a", 5]}]}).encode())
    check(st == 400 and "element 1 of data is not a string (BYTES)" in json.loads(b)["error"],
          f"JSON number for BYTES: 400 ({b!r})")
    x = httpclient.InferInput("text", [1], "INT32")
    x.set_data_from_numpy(np.array([1], np.int32))
    expect_fail("INT32 for a BYTES input", "400", ["datatype INT32, expected BYTES"],
                c.infer, MODEL, [x])
    expect_fail("classification of a BYTES output", "400", ["classification"],
                c.infer, MODEL, [_text("a")],
                outputs=[httpclient.InferRequestedOutput("mapped", class_count=2)])
    mapped, _ = infer(c, [b"still serving"])
    check(bytes(mapped[0]) == b"STILL SERVING", "the server still serves")


def _text(s):
    x = httpclient.InferInput("text", [1], "BYTES")
    x.set_data_from_numpy(np.array([s.encode()], dtype=np.object_))
    return x


def check_v1(addr):
    """The /v1 invoke API takes and answers JSON strings too."""
    st, _, b = http(addr, "POST", f"/v1/functions/{MODEL}/invoke", json.dumps(
        {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [2],
                     "data": ["abc", "\u00e9t\u00e9"]}]}).encode())
    check(st == 200, f"/v1 invoke: 200 ({b[:200]!r})")
    outs = {o["name"]: o for o in json.loads(b)["outputs"]}
    check(outs["mapped"]["data"] == ["ABC", "\u00e9T\u00e9"] and
          outs["length"]["data"] == [3, 5], f"/v1 invoke: strings and lengths ({outs})")


def run_checks(addr):
    deploy(addr)
    c = httpclient.InferenceServerClient(url=addr)
    check_basic(c)
    check_batched(c, addr)
    check_shm(c)
    check_bad(c, addr)
    check_v1(addr)
    check(c.is_server_live() and c.is_model_ready(MODEL), "still serving")
    c.close()


def main():
    plugin = os.environ["GF_PLUGIN_STRINGS"]
    with tempfile.TemporaryDirectory(prefix="gf-tritonbytes-") as tmp:
        serve(tmp, TOKEN, run_checks, devices="cpu:1", device_memory="64M",
              host_memory="64M", extra=["--allow-native-functions", "--plugins", plugin])
    print(f"{len(CHECKS)} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
