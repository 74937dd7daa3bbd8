"""Reading a synthetic checkpoint back: `verify` (a directory against
docs/checkpoint.md, for `make_checkpoint.py --verify`) and `Checkpoint` (random
access to dequantized tensors, for the self-test).  Separate from the writer
(generator.py) so the checks stay an independent second reading.
"""
import json
import os

import numpy as np

import quantize as Q
import safetensors_writer as ST
from generator import checkpoint_format, plan

# --------------------------------------------------------------------------- verification

def verify(d):
    """Reads a checkpoint directory back; -> list of problems (empty if it matches docs/checkpoint.md)."""
    problems = []
    config = json.load(open(os.path.join(d, "config.json")))
    fmt = checkpoint_format(config)
    index = json.load(open(os.path.join(d, "model.safetensors.index.json")))
    expected = {}
    for src, st, _ in plan(config, fmt):
        for name, dt, sh in st:
            expected[name] = (dt, list(sh), src.shape)
    wm = index["weight_map"]
    if set(wm) != set(expected):
        problems.append(f"weight_map: missing {sorted(set(expected) - set(wm))[:5]}, "
                        f"extra {sorted(set(wm) - set(expected))[:5]}")
    files = sorted(set(wm.values()))
    if len(files) < 2:
        problems.append(f"only {len(files)} file(s)")
    total = 0
    seen = set()
    for fname in files:
        path = os.path.join(d, fname)
        header, start = ST.read_header(path)
        if start % 8:
            problems.append(f"{fname}: data start {start} not 8-aligned")
        header.pop("__metadata__", None)
        spans = sorted((h["data_offsets"][0], h["data_offsets"][1], n) for n, h in header.items())
        pos = 0
        for b, e, n in spans:
            h = header[n]
            if b != pos:
                problems.append(f"{fname}: {n} starts at {b}, expected {pos} (hole/overlap)")
            if b % ST.DTYPE_SIZE[h["dtype"]]:
                problems.append(f"{fname}: {n} misaligned")
            if e - b != ST.nbytes_of(h["dtype"], h["shape"]):
                problems.append(f"{fname}: {n} size mismatch")
            pos = e
        if start + pos != os.path.getsize(path):
            problems.append(f"{fname}: file size {os.path.getsize(path)} != {start + pos}")
        total += pos
        for n, h in header.items():
            seen.add(n)
            if wm.get(n) != fname:
                problems.append(f"{n}: in {fname} but index says {wm.get(n)}")
            if n in expected and (h["dtype"], h["shape"]) != expected[n][:2]:
                problems.append(f"{n}: {h['dtype']} {h['shape']}, expected {expected[n][:2]}")
            if n.endswith(".weight_shape"):
                v = ST.read_tensor(path, n, header, start)
                if list(v) != list(expected[n][2]):
                    problems.append(f"{n}: weight_shape {list(v)} != {list(expected[n][2])}")
            elif h["dtype"] == "F8_E4M3":
                v = ST.read_tensor(path, n, header, start)
                if np.any((v & 0x7F) == 0x7F):
                    problems.append(f"{n}: NaN codes")
            elif n.endswith("_scale_inv"):
                v = ST.read_tensor(path, n, header, start)
                if not np.all(np.isfinite(v) & (v > 0)):
                    problems.append(f"{n}: bad scales")
    if seen != set(wm):
        problems.append("weight_map names not found in the files: " + str(sorted(set(wm) - seen)[:5]))
    if index["metadata"]["total_size"] != total:
        problems.append(f"total_size {index['metadata']['total_size']} != {total}")
    return problems


class Checkpoint:
    """Random access to a checkpoint's tensors (tests)."""

    def __init__(self, d):
        self.d = d
        self.config = json.load(open(os.path.join(d, "config.json")))
        self.wm = json.load(open(os.path.join(d, "model.safetensors.index.json")))["weight_map"]
        self.headers = {}

    def raw(self, name):
        f = self.wm[name]
        if f not in self.headers:
            self.headers[f] = ST.read_header(os.path.join(self.d, f))
        h, s = self.headers[f]
        return ST.read_tensor(os.path.join(self.d, f), name, h, s)

    def weight(self, name):
        """Dequantized float64 value of logical weight `name` (ends in .weight)."""
        if name in self.wm:
            a = self.raw(name)
            h = self.headers[self.wm[name]][0][name]
            if h["dtype"] == "BF16":
                return Q.bf16_to_f32(a).astype(np.float64)
            if h["dtype"] == "F32":
                return a.astype(np.float64)
            return Q.fp8_block_dequantize(a, self.raw(name + "_scale_inv"))
        base = name[: -len(".weight")]
        return Q.int4_group_dequantize(self.raw(base + ".weight_packed"), self.raw(base + ".weight_scale"))
