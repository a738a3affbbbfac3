#!/usr/bin/python3
"""Writes the seed corpora for the .npy and safetensors fuzz targets:
small valid files of every kind the readers accept and invalid files for
each bad-input case (reference/bad-input-and-faults.md, checklist 1-15).
The output is deterministic; the generated files are committed, and
replay_npy / replay_safetensors run them all on every test run. Crashers a
fuzzer finds are added next to them by hand (named crash-*), never by this
script, which leaves other files alone.

Usage: /usr/bin/python3 tests/corpus/make_io_corpus.py
"""
import io
import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def npy_bytes(arr, **kw):
    f = io.BytesIO()
    np.save(f, arr, **kw)
    return f.getvalue()


def npy_raw(header, data=b"", major=1, hlen=None):
    """A .npy image with the header text exactly as given."""
    h = header.encode("latin-1")
    n = len(h) if hlen is None else hlen
    pre = b"\x93NUMPY" + bytes([major, 0]) + (struct.pack("<H", n) if major == 1 else struct.pack("<I", n))
    return pre + h + data


def hdr(descr="'<f4'", fortran="False", shape="(2,)"):
    return "{'descr': %s, 'fortran_order': %s, 'shape': %s, }\n" % (descr, fortran, shape)


def npy_files():
    f = {}
    a = np.arange(6, dtype="<f4").reshape(2, 3) / 4
    f["ok_f32_2x3.npy"] = npy_bytes(a)
    f["ok_f64_scalar.npy"] = npy_bytes(np.array(-1.5))
    f["ok_f16.npy"] = npy_bytes(np.array([1, 65504, np.inf, np.nan, 6e-8], dtype="<f2"))
    f["ok_i64.npy"] = npy_bytes(np.array([-(2**63), 2**63 - 1, 0], dtype="<i8"))
    f["ok_i32.npy"] = npy_bytes(np.arange(4, dtype="<i4"))
    f["ok_i16.npy"] = npy_bytes(np.arange(4, dtype="<i2"))
    f["ok_i8.npy"] = npy_bytes(np.arange(-2, 2, dtype="|i1"))
    f["ok_u8.npy"] = npy_bytes(np.arange(250, 256, dtype="|u1"))
    f["ok_bool.npy"] = npy_bytes(np.array([True, False, True]))
    f["ok_fortran_2x3.npy"] = npy_bytes(np.asfortranarray(a))
    f["ok_fortran_3d.npy"] = npy_bytes(np.asfortranarray(np.arange(24, dtype="<i8").reshape(2, 3, 4)))
    f["ok_bigendian_f4.npy"] = npy_bytes(a.astype(">f4"))
    f["ok_bigendian_i8_fortran.npy"] = npy_bytes(np.asfortranarray(np.arange(6, dtype=">i8").reshape(3, 2)))
    f["ok_empty_0x10.npy"] = npy_bytes(np.zeros((0, 10), dtype="<f4"))
    f["ok_rank8.npy"] = npy_bytes(np.zeros((1, 2, 1, 2, 1, 1, 2, 1), dtype="<f4"))
    f["ok_v2.npy"] = npy_raw(hdr(), b"\0" * 8, major=2)
    f["ok_v3.npy"] = npy_raw(hdr(), b"\0" * 8, major=3)
    f["ok_py2_long.npy"] = npy_raw("{'descr': '<i4', 'fortran_order': False, 'shape': (2L,)}", b"\0" * 8)
    # Checklist 12: magic, version, header length and size, literal, keys.
    good = f["ok_f32_2x3.npy"]
    f["bad_magic.npy"] = b"\x93NUMPX" + good[6:]
    f["bad_version_4_0.npy"] = good[:6] + b"\x04\x00" + good[8:]
    f["bad_header_past_eof.npy"] = npy_raw(hdr(), hlen=4000)
    f["bad_header_too_large.npy"] = npy_raw(hdr() + " " * 10001, b"\0" * 8, major=2)
    f["bad_too_short.npy"] = good[:9]
    f["bad_not_dict.npy"] = npy_raw("[('descr', '<f4')]\n")
    f["bad_missing_key.npy"] = npy_raw("{'descr': '<f4', 'shape': (2,), }\n", b"\0" * 8)
    f["bad_extra_key.npy"] = npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 0}", b"\0" * 8)
    f["bad_duplicate_key.npy"] = npy_raw("{'shape': (2,), 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
                                         b"\0" * 8)
    f["bad_shape_int.npy"] = npy_raw(hdr(shape="(2)"), b"\0" * 8)
    f["bad_shape_list.npy"] = npy_raw(hdr(shape="[2]"), b"\0" * 8)
    f["bad_fortran_int.npy"] = npy_raw(hdr(fortran="1"), b"\0" * 8)
    # Checklist 13: pickles, structured, sub-array dtypes.
    f["bad_pickle.npy"] = npy_bytes(np.array([None, {"a": 1}], dtype=object), allow_pickle=True)
    f["bad_structured.npy"] = npy_bytes(np.zeros(2, dtype=[("a", "<f4"), ("b", "<i8")]))
    f["bad_subarray.npy"] = npy_raw(hdr(descr="('<f4', (2,))"), b"\0" * 16)
    f["bad_complex.npy"] = npy_bytes(np.zeros(2, dtype=np.complex64))
    # Checklist 15: data size and dims.
    f["bad_short_data.npy"] = good[:-1]
    f["bad_trailing_bytes.npy"] = good + b"\0"
    f["bad_negative_dim.npy"] = npy_raw(hdr(shape="(-1,)"))
    f["bad_shape_overflow.npy"] = npy_raw(hdr(shape="(4294967296, 4294967296)"))
    f["bad_huge_dim.npy"] = npy_raw(hdr(shape="(99999999999999999999,)"))
    f["bad_bool_byte.npy"] = npy_raw(hdr(descr="'|b1'"), b"\x01\x02")
    return f


