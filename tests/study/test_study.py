"""The scaling study's CSV / plot / report pipeline (jobs/study) on recorded
metrics files (tests/fixtures/study): every metrics field reaches the CSV,
derived figures and the plan's prediction are computed as the formulas say
(expected values worked out here by hand from the fixture numbers), the plots
are PNG files and the report shows them and every point."""
import csv
import json
import math
import os
import shutil
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "jobs"))
from study import collect, plots, report, seed, sweep  # noqa: E402
from study.points import Point, StudyError, base_id, grid, point_id, positive_ints  # noqa: E402

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "study")
PROMPT, TOKENS = 16, 16  # the recorded study's workload
LINK = "emulated-1gbit"
POINTS = [Point(1, "single", 4, 0, "none"), Point(2, "pipeline", 4, 0, LINK), Point(2, "expert", 4, 0, LINK)]


def metrics_of(p):
    with open(os.path.join(FIXTURES, "points", point_id(p), "metrics.json")) as fp:
        return json.load(fp)


def leaves(value, path=""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, f"{path}.{k}" if path else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaves(v, f"{path}.{i}")
    else:
        yield path, value


class Grid(unittest.TestCase):
    def test_default_study(self):
        pts = grid([1, 2, 4], ["pipeline", "expert"], [1, 8, 32], [0], ["a", "b"])
        # 1 rank: once per batch (no mode, no link); 2 and 4 ranks: 2 modes x 3 batches x 2 links.
        self.assertEqual(len(pts), 3 + 2 * 2 * 3 * 2)
        self.assertEqual(sum(p.ranks == 1 for p in pts), 3)
        self.assertTrue(all(p.mode == "single" and p.link == "none" for p in pts if p.ranks == 1))
        self.assertEqual(len({point_id(p) for p in pts}), len(pts))

    def test_micro_batches_vary_in_both_modes(self):
        # Pipeline: steps in flight; expert: row groups per rank (generate's --micro-batches in both).
        pts = grid([2], ["pipeline", "expert"], [8], [1, 2], ["a"])
        self.assertEqual(sorted((p.mode, p.micro_batches) for p in pts),
                         [("expert", 1), ("expert", 2), ("pipeline", 1), ("pipeline", 2)])

    def test_stages_vary_in_pipeline_mode_only(self):
        pts = grid([1, 2], ["pipeline", "expert"], [8], [0], ["a"], ["bytes", "auto"])
        self.assertEqual(sorted((p.ranks, p.mode, p.stages) for p in pts),
                         [(1, "single", "bytes"), (2, "expert", "bytes"), (2, "pipeline", "auto"),
                          (2, "pipeline", "bytes")])
        # Byte-balanced points keep the ids older studies gave them (a study resumes across the change).
        self.assertEqual(point_id(Point(2, "pipeline", 8, 0, "a")), "r2-pipeline-b8-kauto-a")
        self.assertEqual(point_id(Point(2, "pipeline", 8, 0, "a", "auto")), "r2-pipeline-b8-kauto-sauto-a")
        with self.assertRaisesRegex(StudyError, "stages 'time'"):
            grid([2], ["pipeline"], [1], [0], ["a"], ["time"])

    def test_repeats_run_in_rounds(self):
        one = grid([1, 2], ["pipeline"], [1, 8], [0], ["a", "b"])
        pts = grid([1, 2], ["pipeline"], [1, 8], [0], ["a", "b"], repeats=3)
        # The whole grid per round, rounds in order: a point's runs are a round apart.
        self.assertEqual(pts, [p._replace(rep=r) for r in (1, 2, 3) for p in one])
        self.assertEqual(len({point_id(p) for p in pts}), len(pts))
        # Round 1 keeps the ids of a study without repeats (it resumes into rounds); later ones add -rep<r>.
        self.assertEqual([point_id(p) for p in pts[:len(one)]], [point_id(p) for p in one])
        self.assertEqual(point_id(Point(2, "pipeline", 8, 0, "a", "auto", 3)), "r2-pipeline-b8-kauto-sauto-a-rep3")
        self.assertEqual(base_id(Point(2, "pipeline", 8, 0, "a", "auto", 3)), "r2-pipeline-b8-kauto-sauto-a")
        with self.assertRaisesRegex(StudyError, "--repeats 0"):
            grid([1], ["pipeline"], [1], [0], ["a"], repeats=0)

    def test_one_cluster_per_run_of_a_link_in_study_order(self):
        pts = grid([1, 2], ["pipeline"], [1], [0], ["a", "b"], repeats=2)
        runs = sweep.link_runs(pts)
        self.assertEqual([(link, len(ps)) for link, ps in runs],
                         [("none", 1), ("a", 1), ("b", 1), ("none", 1), ("a", 1), ("b", 1)])
        self.assertEqual([p for _, ps in runs for p in ps], pts)

    def test_bad_input_is_named(self):
        with self.assertRaisesRegex(StudyError, "mode 'tensor'"):
            grid([2], ["tensor"], [1], [0], ["a"])
        with self.assertRaisesRegex(StudyError, "--ranks '1,x'"):
            positive_ints("1,x", "--ranks")
        with self.assertRaisesRegex(StudyError, "batches must be >= 1"):
            grid([1], ["pipeline"], [0], [0], ["a"])


class Plan(unittest.TestCase):
    def test_plan_arguments(self):
        cfg = {"trillion": "T", "model": "M", "threads": 1, "host_profile": None, "prompt_tokens": 40, "tokens": 9,
               "links": {LINK: {"path": "profiles/emulated-1gbit.json"}}, "study": "/nonexistent-study"}
        # The prefill step: the batch's prompts, 256 tokens at most (8 x 40 -> 256); the
        # context: the prompt and half the generated tokens (40 + 4).
        self.assertEqual(sweep.plan_args(cfg, Point(2, "pipeline", 8, 4, LINK)),
                         ["T", "plan", "--model", "M", "--ranks", "2", "--parallel", "pipeline", "--batch", "8",
                          "--max-batch", "8", "--threads", "1", "--json", "--emulated", "--step-tokens", "256",
                          "--context", "44", "--micro-batches", "4", "--link-profile", "profiles/emulated-1gbit.json"])
        # One rank: no link; micro-batches 0 (one per stage) is plan's default, not passed.
        self.assertEqual(sweep.plan_args(dict(cfg, host_profile="h.json"), Point(1, "single", 1, 0, "none")),
                         ["T", "plan", "--model", "M", "--ranks", "1", "--parallel", "pipeline", "--batch", "1",
                          "--max-batch", "1", "--threads", "1", "--json", "--emulated", "--step-tokens", "40",
                          "--context", "44", "--profile", "h.json"])

    def test_stages_auto_reaches_plan_and_generate_alike(self):
        cfg = {"trillion": "T", "model": "M", "threads": 1, "host_profile": "h.json", "prompt_tokens": 4, "tokens": 9,
               "links": {LINK: {"path": "l.json"}}, "study": "/nonexistent-study"}
        p = Point(2, "pipeline", 8, 0, LINK, "auto")
        args = sweep.plan_args(cfg, p)
        self.assertEqual(args[args.index("--stages"):args.index("--stages") + 2], ["--stages", "auto"])
        self.assertEqual(args[args.index("--max-batch") + 1], "8")
        self.assertEqual(args[args.index("--profile") + 1], "h.json")
        gen = sweep.generate_args("T", "M", p, "D", 1, "h.json")
        # The same split in both: generate predicts with the profile plan reads, at the same --max-batch.
        self.assertEqual(gen[gen.index("--stages"):], ["--stages", "auto", "--profile", os.path.abspath("h.json")])
        self.assertEqual(gen[gen.index("--max-batch") + 1], "8")
        self.assertNotIn("--stages", sweep.generate_args("T", "M", Point(2, "pipeline", 8, 0, LINK), "D", 1, "h.json"))
        # Expert mode: micro-batches are row groups, passed to generate (and no split).
        gen = sweep.generate_args("T", "M", Point(2, "expert", 8, 2, LINK), "D", 1, "h.json")
        self.assertEqual(gen[gen.index("--micro-batches"):], ["--micro-batches", "2"])

    def test_a_point_calibrated_before_it_ran_is_predicted_from_its_own_profile(self):
        study = tempfile.mkdtemp()
        try:
            cfg = {"trillion": "T", "model": "M", "threads": 1, "host_profile": "h.json", "prompt_tokens": 4,
                   "tokens": 9, "links": {}, "study": study}
            p, q = Point(1, "single", 1, 0, "none"), Point(1, "single", 8, 0, "none")
            own = os.path.join(sweep.point_dir(study, p), "profile.json")
            os.makedirs(os.path.dirname(own))
            with open(own, "w") as fp:
                fp.write("{}")
            self.assertEqual(sweep.plan_args(cfg, p)[-2:], ["--profile", own])
            self.assertEqual(sweep.plan_args(cfg, q)[-2:], ["--profile", "h.json"])
        finally:
            shutil.rmtree(study)

    def test_requests_ask_for_exact_lengths(self):
        reqs = sweep.requests(Point(2, "expert", 3, 0, LINK), 5, 7, 100)
        self.assertEqual(len(reqs), 3)
        self.assertEqual(len({r["id"] for r in reqs}), 3)
        for r in reqs:
            self.assertEqual((r["max_tokens"], r["min_tokens"], r["ignore_eos"]), (7, 7, True))
            self.assertEqual(len(r["prompt_token_ids"]), 5)
            self.assertTrue(all(0 <= t < 100 for t in r["prompt_token_ids"]))


class Rows(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.loaded = collect.load(FIXTURES, POINTS)
        self.rows = [collect.row(p, m, plan, PROMPT, TOKENS, load) for p, m, plan, load in self.loaded]

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_flatten(self):
        self.assertEqual(collect.flatten({"a": {"b": 1}, "l": [{"x": 2}, 3]}, "m."),
                         {"m.a.b": 1, "m.l.0.x": 2, "m.l.1": 3})

    def test_every_metrics_field_reaches_the_csv(self):
        path = os.path.join(self.tmp, "study.csv")
        collect.write_csv(path, self.rows)
        with open(path, newline="") as fp:
            got = list(csv.DictReader(fp))
        self.assertEqual([r["point"] for r in got], [point_id(p) for p in POINTS])
        for p, r in zip(POINTS, got):
            m = metrics_of(p)
            n = 0
            for key, value in leaves(m):
                self.assertEqual(r[f"metrics.{key}"], str(value), key)
                n += 1
            self.assertGreater(n, 30)
            self.assertEqual(int(r["ranks"]), p.ranks)
            # per_rank.1.* exists at 2 ranks only: empty at 1.
            self.assertEqual(r["metrics.per_rank.1.rank"], "" if p.ranks == 1 else "1")

    def test_derived_figures(self):
        for p, r in zip(POINTS, self.rows):
            m = metrics_of(p)
            self.assertAlmostEqual(r["measured_tokens_per_s"], m["tokens"]["generated"] / m["seconds"]["generation"])
            self.assertEqual(m["tokens"]["generated"], 4 * TOKENS)  # ignore_eos + min_tokens: exact lengths
            for rank in m["per_rank"]:
                i = rank["rank"]
                self.assertAlmostEqual(r[f"step.{i}.busy_seconds"], rank["busy_seconds"] / m["steps"])
                self.assertAlmostEqual(r[f"step.{i}.wait_seconds"], rank["wait_seconds"] / m["steps"])
            sent = sum(x["bytes_sent"] for x in m["per_rank"])
            self.assertAlmostEqual(r["bytes_sent_per_token"], sent / (4 * TOKENS))
        self.assertEqual(self.rows[0]["bytes_sent_per_token"], 0)  # one rank sends nothing
        # load.json (the expert point has one): the load columns; without it they are empty.
        self.assertEqual((self.rows[2]["load_before"], self.rows[2]["load_after"]), (3.5, 4.25))
        self.assertEqual((self.rows[0]["load_before"], self.rows[0]["load_after"]), ("", ""))

    def test_prediction_of_the_matching_entries(self):
        single, pipe, expert = self.rows
        for r in (single, expert):  # no plan.json: empty prediction columns
            self.assertEqual([r[k] for k in collect.PREDICTED[1:]], [""] * (len(collect.PREDICTED) - 1))
        # plan.json: prefill 1000 tok/s and decode 100 tok/s at batch 4 (the batch-8 and expert
        # entries do not apply): 4*16/1000 + 4*15/100 = 0.664 s for 64 tokens.
        self.assertEqual(pipe["predicted_decode_tokens_per_s"], 100.0)
        self.assertEqual(pipe["predicted_decode_bound"], "link")
        self.assertEqual(pipe["predicted_prefill_tokens_per_s"], 1000.0)
        self.assertAlmostEqual(pipe["predicted_tokens_per_s"], 64 / 0.664)
        m = metrics_of(POINTS[1])
        measured = 64 / m["seconds"]["generation"]
        self.assertAlmostEqual(pipe["error"], (64 / 0.664) / measured - 1)

    def test_a_point_run_in_rounds_reports_its_median_run(self):
        # Three runs of the pipeline point (throughputs 30, 10, 20 by hand) and two of the expert point.
        pipe, expert = self.rows[1], self.rows[2]
        runs = [dict(pipe, rep=1, measured_tokens_per_s=30.0, error=0.5),
                dict(expert, rep=1, measured_tokens_per_s=7.0),
                dict(pipe, rep=2, measured_tokens_per_s=10.0, error=-0.1),
                dict(expert, rep=2, measured_tokens_per_s=5.0),
                dict(pipe, rep=3, measured_tokens_per_s=20.0, error=0.25)]
        got = collect.medians(runs)
        self.assertEqual([r["point"] for r in got], [point_id(POINTS[1]), point_id(POINTS[2])])
        # The median run itself, its own error; the range over all runs.
        self.assertEqual((got[0]["rep"], got[0]["measured_tokens_per_s"], got[0]["error"]), (3, 20.0, 0.25))
        self.assertEqual((got[0]["repeats"], got[0]["measured_min"], got[0]["measured_max"]), (3, 10.0, 30.0))
        # An even count: the lower middle run (a real run, not an average of two).
        self.assertEqual((got[1]["rep"], got[1]["measured_tokens_per_s"], got[1]["repeats"]), (2, 5.0, 2))
        self.assertEqual(report.throughput_cell(got[0]), "20.0 (10.0–30.0, 3 runs)")
        self.assertEqual(report.throughput_cell(self.rows[0]), f"{self.rows[0]['measured_tokens_per_s']:.1f}")
        cfg = {"model": "/x/m", "prompt_tokens": PROMPT, "tokens": TOKENS, "threads": 1, "cores": 2,
               "links": {LINK: {"rate_bytes_per_s": 125e6, "latency_s": 1e-4}}}
        out = os.path.join(self.tmp, "report.md")
        report.write(out, got, cfg, {k: os.path.join(self.tmp, f) for k, f in plots.FILES.items()}, "cmd")
        with open(out) as fp:
            text = fp.read()
        self.assertIn("Each point ran up to 3 times, in rounds", text)
        self.assertIn(f"| {point_id(POINTS[1])} | 2 | pipeline | 4 | auto | {LINK} | 20.0 (10.0–30.0, 3 runs) |", text)
        self.assertIn("+25.0%", text)  # the median run's own error

    def test_no_prediction_without_prefill_rate(self):
        pred = {"decode": {"tokens_per_s": 100.0}}
        self.assertIsNone(collect.predicted_workload(pred, 4, PROMPT, TOKENS))
        self.assertAlmostEqual(collect.predicted_workload(pred, 4, 0, TOKENS), 4 * 16 / (4 * 15 / 100))

    def test_plots_and_report(self):
        paths = plots.draw(self.rows, os.path.join(self.tmp, "figures"))
        self.assertEqual(set(paths), {"throughput", "step_time", "bytes", "predicted"})
        for path in paths.values():
            with open(path, "rb") as fp:
                self.assertEqual(fp.read(8), b"\x89PNG\r\n\x1a\n", path)
            self.assertGreater(os.path.getsize(path), 5000, path)
        cfg = {"model": "/x/demo-fp8-text", "prompt_tokens": PROMPT, "tokens": TOKENS, "threads": 1, "cores": 2,
               "links": {LINK: {"rate_bytes_per_s": 125e6, "latency_s": 1e-4}}}
        out = os.path.join(self.tmp, "report.md")
        # A plan as `trillion plan --json` prints it (hand-made figures).
        plan = {"fits": True, "predictions": [
            {"mode": "pipeline", "phase": "decode", "batch": 1, "tokens_per_s": 4.25, "bound": "compute"},
            {"mode": "pipeline", "phase": "decode", "batch": 8, "tokens_per_s": 22.9, "bound": "compute"},
            {"mode": "pipeline", "phase": "prefill", "batch": 256, "tokens_per_s": 16.4, "bound": "compute"},
            {"mode": "expert", "phase": "decode", "batch": 1, "tokens_per_s": 6.04, "bound": "memory"},
            {"mode": "expert", "phase": "decode", "batch": 128, "tokens_per_s": 92.94, "bound": "compute"}]}
        seed_rows = seed.rows_from_plan("DeepSeek-V3 FP8", "4x M3 Ultra 512 GB", plan)
        self.assertEqual([r["mode"] for r in seed_rows], ["pipeline", "expert"])
        self.assertEqual(seed_rows[0]["decode"], {1: 4.25, 8: 22.9})
        self.assertIsNone(seed_rows[1]["prefill"])
        report.write(out, self.rows, cfg, paths, "jobs/scaling-study ...", ["r4-expert-b4-kauto-x"],
                     (seed_rows, ["Kimi K2 Thinking INT4 on 4x M2 Ultra 192 GB: trillion plan failed: boom"]))
        with open(out) as fp:
            text = fp.read()
        for f in plots.FILES.values():
            self.assertIn(f"](figures/{f})", text)
        for p in POINTS:
            self.assertIn(f"| {point_id(p)} |", text)
        self.assertIn("Not measured yet (1): `r4-expert-b4-kauto-x`", text)
        self.assertIn("| DeepSeek-V3 FP8 | 4x M3 Ultra 512 GB | pipeline | yes | 4.2 | 22.9 | — | — | 16 | compute |",
                      text)  # 4.25 rounds to even
        self.assertIn("| DeepSeek-V3 FP8 | 4x M3 Ultra 512 GB | expert | yes | 6.0 | — | — | 92.9 | — | memory |", text)
        self.assertIn("- Kimi K2 Thinking INT4 on 4x M2 Ultra 192 GB: trillion plan failed: boom", text)
        self.assertEqual(text.count("| no prediction |"), 2)
        self.assertIn("2 point(s) have no prediction", text)
        err = self.rows[1]["error"]
        self.assertIn(f"{err * 100:+.1f}%", text)
        self.assertIn("| 3.5 / 4.2 |", text)  # the expert point's load (4.25 rounds to even)
        self.assertIn("1 of 1 predicted point(s) within" if abs(err) <= 0.25 else "0 of 1 predicted point(s) within",
                      text)
        # Pipeline efficiency: the 2-rank pipeline point over the 1-rank one.
        ratio = self.rows[1]["measured_tokens_per_s"] / self.rows[0]["measured_tokens_per_s"]
        self.assertIn(f"| {ratio:.2f} |", text)
        self.assertTrue(math.isfinite(ratio))


if __name__ == "__main__":
    # unittest itself passes a run of no tests (before Python 3.12): that fails here.
    result = unittest.main(exit=False).result
    sys.exit(0 if result.wasSuccessful() and result.testsRun > 0 else 1)
