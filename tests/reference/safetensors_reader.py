"""Minimal, dependency-free (numpy only) safetensors reader.

File layout: 8-byte little-endian u64 N, N bytes of JSON header
{"__metadata__": {...}?, name: {"dtype", "shape", "data_offsets": [b, e]}},
then the data; offsets are relative to the end of the header; tensors are
C-order little-endian.

`SafetensorsFile.raw(name)` returns the stored values in their storage type
(BF16 -> uint16 bit patterns, F8_E4M3 -> uint8 bit patterns); `to_float64`
decodes any floating storage type exactly. `Checkpoint` resolves tensor names
through `model.safetensors.index.json` (or a lone `model.safetensors`).
"""

import json
import mmap
import os

import numpy as np

# dtype name -> numpy storage dtype (little-endian)
STORAGE_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "F8_E4M3": np.dtype("u1"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("u1"),
}

FLOAT_DTYPES = ("F64", "F32", "F16", "BF16", "F8_E4M3")


class SafetensorsError(Exception):
    pass


def _e4m3fn_table():
    """float64 value of every e4m3fn byte: sign bit 7, exponent bits 6..3
    (bias 7), mantissa bits 2..0; exponent 0 is subnormal; no infinities;
    0x7f / 0xff are NaN."""
    table = np.empty(256, dtype=np.float64)
    for b in range(256):
        sign = -1.0 if b & 0x80 else 1.0
        exp = (b >> 3) & 0xF
        man = b & 0x7
        if exp == 0xF and man == 0x7:
            table[b] = np.nan
        elif exp == 0:
            table[b] = sign * (man / 8.0) * 2.0 ** (1 - 7)
        else:
            table[b] = sign * (1.0 + man / 8.0) * 2.0 ** (exp - 7)
    return table


E4M3FN_TABLE = _e4m3fn_table()


def bf16_bits_to_f64(bits):
    """uint16 bf16 bit patterns -> float64 (exact: bf16 is the top half of f32)."""
    bits = np.asarray(bits, dtype=np.uint16)
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def e4m3_bits_to_f64(bits):
    """uint8 e4m3fn bit patterns -> float64 (exact)."""
    return E4M3FN_TABLE[np.asarray(bits, dtype=np.uint8)]


def to_float64(dtype, raw):
    """Decode a raw storage array of safetensors dtype `dtype` to float64."""
    if dtype == "BF16":
        return bf16_bits_to_f64(raw)
    if dtype == "F8_E4M3":
        return e4m3_bits_to_f64(raw)
    if dtype in ("F64", "F32", "F16"):
        return np.asarray(raw).astype(np.float64)
    raise SafetensorsError("dtype %s is not a floating type" % dtype)


class SafetensorsFile:
    """One .safetensors file, memory-mapped; tensors are read lazily."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 8:
                raise SafetensorsError("%s: file too short (%d bytes)" % (path, size))
            n = int.from_bytes(f.read(8), "little")
            if n > size - 8:
                raise SafetensorsError("%s: header length %d exceeds file size %d" % (path, n, size))
            try:
                header = json.loads(f.read(n).decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise SafetensorsError("%s: bad JSON header: %s" % (path, e))
            self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size > 0 else b""
        self.data_start = 8 + n
        self.metadata = header.pop("__metadata__", {}) or {}
        self.entries = {}
        for name, e in header.items():
            try:
                dtype, shape, (b, end) = e["dtype"], [int(s) for s in e["shape"]], e["data_offsets"]
            except (KeyError, TypeError, ValueError):
                raise SafetensorsError("%s: tensor %s: malformed header entry %r" % (path, name, e))
            if dtype not in STORAGE_DTYPES:
                raise SafetensorsError("%s: tensor %s: unsupported dtype %s" % (path, name, dtype))
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            nbytes = count * STORAGE_DTYPES[dtype].itemsize
            if not (0 <= b <= end) or end - b != nbytes:
                raise SafetensorsError("%s: tensor %s: offsets [%d, %d) do not hold %s %s (%d bytes)"
                                       % (path, name, b, end, dtype, shape, nbytes))
            if self.data_start + end > size:
                raise SafetensorsError("%s: tensor %s: data [%d, %d) beyond end of file (%d bytes; truncated?)"
                                       % (path, name, self.data_start + b, self.data_start + end, size))
            self.entries[name] = (dtype, tuple(shape), b, end)

    def keys(self):
        return self.entries.keys()

    def dtype(self, name):
        return self.entries[name][0]

    def shape(self, name):
        return self.entries[name][1]

    def raw(self, name):
        """The stored values in their storage dtype (read-only view of the map)."""
        if name not in self.entries:
            raise SafetensorsError("%s: no tensor %s" % (self.path, name))
        dtype, shape, b, end = self.entries[name]
        sd = STORAGE_DTYPES[dtype]
        arr = np.frombuffer(self._mm, dtype=sd, count=(end - b) // sd.itemsize,
                            offset=self.data_start + b)
        return arr.reshape(shape)

    def float64(self, name):
        return to_float64(self.dtype(name), self.raw(name))


class Checkpoint:
    """A Hugging Face checkpoint directory: config.json plus safetensors,
    resolved through model.safetensors.index.json when present."""

    def __init__(self, directory):
        self.directory = directory
        cfg_path = os.path.join(directory, "config.json")
        if not os.path.isfile(cfg_path):
            raise SafetensorsError("%s: no config.json" % directory)
        with open(cfg_path) as f:
            self.config = json.load(f)
        index_path = os.path.join(directory, "model.safetensors.index.json")
        self._files = {}
        self.weight_map = {}
        if os.path.isfile(index_path):
            with open(index_path) as f:
                index = json.load(f)
            if "weight_map" not in index:
                raise SafetensorsError("%s: no weight_map" % index_path)
            self.weight_map = dict(index["weight_map"])
        elif os.path.isfile(os.path.join(directory, "model.safetensors")):
            st = self._file("model.safetensors")
            self.weight_map = {k: "model.safetensors" for k in st.keys()}
        else:
            raise SafetensorsError("%s: neither model.safetensors.index.json nor model.safetensors" % directory)

    def _file(self, fname):
        if fname not in self._files:
            path = os.path.join(self.directory, fname)
            if not os.path.isfile(path):
                raise SafetensorsError("%s: missing shard file %s" % (self.directory, fname))
            self._files[fname] = SafetensorsFile(path)
        return self._files[fname]

    def __contains__(self, name):
        return name in self.weight_map

    def _locate(self, name):
        if name not in self.weight_map:
            raise SafetensorsError("%s: tensor %s not in checkpoint" % (self.directory, name))
        st = self._file(self.weight_map[name])
        if name not in st.entries:
            raise SafetensorsError("%s: tensor %s listed in index but absent from %s"
                                   % (self.directory, name, st.path))
        return st

    def dtype(self, name):
        return self._locate(name).dtype(name)

    def shape(self, name):
        return self._locate(name).shape(name)

    def raw(self, name):
        return self._locate(name).raw(name)

    def float64(self, name):
        return self._locate(name).float64(name)
