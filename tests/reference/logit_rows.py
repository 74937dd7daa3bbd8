"""How engine logits are held to the float64 reference's, row by row: one
policy for tests/model/compare_reference.py and tests/e2e/test_reference.py.

f32 (the exact path): every row within 1e-4 of the row's logit scale
(max |reference logit|), the project's bar.

int8 (the integer-dot path), against the reference that quantizes the same
activations (deepseek_ref.quantize_activations): the same 1e-4 for every row
before the first position where the reference met an activation within
TIE_MARGIN quantization steps of a rounding tie; there the float32 engine,
whose activations differ from the float64 ones by ~1e-6 relative, may round
that activation the other way: a change of one quantization step, 1/127 of
its group's absmax (0.79%), in one input of one product, which later
positions see through the cache. Rows from that position on are held to
TIE_TOLERANCE = 1e-2 (one step, rounded up). Measured on the synthetic
presets: 0 to 18 of 41 rows use the allowance, the worst at 6.2e-3; skipping
the quantization altogether moves the same rows by ~1e-2 (median) and up to
0.3, which fails both bars.

NaN and inf fail on either side: every comparison is written so that NaN
makes it false.
"""
import numpy as np

STRICT = 1e-4
TIE_TOLERANCE = 1e-2


def row_error(eng, ref):
    """(problem or None, relative error) of one row, before any tolerance."""
    if not np.all(np.isfinite(ref)):
        return "reference logits are not all finite", float("nan")
    if not np.all(np.isfinite(eng)):
        return "engine logits are not all finite (%d of %d)" % (np.sum(~np.isfinite(eng)), eng.size), float("nan")
    scale = np.max(np.abs(ref))
    if not (scale > 0):
        return "reference logits are all zero", float("nan")
    return None, float(np.max(np.abs(eng - ref)) / scale)


def row_problem(eng, ref, tol=STRICT):
    """(why the row fails at `tol`, or None; relative error). Also the argmax
    where the reference's top-2 gap is clear (10 tol of the scale)."""
    problem, err = row_error(eng, ref)
    if problem:
        return problem, err
    if not (err <= tol):
        return "relative error %.3g > %g" % (err, tol), err
    top2 = np.sort(ref)[-2:]
    if top2[1] - top2[0] > 10 * tol * np.max(np.abs(ref)) and np.argmax(eng) != np.argmax(ref):
        return "argmax %d vs %d (relative error %.3g)" % (np.argmax(eng), np.argmax(ref), err), err
    return None, err


class RowCheck:
    """Accumulates rows of several requests under one compute path's policy."""

    def __init__(self, activations):
        self.activations = activations
        self.rows = self.loose = 0
        self.worst = self.worst_loose = 0.0
        self.problems = []

    def request(self, name, eng, ref, first_tie=None):
        """eng, ref [T, vocab]; first_tie: the reference's first near-tie position (int8) or None."""
        for t in range(ref.shape[0]):
            near_tie = self.activations == "int8" and first_tie is not None and t >= first_tie
            problem, err = row_problem(eng[t], ref[t], TIE_TOLERANCE if near_tie else STRICT)
            self.rows += 1
            if near_tie and err > STRICT:
                self.loose += 1
                self.worst_loose = max(self.worst_loose, err)
            elif not np.isnan(err):
                self.worst = max(self.worst, err)
            if problem:
                self.problems.append("%s token %d: %s" % (name, t, problem))

    def finish(self):
        """Every problem found."""
        return list(self.problems)

    def summary(self):
        s = "worst relative logit error %.3g over %d rows" % (self.worst, self.rows)
        if self.loose:
            s += "; %d rows after a near rounding tie above %g, worst %.3g" % (self.loose, STRICT, self.worst_loose)
        return s


def self_check():
    """The policy against planted rows: NaN, inf and a large error fail; a
    small one passes; the near-tie allowance holds only from the first tie and
    only up to one step."""
    ref = np.array([[1.0, -2.0, 3.0, 0.5]] * 10)
    assert row_problem(ref[0] + 1e-6, ref[0])[0] is None
    assert row_problem(ref[0] * 1.01, ref[0])[0] is not None
    for bad in (np.nan, np.inf, -np.inf):
        e = ref[0].copy()
        e[1] = bad
        assert row_problem(e, ref[0])[0] is not None, bad
        assert row_problem(ref[0], e)[0] is not None, bad
    assert row_problem(ref[0], np.zeros(4))[0] is not None
    c = RowCheck("int8")
    eng = ref.copy()
    eng[8] *= 1.005  # one row after a tie: allowed
    c.request("a", eng, ref, first_tie=5)
    assert not c.finish(), c.finish()
    c = RowCheck("int8")
    c.request("a", eng, ref, first_tie=9)  # the error is before the first tie: strict there
    assert c.finish()
    c = RowCheck("int8")
    c.request("a", ref * 1.02, ref, first_tie=0)  # more than one step: no tie explains it
    assert c.finish()
    c = RowCheck("f32")
    c.request("a", eng, ref, first_tie=5)
    assert c.finish()
