#!/usr/bin/env python3
"""Compares two folders of output_N.pb tensors (serialized ONNX TensorProtos) elementwise.

    compare_outputs.py GOT_DIR WANT_DIR [--atol 1e-4] [--rtol 1e-3]

Every WANT_DIR/output_N.pb must have a GOT_DIR/output_N.pb of the same dtype and shape, and
|got - want| <= atol + rtol * |want| must hold everywhere (np.allclose's rule; a NaN matches
only a NaN in the same place, since here both sides are Kiln's own backends). One line per
output, then a last line that scripts/gpu-check parses:

    result: ok outputs 2 failed 0 max_abs 3.1e-06 worst_ratio 0.0312

Exit status: 0 all outputs match, 1 some output differs, 2 a file is missing or unreadable.

It reads the TensorProtos with its own small protobuf decoder, so it needs neither onnx nor
protobuf; numpy is used when it is importable (much faster), else plain Python. This lets it
run under any python3 >= 3.8 on a GPU machine that has none of the build's Python packages.
"""
import argparse
import glob
import math
import os
import re
import struct
import sys

try:
    import numpy as np
except ImportError:  # plain Python fallback below
    np = None

# TensorProto.DataType -> (name, struct format of one element, element size)
DTYPES = {
    1: ("float32", "f", 4), 2: ("uint8", "B", 1), 3: ("int8", "b", 1), 4: ("uint16", "H", 2),
    5: ("int16", "h", 2), 6: ("int32", "i", 4), 7: ("int64", "q", 8), 9: ("bool", "?", 1),
    10: ("float16", "e", 2), 11: ("float64", "d", 8), 12: ("uint32", "I", 4), 13: ("uint64", "Q", 8),
    16: ("bfloat16", "H", 2),
}


class TensorError(Exception):
    pass


def _varint(buf, pos):
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise TensorError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise TensorError("varint longer than 10 bytes")


def _signed64(v):
    return v - (1 << 64) if v >= (1 << 63) else v


