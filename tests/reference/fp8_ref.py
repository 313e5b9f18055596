"""fp8_ref.py -- the NumPy side of tests/golden/test_convert_fp8.sh.

  python3 fp8_ref.py quantize BF16_DIR FP8_DIR B0 B1
      An FP8 checkpoint as DeepSeek-V3's are laid out, from a bf16 model
      directory (eaas make-model): every linear weight "*_proj.weight" (not
      the router, embeddings, LM head or norms) becomes F8_E4M3 with a
      "<name>_scale_inv" of shape [ceil(rows/B0), ceil(cols/B1)] (amax / 448
      per block; F32, and BF16 for one weight, as some checkpoints store
      them); its codes are the nearest e4m3 values of w / scale, with a few
      edge codes planted (zeros, the smallest subnormal and normal, +-448);
      config.json gets quantization_config. Other files are copied.
  python3 fp8_ref.py check FP8_DIR OUT_DIR
      OUT_DIR (eaas convert-fp8's output) holds, for every FP8 weight, the
      bf16 bits of e4m3(code) * scale computed here in float32 and rounded to
      nearest even, no scale tensors, every other tensor byte for byte, and
      a config.json without quantization_config. Prints "N passed, N failed".

The e4m3 values are computed from the bit fields (sign, 4 exponent bits of
bias 7, 3 mantissa bits; exponent 0 subnormal; S.1111.111 NaN), not taken
from eaas.
"""

import json
import os
import shutil
import struct
import sys

import numpy as np

