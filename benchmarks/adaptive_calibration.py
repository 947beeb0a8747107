"""Stopping rules × kinds of world (issue 47): how often each rule keeps the arm that is best at
the budget, and what it spends, on planted worlds drawn like runs/nstar/cpu/main's two splits.

    python benchmarks/adaptive_calibration.py [--worlds 1000] [--seed 0]

Worlds (`isolab.sweep.adaptive_worlds`; the committed sweep's 12 arms × 3 seeds, 9 checkpoints
256 … 65,536 rollouts, seed noise per checkpoint and its lag-1 correlation): constant lead, late
bloomer in the IsoComputeLaw family, late bloomer spliced into the measured curves (both
crossing the leader between 1/8 and 1/2 of the budget), and null (all arms equal). The planted
lead at the budget is one run's seed SD there (0.020 Easy, 0.008 Hard); the late-bloomer rows
are repeated at twice that. Every rule plays on the same worlds (same seed). A cell reads
"kept/N [95% Clopper–Pearson interval, %] · compute" (compute: mean share of the full grid's
rollouts); null cells count the best seed mean of the full grid at the budget as the best, and
add the worlds with any stop (every stop is false there), in brackets. The tables are those of
docs/statistics.md. The last column replays the rule on
the committed curves themselves (`replay`; the predicted-standing rule through `simulate`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from isolab.sweep.adaptive import StoppingRule, replay
from isolab.sweep.adaptive_calibration import (
    KINDS,
    PredictedStanding,
    calibrate,
    committed_designs,
    simulate,
)
from isolab.sweep.adaptive_worlds import Design
from isolab.tracking.runs import load_runs
from isolab.vocab import DEFAULT_X, DEFAULT_Y

NSTAR = Path(__file__).resolve().parents[1] / "runs" / "nstar" / "cpu" / "main"
#: (name in the table, rule).
RULES = [
    ("z = 2.5 from the 3rd checkpoint (issue 32)", StoppingRule(z=2.5, judge_from=0)),
    ("z = 4 from the 3rd", StoppingRule(z=4, judge_from=0)),
    ("z = 2.5 from the 6th (1/8 of the budget)", StoppingRule(z=2.5, grace=5, judge_from=0)),
    ("z = 3 from 1/4 of the budget", StoppingRule(z=3, judge_from=0.25)),
    ("**z = 3 from 1/2 of the budget (default)**", StoppingRule()),
    ("predicted standing (line through the last 3 checkpoints + 2 SE)", PredictedStanding()),
    ("successive halving, top 1/2 per rung from the 3rd", StoppingRule(z=None, eta=2, judge_from=0)),
    ("ASHA, top 1/3 per rung from the 3rd", StoppingRule(z=None, eta=3, judge_from=0)),
    ("top 1/3 at 1/2 of the budget (fixed fraction)", StoppingRule(z=None, eta=3)),
]  # fmt: skip


def cell(c) -> str:
    """ "kept/N [lower, upper] · compute" (percent); a null world's: "kept/N · compute (stops)"."""
    if c.kind == "null":
        return f"{c.kept}/{c.worlds} · {c.fraction:.0%} ({c.any_stop})"
    lo, hi = (f"{100 * b:.1f}".replace("100.0", "100") for b in c.interval)
    return f"{c.kept}/{c.worlds} [{lo}, {hi}] · {c.fraction:.0%}"


def committed_fraction(d: Design, runs: pl.DataFrame, rule) -> float:
    """The rule on the committed curves: `replay`, or `simulate` for a rule replay lacks."""
    if isinstance(rule, StoppingRule):
        return replay(runs, rule).fraction
    values = np.full((1, len(d.labels), d.seeds, len(d.rungs)), np.nan)
    cfg = list(d.arms.columns)
    index = {row: i for i, row in enumerate(d.arms.iter_rows())}
    trained = runs.filter(pl.col(DEFAULT_X) > 0).sort("seed")
    for (*arm,), g in trained.group_by(cfg, maintain_order=True):
        for s, (_, seed_rows) in enumerate(g.group_by("seed", maintain_order=True)):
            at = np.searchsorted(d.rungs, seed_rows[DEFAULT_X].to_numpy())
            values[0, index[tuple(arm)], s, at] = seed_rows[DEFAULT_Y].to_numpy()
    return float(simulate(d, values, rule).fraction[0])


def table(split: str, d: Design, runs: pl.DataFrame, worlds: int, seed: int) -> None:
    print(f"\n({worlds} worlds per cell, lead {d.margin:.3f} at the budget)\n")
    kinds = [f"{k} (worlds with a stop)" if k == "null" else k for k in KINDS]
    print(f"| rule, {split.capitalize()} | " + " | ".join(kinds) + " | committed |")
    print("|---|" + "---|" * (len(KINDS) + 1))
    for name, rule in RULES:
        cells = [cell(calibrate(d, rule, k, worlds=worlds, seed=seed)) for k in KINDS]
        print(f"| {name} | " + " | ".join(cells) + f" | {committed_fraction(d, runs, rule):.0%} |")


def wide_lead(designs: dict[str, Design], worlds: int, seed: int) -> None:
    print(f"\n### late bloomers leading by two runs' SD at the budget ({worlds} worlds per cell)\n")
    late = [k for k in KINDS if k.startswith("late bloomer")]
    print("| split | rule | " + " | ".join(late) + " |")
    print("|---|---|" + "---|" * len(late))
    for split, d in designs.items():
        for name, rule in (RULES[0], RULES[4]):
            cells = [
                cell(calibrate(d, rule, k, worlds=worlds, seed=seed, margin=2 * d.margin))
                for k in late
            ]
            print(f"| {split} | {name} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worlds", type=int, default=1000, help="worlds per rule × kind × split")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.worlds < 1:
        parser.error(f"--worlds {args.worlds}: need at least 1 world (e.g. 1000).")
    start = time.perf_counter()
    designs = committed_designs()
    runs = load_runs(NSTAR, statuses=["FINISHED"])
    for split, d in designs.items():
        table(split, d, runs.filter(pl.col("split") == split), args.worlds, args.seed)
    wide_lead(designs, args.worlds, args.seed)
    print(f"\n({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
