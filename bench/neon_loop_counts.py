#!/usr/bin/python3
"""Instructions per output in the arm64 inner loops of the integer-dot
tiles (INT4 on SMMLA and SDOT, INT8 on SDOT) and of FP8's two paths (f32
FMLA, the bf16 path's BFMMLA), counted in the disassembly of a cross build
(tools/test-arm64.sh makes one).

Why a static count: no CPU with i8mm (SMMLA) is among this project's test
machines, and qemu checks bits, not time. Where the kernels are compute-bound
(prefill, large batches) the instructions an output costs bound its speed on
a core that issues a fixed number a cycle; time it on the machine itself with
TRILLION_ISA=neon against neon-i8mm (bench_matmul, bench_model).

A loop is a backward branch and the instructions it spans; the innermost loop
holding a tile's multiply instructions is its group loop:
  SMMLA, 2 rows x 4 tokens, two groups a turn (g % 2 is a constant in each
  half): 16 smmla (4 lanes x 2 token pairs x 2 groups);
  INT4 SDOT, 4 rows x 2 tokens, a block of four groups a turn (their scale
  products made by four vmulq before it): 64 sdot (2 per output and group)
  and 16 ushr (the high nibbles of 4 rows x 4 groups);
  INT8 SDOT, 4 rows x 2 tokens, one group a turn: 16 sdot (the two half
  groups of 8 outputs), no nibble shifts.
"bf16 at Nx f32's speed" is f32's instructions an output over bf16's: the
speed ratio on a core that issues both loops' instructions at one rate
(profiles/make_profiles.py estimates the Mac profiles' fp8/bf16 rates so).
A loop's count is what runs each turn only when no branch inside it skips
code: the table says how many conditional branches each loop holds. "dot
share" is the loop's SDOT/SMMLA instructions over all of its instructions:
the fraction of the peak (that instruction's rate: SDOT/SMMLA, FMLA or
BFMMLA) the loop reaches on a core that issues every instruction at the
rate it issues those. No BFMMLA CPU is among this project's machines
either: these are counts, not times.

  bench/neon_loop_counts.py [BUILD_DIR]   (default: build-arm64)
"""
import re
import subprocess
import sys
from pathlib import Path

OBJDUMP = "aarch64-linux-gnu-objdump"


def loops(obj):
    text = subprocess.run([OBJDUMP, "-d", "--no-show-raw-insn", str(obj)], capture_output=True, text=True,
                          check=True).stdout
    ins = []
    for line in text.splitlines():
        m = re.match(r"\s+([0-9a-f]+):\s+(\S+)\s*(.*)", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2), m.group(3)))
    at = {a: i for i, (a, _, _) in enumerate(ins)}
    for i, (a, op, args) in enumerate(ins):
        if not re.fullmatch(r"b(\.\w+)?|cbn?z|tbn?z", op):
            continue
        m = re.match(r"([0-9a-f]+)", args.split(",")[-1].strip())
        target = int(m.group(1), 16) if m else None
        if target is not None and target < a and target in at:
            yield [o for _, o, _ in ins[at[target]:i + 1]]


def branches_inside(body):
    return sum(1 for op in body[:-1] if re.fullmatch(r"b\.\w+|cbn?z|tbn?z|bl", op))


def innermost(obj, want):
    found = [body for body in loops(obj) if all(body.count(op) == n for op, n in want.items())]
    if not found:
        sys.exit(f"{obj}: no loop with {want}; was the file built with -O3?")
    return min(found, key=len)


def main():
    build = Path(sys.argv[1] if len(sys.argv) > 1 else "build-arm64")
    objs = build / "src/kernels/CMakeFiles/trillion_kernels.dir/arm"
    # (name, object, opcode counts that pick the loop, groups a turn, outputs)
    rows = [("INT4 SMMLA, 2 rows x 4 tokens", objs / "matmul_q8_smmla.cpp.o", {"smmla": 16}, 2, 8),
            ("INT4 SDOT, 4 rows x 2 tokens", objs / "matmul_q8_sdot.cpp.o", {"sdot": 64, "ushr": 16}, 4, 8),
            ("INT8 SDOT, 4 rows x 2 tokens", objs / "matmul_q8_sdot.cpp.o", {"sdot": 16, "ushr": 0}, 1, 8),
            ("FP8 f32 FMLA, 4 rows x 2 tokens", objs / "matmul_neon.cpp.o", {"fmla": 16, "fcvtl": 8, "bic": 4}, 0.25, 8),
            ("FP8 bf16 BFMMLA, 4 rows x 4 tokens", objs / "matmul_bf16_bfmmla.cpp.o", {"bfmmla": 16}, 0.5, 16),
            ("FP8 f32 FMLA, 4 rows x 1 token", objs / "matmul_neon.cpp.o", {"fmla": 8, "fcvtl": 8, "bic": 4}, 0.25, 4),
            ("FP8 bf16 BFMMLA, 4 rows x 2 tokens", objs / "matmul_bf16_bfmmla.cpp.o", {"bfmmla": 8, "uzp2": 8}, 0.5,
             8)]
    print(f"{'inner loop':30} {'a turn':>7} {'per group':>10} {'per output':>11} {'dot share':>10} "
          f"{'branches inside':>16}")
    per = {}
    for name, obj, want, groups, outputs in rows:
        body = innermost(obj, want)
        per[name] = len(body) / (groups * outputs)
        dots = sum(body.count(op) for op in ("sdot", "smmla", "fmla", "bfmmla"))
        print(f"{name:30} {len(body):7d} {len(body) / groups:10.1f} {per[name]:11.1f} {dots / len(body):10.0%} "
              f"{branches_inside(body):16d}")
    a, b = per[rows[1][0]], per[rows[0][0]]
    print(f"INT4: SDOT over SMMLA {a / b:.2f}x the instructions an output")
    widen = innermost(objs / "matmul_bf16_bfmmla.cpp.o", {"uzp2": 1, "fcvtl": 1, "fcvtl2": 1})
    per_weight = len(widen) / 8
    print(f"FP8 -> bf16 panel widening: {len(widen)} instructions a turn of 8 weights, {per_weight:.2f} a weight "
          f"({branches_inside(widen)} branches inside)")
    f32, bf = per[rows[3][0]], per[rows[4][0]]
    f32_one, bf_pair = per[rows[5][0]], per[rows[6][0]]
    # At 1 token the one-pair loop's second token is padding: its instructions serve 4 outputs, not 8.
    print(f"FP8 at  1 token:  f32 FMLA {f32_one:.1f}, bf16 BFMMLA {2 * bf_pair:.1f} instructions an output and group: "
          f"bf16 at {f32_one / (2 * bf_pair):.2f}x f32's speed")
    print(f"FP8 at  2 tokens: f32 FMLA {f32:.1f}, bf16 BFMMLA {bf_pair:.1f}: f32 over bf16 {f32 / bf_pair:.2f}x")
    for n in (4, 8, 32, 128):
        total = bf + per_weight * 32 / n
        print(f"FP8 at {n:3d} tokens: f32 FMLA {f32:.1f}, bf16 BFMMLA {total:.1f} instructions an output and group "
              f"(tile {bf:.1f} + widening {per_weight * 32 / n:.1f}): bf16 at {f32 / total:.2f}x f32's speed")


if __name__ == "__main__":
    main()
