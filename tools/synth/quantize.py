"""Number formats of the synthetic checkpoints: bf16 rounding, FP8 e4m3fn
(DeepSeek-V3 block quantization) and INT4 (compressed-tensors pack-quantized,
Kimi K2 Thinking).  numpy only.  Every function here is exact and
deterministic; `make_checkpoint.py --self-test` checks each encoder against an
independent table-based one.

Conventions (see docs/checkpoint.md):
  bf16   : upper 16 bits of the float32 after round-to-nearest-even; NaN -> 0x7fc0 (sign kept).
  e4m3fn : 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; 0x7f / 0xff are NaN;
           largest finite 448 (0x7e); subnormals m * 2^-9, m = 1..7.
           Encoding is round-to-nearest, ties to the even code (= even mantissa), saturating:
           finite values beyond 448 become +-448 (those below 464 would round there anyway).
  FP8 block: weight_scale_inv[R][C] = amax(block) / 448 (float32; 1.0 for an all-zero block),
           code = e4m3(w / scale) ; the weight is e4m3(code) * weight_scale_inv[r/128][c/128].
  INT4   : per row, group of 32 columns: scale = bf16(amax / 7) (1 group = 1 scale; an all-zero
           group stores scale 0), q = clip(rint(w / scale), -8, 7), nibble = q + 8,
           word j of a row holds columns 8j..8j+7, column 8j+i in bits 4i..4i+3;
           the weight is (nibble - 8) * scale.
"""
import math

import numpy as np

FP8_MAX = 448.0
FP8_BLOCK = 128
INT4_GROUP = 32
INT4_PACK = 8  # nibbles per int32 word


# ----------------------------------------------------------------------------- bf16

def bf16_bits(x):
    """float array -> uint16 bf16 bit patterns (round to nearest even)."""
    x = np.asarray(x, dtype=np.float32)
    shape = x.shape
    x = x.reshape(-1)
    u = x.view(np.uint32)
    r = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    out = r.astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        out[nan] = ((u[nan] >> np.uint32(16)) & np.uint32(0x8000)).astype(np.uint16) | np.uint16(0x7FC0)
    return out.reshape(shape)


def bf16_to_f32(bits):
    """uint16 bf16 bit patterns -> float32 (exact)."""
    bits = np.asarray(bits, dtype=np.uint16)
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def bf16_round(x):
    """float -> float32 value of its bf16 rounding."""
    return bf16_to_f32(bf16_bits(x))


# ----------------------------------------------------------------------------- e4m3fn

def _fp8_decode_table():
    t = np.empty(256, dtype=np.float64)
    for code in range(256):
        s = -1.0 if code & 0x80 else 1.0
        e = (code >> 3) & 0xF
        m = code & 0x7
        if e == 0xF and m == 0x7:
            t[code] = math.nan
        elif e == 0:
            t[code] = s * m * 2.0 ** -9
        else:
            t[code] = s * (1.0 + m / 8.0) * 2.0 ** (e - 7)
    return t


FP8_DECODE = _fp8_decode_table()                      # float64[256], NaN at 0x7f / 0xff
FP8_DECODE_F32 = FP8_DECODE.astype(np.float32)
_FP8_POS = FP8_DECODE[:0x7F].copy()                   # the 127 finite non-negative values, ascending


def fp8_decode(codes):
    """uint8 e4m3fn codes -> float32 (exact)."""
    return FP8_DECODE_F32[np.asarray(codes, dtype=np.uint8)]


