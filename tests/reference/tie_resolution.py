"""The int8 path's near rounding ties, resolved toward the engine.

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

The choice is a search over the near ties the reference meets, each named
by (quantized input, position, column): find the first row that fails; try
the near ties at or before it, latest position first, rounded the other
way; keep a flip that moves the first failing row later (or, when none
does, the one that at least halves that row's error without failing an
earlier row), and repeat. Only near ties are candidates, each flip is one
step of one activation, and the result must then hold every row to 1e-4:
an engine error that is not a handful of such roundings cannot be matched.
The flips found are reported; on the synthetic presets a request needs 0 to
a few.
"""
import numpy as np

import logit_rows


def forward(model, ids, flips):
    """(logits [T, vocab], near-tie keys met) of one causal forward over ids
    with `flips` rounded the other way."""
    w = model.w
    w.flips, w.tie_keys, w.tie_positions = set(flips), set(), set()
    logits, _ = model.forward(ids)
    return logits, set(w.tie_keys)


def _first_bad(eng, ref):
    """(first row failing the strict bar or None, its relative error)."""
    for t in range(ref.shape[0]):
        problem, err = logit_rows.row_problem(eng[t], ref[t])
        if problem:
            return t, err
    return None, 0.0


def resolve(model, ids, eng, max_forwards=300):
    """Reference logits for `ids` with its near ties rounded as the engine's
    logits `eng` [T, vocab] show. Returns (logits, flips as sorted keys,
    forwards run, True when every row then meets the strict bar)."""
    flips = frozenset()
    ref, keys = forward(model, ids, flips)
    forwards, tried = 1, set()
    while True:
        t, err = _first_bad(eng, ref)
        if t is None:
            break
        cands = sorted((k for k in keys if k[1] <= t and k not in flips and k not in tried),
                       key=lambda k: (-k[1], k))
        moved, halved = None, None
        for k in cands:
            if forwards >= max_forwards:
                break
            tried.add(k)
            r2, keys2 = forward(model, ids, flips | {k})
            forwards += 1
            t2, err2 = _first_bad(eng, r2)
            if t2 is None or t2 > t:
                moved = (k, r2, keys2)
                break
            if t2 == t and err2 <= 0.5 * err and (halved is None or err2 < halved[3]):
                halved = (k, r2, keys2, err2)
        chosen = moved or halved
        if chosen is None:
            break
        flips = flips | {chosen[0]}
        ref, keys = chosen[1], chosen[2]
        tried = set()  # after a flip, a near tie tried before may now be the one
    model.w.flips = set()
    return ref, sorted(flips), forwards, _first_bad(eng, ref)[0] is None


def self_check(model, ids):
    """The search against a planted engine: the reference's own logits with
    the first of its near ties that moves a row past the bar flipped must be
    found (that flip, every row at the bar), and logits 2% off everywhere
    must not be matched. Returns (near ties met, the flip planted and found,
    None when no single flip moves a row past the bar)."""
    base, keys = forward(model, ids, set())
    planted_key = None
    for k in sorted(keys, key=lambda k: (k[1], k)):
        planted, _ = forward(model, ids, {k})
        if _first_bad(planted, base)[0] is None:
            continue  # this flip moves no row past the bar: nothing to find
        _, flips, _, ok = resolve(model, ids, planted)
        if not ok or k not in flips:
            raise AssertionError("tie_resolution: planted flip %r not found (found %r)" % (k, flips))
        planted_key = k
        break
    _, _, _, ok = resolve(model, ids, base * 1.02, max_forwards=20)
    if ok:
        raise AssertionError("tie_resolution: logits 2% off were matched by flips")
    return len(keys), planted_key