def st_raw(header_text, data=b"", n=None):
    h = header_text.encode("utf-8") if isinstance(header_text, str) else header_text
    return struct.pack("<Q", len(h) if n is None else n) + h + data


def st_json(tensors, meta=None):
    """tensors: name -> (dtype, shape, [begin, end]); the JSON text as given."""
    d = {}
    if meta is not None:
        d["__metadata__"] = meta
    for k, (dt, shape, offs) in tensors.items():
        d[k] = {"dtype": dt, "shape": shape, "data_offsets": offs}
    return json.dumps(d, separators=(",", ":"))


def one(dt="F32", shape="[2]", offs="[0,8]", name="t"):
    return '{"%s":{"dtype":"%s","shape":%s,"data_offsets":%s}}' % (name, dt, shape, offs)


def safetensors_files():
    f = {}
    valid = st_json({"a.weight": ("F32", [2, 3], [0, 24]), "a.bias": ("F16", [3], [24, 30]),
                     "n": ("I64", [], [30, 38]), "e": ("BF16", [0, 4], [38, 38]), "m": ("BOOL", [2], [38, 40]),
                     "i": ("I8", [1], [40, 41]), "u": ("U8", [1], [41, 42]), "s": ("I16", [1], [42, 44]),
                     "w": ("I32", [1], [44, 48]), "d": ("F64", [1], [48, 56])}, {"format": "pt"})
    data = bytes(range(38)) + b"\x01\x00" + bytes(16)
    f["ok_mixed.safetensors"] = st_raw(valid, data)
    f["ok_empty_header.safetensors"] = st_raw("{}      ")
    f["ok_scalar.safetensors"] = st_raw(one("F64", "[]", "[0,8]"), bytes(8))
    f["ok_zero_size_shared.safetensors"] = st_raw(
        '{"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
        b"\x07")
    f["ok_unicode_name.safetensors"] = st_raw(one("U8", "[1]", "[0,1]", name="\\u00e9\\ud83d\\ude00"), b"\x01")
    f["ok_whitespace.safetensors"] = st_raw("  " + one("U8", "[1]", "[0,1]") + "   ", b"\x01")
    # Checklist 1-3: frame.
    f["bad_empty.safetensors"] = b""
    f["bad_7_bytes.safetensors"] = b"\x02" + bytes(6)
    f["bad_n_past_eof.safetensors"] = st_raw("{}", n=100)
    f["bad_n_wrap.safetensors"] = st_raw("{}", n=2**64 - 1)
    f["bad_n_200mb.safetensors"] = st_raw("{}", n=200_000_000)
    f["bad_depth_bomb.safetensors"] = st_raw('{"a":' + "[" * 2000)
    f["bad_depth_objects.safetensors"] = st_raw('{"a":' * 100 + "1" + "}" * 100)
    # Checklist 4: header text.
    f["bad_not_utf8.safetensors"] = st_raw(b'{"\xff":{}}')
    f["bad_not_json.safetensors"] = st_raw("hello   ")
    f["bad_array_top.safetensors"] = st_raw("[1]")
    f["bad_metadata_value.safetensors"] = st_raw('{"__metadata__":{"a":1}}')
    f["bad_metadata_nested.safetensors"] = st_raw('{"__metadata__":{"a":{"b":"c"}}}')
    # Checklist 5: offsets.
    f["bad_begin_after_end.safetensors"] = st_raw(one("F32", "[1]", "[8,4]"), bytes(8))
    f["bad_gap.safetensors"] = st_raw(
        '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}',
        bytes(12))
    f["bad_overlap.safetensors"] = st_raw(
        '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}',
        bytes(8))
    f["bad_end_past_buffer.safetensors"] = st_raw(one(), bytes(7))
    f["bad_trailing.safetensors"] = st_raw(one(), bytes(9))
    # Checklist 6-7: numbers and sizes.
    for tag, shape in [("neg", "[-1]"), ("frac", "[1.5]"), ("exp", "[1e3]"), ("2p64", "[18446744073709551616]"),
                       ("2p48", "[281474976710656]"), ("long", "[" + "9" * 80 + "]")]:
        f[f"bad_shape_{tag}.safetensors"] = st_raw(one("F32", shape, "[0,4]"), bytes(4))
    f["bad_offset_neg.safetensors"] = st_raw(one("F32", "[1]", "[-4,0]"), bytes(4))
    f["bad_size_mismatch.safetensors"] = st_raw(one("F32", "[2,4]", "[0,24]"), bytes(24))
    f["bad_size_overflow.safetensors"] = st_raw(one("F32", "[4294967296,4294967296,16]", "[0,4]"), bytes(4))
    f["bad_rank9.safetensors"] = st_raw(one("F32", "[1,1,1,1,1,1,1,1,1]", "[0,4]"), bytes(4))
    # Checklist 9-10: dtypes, BOOL, names.
    for dt in ["F128", "f32", "F8_E4M3", "U64"]:
        f[f"bad_dtype_{dt}.safetensors"] = st_raw(one(dt, "[1]", "[0,4]"), bytes(4))
    f["bad_bool_byte.safetensors"] = st_raw(one("BOOL", "[2]", "[0,2]"), b"\x01\x02")
    f["bad_duplicate.safetensors"] = st_raw(
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}',
        b"\x01\x02")
    f["bad_nul_name.safetensors"] = st_raw(
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a\\u0000b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}',
        b"\x01\x02")
    f["bad_lone_surrogate.safetensors"] = st_raw(one("U8", "[1]", "[0,1]", name="\\udc80"), b"\x01")
    f["bad_extra_key.safetensors"] = st_raw('{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}}', b"\x01")
    f["bad_truncated.safetensors"] = f["ok_mixed.safetensors"][:-5]
    return f


def write(sub, files):
    d = os.path.join(HERE, sub)
    os.makedirs(d, exist_ok=True)
    for name, data in sorted(files.items()):
        with open(os.path.join(d, name), "wb") as fh:
            fh.write(data)
    print(f"{sub}: {len(files)} files")


if __name__ == "__main__":
    write("npy", npy_files())
    write("safetensors", safetensors_files())