def fp8_encode_bits(x):
    """float32 array -> uint8 e4m3fn codes; RNE, ties to even, saturating at +-448, NaN -> 0x7f|sign.

    Bit arithmetic on the float32 pattern (second independent implementation, self-test only)."""
    x = np.asarray(x, dtype=np.float32)
    shape = x.shape
    x = x.reshape(-1)
    u = x.view(np.uint32)
    sign = ((u >> np.uint32(24)) & np.uint32(0x80)).astype(np.uint8)
    a = u & np.uint32(0x7FFFFFFF)                      # |x| bits
    # normal range of e4m3 (|x| >= 2^-6): round the 23-bit mantissa to 3 bits, RNE
    r = (a + np.uint32(0x7FFFF) + ((a >> np.uint32(20)) & np.uint32(1))) >> np.uint32(20)
    normal = a >= np.uint32(0x3C800000)                # 2^-6 = exponent field 121
    r = np.where(normal, r - np.uint32(120 << 3), np.uint32(0))
    # subnormal range: value = m * 2^-9, m = rint(|x| * 512) (exact scaling, RNE)
    ax = np.where(normal, np.float32(0.0), np.abs(x))  # NaN/inf/large take the normal path
    sub = np.rint(ax * np.float32(512.0)).astype(np.uint32)
    code = np.where(normal, r, np.minimum(sub, np.uint32(8)))
    code = np.minimum(code, np.uint32(0x7E)).astype(np.uint8)   # saturate (also +inf)
    nan = a > np.uint32(0x7F800000)
    code[nan] = 0x7F
    return (code | sign).reshape(shape)


def fp8_encode_reference(x):
    """Independent encoder: nearest of the 127 finite magnitudes by searchsorted, ties to the
    even code, saturating.  Slow; used only by the self-test."""
    x = np.asarray(x, dtype=np.float32)
    shape = x.shape
    x = x.reshape(-1)
    with np.errstate(invalid="ignore"):
        a = np.abs(x.astype(np.float64))
    nanmask = np.isnan(a)
    a = np.where(nanmask, 0.0, np.minimum(a, FP8_MAX))
    hi = np.searchsorted(_FP8_POS, a, side="left")     # first value >= a
    hi = np.minimum(hi, 0x7E)
    lo = np.maximum(hi - 1, 0)
    dlo = a - _FP8_POS[lo]
    dhi = _FP8_POS[hi] - a
    pick_hi = (dhi < dlo) | ((dhi == dlo) & (hi % 2 == 0))
    code = np.where(pick_hi, hi, lo).astype(np.uint8)
    code[nanmask] = 0x7F
    sign = (np.signbit(x)).astype(np.uint8) << np.uint8(7)
    return (code | sign).reshape(shape)


def _fp8_tables():
    """Two 65536-entry tables indexed by the upper 16 bits of a float32: the code of that value
    exactly (lower 16 bits zero), and the code of any value strictly above it within the same
    upper-16 bucket.  Every e4m3 rounding boundary (midpoint of two neighbours, 5 significant
    bits) is a bucket start, so one code holds for a whole open bucket."""
    top = (np.arange(65536, dtype=np.uint32) << np.uint32(16))
    exact = fp8_encode_reference(top.view(np.float32))
    inside = fp8_encode_reference((top | np.uint32(0x8000)).view(np.float32))
    return exact, inside


_FP8_EXACT, _FP8_INSIDE = _fp8_tables()


def fp8_encode(x):
    """float32 array -> uint8 e4m3fn codes; RNE, ties to even, saturating at +-448, NaN -> 0x7f|sign.

    Table lookup on the upper 16 bits (fast path used by the generator)."""
    x = np.asarray(x, dtype=np.float32)
    u = x.view(np.uint32)
    hi = u >> np.uint32(16)
    lo0 = (u & np.uint32(0xFFFF)) == 0
    return np.where(lo0, _FP8_EXACT.take(hi), _FP8_INSIDE.take(hi))


