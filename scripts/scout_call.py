"""Read the pre-registered call of the crossover scout (issue 45; `studies/nstar/cpu/scout.yaml`).

    .venv/bin/python scripts/scout_call.py [SNAPSHOT]   # default runs/chunks/nstar-cpu-scout

The pre-registration fixes everything this script does, before any run landed:
- It reads nothing until both seeds of all three arms (n = 4, 8, 16) have FINISHED: no interim
  call. With fewer, it says how many landed and exits 3.
- The claim "n* moves from 4 towards 8 or 16 by C_max" is called when the crossing test of
  `isolab.verdicts.crossing` (step-down max-|t| over every pair × checkpoint, α = 0.05) certifies
  n* growing, with the larger n ahead at a checkpoint C ≥ 2^16 and behind at an earlier one.
- Otherwise the study says plainly that tiny models do not show the headline at up to C_max,
  with the advantage curves D_b(C) = avg@4(n_b) − avg@4(4) (seed means, paired by seed), n = 4's
  gain per doubling at C_max and the saturation gate, and Σlr beside C.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import polars as pl

from isolab.table import as_float
from isolab.tracking.snapshot import read_snapshot
from isolab.verdicts import crossing, saturation
from isolab.vocab import EVAL_AVG, ROLLOUTS

SNAPSHOT = Path("runs/chunks/nstar-cpu-scout")
ARMS = (4, 8, 16)
SEEDS = (0, 1)
LATE_FROM = 2.0**16  # the larger n must be ahead at some C ≥ this
ALPHA = 0.05
NOT_READ = 3  # exit status: the scout has not landed whole


def landed(df: pl.DataFrame) -> set[tuple[int, int]]:
    """The (n, seed) runs FINISHED in the snapshot."""
    done = df.filter(pl.col("status") == "FINISHED").select("n", "seed").unique()
    return {(int(n), int(s)) for n, s in done.iter_rows()}


def advantage_table(df: pl.DataFrame) -> pl.DataFrame:
    """Per checkpoint (the i-th evaluation of every run; an arm's C is rounded up to a whole
    batch, so the arms' C differ by < 1 batch): each arm's seed-mean avg@4, D_b for n_b = 8, 16
    (seed-paired mean and the two seeds' differences), and each arm's summed learning rate
    Σlr = lr · steps."""
    cells = (
        df.filter(pl.col(ROLLOUTS) > 0)
        .with_columns(i=pl.col(ROLLOUTS).rank("ordinal").over("run_key"))
        .select(
            "i",
            "n",
            "seed",
            pl.col(ROLLOUTS).alias("C"),
            pl.col(EVAL_AVG).alias("y"),
            (pl.col("lr") * pl.col(ROLLOUTS) / (pl.col("B_p") * pl.col("n"))).alias("lr_sum"),
        )
    )
    wide = cells.pivot(on="n", index=["i", "seed"], values=["y", "lr_sum", "C"])
    out = []
    for (_,), g in wide.sort("i", "seed").group_by("i", maintain_order=True):
        row: dict[str, float | str] = {"C (n = 4)": as_float(g["C_4"].mean())}
        for n in ARMS:
            row[f"avg@4 n={n}"] = as_float(g[f"y_{n}"].mean())
            row[f"Σlr n={n}"] = as_float(g[f"lr_sum_{n}"].mean())
        for n in ARMS[1:]:
            diffs = (g[f"y_{n}"] - g["y_4"]).to_list()
            row[f"D_{n}"] = float(sum(diffs) / len(diffs))
            row[f"D_{n} by seed"] = ", ".join(f"{d:+.3f}" for d in diffs)
        out.append(row)
    return pl.DataFrame(out)


def call(result) -> tuple[str, str]:
    """The pre-registered call and its reason, from the crossing test's result."""
    if not result.ran:
        return "inconclusive", f"the crossing test could not run: {result.note}"
    extra = result.extra or {}
    grows = result.estimate > 0 and result.p_value < ALPHA
    late = extra.get("C_to", 0.0) >= LATE_FROM and extra.get("C_from", math.inf) < extra["C_to"]
    if grows and late:
        return "agrees", result.note
    if grows:
        return "inconclusive", (
            f"{result.note}; but the larger n leads only before C = {LATE_FROM:,.0f}, not where "
            "the pre-registration looks"
        )
    if result.estimate < 0 and result.p_value < ALPHA:
        return "disagrees", result.note
    return "not shown", (
        f"neither n = 8 nor n = 16 overtakes n = 4 by C_max with step-down p < {ALPHA} "
        f"({result.note})"
    )


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else SNAPSHOT
    df = read_snapshot(path, None)
    have = landed(df)
    want = {(n, s) for n in ARMS for s in SEEDS}
    if not want <= have:
        missing = ", ".join(f"n={n} seed {s}" for n, s in sorted(want - have))
        print(
            f"not read: {len(want & have)} of {len(want)} scout runs have landed (missing: "
            f"{missing}); the pre-registration reads no interim call."
        )
        return NOT_READ
    runs = df.filter(pl.col("status") == "FINISHED")
    result, _ = crossing.crossing_test(runs, EVAL_AVG)
    verdict, reason = call(result)
    table = advantage_table(runs)
    gate = saturation.plateau_gate(runs, runs, EVAL_AVG, n=4, B_p=16)
    with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=200, float_precision=4):
        print(table)
    print(
        f"n = 4's gain per doubling over the last two doublings at C_max = {gate.C_max:,.0f}: "
        f"{gate.gain:+.4f} (SE {gate.se:.4f}); saturation gate: "
        f"{'passed' if gate.passed else 'failed'}: {gate.reason}"
    )
    print(f"call (pre-registered, nstar.scout_crossover): {verdict}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
