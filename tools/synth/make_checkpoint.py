#!/usr/bin/python3
"""Synthetic Hugging Face checkpoints of the DeepSeek-V3 architecture (DeepSeek-V3, Kimi K2).

    /usr/bin/python3 tools/synth/make_checkpoint.py --preset tiny --format bf16|fp8|int4 \\
        --seed 0 --output DIR [--files N] [--nextn-layers N]
    /usr/bin/python3 tools/synth/make_checkpoint.py --list-presets
    /usr/bin/python3 tools/synth/make_checkpoint.py --verify DIR
    /usr/bin/python3 tools/synth/make_checkpoint.py --self-test

Writes DIR/config.json, DIR/generation_config.json, DIR/model.safetensors.index.json and
DIR/model-0000K-of-0000N.safetensors, in the layout of docs/checkpoint.md.  Output is a
pure function of (preset, format, seed, files, nextn-layers): the same bytes every run.
Tensors are generated and written one row-chunk at a time (peak memory ~ a few hundred MB
whatever the preset).  Needs only the standard library and numpy.
"""
import argparse
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import presets as P  # noqa: E402
from generator import generate, plan  # noqa: E402
from readback import verify  # noqa: E402


# --------------------------------------------------------------------------- sizes / listing

def param_counts(config):
    main = mtp = 0
    L = config["num_hidden_layers"]
    for src in P.tensor_sources(config):
        n = int(np.prod(src.shape))
        m = re.match(r"model\.layers\.(\d+)\.", src.name)
        if m and int(m.group(1)) >= L:
            mtp += n
        else:
            main += n
    return main, mtp


def list_presets():
    print(f"{'preset':13} {'model_type':11} {'L':>2} {'MTP':>3} {'params':>14} {'(+MTP)':>12} "
          f"{'bf16 MB':>9} {'fp8 MB':>9} {'int4 MB':>9}  description")
    for name, p in P.PRESETS.items():
        c = P.build_config(name, "bf16")
        main, mtp = param_counts(c)
        sizes = []
        for fmt in P.FORMATS:
            try:
                sizes.append(f"{sum(g[2] for g in plan(P.build_config(name, fmt), fmt)) / 1e6:9.1f}")
            except ValueError:
                sizes.append(f"{'-':>9}")
        print(f"{name:13} {c['model_type']:11} {c['num_hidden_layers']:2} {c['num_nextn_predict_layers']:3} "
              f"{main:14,} {mtp:12,} {' '.join(sizes)}  {p['description']}")


# --------------------------------------------------------------------------- CLI

def main(argv=None):
    ap = argparse.ArgumentParser(description="Write a synthetic DeepSeek-V3-family Hugging Face checkpoint.")
    ap.add_argument("--preset", choices=list(P.PRESETS))
    ap.add_argument("--format", choices=P.FORMATS, default="bf16")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--output", help="output directory (created; earlier shards there are replaced)")
    ap.add_argument("--files", type=int, default=None,
                    help="number of .safetensors files (default: 2, more so that none exceeds ~1.5 GiB)")
    ap.add_argument("--nextn-layers", type=int, default=None,
                    help="override num_nextn_predict_layers (MTP layers written after the main stack)")
    ap.add_argument("--list-presets", action="store_true")
    ap.add_argument("--verify", metavar="DIR", help="check a checkpoint directory against docs/checkpoint.md")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    if a.self_test:
        import synth_self_test  # test code, kept out of the generator
        return 0 if synth_self_test.self_test() else 1
    if a.list_presets:
        list_presets()
        return 0
    if a.verify:
        probs = verify(a.verify)
        for p in probs:
            print("problem:", p)
        print(f"{a.verify}: {'OK' if not probs else f'{len(probs)} problem(s)'}")
        return 0 if not probs else 1
    if not a.preset or not a.output:
        ap.error("--preset and --output are required (or --list-presets / --verify / --self-test)")
    if a.seed < 0:
        ap.error("--seed must be >= 0")
    if a.files is not None and a.files < 1:
        ap.error("--files must be >= 1")
    log = None if a.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    try:
        config, total, nfiles, secs = generate(a.preset, a.format, a.seed, a.output, a.files, a.nextn_layers, log=log)
    except ValueError as e:
        print(f"make_checkpoint: {e}", file=sys.stderr)
        return 2
    main_p, mtp_p = param_counts(config)
    if log:
        log(f"{a.output}: preset {a.preset}, {a.format}, seed {a.seed}: {main_p:,} parameters"
            f" (+{mtp_p:,} MTP), {total / 1e6:.1f} MB in {nfiles} files, {secs:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
