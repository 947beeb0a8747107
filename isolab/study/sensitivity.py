"""A sensitivity arm: the study's grid run again with one setting changed (nstar's `lr-half`,
lr_base/2, pre-registered in issue 27), its claims tested again on its runs alone and set
beside the main sweep's calls. The arm's runs never enter the main analysis or its Holm family."""

from __future__ import annotations

from typing import Any

import polars as pl

from isolab.study import claims
from isolab.study.report import Report, fmt, fmt_compute
from isolab.verdicts import Verdict
from isolab.vocab import EVAL_AVG, ROLLOUTS, RUN_ID, RUN_KEY, STEP

#: Columns that differ between any two runs or sweeps without being a setting.
NOT_SETTINGS = {
    RUN_KEY,
    RUN_ID,
    "run_name",
    "status",
    "experiment",
    "start_time",
    "end_time",
    "seed",
    STEP,
    "timestamp",
    "base_digest",
    "eval_counts",
    "eval_sets",
}


def changed_settings(main: pl.DataFrame, arm: pl.DataFrame) -> dict[str, tuple[Any, Any]]:
    """The settings held fixed within each table that differ between them: name → (main's, the
    arm's), e.g. {"lr_base": (5e-05, 2.5e-05)}."""
    out = {}
    for col in arm.columns:
        if (
            col in NOT_SETTINGS
            or col.startswith("eval_counts-")
            or col not in main.columns
            or "/" in col
        ):
            continue
        a, b = main[col].drop_nulls().unique(), arm[col].drop_nulls().unique()
        if len(a) == 1 and len(b) == 1 and a[0] != b[0]:
            out[col] = (a[0], b[0])
    return out


def best_n(df: pl.DataFrame) -> pl.DataFrame:
    """Per split and checkpoint, the n (with its B_p) of the best seed-mean final metric; of
    tied arms (every arm at C = 0: the base model) the smallest n, then B_p."""
    means = df.group_by("split", ROLLOUTS, "n", "B_p").agg(pl.col(EVAL_AVG).mean())
    return (
        means.sort([EVAL_AVG, "n", "B_p"], descending=[True, False, False])
        .group_by("split", ROLLOUTS, maintain_order=True)
        .first()
        .sort("split", ROLLOUTS)
    )


def add_sensitivity(
    report: Report, study: str, sweep: str, arm: pl.DataFrame, main: pl.DataFrame | None
) -> list[Verdict]:
    """Test `study`'s claims on the arm's runs alone (as its main sweep), and put beside the
    report's own calls: a table `sensitivity_<sweep>`, the arm's verdicts and best n per
    checkpoint in the findings (`sensitivity`), one summary sentence."""
    verdicts = claims.evaluate(study, {"main": arm})
    mine = {(v.claim, v.split): v for v in report.verdicts}
    rows = []
    for v in verdicts:
        here = mine.get((v.claim, v.split))
        rows.append(
            {
                "claim": v.claim,
                "split": v.split,
                "call (main)": here.call if here else None,
                f"call ({sweep})": v.call,
                "effect (main)": here.statistic if here else None,
                f"effect ({sweep})": v.statistic,
                f"p ({sweep})": v.p_value,
                f"detectable ({sweep})": v.min_detectable_effect,
                "note": v.note,
            }
        )
    table = pl.DataFrame(rows, infer_schema_length=None)
    report.tables[f"sensitivity_{sweep.replace('-', '_')}"] = table
    changed = changed_settings(main, arm) if main is not None else {}
    finding: dict[str, Any] = {
        "runs": arm[RUN_KEY].n_unique(),
        "seeds": arm["seed"].n_unique(),
        "changed": {k: [a, b] for k, (a, b) in changed.items()},
        "verdicts": [v.to_dict() for v in verdicts],
    }
    if {"n", "B_p", "split"} <= set(arm.columns) and EVAL_AVG in arm.columns:
        ok = arm.filter(pl.col(EVAL_AVG).is_not_null())
        finding["best_n"] = best_n(ok).to_dicts()
        if main is not None:
            finding["best_n_main"] = best_n(main.filter(pl.col(EVAL_AVG).is_not_null())).to_dicts()
    report.findings.setdefault("sensitivity", {})[sweep] = finding
    report.sensitivity[sweep] = verdicts
    report.summary.append(_sentence(sweep, finding, verdicts, mine))
    return verdicts


def _sentence(
    sweep: str,
    finding: dict[str, Any],
    verdicts: list[Verdict],
    mine: dict[tuple[str, str | None], Verdict],
) -> str:
    what = (
        ", ".join(
            f"{k} {b:g} (main: {a:g})" if isinstance(a, float) else f"{k} {b} (main: {a})"
            for k, (a, b) in finding["changed"].items()
        )
        or "one changed setting"
    )
    tested = [v for v in verdicts if v.p_value is not None]
    same = [v for v in tested if (m := mine.get((v.claim, v.split))) and m.call == v.call]
    differ = [
        f"{v.claim}{' ' + v.split if v.split else ''}: {mine[(v.claim, v.split)].call} → {v.call}"
        for v in tested
        if (v.claim, v.split) in mine and mine[(v.claim, v.split)].call != v.call
    ]
    untested = [
        f"{v.claim}{' ' + v.split if v.split else ''}" for v in verdicts if v.p_value is None
    ]
    parts = [
        f"Sensitivity arm `{sweep}` ({finding['runs']} runs, {finding['seeds']} seed(s); {what}):",
        f"{len(same)} of {len(tested)} claims testable there get the main sweep's call",
    ]
    if differ:
        parts.append("; differ: " + "; ".join(differ))
    if untested:
        parts.append("; not testable on the arm alone: " + ", ".join(untested))
    best = finding.get("best_n")
    if best:
        last = max(r[ROLLOUTS] for r in best)
        ends = [r for r in best if r[ROLLOUTS] == last]
        main_ends = {r["split"]: r for r in finding.get("best_n_main", []) if r[ROLLOUTS] == last}
        cells = []
        for r in ends:
            m = main_ends.get(r["split"])
            ref = f" (main: n = {m['n']}, {fmt(m[EVAL_AVG])})" if m else ""
            cells.append(f"{r['split']} n = {r['n']} at B_p = {r['B_p']}, {fmt(r[EVAL_AVG])}{ref}")
        parts.append(f". Best n at {fmt_compute(last)} rollouts: " + "; ".join(cells))
    return " ".join(parts[:2]) + "".join(parts[2:]) + "."
