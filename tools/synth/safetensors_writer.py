"""Minimal streaming safetensors writer (and a reader for self-checks), numpy only.

File layout: u64 little-endian header length N, N bytes of JSON header (padded with
spaces to a multiple of 8, so the data starts 8-byte aligned), then the tensors'
bytes, C order, little-endian, back to back with no holes.  The header lists every
tensor with dtype, shape and data_offsets [begin, end) relative to the data start,
plus "__metadata__": {"format": "pt"} like files written by torch.

As the safetensors library does, the data is ordered by element size (largest
first), then by name: every tensor then starts at a multiple of its element size.

The writer lays out the whole file from the declared (name, dtype, shape) list
first, then accepts each tensor's bytes in order, in as many pieces as wanted
(`append`), so that a multi-gigabyte file is written without holding it in memory.
The file is written under a temporary name and renamed on `close()` once every
tensor is complete.
"""
import json
import os
import struct

import numpy as np

DTYPE_SIZE = {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1, "U8": 1, "I8": 1}
# numpy dtype carrying each safetensors dtype's bits (BF16 as its uint16 pattern, F8 as uint8 codes)
NUMPY_OF = {
    "F64": np.dtype("<f8"), "I64": np.dtype("<i8"), "F32": np.dtype("<f4"), "I32": np.dtype("<i4"),
    "BF16": np.dtype("<u2"), "F16": np.dtype("<f2"), "F8_E4M3": np.dtype("u1"), "U8": np.dtype("u1"),
    "I8": np.dtype("i1"),
}


def nbytes_of(dtype, shape):
    n = DTYPE_SIZE[dtype]
    for s in shape:
        n *= int(s)
    return n


def data_order(entries):
    """entries: iterable of (name, dtype, shape) -> list in on-disk data order."""
    return sorted(entries, key=lambda e: (-DTYPE_SIZE[e[1]], e[0]))


class SafetensorsWriter:
    def __init__(self, path, entries):
        self.path = path
        self.tmp = os.path.join(os.path.dirname(path) or ".", "." + os.path.basename(path) + ".partial")
        self.info = {}
        header = {"__metadata__": {"format": "pt"}}
        off = 0
        for name, dtype, shape in data_order(entries):
            if name in self.info:
                raise ValueError("duplicate tensor " + name)
            size = nbytes_of(dtype, shape)
            header[name] = {"dtype": dtype, "shape": [int(s) for s in shape], "data_offsets": [off, off + size]}
            self.info[name] = {"dtype": dtype, "begin": off, "size": size, "written": 0}
            off += size
        self.data_size = off
        hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
        hb += b" " * ((-(8 + len(hb))) % 8)
        self.data_start = 8 + len(hb)
        self.f = open(self.tmp, "wb")
        self.f.write(struct.pack("<Q", len(hb)))
        self.f.write(hb)
        self.f.truncate(self.data_start + self.data_size)

    def append(self, name, array):
        """Append the next piece of tensor `name` (numpy array of the dtype's carrier type)."""
        t = self.info[name]
        want = NUMPY_OF[t["dtype"]]
        a = np.ascontiguousarray(array)
        if a.dtype != want:
            raise TypeError(f"{name}: got numpy {a.dtype}, tensor is {t['dtype']} ({want})")
        if t["written"] + a.nbytes > t["size"]:
            raise ValueError(f"{name}: more data than its shape ({t['written']} + {a.nbytes} > {t['size']})")
        self.f.seek(self.data_start + t["begin"] + t["written"])
        self.f.write(memoryview(a).cast("B"))
        t["written"] += a.nbytes

    def close(self):
        missing = [n for n, t in self.info.items() if t["written"] != t["size"]]
        if missing:
            self.f.close()
            raise ValueError(f"{self.path}: incomplete tensors: {missing[:5]}")
        self.f.close()
        os.replace(self.tmp, self.path)

    def abort(self):
        try:
            self.f.close()
        finally:
            if os.path.exists(self.tmp):
                os.remove(self.tmp)


def read_header(path):
    """-> (header dict, data_start)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
    return header, 8 + n


def read_tensor(path, name, header=None, data_start=None):
    """-> numpy array (carrier dtype: BF16 as uint16, F8_E4M3 as uint8) of tensor `name`."""
    if header is None:
        header, data_start = read_header(path)
    h = header[name]
    b, e = h["data_offsets"]
    a = np.fromfile(path, dtype=NUMPY_OF[h["dtype"]], count=(e - b) // DTYPE_SIZE[h["dtype"]],
                    offset=data_start + b)
    return a.reshape(h["shape"])
