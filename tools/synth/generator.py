"""Generation of a synthetic checkpoint: random streams, the file plan, and the
streaming pipeline that draws each tensor in row chunks, encodes it in the chosen
format (quantize.py) and writes the shards (safetensors_writer.py), then the JSON
files.  Kept apart from make_checkpoint.py (the CLI) so that the CLI, the
read-back checks (readback.py) and the self-test (synth_self_test.py) share it.
"""
import hashlib
import json
import math
import os
import queue
import re
import threading
import time

import numpy as np

import presets as P
import quantize as Q
import safetensors_writer as ST

MAX_FILE_BYTES = 3 << 29          # 1.5 GiB: the default file count keeps every file below ~2 GB
CHUNK_ELEMS = 1 << 22             # elements generated at once (a multiple of 128 rows, at least 128)
SHARD_RE = re.compile(r"^model-\d{5}-of-\d{5}\.safetensors$")


# --------------------------------------------------------------------------- random streams

def stream(seed, key):
    """Independent generator per tensor: depends on (seed, key) only, not on generation order."""
    h = hashlib.sha256(key.encode("utf-8")).digest()
    words = [int.from_bytes(h[i:i + 4], "little") for i in range(0, 16, 4)]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed)] + words)))


def draw(rng, init, shape):
    """Next values of the stream, float32; successive calls continue the same sequence, so a
    matrix drawn in row chunks equals the matrix drawn at once."""
    if init[0] == "normal":
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(init[1])
    if init[0] == "norm":
        return np.float32(1.0) + np.float32(0.1) * rng.standard_normal(shape, dtype=np.float32)
    if init[0] == "uniform":
        lo, hi = init[1], init[2]
        return (lo + (hi - lo) * rng.random(shape, dtype=np.float64)).astype(np.float32)
    raise ValueError(init)


# --------------------------------------------------------------------------- generation

def checkpoint_format(config):
    q = config.get("quantization_config")
    if q is None:
        return "bf16"
    return {"fp8": "fp8", "compressed-tensors": "int4"}[q["quant_method"]]


def plan(config, fmt):
    """-> [(Source, [(name, dtype, shape)], nbytes)] in model order."""
    out = []
    for src in P.tensor_sources(config):
        st = P.stored_tensors(src, fmt)
        out.append((src, st, sum(ST.nbytes_of(dt, sh) for _, dt, sh in st)))
    return out


def split_files(sizes, nfiles):
    """Contiguous groups -> file index per group, balanced by bytes, no file empty."""
    n = len(sizes)
    nfiles = max(1, min(nfiles, n))
    total = sum(sizes)
    starts = [0]
    cum = 0
    bounds = []
    for i, s in enumerate(sizes):
        bounds.append(cum)
        cum += s
    for k in range(1, nfiles):
        target = total * k / nfiles
        i = next((j for j in range(n) if bounds[j] >= target), n)
        i = max(i, starts[-1] + 1)
        i = min(i, n - (nfiles - k))
        starts.append(i)
    starts.append(n)
    assign = []
    for k in range(nfiles):
        assign += [k] * (starts[k + 1] - starts[k])
    return assign, nfiles


def source_chunks(sources, seed, chunk_elems):
    """Yields (src, first_row, float32 values) for every source in order: a 1-D source whole,
    a matrix in chunks of whole 128-row multiples (the FP8 block height)."""
    for src in sources:
        rng = stream(seed, src.key)
        if len(src.shape) == 1:
            yield src, 0, draw(rng, src.init, src.shape)
            continue
        rows, cols = src.shape
        step = max(128, (chunk_elems // cols) // 128 * 128)
        for r0 in range(0, rows, step):
            yield src, r0, draw(rng, src.init, (min(step, rows - r0), cols))


def prefetched(iterable, depth=2):
    """Runs `iterable` in a helper thread, `depth` items ahead (numpy's generators release the
    GIL, so drawing the next chunk overlaps encoding and writing this one).  Same items, same
    order: determinism is untouched."""
    q = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def put(item):  # False once the consumer has gone
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def run():
        try:
            for item in iterable:
                if not put(item):
                    return
            put(done)
        except BaseException as e:  # noqa: BLE001  (re-raised in the consumer)
            put(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        t.join()


def emit_chunk(src, r0, x, fmt, w):
    """Encodes one chunk of source `src` in format `fmt` and appends it to writer `w`."""
    stored = P.stored_tensors(src, fmt)
    if len(src.shape) == 1:
        name, dtype, _ = stored[0]
        w.append(name, x if dtype == "F32" else Q.bf16_bits(x))
        return
    if len(stored) == 1:
        w.append(stored[0][0], Q.bf16_bits(x))
    elif fmt == "fp8":
        codes, scale = Q.fp8_block_quantize(x)
        w.append(stored[0][0], codes)
        w.append(stored[1][0], scale)
    else:  # int4
        packed, sbits = Q.int4_group_quantize(x)
        w.append(stored[0][0], packed)
        w.append(stored[1][0], sbits)
        if r0 + x.shape[0] == src.shape[0]:
            w.append(stored[2][0], np.array(src.shape, dtype=np.int32))


def generate(preset, fmt, seed, output, files=None, nextn_layers=None, chunk_elems=CHUNK_ELEMS, log=None):
    config = P.build_config(preset, fmt, nextn_layers)
    groups = plan(config, fmt)
    sizes = [g[2] for g in groups]
    total = sum(sizes)
    nfiles = files if files else max(2, math.ceil(total / MAX_FILE_BYTES))
    assign, nfiles = split_files(sizes, nfiles)
    os.makedirs(output, exist_ok=True)
    for f in os.listdir(output):   # stale shards of an earlier run with another file count
        if SHARD_RE.match(f) or f == "model.safetensors.index.json":
            os.remove(os.path.join(output, f))
    weight_map = {}
    t0 = time.time()
    chunks = prefetched(source_chunks([g[0] for g in groups], seed, chunk_elems))
    for k in range(nfiles):
        fname = f"model-{k + 1:05d}-of-{nfiles:05d}.safetensors"
        members = [g for g, a in zip(groups, assign) if a == k]
        entries = [t for g in members for t in g[1]]
        if log:
            log(f"  {fname}: {len(entries)} tensors, {sum(g[2] for g in members) / 1e6:.1f} MB")
        w = ST.SafetensorsWriter(os.path.join(output, fname), entries)
        try:
            last = members[-1][0]
            for src, r0, x in chunks:
                emit_chunk(src, r0, x, fmt, w)
                if src is last and (len(src.shape) == 1 or r0 + x.shape[0] == src.shape[0]):
                    break
            w.close()
        except BaseException:
            w.abort()
            chunks.close()
            raise
        for name, _, _ in entries:
            weight_map[name] = fname
    chunks.close()
    index = {"metadata": {"total_size": total}, "weight_map": {k: weight_map[k] for k in sorted(weight_map)}}
    _write_json(os.path.join(output, "config.json"), config)
    _write_json(os.path.join(output, "generation_config.json"), P.generation_config(config))
    _write_json(os.path.join(output, "model.safetensors.index.json"), index)
    return config, total, nfiles, time.time() - t0


def _write_json(path, obj):
    tmp = path + ".partial"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
