#!/usr/bin/python3
"""Cross-checks dpc's .npy and safetensors code against NumPy and PyTorch.

Usage: check_numpy.py PATH/TO/npy_tool

- NumPy writes arrays of every supported dtype and many shapes (scalar,
  empty, rank 8), in C and Fortran order, little- and big-endian; npy_tool
  reads and rewrites each; the result must load in NumPy with the same
  values and be byte-identical to what numpy.save writes for the native
  little-endian C-order array.
- Files NumPy can write but dpc refuses (pickles, structured, complex,
  strings, uint16, trailing bytes, truncation) must fail with the reason and
  leave no output file.
- float16/bfloat16 conversions match NumPy's and PyTorch's rounding bit for
  bit (every 16-bit pattern, and a million random floats).
- safetensors: a PyTorch state_dict written by a small Python writer is read
  and rewritten by dpc; the Python reader gets identical tensors back; the
  dpc-written layout follows the format (8-byte header padding, tiling,
  natural alignment) and is deterministic.
Exits 77 (skip) when numpy is missing; the torch parts are skipped alone.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("numpy not available: skipping")
    sys.exit(77)
try:
    import torch
except ImportError:
    torch = None

np.seterr(over="ignore", invalid="ignore")  # casts to float16 overflow on purpose
TOOL = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="dpc_check_numpy_")
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def tool(*args):
    r = subprocess.run([TOOL, *args], capture_output=True, text=True)
    return r.returncode, r.stderr.strip()


def path(name):
    return os.path.join(TMP, name)


def same_bits(a, b):
    """Equal dtype, shape and bytes (NaN payloads included)."""
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# ---- .npy ------------------------------------------------------------------

def sample(dt, shape, rng):
    n = int(np.prod(shape)) if shape else 1
    if dt.kind == "f":
        v = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)
        special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 65504.0, 6e-8]
        v[: min(n, len(special))] = special[: min(n, len(special))]
        return v.astype(dt).reshape(shape)
    if dt.kind == "b":
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, n, dtype=dt, endpoint=True).reshape(shape)


def check_npy_roundtrips():
    rng = np.random.default_rng(1234)
    dtypes = ["<f4", "<f8", "<f2", "<i8", "<i4", "<i2", "|i1", "|u1", "|b1"]
    shapes = [(), (0,), (0, 10), (7,), (2, 3), (3, 1, 4), (2, 0, 3), (1, 2, 1, 3, 1, 1, 2, 1)]
    cases, fortran = [], 0
    for code in dtypes:
        for shape in shapes:
            base = sample(np.dtype(code), shape, rng)
            variants = {"c": base, "f": np.asfortranarray(base) if shape else base}
            if np.dtype(code).itemsize > 1:
                big = base.astype(np.dtype(code).newbyteorder(">"))
                variants["be"] = big
                variants["be_f"] = np.asfortranarray(big) if shape else big
            for tag, arr in variants.items():
                i = len(cases)
                np.save(path(f"rt_in{i}.npy"), arr)
                fortran += b"'fortran_order': True" in open(path(f"rt_in{i}.npy"), "rb").read(200)
                cases.append((f"{code} {shape} {tag}", code, arr))
    # One run for all files: the tool loads the CUDA libraries dpc links.
    args = []
    for i in range(len(cases)):
        args += [path(f"rt_in{i}.npy"), path(f"rt_out{i}.npy")]
    rc, err = tool("copy", *args)
    if rc != 0:
        fail(f"copy: {err}")
    for i, (name, code, arr) in enumerate(cases):
        dst = path(f"rt_out{i}.npy")
        if not os.path.exists(dst):
            continue
        got = np.load(dst)
        want = arr.astype(np.dtype(code), order="C")  # (ascontiguousarray makes 0-d 1-d)
        if not same_bits(got, want):
            fail(f"copy {name}: values differ")
        np.save(path("ref.npy"), want)
        if open(dst, "rb").read() != open(path("ref.npy"), "rb").read():
            fail(f"copy {name}: bytes differ from numpy.save")
    print(f"npy round trips: {len(cases)} ({fortran} in Fortran order)")
    if fortran < 40:
        fail("too few Fortran-order files: the test no longer covers them")


def check_npy_refusals():
    cases = []
    obj = np.array([{"a": 1}, None], dtype=object)
    np.save(path("obj.npy"), obj, allow_pickle=True)
    cases.append(("obj.npy", "pickled object arrays are refused"))
    np.save(path("struct.npy"), np.zeros(3, dtype=[("a", "<f4"), ("b", "<i8")]))
    cases.append(("struct.npy", "structured dtypes are not supported"))
    np.save(path("complex.npy"), np.zeros(3, dtype=np.complex64))
    cases.append(("complex.npy", "unsupported dtype descr '<c8'"))
    np.save(path("str.npy"), np.array(["ab", "c"]))
    cases.append(("str.npy", "unsupported dtype descr '<U2'"))
    np.save(path("u16.npy"), np.zeros(3, dtype=np.uint16))
    cases.append(("u16.npy", "unsupported dtype descr '<u2'"))
    np.save(path("ok.npy"), np.arange(6, dtype=np.float32))
    raw = open(path("ok.npy"), "rb").read()
    open(path("trailing.npy"), "wb").write(raw + b"\0")
    cases.append(("trailing.npy", "1 unexpected bytes after the array data"))
    open(path("short.npy"), "wb").write(raw[:-1])
    cases.append(("short.npy", "data is truncated"))
    open(path("v4.npy"), "wb").write(raw[:6] + b"\x04" + raw[7:])
    cases.append(("v4.npy", "unsupported .npy format version 4.0"))
    for name, want in cases:
        out = path("refused_out.npy")
        rc, err = tool("copy", path(name), out)
        if rc != 1 or want not in err or not err.startswith(f"npy_tool: error: {path(name)}: "):
            fail(f"{name}: expected exit 1 with '{want}', got {rc}: {err}")
        if os.path.exists(out) or any(f.startswith("refused_out.npy.tmp") for f in os.listdir(TMP)):
            fail(f"{name}: output file left behind")
    print(f"npy refusals: {len(cases)}")


# ---- conversions -----------------------------------------------------------

def convert(arr, dtype_name, out_name="conv.npy"):
    np.save(path("conv_in.npy"), arr)
    rc, err = tool("convert", path("conv_in.npy"), path(out_name), dtype_name)
    if rc != 0:
        fail(f"convert to {dtype_name}: {err}")
        return None
    if out_name.endswith(".npy"):
        return np.load(path(out_name))
    return st_read(path(out_name))[0]["x"]


def compare_halfbits(got, want, what):
    """Bitwise on non-NaN, NaN-ness on NaN (hardware may quiet payloads)."""
    g, w = got.view(np.uint16), want.view(np.uint16)
    gn, wn = (g & 0x7FFF) > 0x7C00, (w & 0x7FFF) > 0x7C00
    if what.endswith("bfloat16"):
        gn, wn = (g & 0x7FFF) > 0x7F80, (w & 0x7FFF) > 0x7F80
    bad = np.flatnonzero((gn != wn) | (~wn & (g != w)))
    if bad.size:
        i = bad[0]
        fail(f"{what}: {bad.size} mismatches, first at {i}: got {g[i]:#06x} want {w[i]:#06x}")


def check_conversions():
    rng = np.random.default_rng(99)
    bits = rng.integers(0, 2**32, 1_000_000, dtype=np.uint64).astype(np.uint32)
    # Values near f16 boundaries: ties, subnormals, overflow.
    edges = np.concatenate([np.arange(0x33000000, 0x33000100), np.arange(0x477FE000, 0x47800100),
                            np.arange(0x38800000 - 64, 0x38800000 + 64)]).astype(np.uint32)
    f32 = np.concatenate([bits, edges]).view(np.float32)
    compare_halfbits(convert(f32, "float16"), f32.astype(np.float16), "float32->float16")
    f64 = rng.standard_normal(1_000_000) * 2.0 ** rng.integers(-30, 20, 1_000_000)
    f64[:4] = [1 + 2**-11 + 2**-40, 65519.999999, 2**-25 + 2**-60, -(2**-25)]
    compare_halfbits(convert(f64, "float16"), f64.astype(np.float16), "float64->float16")
    every = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    got = convert(every, "float32")
    want = every.astype(np.float32)
    ok = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    if not ok.all():
        fail(f"float16->float32: {np.count_nonzero(~ok)} mismatches")
    big = np.array([3_000_000_000, 5], dtype=np.int64)
    np.save(path("conv_in.npy"), big)
    rc, err = tool("convert", path("conv_in.npy"), path("c.npy"), "int32")
    if rc != 1 or "element 0 is 3000000000" not in err:
        fail(f"int64->int32 range check: {rc} {err}")
    small = np.array([-(2**31), 2**31 - 1, 0], dtype=np.int64)
    if not same_bits(convert(small, "int32"), small.astype(np.int32)):
        fail("int64->int32 values")
    if torch is None:
        print("conversions: numpy only (torch missing)")
        return
    got = convert(f32, "bfloat16", "conv.safetensors")
    want = torch.from_numpy(f32.copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    compare_halfbits(got, want, "float32->bfloat16")
    every_bf = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    st_write(path("bf_in.safetensors"), {"x": ("BF16", [65536], every_bf.tobytes())})
    rc, err = tool("convert", path("bf_in.safetensors"), path("bf_out.npy"), "float32")
    got = np.load(path("bf_out.npy")) if rc == 0 else None
    want = torch.from_numpy(every_bf.view(np.int16).copy()).view(torch.bfloat16).float().numpy()
    if got is None or not ((got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))).all():
        fail(f"bfloat16->float32: {err}")
    print("conversions: numpy and torch")


# ---- safetensors -----------------------------------------------------------

ST_NP = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
         "I8": "|i1", "U8": "|u1", "BOOL": "|b1", "BF16": "<u2"}


def st_write(p, tensors, meta=None):
    """The format's reference layout: JSON header padded to 8, then data."""
    hdr, blobs, off = {}, [], 0
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, (dt, shape, raw) in tensors.items():
        hdr[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def st_read(p):
    """Returns ({name: ndarray (bf16 as uint16)}, metadata, header dict, header length)."""
    b = open(p, "rb").read()
    (n,) = struct.unpack("<Q", b[:8])
    hdr = json.loads(b[8 : 8 + n])
    meta = hdr.pop("__metadata__", {})
    out = {}
    for name, v in hdr.items():
        s, e = v["data_offsets"]
        out[name] = np.frombuffer(b[8 + n + s : 8 + n + e], dtype=ST_NP[v["dtype"]]).reshape(v["shape"])
    return out, meta, hdr, n


def torch_state():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(10, 5), torch.nn.BatchNorm1d(5), torch.nn.Embedding(7, 3))
    sd = {k: v for k, v in m.state_dict().items()}
    sd["half.w"] = torch.randn(4, 3).half()
    sd["bf.w"] = torch.randn(2, 5).bfloat16()
    sd["mask"] = torch.rand(6) > 0.5
    sd["i8"] = torch.randint(-128, 127, (3, 3), dtype=torch.int8)
    sd["u8"] = torch.randint(0, 255, (4,), dtype=torch.uint8)
    sd["i16"] = torch.randint(-30000, 30000, (2,), dtype=torch.int16)
    sd["i32"] = torch.randint(-(2**31), 2**31 - 1, (2, 2), dtype=torch.int32)
    sd["f64"] = torch.randn(3, dtype=torch.float64)
    sd["empty"] = torch.zeros(0, 4)
    sd["scalar"] = torch.tensor(3.5)
    sd["名前.ünïcode"] = torch.ones(2)
    return sd


