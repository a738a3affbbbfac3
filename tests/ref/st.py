#!/usr/bin/python3
"""st — a small, strict safetensors writer and reader (json + struct + numpy).

Format (https://github.com/huggingface/safetensors, README "Format"):

    8 bytes   N, little-endian u64: length of the JSON header
    N bytes   UTF-8 JSON: {"__metadata__": {str: str}?,
                           name: {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...}
              padded at the end with spaces (0x20) to a multiple of 8
    rest      the byte buffer; offsets are relative to its start, little-endian, C order

The writer stores tensors sorted by name, data in the same order, with no
gaps.  The reader performs the reference implementation's checks (header
size, UTF-8, JSON shape, offsets tiling the whole buffer with no holes or
trailing bytes, byte counts matching shape x dtype) and also rejects
duplicate keys, so it can be used to validate files that dpc writes.

Use as a module::

    st.save("w.safetensors", {"fc.weight": np.ndarray, ...}, metadata={"format": "pt"})
    tensors = st.load("w.safetensors")          # {name: np.ndarray}
    header = st.read_header("w.safetensors")    # the parsed JSON header

or from the command line: `st.py FILE.safetensors` lists the tensors.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import tempfile

import numpy as np

MAX_HEADER = 100_000_000  # same limit as the reference reader

# safetensors dtype -> numpy dtype (little-endian).  BF16 has no numpy type:
# it is read as uint16 bits and widened to float32 by load().
DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"), "U32": np.dtype("<u4"), "U16": np.dtype("<u2"), "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}


class SafetensorsError(Exception):
    pass


def _st_dtype(a: np.ndarray) -> str:
    """safetensors name of a numpy dtype (any byte order; data is written LE)."""
    for k, v in DTYPES.items():
        if k != "BF16" and a.dtype.kind == v.kind and a.dtype.itemsize == v.itemsize:
            return k
    raise SafetensorsError(f"unsupported numpy dtype {a.dtype}")


def dumps(tensors: dict, metadata: dict | None = None) -> bytes:
    """Serialise {name: np.ndarray} to safetensors bytes."""
    header: dict = {}
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise SafetensorsError("__metadata__ must map strings to strings")
        header["__metadata__"] = dict(metadata)
    chunks = []
    offset = 0
    for name in sorted(tensors):
        if name == "__metadata__":
            raise SafetensorsError("'__metadata__' is not a valid tensor name")
        a = np.asarray(tensors[name])
        dtype = _st_dtype(a)
        data = np.ascontiguousarray(a, dtype=DTYPES[dtype]).tobytes(order="C")
        header[name] = {"dtype": dtype, "shape": [int(d) for d in a.shape],
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * (-len(hjson) % 8)  # pad to a multiple of 8 with spaces
    return struct.pack("<Q", len(hjson)) + hjson + b"".join(chunks)


def save(path: str, tensors: dict, metadata: dict | None = None) -> None:
    """Write atomically: a failed write never leaves a partial file."""
    blob = dumps(tensors, metadata)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".st-", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise SafetensorsError(f"duplicate key {k!r} in header")
        out[k] = v
    return out


def parse_header(blob: bytes) -> tuple[dict, int]:
    """Validate and return (header, start of the byte buffer)."""
    if len(blob) < 8:
        raise SafetensorsError("file is shorter than 8 bytes")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > MAX_HEADER:
        raise SafetensorsError(f"header length {n} exceeds {MAX_HEADER}")
    if 8 + n > len(blob):
        raise SafetensorsError(f"header length {n} runs past the end of the file ({len(blob)} bytes)")
    try:
        text = blob[8:8 + n].decode("utf-8")
        header = json.loads(text, object_pairs_hook=_no_duplicates)
    except UnicodeDecodeError as e:
        raise SafetensorsError(f"header is not UTF-8: {e}") from None
    except json.JSONDecodeError as e:
        raise SafetensorsError(f"header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise SafetensorsError("header is not a JSON object")
    meta = header.get("__metadata__")
    if meta is not None and not (isinstance(meta, dict) and
                                 all(isinstance(v, str) for v in meta.values())):
        raise SafetensorsError("__metadata__ must map strings to strings")
    buf_len = len(blob) - 8 - n
    entries = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict) or set(info) - {"dtype", "shape", "data_offsets"} or \
                not {"dtype", "shape", "data_offsets"} <= set(info):
            raise SafetensorsError(f"{name}: entry needs exactly dtype, shape, data_offsets")
        dt, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if dt not in DTYPES:
            raise SafetensorsError(f"{name}: unknown dtype {dt!r}")
        if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
            raise SafetensorsError(f"{name}: bad shape {shape!r}")
        if not (isinstance(offs, list) and len(offs) == 2 and
                all(type(o) is int and o >= 0 for o in offs) and offs[0] <= offs[1]):
            raise SafetensorsError(f"{name}: bad data_offsets {offs!r}")
        nbytes = int(np.prod(shape, dtype=object)) * DTYPES[dt].itemsize
        if offs[1] - offs[0] != nbytes:
            raise SafetensorsError(f"{name}: data_offsets span {offs[1] - offs[0]} bytes, "
                                   f"shape {shape} x {dt} needs {nbytes}")
        entries.append((offs[0], offs[1], name))
    entries.sort()
    pos = 0
    for begin, end, name in entries:
        if begin != pos:
            raise SafetensorsError(f"{name}: data starts at {begin}, expected {pos} "
                                   f"(gap or overlap in the byte buffer)")
        pos = end
    if pos != buf_len:
        raise SafetensorsError(f"byte buffer is {buf_len} bytes but tensors cover {pos}")
    return header, 8 + n


def loads(blob: bytes) -> dict:
    header, base = parse_header(blob)
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        a = np.frombuffer(blob, dtype=DTYPES[info["dtype"]], count=(e - b) //
                          DTYPES[info["dtype"]].itemsize, offset=base + b)
        a = a.reshape(info["shape"]).copy()
        if info["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a
    return out


def load(path: str) -> dict:
    with open(path, "rb") as f:
        return loads(f.read())


def read_header(path: str) -> dict:
    with open(path, "rb") as f:
        return parse_header(f.read())[0]


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description="Validate a safetensors file and list its tensors.")
    ap.add_argument("file")
    a = ap.parse_args(argv)
    try:
        header = read_header(a.file)
    except (OSError, SafetensorsError) as e:
        print(f"st.py: error: {a.file}: {e}", file=sys.stderr)
        return 1
    for name in sorted(k for k in header if k != "__metadata__"):
        info = header[name]
        print(f"{name}\t{info['dtype']}\t{info['shape']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
