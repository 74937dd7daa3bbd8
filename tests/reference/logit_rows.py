"""How engine logits are held to the float64 reference's, row by row: one
policy for tests/model/compare_reference.py and tests/e2e/test_reference.py.

Every row within 1e-4 of the row's logit scale (max |reference logit|), the
project's bar, and the same argmax where the reference's top-2 gap is clear
(10 x the bar). On the int8 path (--activations int8) the reference
quantizes the same activations (deepseek_ref.quantize_activations) and its
near rounding ties are first resolved toward the engine
(tests/reference/tie_resolution.py), so the same bar holds there too.

NaN and inf fail on either side: every comparison is written so that NaN
makes it false.
"""
import numpy as np

STRICT = 1e-4


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
    """Accumulates rows of several requests under the policy."""

    def __init__(self):
        self.rows = self.requests = 0
        self.flips = 0
        self.worst = 0.0
        self.problems = []

    def request(self, name, eng, ref, flips=0):
        """eng, ref [T, vocab]; flips: near ties the reference rounded as the engine did (int8)."""
        self.requests += 1
        self.flips += flips
        for t in range(ref.shape[0]):
            problem, err = row_problem(eng[t], ref[t])
            self.rows += 1
            if not np.isnan(err):
                self.worst = max(self.worst, err)
            if problem:
                self.problems.append("%s token %d: %s" % (name, t, problem))

    def finish(self):
        """Every problem found."""
        return list(self.problems)

    def summary(self):
        s = "worst relative logit error %.3g over %d rows" % (self.worst, self.rows)
        if self.flips:
            s += "; %d near rounding ties taken as the engine rounded them" % self.flips
        return s


def _expect(ok, what=""):
    """A self-check that holds under python -O too (no assert)."""
    if not ok:
        raise AssertionError("logit_rows self-check: %s" % (what,))


def self_check():
    """The policy against planted rows: NaN, inf, a large error and a wrong
    argmax fail; a small error passes."""
    ref = np.array([[1.0, -2.0, 3.0, 0.5]] * 10)
    _expect(row_problem(ref[0] + 1e-6, ref[0])[0] is None)
    _expect(row_problem(ref[0] * 1.01, ref[0])[0] is not None)
    for bad in (np.nan, np.inf, -np.inf):
        e = ref[0].copy()
        e[1] = bad
        _expect(row_problem(e, ref[0])[0] is not None, bad)
        _expect(row_problem(ref[0], e)[0] is not None, bad)
    _expect(row_problem(ref[0], np.zeros(4))[0] is not None)
    c = RowCheck()
    eng = ref.copy()
    eng[8] *= 1.005  # half a percent on one row: fails
    c.request("a", eng, ref)
    _expect(len(c.finish()) == 1, c.finish())
    c = RowCheck()
    c.request("a", ref + 1e-5, ref)
    _expect(not c.finish(), c.finish())