def _fields(buf):
    """Yields (field number, wire type, value): an int for varint/fixed, bytes for length-delimited."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            if pos + n > len(buf):
                raise TensorError(f"field {field}: {n} bytes announced, {len(buf) - pos} left")
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise TensorError(f"field {field}: unsupported wire type {wire}")
        if pos > len(buf):
            raise TensorError(f"field {field}: truncated")
        yield field, wire, value


def _packed_varints(value, wire):
    if wire == 0:
        return [value]
    out, pos = [], 0
    while pos < len(value):
        v, pos = _varint(value, pos)
        out.append(v)
    return out


def read_tensor(path):
    """Returns (name, dtype name, dims, flat values as float64 numpy array or list of floats)."""
    with open(path, "rb") as f:
        buf = f.read()
    name, dtype, dims, raw = "", 0, [], None
    typed = {4: b"", 10: b""}  # float_data, double_data as little-endian bytes
    ints = {5: [], 7: [], 11: []}  # int32_data, int64_data, uint64_data
    for field, wire, value in _fields(buf):
        if field == 1:
            dims += [_signed64(v) for v in _packed_varints(value, wire)]
        elif field == 2:
            dtype = value
        elif field == 8:
            name = value.decode("utf-8", "replace")
        elif field == 9:
            raw = value
        elif field in typed:
            typed[field] += value
        elif field in ints:
            ints[field] += _packed_varints(value, wire)
        elif field in (13, 14) and value not in (0, b""):
            raise TensorError("external data is not supported")
    if dtype not in DTYPES:
        raise TensorError(f"data_type {dtype} is not supported")
    dname, fmt, size = DTYPES[dtype]
    count = 1
    for d in dims:
        if d < 0:
            raise TensorError(f"negative dim {d}")
        count *= d
    if raw is None:  # typed fields: re-encode them as raw little-endian bytes of the dtype
        if dtype == 1:
            raw = typed[4]
        elif dtype == 11:
            raw = typed[10]
        elif dtype in (7,):
            raw = struct.pack(f"<{len(ints[7])}q", *[_signed64(v) for v in ints[7]])
        elif dtype in (12, 13):
            raw = struct.pack(f"<{len(ints[11])}{fmt}", *ints[11])
        else:  # int32_data carries every type of 4 bytes or fewer, float16/bfloat16 as bits
            vals = [_signed64(v) for v in ints[5]]
            if dtype in (10, 16, 4):
                vals = [v & 0xFFFF for v in vals]
            pack = "H" if dtype == 10 else fmt  # float16 bits, not values
            raw = struct.pack(f"<{len(vals)}{pack}", *[bool(v) if dtype == 9 else v for v in vals])
    if len(raw) != count * size:
        raise TensorError(f"{dname}{dims}: {len(raw)} bytes of data, expected {count * size}")
    if np is not None:
        if dtype == 16:
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            values = bits.view(np.float32).astype(np.float64)
        else:
            values = np.frombuffer(raw, dtype="<" + fmt).astype(np.float64)
    else:
        if dtype == 16:
            values = [struct.unpack("<f", struct.pack("<I", b << 16))[0] for (b,) in struct.iter_unpack("<H", raw)]
        else:
            values = [float(v) for (v,) in struct.iter_unpack("<" + fmt, raw)] if count else []
    return name, dname, dims, values


def compare(got, want, atol, rtol):
    """Returns (ok, max abs error, worst error / tolerance, NaN count, where the worst is)."""
    if np is not None:
        g, w = got, want
        both_nan = np.isnan(g) & np.isnan(w)
        err = np.where(both_nan, 0.0, np.abs(g - w))
        err = np.where(np.isnan(err), np.inf, err)  # NaN on one side only
        ratio = err / (atol + rtol * np.abs(np.where(np.isnan(w), 0.0, w)))
        if g.size == 0:
            return True, 0.0, 0.0, 0, -1
        i = int(np.argmax(ratio))
        return bool(ratio[i] <= 1.0), float(err.max()), float(ratio[i]), int(both_nan.sum()), i
    max_err = worst = 0.0
    where, nans = -1, 0
    for i, (g, w) in enumerate(zip(got, want)):
        if math.isnan(g) and math.isnan(w):
            nans += 1
            continue
        e = abs(g - w)
        e = math.inf if math.isnan(e) else e
        r = e / (atol + rtol * (0.0 if math.isnan(w) else abs(w)))
        max_err = max(max_err, e)
        if r > worst or where < 0:
            worst, where = r, i
    return worst <= 1.0, max_err, worst, nans, where


def numbered_outputs(folder):
    def key(path):
        m = re.search(r"_(\d+)\.pb$", path)
        return int(m.group(1)) if m else -1
    return sorted(glob.glob(os.path.join(folder, "output_*.pb")), key=key)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("got", help="folder with the outputs to check (e.g. from --device cuda)")
    parser.add_argument("want", help="folder with the reference outputs (e.g. from --device cpu)")
    parser.add_argument("--atol", type=float, default=1e-4)
    parser.add_argument("--rtol", type=float, default=1e-3)
    args = parser.parse_args()
    wants = numbered_outputs(args.want)
    if not wants:
        print(f"error: no output_N.pb in {args.want}")
        print("result: error outputs 0 failed 0 max_abs nan worst_ratio nan")
        return 2
    failed, errors, max_abs, worst_ratio = 0, 0, 0.0, 0.0
    for want_path in wants:
        fname = os.path.basename(want_path)
        got_path = os.path.join(args.got, fname)
        try:
            wname, wdtype, wdims, wvals = read_tensor(want_path)
            if not os.path.isfile(got_path):
                raise TensorError(f"{got_path} is missing")
            _, gdtype, gdims, gvals = read_tensor(got_path)
        except (OSError, TensorError) as e:
            print(f"{fname}: ERROR {e}")
            errors += 1
            continue
        label = f"{fname} '{wname}' {wdtype}{wdims}"
        if (gdtype, gdims) != (wdtype, wdims):
            print(f"{label}: FAIL got {gdtype}{gdims}")
            failed += 1
            max_abs = worst_ratio = math.inf
            continue
        ok, err, ratio, nans, where = compare(gvals, wvals, args.atol, args.rtol)
        max_abs, worst_ratio = max(max_abs, err), max(worst_ratio, ratio)
        note = f" ({nans} NaN on both sides)" if nans else ""
        if not ok:
            note += f"; worst at flat index {where}: got {float(gvals[where]):.7g}, want {float(wvals[where]):.7g}"
            failed += 1
        print(f"{label}: {'ok' if ok else 'FAIL'} max_abs {err:.3g} worst/tol {ratio:.3g}{note}")
    status = "error" if errors else ("FAIL" if failed else "ok")
    print(f"result: {status} outputs {len(wants)} failed {failed + errors} max_abs {max_abs:.3g} "
          f"worst_ratio {worst_ratio:.3g}")
    return 2 if errors else (1 if failed else 0)


if __name__ == "__main__":
    sys.exit(main())
