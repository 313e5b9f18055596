"""st_io.py -- read and write HF safetensors files with numpy only.

Part of the NumPy reference forward pass (see README.md in this folder).
Written from the safetensors format description, nothing else:

  offset  size  field
  0       8     N = header length, unsigned 64-bit little-endian
  8       N     JSON object: name -> {"dtype", "shape", "data_offsets": [begin, end]},
                plus an optional "__metadata__" object of string -> string
  8+N     ...   data; a tensor's bytes are [8+N+begin, 8+N+end), row-major, little-endian

A model directory holds either model.safetensors, or shards listed in
model.safetensors.index.json ({"weight_map": {name: file}}), or (no index)
any *.safetensors files, whose tensors are merged.

Reading is strict: every length and offset is checked against the file size
and the dtype/shape, and errors name the file and tensor. Tensors are
upcast to float32 when read: F32 as is, F16 exactly, BF16 exactly (a bf16 is
the high half of an f32).
"""

import json
import os

import numpy as np

# dtype name -> (bytes per element, numpy little-endian dtype of the raw storage)
_DTYPES = {
    "F32": (4, np.dtype("<f4")),
    "F16": (2, np.dtype("<f2")),
    "BF16": (2, np.dtype("<u2")),
    "F64": (8, np.dtype("<f8")),
}

MAX_HEADER = 100 * 1024 * 1024


class FormatError(Exception):
    """A model file or directory does not match what it claims to be."""


class _Entry:
    __slots__ = ("path", "name", "dtype", "shape", "begin", "end", "data_start")

    def __init__(self, path, name, dtype, shape, begin, end, data_start):
        self.path = path
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.begin = begin
        self.end = end
        self.data_start = data_start


def _read_header(path):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise FormatError(f"{path}: shorter than the 8-byte header length")
        n = int.from_bytes(head, "little")
        if n > MAX_HEADER or n > size - 8:
            raise FormatError(f"{path}: header length {n} exceeds the file size {size}")
        raw = f.read(n)
    try:
        hdr = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"{path}: header is not JSON: {e}") from None
    if not isinstance(hdr, dict):
        raise FormatError(f"{path}: header is not a JSON object")
    data_len = size - 8 - n
    entries = {}
    for name, meta in hdr.items():
        if name == "__metadata__":
            continue
        if not isinstance(meta, dict):
            raise FormatError(f"{path}: tensor {name}: entry is not an object")
        dt = meta.get("dtype")
        shape = meta.get("shape")
        offs = meta.get("data_offsets")
        if dt not in _DTYPES:
            raise FormatError(f"{path}: tensor {name}: unsupported dtype {dt!r}")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise FormatError(f"{path}: tensor {name}: bad shape {shape!r}")
        if (not isinstance(offs, list) or len(offs) != 2
                or not all(isinstance(o, int) for o in offs)):
            raise FormatError(f"{path}: tensor {name}: bad data_offsets {offs!r}")
        begin, end = offs
        if not (0 <= begin <= end <= data_len):
            raise FormatError(f"{path}: tensor {name}: data_offsets {offs} outside the "
                              f"{data_len}-byte data section")
        count = 1
        for d in shape:
            count *= d
        if count * _DTYPES[dt][0] != end - begin:
            raise FormatError(f"{path}: tensor {name}: {end - begin} bytes for shape {shape} "
                              f"of {dt}")
        entries[name] = _Entry(path, name, dt, tuple(shape), begin, end, 8 + n)
    return entries


def to_float32(raw, dtype):
    """Raw storage array (as read) -> float32 array of the same shape."""
    if dtype == "F32":
        return raw.astype(np.float32)
    if dtype == "F16":
        return raw.astype(np.float32)
    if dtype == "BF16":
        return (raw.astype(np.uint32) << np.uint32(16)).view(np.float32)
    if dtype == "F64":
        return raw.astype(np.float32)
    raise FormatError(f"unsupported dtype {dtype}")


class SafetensorsDir:
    """All tensors of an HF model directory, read lazily, upcast to float32."""

    def __init__(self, model_dir):
        self.dir = model_dir
        self.entries = {}
        index = os.path.join(model_dir, "model.safetensors.index.json")
        single = os.path.join(model_dir, "model.safetensors")
        if os.path.exists(index):
            with open(index, "r", encoding="utf-8") as f:
                try:
                    wm = json.load(f).get("weight_map")
                except json.JSONDecodeError as e:
                    raise FormatError(f"{index}: not JSON: {e}") from None
            if not isinstance(wm, dict):
                raise FormatError(f"{index}: no weight_map object")
            files = sorted(set(wm.values()))
            per_file = {}
            for fn in files:
                if not isinstance(fn, str) or "/" in fn or fn.startswith("."):
                    raise FormatError(f"{index}: bad shard name {fn!r}")
                per_file[fn] = _read_header(os.path.join(model_dir, fn))
            for name, fn in wm.items():
                if name not in per_file[fn]:
                    raise FormatError(f"{index}: tensor {name} is mapped to {fn}, "
                                      f"which does not hold it")
                self.entries[name] = per_file[fn][name]
        elif os.path.exists(single):
            self.entries = _read_header(single)
        else:
            files = sorted(fn for fn in os.listdir(model_dir) if fn.endswith(".safetensors"))
            if not files:
                raise FormatError(f"{model_dir}: no model.safetensors, no index, no *.safetensors")
            for fn in files:
                for name, e in _read_header(os.path.join(model_dir, fn)).items():
                    if name in self.entries:
                        raise FormatError(f"{model_dir}: tensor {name} is in two shards")
                    self.entries[name] = e
        self._maps = {}

    def __contains__(self, name):
        return name in self.entries

    def dtype_of(self, name):
        return self.entries[name].dtype

    def get(self, name, shape=None):
        """Tensor `name` as a float32 array; checks the shape if one is given."""
        e = self.entries.get(name)
        if e is None:
            raise FormatError(f"{self.dir}: missing tensor {name}")
        if shape is not None and tuple(shape) != e.shape:
            raise FormatError(f"{e.path}: tensor {name} has shape {list(e.shape)}, "
                              f"expected {list(shape)}")
        mm = self._maps.get(e.path)
        if mm is None:
            mm = np.memmap(e.path, dtype=np.uint8, mode="r")
            self._maps[e.path] = mm
        nbytes_el, np_dt = _DTYPES[e.dtype]
        buf = mm[e.data_start + e.begin: e.data_start + e.end]
        raw = np.frombuffer(buf.tobytes(), dtype=np_dt).reshape(e.shape)
        return np.ascontiguousarray(to_float32(raw, e.dtype))


# ---------------------------------------------------------------- writing (for selftest.py)

def float32_to_bf16_bits(x):
    """float32 array -> uint16 bf16 bit patterns, round to nearest even (NaN kept NaN)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(x)
    out = rounded.astype(np.uint16)
    out[nan] = 0x7FC0
    return out


def write_safetensors(path, tensors, dtype="F32"):
    """tensors: dict name -> float array. Written in the given dtype (F32, F16, BF16).
    The 1-D per-expert correction bias and norms are written in the same dtype."""
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name], dtype=np.float32)
        if dtype == "F32":
            data = arr.astype("<f4").tobytes()
        elif dtype == "F16":
            data = arr.astype("<f2").tobytes()
        elif dtype == "BF16":
            data = float32_to_bf16_bits(arr).astype("<u2").tobytes()
        else:
            raise ValueError(dtype)
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(hb).to_bytes(8, "little"))
        f.write(hb)
        for b in blobs:
            f.write(b)
