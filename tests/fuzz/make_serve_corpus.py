#!/usr/bin/env python3
"""Seeds of fuzz_serve (tests/fuzz/fuzz_serve.c) into tests/corpus/serve/:
make_serve_corpus.py [DIR]. A seed is one flag byte (bits 0-1: the
signature, 0 MLP x:[N,4], 1 Bert ids:i64[N,S] + mask:[N,S], 2 Fixed
a:[2,3] + b:i64[], 3 Twice x:[2N,2N,3]; bit 2: a 4-byte little-endian
Inference-Header-Content-Length follows), then the request body. Valid
requests in JSON and in the binary extension, and refused ones: the
announce-a-huge-shape bodies of issue 30, a NUL escape in a name, names
of invalid or cut UTF-8, bad binary sizes."""
import json
import os
import struct
import sys

import numpy as np

MLP, BERT, FIXED, TWICE = 0, 1, 2, 3


def js(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


def seed_json(sig, req):
    return bytes([sig]) + (req if isinstance(req, bytes) else js(req))


def seed_bin(sig, inputs, extra=None, hlen=None, tail=b""):
    """inputs: [(name, datatype, shape, array or None for JSON data list)]."""
    req, blobs = {"inputs": []}, []
    for name, dt, shape, a in inputs:
        t = {"name": name, "shape": shape, "datatype": dt}
        if isinstance(a, np.ndarray):
            raw = a.tobytes()
            t["parameters"] = {"binary_data_size": len(raw)}
            blobs.append(raw)
        else:
            t["data"] = a
        req["inputs"].append(t)
    req.update(extra or {})
    h = js(req)
    return bytes([sig | 4]) + struct.pack("<I", len(h) if hlen is None else hlen) + h + b"".join(blobs) + tail


def seeds():
    x = [0.5, -1, 2, 3.25, 4, 5, 6e-3, 7]
    yield "mlp_json", seed_json(MLP, {"id": "r1", "inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32",
                                                               "data": x}]})
    yield "mlp_nested", seed_json(MLP, {"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP16",
                                                    "data": [x[:4], x[4:]]}],
                                        "outputs": [{"name": "output0", "parameters": {"binary_data": True}}],
                                        "parameters": {"scale": 2.5, "binary_data_output": True, "flag": True}})
    yield "mlp_zero_rows", seed_json(MLP, {"inputs": [{"name": "x", "shape": [0, 4], "datatype": "FP32", "data": []}]})
    yield "mlp_bin", seed_bin(MLP, [("x", "FP32", [2, 4], np.array(x, np.float32))],
                              {"parameters": {"binary_data_output": True}})
    yield "mlp_bin_fp16", seed_bin(MLP, [("x", "FP16", [1, 4], np.array(x[:4], np.float16))])
    ids = np.array([[1, 2, 3], [4, 5, 6]], np.int64)
    yield "bert_json", seed_json(BERT, {"inputs": [
        {"name": "ids", "shape": [2, 3], "datatype": "INT64", "data": ids.reshape(-1).tolist()},
        {"name": "mask", "shape": [2, 3], "datatype": "BOOL", "data": [True, True, False, 1, 0, 1]}],
        "outputs": [{"name": "output1"}, {"name": "output0"}]})
    yield "bert_bin_mixed", seed_bin(BERT, [("ids", "INT32", [2, 3], ids.astype(np.int32)),
                                            ("mask", "FP32", [2, 3], [1, 1, 1, 0, 0, 0])])
    yield "bert_bin_bool", seed_bin(BERT, [("mask", "BOOL", [1, 3], np.array([1, 0, 1], np.bool_)),
                                           ("ids", "INT64", [1, 3], ids[:1].copy())])
    yield "fixed_json", seed_json(FIXED, {"inputs": [{"name": "b", "shape": [], "datatype": "INT64", "data": [7]},
                                                     {"name": "a", "shape": [2, 3], "datatype": "FP32",
                                                      "data": [[1, 2, 3], [4, 5, 6]]}]})
    yield "twice_json", seed_json(TWICE, {"inputs": [{"name": "x", "shape": [2, 2, 3], "datatype": "FP32",
                                                      "data": list(range(12))}]})
    # refused
    yield "huge_json", seed_json(MLP, b'{"inputs":[{"name":"x","shape":[262144,4],"datatype":"FP32","data":[]}]}')
    huge = b'{"inputs":[{"name":"x","shape":[262144,4],"datatype":"FP32","parameters":{"binary_data_size":4194304}}]}'
    yield "huge_bin", bytes([MLP | 4]) + struct.pack("<I", len(huge)) + huge
    yield "huge_zero_rows", seed_json(BERT, b'{"inputs":[{"name":"ids","shape":[0,1000000000],"datatype":"INT64",'
                                            b'"data":[]},{"name":"mask","shape":[0,9],"datatype":"FP32","data":[]}]}')
    yield "nul_name", seed_json(MLP, b'{"inputs":[{"name":"x\\u0000y","shape":[1,4],"datatype":"FP32",'
                                     b'"data":[1,2,3,4]}]}')
    yield "bad_utf8_name", seed_json(MLP, b'{"inputs":[{"name":"a' + "\u00e9".encode() * 40 + b'\xc3","shape":[1]}]}')
    yield "bad_utf8_param", seed_json(MLP, b'{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}],'
                                           b'"parameters":{"\xff\xfe\x01":"s"}}')
    yield "wrong_shape", seed_json(TWICE, {"inputs": [{"name": "x", "shape": [2, 4, 3], "datatype": "FP32",
                                                       "data": [0] * 24}]})
    yield "bin_size_mismatch", seed_bin(MLP, [("x", "FP32", [1, 4], np.zeros(3, np.float32))])
    yield "bin_hlen_past_end", seed_bin(MLP, [("x", "FP32", [1, 4], np.zeros(4, np.float32))], hlen=100000)
    yield "bin_trailing", seed_bin(MLP, [("x", "FP32", [1, 4], np.zeros(4, np.float32))], tail=b"xx")
    yield "malformed", seed_json(MLP, b'{"inputs": [{"name": "x", "shape": [1, 4], "data": [1, 2')


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                             "corpus", "serve")
    os.makedirs(out, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(out, "seed_" + name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
