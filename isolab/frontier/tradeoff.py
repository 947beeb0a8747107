"""n against B_p at a fixed batch B = B_p·n (IsoCompute Playbook §4.2)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from isolab.frontier.status import Status
from isolab.table import check_single_setting, finite_rows, require, to_polars
from isolab.vocab import DEFAULT_Y, STEP


@dataclass(frozen=True)
class TradeoffResult:
    """Reward against M for each split (B_p, n) of a fixed batch B = B_p·n.

    Attributes:
        B: the batch.
        curves: seed-averaged reward per split and step (`B_p`, `n`, `step`, metric, `n_seeds`).
        per_step: the winning split at each step of the common step grid.
        winners: the best split over the smallest and the largest third of the common steps
            (log-spaced): `regime` ∈ {``small M``, ``large M``}, `n`, `B_p`, mean reward, margin
            over the runner-up.
        crossover_M: first step from which the large-M winner leads at every later step.
        status, reason: as elsewhere.
    """

    B: int
    metric: str
    curves: pl.DataFrame
    per_step: pl.DataFrame
    winners: pl.DataFrame
    crossover_M: float
    status: Status
    reason: str = ""


def tradeoff_fixed_batch(
    df: Any, B: int, *, y: str = DEFAULT_Y, grid_points: int = 60
) -> TradeoffResult:
    """Who wins at fixed B = B_p·n: more problems or more rollouts per problem, by M.

    At fixed B every split spends the same compute per step (C = B·M), so comparing reward at
    equal M is an iso-compute comparison. The Playbook finds (Easy sets) that with few steps a
    larger B_p wins and with many steps a larger n does. Each split's seed-averaged curve is
    interpolated (in log M) on a common log-spaced step grid where all splits have data.
    """
    df = to_polars(df)
    require(df, y, "n", "B_p", STEP)
    check_single_setting(df, "tradeoff_fixed_batch")
    if "B" not in df.columns:
        df = df.with_columns((pl.col("B_p") * pl.col("n")).alias("B"))
    sel = finite_rows(df.filter(pl.col("B") == B), y, context="tradeoff_fixed_batch")
    empty = pl.DataFrame()

    def fail(reason: str, curves: pl.DataFrame = empty) -> TradeoffResult:
        return TradeoffResult(B, y, curves, empty, empty, float("nan"), "not identifiable", reason)

    if sel.height == 0:
        avail = sorted(df["B"].unique().to_list())
        return fail(f"no runs with B = B_p·n = {B}; batches in the table: {avail}")
    curves = (
        sel.group_by(["B_p", "n", STEP])
        .agg(pl.col(y).mean(), pl.len().alias("n_seeds"))
        .sort(["n", STEP])
    )
    splits = curves.select("B_p", "n").unique().sort("n")
    if splits.height < 2:
        return fail(
            f"only one split of B = {B} (B_p = {splits['B_p'][0]}, n = {splits['n'][0]})", curves
        )
    lo, hi = 0.0, math.inf
    series = []
    for b_p, n in splits.iter_rows():
        c = curves.filter((pl.col("B_p") == b_p) & (pl.col("n") == n) & (pl.col(STEP) > 0))
        if c.height == 0:
            return fail(f"split (B_p = {b_p}, n = {n}) has no evaluation after step 0", curves)
        st, val = c[STEP].to_numpy().astype(float), c[y].to_numpy()
        lo, hi = max(lo, st.min()), min(hi, st.max())
        series.append((b_p, n, st, val))
    if not hi > lo:
        return fail(f"the splits of B = {B} share no range of steps", curves)
    grid = np.unique(np.round(np.geomspace(lo, hi, grid_points)))
    Rg = np.stack([np.interp(np.log(grid), np.log(st), val) for _, _, st, val in series])  # S×G
    names = [(b_p, n) for b_p, n, _, _ in series]
    best = np.argmax(Rg, axis=0)
    per_step = pl.DataFrame(
        {
            STEP: grid,
            "B_p": [names[i][0] for i in best],
            "n": [names[i][1] for i in best],
            y: Rg[best, np.arange(len(grid))],
        }
    )
    third = max(len(grid) // 3, 1)
    rows = []
    for regime, cols in (("small M", slice(0, third)), ("large M", slice(-third, None))):
        means = Rg[:, cols].mean(axis=1)
        order = np.argsort(means)[::-1]
        rows.append(
            {
                "regime": regime,
                "M_lo": float(grid[cols][0]),
                "M_hi": float(grid[cols][-1]),
                "B_p": names[order[0]][0],
                "n": names[order[0]][1],
                y: float(means[order[0]]),
                "margin": float(means[order[0]] - means[order[1]]),
            }
        )
    winners = pl.DataFrame(rows)
    late = int(np.argmax(Rg[:, -1]))
    lead = best == late
    # first grid index from which `late` leads at every later step
    tail_ok = np.flip(np.cumprod(np.flip(lead))).astype(bool)
    crossover = float(grid[np.argmax(tail_ok)]) if tail_ok.any() else float("nan")
    return TradeoffResult(B, y, curves, per_step, winners, crossover, "ok")
