"""A converted trillion model directory (docs/format.md: config.json,
manifest.json, HDF5 shards), read with h5py, with the same interface as
safetensors_reader.Checkpoint so the reference runs on what trillion stores
(e.g. a model requantized by `trillion convert --quantize`).

Independent of trillion's C++ reader: tensors are found through manifest.json
and read by dataset name with h5py; the HDF5 storage types are the raw bytes
(BF16 as uint16, F8_E4M3 as uint8, I8 as int8, I32 as int32). An int4
`weight_packed` dataset's `weight_shape` attribute is served as the
`<prefix>.weight_shape` tensor, as in the Hugging Face checkpoint.
"""
import json
import os

import numpy as np

from safetensors_reader import SafetensorsError, to_float64

_STORAGE = {"F32": np.float32, "BF16": np.uint16, "F16": np.float16, "F8_E4M3": np.uint8, "U8": np.uint8,
            "I8": np.int8, "I32": np.int32, "I64": np.int64}


def is_model_directory(path):
    return os.path.isfile(os.path.join(path, "manifest.json"))


class ModelDirectory:
    def __init__(self, directory):
        import h5py  # only needed for converted models
        self._h5py = h5py
        self.directory = directory
        with open(os.path.join(directory, "config.json")) as f:
            self.config = json.load(f)
        with open(os.path.join(directory, "manifest.json")) as f:
            self.manifest = json.load(f)
        if self.manifest.get("format") != "trillion-hdf5":
            raise SafetensorsError("%s: not a trillion-hdf5 manifest" % directory)
        self.tensors = self.manifest["tensors"]
        self._files = {}

    def _file(self, shard):
        if shard not in self._files:
            self._files[shard] = self._h5py.File(os.path.join(self.directory, shard), "r")
        return self._files[shard]

    def _shape_owner(self, name):
        """x.weight_shape -> x.weight_packed when that carries the attribute."""
        if name.endswith(".weight_shape"):
            packed = name[: -len("shape")] + "packed"
            if packed in self.tensors and "weight_shape" in self.tensors[packed]:
                return packed
        return None

    def __contains__(self, name):
        return name in self.tensors or self._shape_owner(name) is not None

    def dtype(self, name):
        if name not in self.tensors and self._shape_owner(name):
            return "I64"
        return self.tensors[name]["dtype"]

    def shape(self, name):
        if name not in self.tensors and self._shape_owner(name):
            return (2,)
        return tuple(self.tensors[name]["shape"])

    def raw(self, name):
        if name not in self.tensors:
            owner = self._shape_owner(name)
            if owner is None:
                raise SafetensorsError("%s: tensor %s not in manifest.json" % (self.directory, name))
            ds = self._file(self.tensors[owner]["shard"])[owner]
            return np.asarray(ds.attrs["weight_shape"], dtype=np.int64)
        info = self.tensors[name]
        ds = self._file(info["shard"])[name]
        arr = ds[()]
        want = _STORAGE[info["dtype"]]
        if arr.dtype != np.dtype(want) or tuple(arr.shape) != tuple(info["shape"]):
            raise SafetensorsError("%s: dataset %s is %s %s, manifest says %s %s" % (
                info["shard"], name, arr.dtype, arr.shape, info["dtype"], info["shape"]))
        return arr

    def float64(self, name):
        return to_float64(self.dtype(name), self.raw(name))
