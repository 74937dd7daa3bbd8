"""Unit tests of windows.py (the harness's pair split, windows and
truncation restated) against hand-computed cases, and against lm-eval's own
functions (utils.get_rolling_token_windows + make_disjoint_window, the
rule restated) over many lengths when lm-eval is importable (it is in the
test's venv: a missing lm-eval is a failure there, not a skip).

    tests/eval/run.sh VENV tests/eval/test_windows.py"""
import importlib.util
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# windows.py on its own: the package's __init__ would import lm-eval.
spec = importlib.util.spec_from_file_location(
    "windows", os.path.join(HERE, "..", "..", "python", "trillion_lm_eval", "windows.py"))
w = importlib.util.module_from_spec(spec)
spec.loader.exec_module(w)

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAILED:", what)


def eq(got, want, what):
    check(got == want, f"{what}: {got!r}, expected {want!r}")


# _encode_pair's whitespace move.
eq(w.split_pair("Answer: ", "Paris"), ("Answer:", " Paris"), "split_pair trailing space")
eq(w.split_pair("a\n\n", "b"), ("a", "\n\nb"), "split_pair trailing newlines")
eq(w.split_pair("abc", " d"), ("abc", " d"), "split_pair no trailing whitespace")
eq(w.split_pair("  ", "x"), ("", "  x"), "split_pair context all whitespace")
# The continuation is what the whole adds after the context's tokens, even
# where BPE merged across the boundary ([5, 6] vs [5, 7, 8]: cont = [8]).
eq(w.pair_tokens([0, 5, 6], [0, 5, 7, 8]), ([0, 5, 6], [8]), "pair_tokens across a merge")
eq(w.pair_tokens([0, 5], [0, 5, 9, 10]), ([0, 5], [9, 10]), "pair_tokens plain")
# Empty context: the prefix (BOS) unless the continuation starts with it.
eq(w.empty_context_tokens([5, 6], 0), ([0], [5, 6]), "empty context: BOS prefix")
eq(w.empty_context_tokens([0, 5, 6], 0), ([0], [5, 6]), "empty context: continuation starting with BOS")
try:
    w.empty_context_tokens([], 0)
    check(False, "empty context and continuation accepted")
except ValueError:
    check(True, "")
# Left truncation: (ctx+cont)[-(L+1):] is scored, the last len(cont) targets read.
eq(w.scored_sequence(list(range(1, 11)), [11, 12], 8), ([4, 5, 6, 7, 8, 9, 10, 11, 12], True), "truncated pair")
eq(w.scored_sequence([1, 2], [3], 8), ([1, 2, 3], False), "short pair")
eq(w.scored_sequence([1, 2, 3, 4, 5, 6, 7, 8], [9], 8), ([1, 2, 3, 4, 5, 6, 7, 8, 9], False),
   "exactly max_length inputs + 1 target: not cut")
# Rolling windows, by hand: 10 tokens 1..10, prefix 0, max_length 4.
#   window 1: inputs [0,1,2,3] predict [1,2,3,4]     -> disjoint ([0], [1,2,3,4])
#   window 2: inputs [4,5,6,7] predict [5,6,7,8]     -> ([4], [5,6,7,8])
#   window 3: inputs [6,7,8,9] predict [9,10]        -> ([6,7,8], [9,10])
eq(w.rolling_windows(list(range(1, 11)), 0, 4), [([0], [1, 2, 3, 4]), ([4], [5, 6, 7, 8]), ([6, 7, 8], [9, 10])],
   "rolling 10 tokens, L=4")
eq(w.rolling_windows([7, 8, 9], 0, 16), [([0], [7, 8, 9])], "rolling: one short window")
eq(w.rolling_windows([7, 8, 9, 10], 0, 4), [([0], [7, 8, 9, 10])], "rolling: exactly one full window")
# One token past a window: the second window reads the full L=4 tokens before it.
eq(w.rolling_windows([7, 8, 9, 10, 11], 0, 4), [([0], [7, 8, 9, 10]), ([7, 8, 9, 10], [11])],
   "rolling: one token past a window")
eq(w.rolling_windows([], 0, 4), [], "rolling: empty document")
eq(w.rolling_windows([5], 0, 1), [([0], [5])], "rolling: L=1")
eq(w.rolling_windows([5, 6, 7], 0, 1), [([0], [5]), ([5], [6]), ([6], [7])], "rolling: L=1, three tokens")
# Lengths the harness's own measurement gave (L=16: 44 tokens -> (1,16),(1,16),(5,12)).
eq([(len(c), len(p)) for c, p in w.rolling_windows(list(range(100, 144)), 1, 16)], [(1, 16), (1, 16), (5, 12)],
   "rolling 44 tokens, L=16: window sizes")
# Every token predicted once, in order; every window at most L inputs.
rng = random.Random(1)
for _ in range(200):
    n, L = rng.randrange(0, 60), rng.randrange(1, 20)
    toks = [rng.randrange(2, 50) for _ in range(n)]
    wins = w.rolling_windows(toks, 1, L)
    ok = [t for _, p in wins for t in p] == toks and all(len(c) + len(p) - 1 <= L for c, p in wins)
    # Each window's context is exactly the tokens before its predictions (or the prefix).
    pos, ctx_ok = 0, True
    for c, p in wins:
        before = ([1] + toks)[:pos + 1]
        ctx_ok &= before[len(before) - len(c):] == c
        pos += len(p)
    check(ok and ctx_ok, f"rolling invariants n={n} L={L}: {wins}")
# Generation prompts and stops.
eq(w.generation_prompt(list(range(1, 11)), 8, 3), ([6, 7, 8, 9, 10], True), "generation prompt cut to L - max_gen")
eq(w.generation_prompt([1, 2], 8, 3), ([1, 2], False), "generation prompt kept")
try:
    w.generation_prompt([1], 8, 8)
    check(False, "max_gen_toks = max_length accepted")
except ValueError:
    check(True, "")
eq(w.cut_at_stops("abc\ndef;g", ["\n", ";"]), "abc", "stops: first")
eq(w.cut_at_stops("abc;def\ng", ["\n", ";"]), "abc", "stops: the earlier one wins")
eq(w.cut_at_stops("abc", ["", "x"]), "abc", "stops: empty and absent")

# lm-eval's own functions, when importable (the venv has lm-eval 0.4.13).
try:
    from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
except ImportError:
    check(False, "lm_eval not importable (run through tests/eval/run.sh)")
else:
    for _ in range(500):
        n, L = rng.randrange(0, 80), rng.randrange(1, 24)
        toks = [rng.randrange(2, 99) for _ in range(n)]
        theirs = [tuple(map(list, make_disjoint_window(x)))
                  for x in get_rolling_token_windows(token_list=toks, prefix_token=1, max_seq_len=L, context_len=1)]
        check([tuple(x) for x in w.rolling_windows(toks, 1, L)] == theirs, f"vs lm-eval: n={n} L={L}")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed or not passed else 0)
