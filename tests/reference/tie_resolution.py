"""The int8 and bf16 paths' near rounding ties, resolved toward the engine.

The engine's --activations int8 path rounds x / d to an integer per
activation. Where the reference's float64 x / d lies within TIE_MARGIN
steps of a rounding tie (k + 1/2), the engine's float32 value, ~1e-6
relative away, may lie on the other side: the engine then uses the other
integer, one step (1/127 of its group's absmax) away, and every later row
that reads it (through the KV cache) differs by up to ~1e-2 of the logit
scale. No tolerance can tell that from a bug of the same size, so instead
the reference is told which way each such activation went: it is rerun
with chosen near ties rounded the other way (deepseek_ref.CheckpointWeights
.flips) until every row matches the engine's logits at the project's bar,
1e-4 (tests/reference/logit_rows.py), or no choice does.

The bf16 path (--activations bf16) meets the same: an activation within
bf16_path.TIE_MARGIN steps of a tie between two bf16 values may take the
other one in the engine, one step (2^-8 relative) of that activation; its
near ties are named and resolved the same way.

The choice is a search over the near ties the reference meets, each named
by (quantized input, position, column): find the first row that fails; try
the near ties at or before it, latest position first and closest to the
tie first within a position, rounded the other way; keep a flip that moves the first failing row later (or, when none
of a position's near ties does, the one of them that at least halves that
row's error without failing an earlier row), and repeat. Only near ties are candidates, each flip is one
step of one activation, and the result must then hold every row to 1e-4:
an engine error that is not a handful of such roundings cannot be matched.
The flips found are reported; on the synthetic presets a request needs 0 to
a few.
"""
from collections import namedtuple

import numpy as np

import logit_rows

# One causal forward: logits [T, vocab], the near-tie keys met (each with its
# distance from the tie, in steps), the routing, the positions whose
# quantized inputs met a near tie.
Pass = namedtuple("Pass", "logits keys routing tie_positions")
# What resolve found: the reference's logits with `flips` (sorted keys) rounded
# the other way, the forwards run, whether every row then meets the strict
# bar, and that forward's routing and tie positions (for routing.json).
Resolution = namedtuple("Resolution", "logits flips forwards matched routing tie_positions")


def forward(model, ids, flips, absorbed=False):
    """One causal forward over ids with `flips` rounded the other way (a Pass)."""
    w = model.w
    w.flips, w.tie_keys, w.tie_positions = set(flips), {}, set()
    logits, routing = model.forward(ids, absorbed=absorbed)
    return Pass(logits, dict(w.tie_keys), routing, set(w.tie_positions))


def _first_bad(eng, ref):
    """(first row failing the strict bar or None, its relative error)."""
    for t in range(ref.shape[0]):
        problem, err = logit_rows.row_problem(eng[t], ref[t])
        if problem:
            return t, err
    return None, 0.0


def resolve(model, ids, eng, max_forwards=300, absorbed=False):
    """The reference for `ids` with its near ties rounded as the engine's
    logits `eng` [T, vocab] show (a Resolution)."""
    flips = frozenset()
    cur = forward(model, ids, flips, absorbed)
    forwards, tried = 1, set()
    while True:
        t, err = _first_bad(eng, cur.logits)
        if t is None:
            break
        cands = sorted((k for k in cur.keys if k[1] <= t and k not in flips and k not in tried),
                       key=lambda k: (-k[1], cur.keys[k], k))
        moved, halved = None, None
        for i, k in enumerate(cands):
            if forwards >= max_forwards:
                break
            if halved is not None and k[1] != cands[i - 1][1]:
                break  # a position's near ties tried: keep its best halving before trying earlier ones
            tried.add(k)
            p = forward(model, ids, flips | {k}, absorbed)
            forwards += 1
            t2, err2 = _first_bad(eng, p.logits)
            if t2 is None or t2 > t:
                moved = (k, p)
                break
            if t2 == t and err2 <= 0.5 * err and (halved is None or err2 < halved[2]):
                halved = (k, p, err2)
        chosen = moved or halved
        if chosen is None:
            break
        flips = flips | {chosen[0]}
        cur = chosen[1]
        tried = set()  # after a flip, a near tie tried before may now be the one
    model.w.flips = set()
    return Resolution(cur.logits, sorted(flips), forwards, _first_bad(eng, cur.logits)[0] is None, cur.routing,
                      cur.tie_positions)


def self_check(model, ids):
    """The search against a planted engine: the reference's own logits with
    the first of its near ties that moves a row past the bar flipped must be
    found (that flip, every row at the bar), and logits 2% off everywhere
    must not be matched. Returns (near ties met, the flip planted and found,
    None when no single flip moves a row past the bar)."""
    first = forward(model, ids, set())
    base = first.logits
    planted_key = None
    for k in sorted(first.keys, key=lambda k: (k[1], k)):
        planted = forward(model, ids, {k}).logits
        if _first_bad(planted, base)[0] is None:
            continue  # this flip moves no row past the bar: nothing to find
        res = resolve(model, ids, planted)
        if not res.matched or k not in res.flips:
            raise AssertionError("tie_resolution: planted flip %r not found (found %r)" % (k, res.flips))
        planted_key = k
        break
    if resolve(model, ids, base * 1.02, max_forwards=20).matched:
        raise AssertionError("tie_resolution: logits 2% off were matched by flips")
    return len(first.keys), planted_key
