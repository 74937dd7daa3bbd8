"""The engine's bf16 path (--activations bf16, src/kernels/matmul_bf16.hpp)
in float64: what it rounds, modelled here; what it sums, summed exactly.

The engine rounds each activation row to bf16 once per linear and takes the
FP8 weights exactly (every e4m3 value is a bf16); it sums their products in
float32 lanes per 128-column block and scales each block's partial sums by
the block's scale. This reference rounds the activations the same way and
sums their products with the exact weights (e4m3 times scale) in float64,
so what remains between the two is the float32 summation (about 2^-24 *
(cols / 16 + 4) of the products' magnitude) and activations near a bf16
rounding tie, which the float32 engine (whose activations differ from these
by ~1e-6 relative) may round the other way: one bf16 step (2^-8 relative)
of one term.

Written from the definition's text, with numpy bit operations; it shares no
code with the engine.
"""
import numpy as np


def bf16_round(x):
    """bf16(v) of the definition, for float32 values v (float64 arrays are
    first rounded to float32, as the engine's activations are float32):
    round to nearest even to 8 significant bits; a subnormal v is a zero of
    its sign; NaN stays NaN. Returned as float64."""
    v = np.ascontiguousarray(np.asarray(x, dtype=np.float64).astype(np.float32))
    u = v.view(np.uint32).astype(np.uint64)
    sign = u & 0x80000000
    mag = u & 0x7FFFFFFF
    nan = mag > 0x7F800000
    # Round the low 16 bits away, to nearest, ties to the even upper half.
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    out = np.where(mag < 0x00800000, sign, rounded)             # subnormal or zero: signed zero
    out = np.where(nan, (u | 0x00400000) & 0xFFFF0000, out)     # NaN stays (a quiet) NaN
    return out.astype(np.uint32).view(np.float32).astype(np.float64)


# An activation within this many bf16 steps of a rounding tie (about 8e-5
# relative at most) may round the other way in the float32 engine: "near a
# tie", and resolved as the int8 path's are (tests/reference/tie_resolution.py).
# The engine's activations were seen up to ~1e-5 relative from these (the
# small preset: a tie 2e-3 steps wide left a row unmatched, 2e-2 matched).
TIE_MARGIN = 2e-2


