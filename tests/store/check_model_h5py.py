#!/usr/bin/python3
"""Cross-checks a converted model directory against docs/format.md with h5py
(an HDF5 reader sharing no code with trillion) and the source checkpoint:

    check_model_h5py.py MODEL_DIR HF_DIR

Every manifest tensor must be a contiguous, unfiltered dataset at a 4096-aligned
offset equal to H5Dget_offset, with the dtype/checksum attributes, and the file
bytes at that offset must equal the safetensors bytes. Exits non-zero on the
first disagreement.
"""
import ctypes
import ctypes.util
import json
import os
import struct
import sys

import h5py


def safetensors_index(hf_dir):
    """name -> (path, absolute begin, end) from the index (or the single file)."""
    index = os.path.join(hf_dir, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) \
        else ["model.safetensors"]
    out = {}
    for f in files:
        path = os.path.join(hf_dir, f)
        with open(path, "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            header = json.loads(fh.read(n))
        for name, e in header.items():
            if name != "__metadata__":
                b, end = e["data_offsets"]
                out[name] = (path, 8 + n + b, 8 + n + end, e["dtype"], e["shape"])
    return out


def xxh64():
    """XXH64 from the reference library (libxxhash; Debian: libxxhash0, which
    tools/install-deps.sh installs), or python's xxhash module; else None."""
    for name in ("libxxhash.so.0", ctypes.util.find_library("xxhash")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.XXH64.restype = ctypes.c_uint64
        lib.XXH64.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]
        return lambda b: lib.XXH64(b, len(b), 0)
    try:
        import xxhash
    except ImportError:
        return None
    return lambda b: xxhash.xxh64_intdigest(b)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    model_dir, hf_dir = sys.argv[1], sys.argv[2]
    manifest = json.load(open(os.path.join(model_dir, "manifest.json")))
    source = safetensors_index(hf_dir)
    hasher = xxh64()
    if hasher is None:
        print("SKIPPED: the checksum cross-check: no libxxhash (apt-get install libxxhash0) and no python xxhash",
              flush=True)
    storage = {"F32": "<f4", "BF16": "<u2", "F16": "<u2", "F8_E4M3": "|u1", "U8": "|u1",
               "I8": "|i1", "I32": "<i4", "I64": "<i8"}
    for shard in manifest["shards"]:
        path = os.path.join(model_dir, shard["file"])
        if os.path.getsize(path) != shard["bytes"]:
            fail(f"{path}: size differs from manifest")
        with h5py.File(path, "r") as f:
            if f.attrs["trillion_format"] != b"trillion-hdf5" or f.attrs["trillion_format_version"] != 1:
                fail(f"{path}: file attributes")
    checked = 0
    for name, t in manifest["tensors"].items():
        path = os.path.join(model_dir, t["shard"])
        with h5py.File(path, "r") as f:
            ds = f[name]
            where = f"{path}: {name}"
            if ds.chunks is not None or ds.compression is not None or ds.id.get_create_plist().get_layout() != h5py.h5d.CONTIGUOUS:
                fail(f"{where}: not contiguous/unfiltered")
            off = ds.id.get_offset()
            if off != t["offset"] or off % 4096:
                fail(f"{where}: offset {off} vs manifest {t['offset']}")
            if list(ds.shape) != t["shape"] or ds.dtype.str != storage[t["dtype"]]:
                fail(f"{where}: shape/type {ds.shape} {ds.dtype.str}")
            if ds.attrs["dtype"].decode() != t["dtype"] or ds.attrs["checksum"].decode() != t["checksum"]:
                fail(f"{where}: attributes")
            if "weight_shape" in t and list(ds.attrs["weight_shape"]) != t["weight_shape"]:
                fail(f"{where}: weight_shape attribute")
            if ds.id.get_storage_size() != t["nbytes"]:
                fail(f"{where}: storage size")
        src_path, b, e, dtype, shape = source[name]
        if dtype != t["dtype"] or shape != t["shape"]:
            fail(f"{where}: differs from the checkpoint's header")
        with open(src_path, "rb") as fh:
            fh.seek(b)
            want = fh.read(e - b)
        with open(path, "rb") as fh:
            fh.seek(t["offset"])
            got = fh.read(t["nbytes"])
        if got != want:
            fail(f"{where}: bytes differ from {src_path}")
        if hasher and f"xxh64:{hasher(got):016x}" != t["checksum"]:
            fail(f"{where}: XXH64 disagrees with the manifest checksum")
        checked += 1
    if checked == 0:
        fail(f"{model_dir}: no tensors in the manifest to check")
    shapes = [n for n in source if n.endswith(".weight_shape")]
    for n in shapes:
        if n in manifest["tensors"]:
            fail(f"{n}: weight_shape stored as a dataset")
    print(f"ok: {checked} tensors in {len(manifest['shards'])} shards match {hf_dir}"
          f"{' (checksums confirmed by XXH64)' if hasher else ' (checksums NOT checked: SKIPPED)'}")


if __name__ == "__main__":
    main()
