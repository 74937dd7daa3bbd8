"""The engine's bf16 path (--activations bf16, src/kernels/matmul_bf16.hpp)
in float64: what it rounds, modelled here; what it sums, summed exactly.

The engine rounds each activation row to bf16 once per linear, and each FP8
weight as bf16(float32(e4m3 * scale)); it then sums products of bf16 values
(exact in float32) in float32 lanes. This reference rounds the same operands
the same way and sums their products in float64, so what remains between
the two is the float32 summation (about 2^-24 * (cols / 32 + 4) of the
products' magnitude) and activations near a bf16 rounding tie, which the
float32 engine (whose activations differ from these by ~1e-6 relative) may
round the other way: one bf16 step (2^-8 relative) of one term.

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


def fp8_weights(e4m3_values, scale_inv, block=(128, 128)):
    """w' = bf16(float32(e4m3(w) * s)) for FP8 weights: e4m3_values [out, in]
    (the exact float values of the bytes), scale_inv [ceil(out/b0), ceil(in/b1)]
    float32 block scales. The product is rounded to float32 first (the
    engine multiplies in float32), then to bf16."""
    out, inn = e4m3_values.shape
    b0, b1 = block
    scale = np.repeat(np.repeat(np.asarray(scale_inv, dtype=np.float32), b0, axis=0)[:out], b1, axis=1)[:, :inn]
    product = np.asarray(e4m3_values, dtype=np.float32) * scale  # float32 * float32, rounded once
    return bf16_round(product)


# An activation within this many bf16 steps of a rounding tie (about 8e-6
# relative at most) may round the other way in the float32 engine: "near a
# tie", and resolved as the int8 path's are (tests/reference/tie_resolution.py).
TIE_MARGIN = 2e-3


def round_activations(x, flip=None):
    """The engine's bf16 rounding of activation rows x [T, n], and a [T, n]
    mask of those within TIE_MARGIN steps of a tie. flip [T, n] (optional):
    those of the near-tie activations it marks take the other neighbour."""
    x = np.asarray(x, dtype=np.float64)
    out = bf16_round(x)
    v = np.abs(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.exp2(np.floor(np.log2(np.where(v > 0, v, 1.0))) - 7)  # one bf16 step in v's binade
        lo = np.floor(v / step) * step
        frac = v / step - np.floor(v / step)
    near = (v >= 2.0 ** -126) & np.isfinite(v) & (np.abs(frac - 0.5) < TIE_MARGIN)
    if flip is not None:
        other = np.copysign(np.where(np.abs(out) > lo, lo, lo + step), x)
        out = np.where(np.asarray(flip, dtype=bool) & near, other, out)
    return out, near


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
    # e4m3 0x7E (448) times 2^-120 in float32, then bf16; 0x01 (2^-9) times 2^-120: subnormal, so zero.
    w = fp8_weights(np.array([[448.0, 2.0 ** -9]]), np.array([[2.0 ** -120]], dtype=np.float32))
    if not (w[0, 0] == 448.0 * 2.0 ** -120 and w[0, 1] == 0.0):
        raise AssertionError("fp8_weights: %r" % (w,))
    # A scale with more bits than bf16 keeps: 3 * (1 + 2^-10) = 3 + 3*2^-10 -> 3 (bf16 step at 2 is 2^-6).
    w = fp8_weights(np.array([[3.0]]), np.array([[1.0 + 2.0 ** -10]], dtype=np.float32))
    if w[0, 0] != 3.0:
        raise AssertionError("fp8_weights rounding: %r" % (w,))
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
