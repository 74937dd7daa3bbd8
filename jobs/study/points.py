"""The points of a scaling study: ranks x mode x batch x micro-batches x
stages x link.

A point's id names every parameter, so a study directory holds one folder per
point and a rerun finds what it has already measured. One rank has no mode
(mode "single") and no link (nothing crosses one): it is measured once per
batch and is the baseline of both modes on every link. Micro-batches are
pipeline steps in flight, or in expert mode groups of each rank's rows that
take turns at the MoE layers (generate's --micro-batches in both; 0 is its
default). Stages (generate's split: "bytes", the default, or "auto", by
predicted time) vary only in pipeline mode (expert mode has every layer on
every rank)."""
from collections import namedtuple

Point = namedtuple("Point", "ranks mode batch micro_batches link stages rep", defaults=("bytes", 1))
STAGES = ("bytes", "auto")

MODES = ("pipeline", "expert")


class StudyError(Exception):
    pass


def point_id(p):
    """The run's id: its folder in the study (a repeat r > 1 adds -rep<r>)."""
    r = f"-rep{p.rep}" if p.rep > 1 else ""  # a study's first round keeps the ids of older studies
    return base_id(p) + r


def base_id(p):
    """The point's id whatever the repeat: what the report's rows are."""
    k = "auto" if p.micro_batches == 0 else str(p.micro_batches)
    s = "-sauto" if p.stages == "auto" else ""  # byte-balanced points keep the ids of older studies
    return f"r{p.ranks}-{p.mode}-b{p.batch}-k{k}{s}-{p.link}"


def positive_ints(text, what):
    try:
        values = [int(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise StudyError(f"{what} {text!r}: give comma-separated integers, e.g. 1,2,4") from None
    if not values or any(v < 0 for v in values):
        raise StudyError(f"{what} {text!r}: give comma-separated integers >= 0, e.g. 1,2,4")
    return sorted(set(values))


def grid(ranks, modes, batches, micro_batches, links, stages=("bytes",), repeats=1):
    """All points, in the order they run: round after round (repeats), each
    round by link, then ranks, mode, batch."""
    if repeats < 1:
        raise StudyError(f"--repeats {repeats}: must be >= 1")
    for m in modes:
        if m not in MODES:
            raise StudyError(f"mode {m!r}: use pipeline or expert")
    for s in stages:
        if s not in STAGES:
            raise StudyError(f"stages {s!r}: use bytes or auto")
    if not stages:
        raise StudyError("stages: give bytes, auto or both")
    if any(r < 1 for r in ranks):
        raise StudyError("ranks must be >= 1")
    if any(b < 1 for b in batches):
        raise StudyError("batches must be >= 1")
    points = []
    if 1 in ranks:
        points += [Point(1, "single", b, 0, "none") for b in batches]
    for link in links:
        for r in (r for r in ranks if r > 1):
            for m in modes:
                for b in batches:
                    for k in micro_batches:
                        for s in (stages if m == "pipeline" else ["bytes"]):
                            points.append(Point(r, m, b, k, link, s))
    seen, unique = set(), []
    for p in points:
        if p not in seen:
            seen.add(p)
            unique.append(p)
    return [p._replace(rep=r) for r in range(1, repeats + 1) for p in unique]