RAW = {"F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1}


def e4m3_table():
    t = np.zeros(256, dtype=np.float32)
    for b in range(256):
        s, e, m = b >> 7, (b >> 3) & 15, b & 7
        if e == 15 and m == 7:
            v = np.nan
        elif e == 0:
            v = (m / 8.0) * 2.0 ** -6
        else:
            v = (1.0 + m / 8.0) * 2.0 ** (e - 7)
        t[b] = -v if s else v
    return t


def bf16_bits(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    out = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return out


def read_dir(d):
    """name -> (dtype, shape, raw bytes) of every tensor of a model directory."""
    idx = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    out = {}
    for fn in files:
        with open(os.path.join(d, fn), "rb") as f:
            blob = f.read()
        n = struct.unpack("<Q", blob[:8])[0]
        header = json.loads(blob[8:8 + n])
        for name, e in header.items():
            if name == "__metadata__":
                continue
            b, end = e["data_offsets"]
            out[name] = (e["dtype"], tuple(e["shape"]), blob[8 + n + b: 8 + n + end])
    return out


def write_file(path, tensors):
    header, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(header).encode()
    h += b" " * (-(8 + len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def to_f32(dt, shape, raw):
    if dt == "F32":
        return np.frombuffer(raw, dtype="<f4").reshape(shape)
    if dt == "BF16":
        return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
    raise ValueError(dt)


def quantize(src, dst, b0, b1):
    tab = e4m3_table()
    pos = np.sort(np.unique(tab[(tab >= 0) & ~np.isnan(tab)]))
    code_of = {float(v): b for b, v in enumerate(tab) if b < 128 and not np.isnan(v)}
    tensors = read_dir(src)
    out, n_fp8 = {}, 0
    for name, (dt, shape, raw) in tensors.items():
        if not (name.endswith("_proj.weight") and len(shape) == 2):
            out[name] = (dt, shape, raw)
            continue
        w = to_f32(dt, shape, raw).astype(np.float32)
        R, C = shape
        sr, sc = -(-R // b0), -(-C // b1)
        scale = np.zeros((sr, sc), dtype=np.float32)
        q = np.zeros((R, C), dtype=np.uint8)
        for i in range(sr):
            for j in range(sc):
                blk = w[i * b0:(i + 1) * b0, j * b1:(j + 1) * b1]
                amax = float(np.max(np.abs(blk)))
                s = np.float32(amax / 448.0) if amax > 0 else np.float32(1.0)
                scale[i, j] = s
                x = np.abs(blk / s)
                k = np.clip(np.searchsorted(pos, x), 1, len(pos) - 1)
                near = np.where(np.abs(pos[k - 1] - x) <= np.abs(pos[k] - x), pos[k - 1], pos[k])
                codes = np.vectorize(lambda v: code_of[float(v)])(near).astype(np.uint8)
                q[i * b0:(i + 1) * b0, j * b1:(j + 1) * b1] = codes | np.where(blk < 0, 0x80, 0).astype(np.uint8)
        if n_fp8 == 0:  # edge codes: +-0, smallest subnormal, smallest normal, +-448
            q.flat[:6] = [0x00, 0x80, 0x01, 0x08, 0x7E, 0xFE]
        out[name] = ("F8_E4M3", shape, q.tobytes())
        if n_fp8 == 1:  # one checkpoint-style BF16 scale (exactly representable, so both sides agree)
            sb = bf16_bits(scale)
            out[name + "_scale_inv"] = ("BF16", scale.shape, sb.tobytes())
        else:
            out[name + "_scale_inv"] = ("F32", scale.shape, scale.astype("<f4").tobytes())
        n_fp8 += 1
    os.makedirs(dst, exist_ok=True)
    write_file(os.path.join(dst, "model.safetensors"), out)
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                  "weight_block_size": [b0, b1]}
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=2)
    for fn in os.listdir(src):
        if fn not in ("config.json",) and not fn.endswith(".safetensors") and not fn.endswith(".index.json"):
            shutil.copy(os.path.join(src, fn), os.path.join(dst, fn))
    print(f"quantized {n_fp8} weights in blocks of [{b0}, {b1}]", file=sys.stderr)


def check(fp8_dir, out_dir):
    tab = e4m3_table()
    b0, b1 = json.load(open(os.path.join(fp8_dir, "config.json")))["quantization_config"]["weight_block_size"]
    src, got = read_dir(fp8_dir), read_dir(out_dir)
    passed = failed = 0

    def ok(cond, what):
        nonlocal passed, failed
        if cond:
            passed += 1
        else:
            failed += 1
            print(f"FAIL {what}", file=sys.stderr)

    n_fp8 = 0
    for name, (dt, shape, raw) in src.items():
        if name.endswith("_scale_inv"):
            ok(name not in got, f"{name}: scale left out")
            continue
        if dt != "F8_E4M3":
            ok(got.get(name) == (dt, shape, raw), f"{name}: copied byte for byte")
            continue
        n_fp8 += 1
        sdt, sshape, sraw = src[name + "_scale_inv"]
        scale = to_f32(sdt, sshape, sraw)
        rows = np.arange(shape[0]) // b0
        cols = np.arange(shape[1]) // b1
        full = scale[rows][:, cols]
        want = bf16_bits(tab[np.frombuffer(raw, dtype=np.uint8).reshape(shape)] * full)
        g = got.get(name)
        ok(g is not None and g[0] == "BF16" and g[1] == shape, f"{name}: BF16 of shape {shape}")
        if g is not None:
            have = np.frombuffer(g[2], dtype="<u2").reshape(shape)
            bad = int(np.sum(have != want))
            ok(bad == 0, f"{name}: {bad} of {want.size} values differ from e4m3 * scale rounded to bf16")
    ok(n_fp8 > 0, "the checkpoint had FP8 weights")
    cfg = json.load(open(os.path.join(out_dir, "config.json")))
    ok("quantization_config" not in cfg, "config.json without quantization_config")
    ok(cfg.get("model_type") == json.load(open(os.path.join(fp8_dir, "config.json")))["model_type"],
       "config.json otherwise kept")
    for fn in os.listdir(fp8_dir):
        if fn != "config.json" and not fn.endswith(".safetensors"):
            ok(open(os.path.join(fp8_dir, fn), "rb").read() == open(os.path.join(out_dir, fn), "rb").read(),
               f"{fn} copied")
    print(f"fp8 weights checked: {n_fp8}", file=sys.stderr)
    print(f"{passed} passed, {failed} failed")
    return failed == 0


if __name__ == "__main__":
    if sys.argv[1] == "quantize":
        quantize(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif sys.argv[1] == "check":
        sys.exit(0 if check(sys.argv[2], sys.argv[3]) else 1)
    else:
        sys.exit("usage: fp8_ref.py quantize BF16_DIR FP8_DIR B0 B1 | check FP8_DIR OUT_DIR")