TORCH_ST = None


def as_st(t):
    global TORCH_ST
    if TORCH_ST is None:
        TORCH_ST = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
                    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
                    torch.uint8: "U8", torch.bool: "BOOL"}
    t = t.contiguous()
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return TORCH_ST[t.dtype], list(t.shape), raw


def check_layout(p, what):
    """dpc's writer: header a multiple of 8, names sorted, tiling, alignment."""
    tensors, _, hdr, n = st_read(p)
    if n % 8:
        fail(f"{what}: header length {n} is not a multiple of 8")
    if list(hdr) != sorted(hdr, key=lambda k: k.encode()):
        fail(f"{what}: header tensors not sorted by name")
    spans = sorted((v["data_offsets"], k) for k, v in hdr.items())
    at = 0
    for (s, e), k in spans:
        if s != at:
            fail(f"{what}: tensor {k} starts at {s}, expected {at}")
        if s % tensors[k].dtype.itemsize:
            fail(f"{what}: tensor {k} at {s} is not aligned to its element size")
        at = e
    if at + 8 + n != os.path.getsize(p):
        fail(f"{what}: data buffer not fully used")


def check_safetensors():
    rng = np.random.default_rng(7)
    # A NumPy-made file covering every dtype, with metadata.
    arrays = {"a": rng.standard_normal((3, 4)).astype("<f4"), "b": np.arange(5, dtype="<i8"),
              "c": rng.standard_normal(3).astype("<f2"), "d": np.array([True, False, True]),
              "e": np.zeros((0, 3), "<f8"), "z": np.array(7, dtype="<i4")}
    codes = {"<f4": "F32", "<i8": "I64", "<f2": "F16", "|b1": "BOOL", "<f8": "F64", "<i4": "I32"}
    tensors = {k: (codes[v.dtype.str], v.shape, v.tobytes()) for k, v in arrays.items()}
    st_write(path("np.safetensors"), tensors, {"format": "np", "note": "line\nbreak \"q\""})
    sources = {"np": (path("np.safetensors"), arrays, {"format": "np", "note": "line\nbreak \"q\""})}
    if torch is not None:
        sd = torch_state()
        st_write(path("torch.safetensors"), {k: as_st(v) for k, v in sd.items()}, {"format": "pt"})
        want = {k: np.frombuffer(as_st(v)[2], dtype=ST_NP[as_st(v)[0]]).reshape(as_st(v)[1]) for k, v in sd.items()}
        sources["torch"] = (path("torch.safetensors"), want, {"format": "pt"})
    for tag, (src, want, meta) in sources.items():
        out, out2 = path(f"{tag}_dpc.safetensors"), path(f"{tag}_dpc2.safetensors")
        rc, err = tool("st-copy", src, out)
        if rc != 0:
            fail(f"st-copy {tag}: {err}")
            continue
        got, gmeta, _, _ = st_read(out)
        if set(got) != set(want) or gmeta != meta:
            fail(f"st-copy {tag}: names or metadata differ: {sorted(got)} {gmeta}")
        for k in want:
            if k in got and not same_bits(got[k], np.asarray(want[k]).astype(got[k].dtype)):
                fail(f"st-copy {tag}: tensor {k} differs")
        check_layout(out, f"st-copy {tag}")
        rc, err = tool("st-copy", out, out2)
        if rc != 0 or open(out, "rb").read() != open(out2, "rb").read():
            fail(f"st-copy {tag}: rewriting dpc's own file changed it ({err})")
        print(f"safetensors {tag}: {len(want)} tensors")
    # A few refusals through the tool: one-line message naming the file.
    raw = open(path("np.safetensors"), "rb").read()
    bad = {"trailing.safetensors": (raw + b"\0", "1 trailing bytes after the last tensor"),
           "cut.safetensors": (raw[:-3], "past the end of the data"),
           "dup.safetensors": (raw.replace(b'"b"', b'"a"', 1), "duplicate tensor name 'a'")}
    for name, (data, want) in bad.items():
        open(path(name), "wb").write(data)
        rc, err = tool("st-copy", path(name), path("x.safetensors"))
        if rc != 1 or want not in err or "\n" in err or path(name) not in err:
            fail(f"{name}: expected exit 1 with '{want}', got {rc}: {err}")
        if os.path.exists(path("x.safetensors")):
            fail(f"{name}: output file left behind")


def main():
    check_npy_roundtrips()
    check_npy_refusals()
    check_safetensors()
    check_conversions()
    subprocess.run(["rm", "-rf", TMP])
    if failures:
        print(f"{len(failures)} failures")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