def bf16_step(v):
    """One bf16 step (a unit in the last place) in the binade of each |x| = v
    (v = 0 counts as 1's binade)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.exp2(np.floor(np.log2(np.where(v > 0, v, 1.0))) - 7)


def round_activations(x, flip=None, distances=False):
    """The engine's bf16 rounding of activation rows x [T, n], and a [T, n]
    mask of those within TIE_MARGIN steps of a tie. flip [T, n] (optional):
    those of the near-tie activations it marks take the other neighbour.
    distances: the mask holds each near tie's distance from the tie in steps
    instead (inf where not near)."""
    x = np.asarray(x, dtype=np.float64)
    out = bf16_round(x)
    v = np.abs(x)
    step = bf16_step(v)
    with np.errstate(divide="ignore", invalid="ignore"):
        lo = np.floor(v / step) * step
        frac = v / step - np.floor(v / step)
    near = (v >= 2.0 ** -126) & np.isfinite(v) & (np.abs(frac - 0.5) < TIE_MARGIN)
    if flip is not None:
        other = np.copysign(np.where(np.abs(out) > lo, lo, lo + step), x)
        out = np.where(np.asarray(flip, dtype=bool) & near, other, out)
    if distances:
        return out, np.where(near, np.abs(frac - 0.5), np.inf)
    return out, near


class EngineRows:
    """The engine's rounded activations of every bf16-path linear, recorded by
    tests/model/hf_logits (ROWS_DIR/<linear>.npy, [rows, cols]), which the
    reference follows: each of its rounded rows is matched with the engine's
    row that differs from it in the fewest columns, and every column where
    they differ must be a rounding the engine's float32 error explains: the
    bf16 rounding of a value within e of the reference's activation x, e =
    FOLLOW_MARGIN of x's bf16 step plus ROW_SLACK of the row's largest
    magnitude (an element much smaller than its row carries the row's
    absolute error, which can exceed its own step). So an activation far
    from a tie must round as the reference's does, one near a tie may take
    either neighbour. Anything else is an error of the engine (or of the
    reference) and raises. The reference then continues with the engine's
    row, so its near ties need no search (tie_resolution.py), and its logits
    are held to the engine's at the usual bar."""

    FOLLOW_MARGIN = 0.01    # steps: ~4e-5 relative, above float32's ~1.5e-5 seen here
    ROW_SLACK = 2.0 ** -19  # of the row's largest magnitude: 32 float32 steps of it

    def __init__(self, directory):
        self.directory = directory
        self.cache = {}
        self.followed = 0  # activations taken the other way, as the engine took them

    def _rows(self, prefix):
        if prefix not in self.cache:
            import os
            path = os.path.join(self.directory, prefix + ".npy")
            if not os.path.exists(path):
                raise AssertionError("engine rows: no %s (the engine did not run %s on the bf16 path)"
                                     % (path, prefix))
            self.cache[prefix] = np.load(path).astype(np.float64)
        return self.cache[prefix]

    def follow(self, prefix, x, rounded):
        """rounded (the reference's bf16 rows of x [T, n]) with each row replaced
        by the engine's matching row (checked as above)."""
        E = self._rows(prefix)
        if E.shape[1] != rounded.shape[1]:
            raise AssertionError("engine rows of %s have %d columns, the reference's %d"
                                 % (prefix, E.shape[1], rounded.shape[1]))
        out = np.array(rounded, dtype=np.float64)
        x = np.asarray(x, dtype=np.float64)
        v = np.abs(x)
        step = bf16_step(v)
        for i in range(out.shape[0]):
            differ = E != out[i]
            best = int(np.argmin(differ.sum(axis=1)))
            cols = np.nonzero(differ[best])[0]
            e = self.FOLLOW_MARGIN * step[i] + self.ROW_SLACK * np.max(v[i])
            lo, hi = bf16_round(x[i] - e), bf16_round(x[i] + e)
            for c in cols:
                if not lo[c] <= E[best, c] <= hi[c]:
                    raise AssertionError(
                        "%s: the engine's activation %d of a row is %r; the reference's is %r, and values "
                        "within %.3g of it (float32 error) round to [%r, %r]"
                        % (prefix, c, E[best, c], x[i, c], e[c], lo[c], hi[c]))
            self.followed += len(cols)
            out[i] = E[best]
        return out


def self_check():
    """Hand-computed roundings (the tests of this module)."""
    cases = [
        (1.0, 1.0),
        (1.0 + 2.0 ** -8, 1.0),                      # a tie: to even (1.0)
        (1.0 + 3 * 2.0 ** -8, 1.0 + 2.0 ** -6),      # a tie: to even (the upper one)
        (1.0 + 2.0 ** -8 + 2.0 ** -20, 1.0 + 2.0 ** -7),  # past the tie: up
        (-2.5, -2.5),
        (3.4e38, np.inf),                            # rounds past the largest bf16
        (1.0e-39, 0.0),                              # a float32 subnormal: zero
        (-1.0e-39, -0.0),
        (2.0 ** -126, 2.0 ** -126),                  # the smallest normal stays
    ]
    got = bf16_round(np.array([c[0] for c in cases]))
    for (v, want), g in zip(cases, got):
        if not (g == want and np.signbit(g) == np.signbit(want)):
            raise AssertionError("bf16_round(%r) = %r, expected %r" % (v, g, want))
    if not np.isnan(bf16_round(np.array([np.nan]))[0]):
        raise AssertionError("bf16_round(NaN) is not NaN")
    # Near ties, and a flip to the other neighbour (down from the even 1 + 2^-6, up from 1).
    x = np.array([[1.0 + 3 * 2.0 ** -8 + 1e-9, -(1.0 + 2.0 ** -8 - 1e-9), 1.0 + 2.0 ** -9]])
    r, near = round_activations(x)
    if list(near[0]) != [True, True, False] or list(r[0]) != [1.0 + 2.0 ** -6, -1.0, 1.0]:
        raise AssertionError("round_activations: %r %r" % (r, near))
    r, _ = round_activations(x, flip=np.array([[True, True, True]]))
    if list(r[0]) != [1.0 + 2.0 ** -7, -(1.0 + 2.0 ** -7), 1.0]:
        raise AssertionError("round_activations flipped: %r" % (r,))


if __name__ == "__main__":
    self_check()
    print("bf16_path: self check passed")