def fp8_block_quantize(w):
    """w float32 [rows, cols] -> (codes uint8 [rows, cols], weight_scale_inv float32
    [ceil(rows/128), ceil(cols/128)]).  Rows may be a chunk of a larger matrix as long
    as it starts on a 128-row boundary."""
    w = np.asarray(w, dtype=np.float32)
    rows, cols = w.shape
    nr, nc = -(-rows // FP8_BLOCK), -(-cols // FP8_BLOCK)
    if (nr * FP8_BLOCK, nc * FP8_BLOCK) != (rows, cols):   # partial blocks: zero padding
        wp = np.zeros((nr * FP8_BLOCK, nc * FP8_BLOCK), dtype=np.float32)
        wp[:rows, :cols] = w
    else:
        wp = w
    v = wp.reshape(nr, FP8_BLOCK, nc, FP8_BLOCK)
    amax = np.abs(v).max(axis=(1, 3))
    scale = (amax / np.float32(FP8_MAX)).astype(np.float32)
    scale[scale == 0] = np.float32(1.0)
    codes = fp8_encode(v / scale[:, None, :, None]).reshape(nr * FP8_BLOCK, nc * FP8_BLOCK)
    if wp is not w:
        codes = np.ascontiguousarray(codes[:rows, :cols])
    return codes, scale


def fp8_block_dequantize(codes, scale):
    """codes uint8 [rows, cols], scale float32 [ceil(rows/128), ceil(cols/128)] -> float64."""
    rows, cols = codes.shape
    full = np.repeat(np.repeat(scale.astype(np.float64), FP8_BLOCK, 0)[:rows], FP8_BLOCK, 1)[:, :cols]
    return FP8_DECODE[codes] * full


# ----------------------------------------------------------------------------- int4

def int4_pack(nibbles):
    """uint [rows, cols] values 0..15 (cols % 8 == 0) -> int32 [rows, cols/8]:
    column 8j+i of a row goes to bits 4i..4i+3 of word j."""
    n = np.asarray(nibbles).astype(np.uint32)
    rows, cols = n.shape
    if cols % INT4_PACK:
        raise ValueError(f"int4_pack: {cols} columns, not a multiple of {INT4_PACK}")
    n = n.reshape(rows, cols // INT4_PACK, INT4_PACK)
    shifts = (np.arange(INT4_PACK, dtype=np.uint32) * np.uint32(4))
    packed = np.bitwise_or.reduce(n << shifts, axis=2).astype(np.uint32)
    return packed.view(np.int32)


def int4_unpack(packed):
    """int32 [rows, words] -> uint8 nibbles [rows, words*8] (inverse of int4_pack)."""
    p = np.asarray(packed, dtype=np.int32).view(np.uint32)
    rows, words = p.shape
    shifts = (np.arange(INT4_PACK, dtype=np.uint32) * np.uint32(4))
    n = (p[:, :, None] >> shifts) & np.uint32(0xF)
    return n.reshape(rows, words * INT4_PACK).astype(np.uint8)


def int4_group_quantize(w):
    """w float32 [rows, cols] (cols % 32 == 0) -> (packed int32 [rows, cols/8],
    scale bf16 bits uint16 [rows, cols/32])."""
    w = np.asarray(w, dtype=np.float32)
    rows, cols = w.shape
    if cols % INT4_GROUP:
        raise ValueError(f"int4_group_quantize: {cols} columns, not a multiple of {INT4_GROUP}")
    g = w.reshape(rows, cols // INT4_GROUP, INT4_GROUP)
    amax = np.abs(g).max(axis=2)
    sbits = bf16_bits(amax / np.float32(7.0))
    s = bf16_to_f32(sbits)
    safe = np.where(s == 0, np.float32(1.0), s)
    q = np.rint(g / safe[:, :, None])
    q = np.where(s[:, :, None] == 0, np.float32(0.0), q)
    q = np.clip(q, -8, 7).astype(np.int32)
    nib = (q + 8).reshape(rows, cols)
    return int4_pack(nib), sbits


def int4_group_dequantize(packed, scale_bits):
    """-> float64 [rows, cols]."""
    q = int4_unpack(packed).astype(np.float64) - 8.0
    rows, cols = q.shape
    s = bf16_to_f32(scale_bits).astype(np.float64)
    return (q.reshape(rows, cols // INT4_GROUP, INT4_GROUP) * s[:, :, None]).reshape(rows, cols)
