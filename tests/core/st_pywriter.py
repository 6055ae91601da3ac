#!/usr/bin/env python3
"""Write a safetensors file with Python's struct and json only.

An independent writer for the reader's tests: it follows the format's
description (8-byte little-endian header length, JSON header, data), not our C
code. The header is deliberately not padded, and the tensors are listed in
the header in a different order from their data, both of which are legal.
"""
import json
import struct
import sys


def main(path):
    tensors = [
        ("fc.weight", "F32", [2, 3], struct.pack("<6f", *[i * 0.5 - 1 for i in range(6)])),
        ("ids", "I64", [4], struct.pack("<4q", -2, -1, 0, 10**12)),
        ("half", "F16", [3], struct.pack("<3e", 1.0, -2.0, 65504.0)),
        # bfloat16 = the top 16 bits of the float32 pattern
        ("bhalf", "BF16", [2], b"".join(struct.pack("<f", v)[2:] for v in (1.0, -0.5))),
        ("scalar", "U8", [], bytes([7])),
        ("empty", "F32", [0, 5], b""),
    ]
    header = {"__metadata__": {"format": "pt"}}
    data = b""
    for name, dtype, shape, blob in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    # list the header entries in reverse: order in the header carries no meaning
    ordered = {"__metadata__": header.pop("__metadata__")}
    for name in reversed(list(header)):
        ordered[name] = header[name]
    text = json.dumps(ordered).encode("utf-8")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(data)


if __name__ == "__main__":
    main(sys.argv[1])
