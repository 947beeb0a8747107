"""10 · Per-prompt allocation: uniform n against adaptive allocators at equal FLOPs.

Every arm of the sweep spends the same FLOPs (IsoFLOP, discarded rollouts charged), so the
report reads each arm's learning curve against `flops/total`:

- `frontier`: per split and arm, the seed-mean avg@4 at each checkpoint against the FLOPs spent;
- `flops_to_target`: the FLOPs each arm needs to reach a stated avg@4, the best uniform n's
  seed-mean avg@4 at half the budget (interpolated in log FLOPs), and their ratio to the best
  uniform n's own: the issue's "same avg@4 with fewer FLOPs" as a number, without a call;
- `discarded`: the share of FLOPs each arm spent on rollouts no update used;
- `split_estimates`: each split's final avg@4 of each allocator minus the best uniform n, within
  seeds (the claims' test on one split: the calls are the claims', pooled over the splits);
- `missing`: the arms, seeds and checkpoints a sweep still lacks (runs landing), in words.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from isolab import plots
from isolab.study import claims, summaries
from isolab.study.allocation import figures
from isolab.study.allocation.claims import ALLOCATORS, BEST_UNIFORM, SWEEP, with_arms
from isolab.study.report import Report, Y, add_noise, figure_row, fmt, fmt_sig, splits_of
from isolab.table import final_rows, run_column
from isolab.verdicts import contrasts
from isolab.vocab import (
    DISCARDED_SHARE,
    FLOPS_TOTAL,
    ROLLOUTS,
    ROLLOUTS_DISCARDED,
)

#: The stated avg@4: the best uniform n's seed-mean avg@4 at this share of its budget.
TARGET_SHARE = 0.5
#: A run whose last evaluation spent less than this share of its split's largest final FLOPs has
#: not finished (a sweep still landing): `missing` names it. IsoFLOP arms end a few percent
#: apart (whole steps), and an unfinished run's last checkpoint is at half the budget or less.
FINISHED_SHARE = 0.75


def arm_order(arms: list[str]) -> list[str]:
    """Uniform arms by n, then the allocators in the claims' order (`ALLOCATORS`)."""

    def key(arm: str) -> tuple[int, int, str]:
        if arm.startswith("uniform n="):
            return (0, int(arm.removeprefix("uniform n=")), arm)
        return (1, ALLOCATORS.index(arm) if arm in ALLOCATORS else len(ALLOCATORS), arm)

    return sorted(set(arms), key=key)


def frontier(df: pl.DataFrame) -> pl.DataFrame:
    """Per split and arm (`with_arms`), the seed-mean avg@4 at each checkpoint against
    `flops/total`: `split`, `arm`, `versus`, `step`, `flops/total`, `mean`, `std`, `n_seeds`."""
    armed = with_arms(df)
    return summaries.curves(armed, ["split", "arm", "versus"], FLOPS_TOTAL, Y)


def _first_reach(log_x: np.ndarray, y: np.ndarray, target: float) -> tuple[float, str]:
    """log2 FLOPs at which a curve first reaches `target` (linear in log FLOPs between the
    checkpoints around it), and how: `interpolated`, `by the first checkpoint` (an upper
    bound: the curve starts above it) or `not reached` (NaN)."""
    above = np.flatnonzero(y >= target)
    if not len(above):
        return math.nan, "not reached"
    i = int(above[0])
    if i == 0:
        return float(log_x[0]), "by the first checkpoint"
    t = (target - y[i - 1]) / (y[i] - y[i - 1])
    return float(log_x[i - 1] + t * (log_x[i] - log_x[i - 1])), "interpolated"


def flops_to_target(front: pl.DataFrame, share: float = TARGET_SHARE) -> pl.DataFrame:
    """Per split and arm, the FLOPs at which its seed-mean curve (`frontier`) first reaches the
    split's target: the best uniform n's seed-mean avg@4 at `share` of its final FLOPs
    (interpolated in log FLOPs). `ratio`: the arm's FLOPs over the best uniform n's (below 1:
    fewer FLOPs for the same avg@4). A split without a best uniform n has no target (NaN)."""
    rows = []
    trained = front.filter(pl.col(FLOPS_TOTAL) > 0).sort(FLOPS_TOTAL)
    for split in splits_of(trained) if trained.height else []:
        part = trained.filter(pl.col("split") == split)
        best = part.filter(pl.col("versus") == BEST_UNIFORM)
        target = math.nan
        if best.height:
            lx = np.log2(best[FLOPS_TOTAL].to_numpy())
            aim = math.log2(share) + float(lx.max())
            if aim >= lx.min():
                target = float(np.interp(aim, lx, best["mean"].to_numpy()))
        for (arm,), g in part.group_by("arm", maintain_order=True):
            lx, how = math.nan, "no target"
            if math.isfinite(target):
                lx, how = _first_reach(
                    np.log2(g[FLOPS_TOTAL].to_numpy()), g["mean"].to_numpy(), target
                )
            rows.append(
                {
                    "split": split,
                    "arm": arm,
                    "target": target,
                    "flops": 2.0**lx if math.isfinite(lx) else math.nan,
                    "reached": how,
                    "best_uniform": bool((g["versus"] == BEST_UNIFORM).any()),
                }
            )
    schema = {
        "split": pl.String,
        "arm": pl.String,
        "target": pl.Float64,
        "flops": pl.Float64,
        "reached": pl.String,
        "best_uniform": pl.Boolean,
    }
    out = pl.DataFrame(rows, schema=schema)
    ref = out.filter(pl.col("best_uniform")).select("split", ref="flops")
    return (
        out.join(ref, on="split", how="left")
        .with_columns(ratio=pl.col("flops") / pl.col("ref"))
        .drop("ref")
    )


def discarded(df: pl.DataFrame) -> pl.DataFrame:
    """Per split and arm, at each run's last evaluation (seed means): the share of all FLOPs
    spent on discarded rollouts (`compute/discarded_share`), the discarded rollouts and all the
    rollouts generated. Null where the runs predate the metric."""
    fin = with_arms(final_rows(df, Y))
    cols = [DISCARDED_SHARE, ROLLOUTS_DISCARDED, ROLLOUTS, FLOPS_TOTAL]
    fin = fin.with_columns(pl.lit(None, pl.Float64).alias(c) for c in cols if c not in fin.columns)
    return (
        fin.group_by("split", "arm")
        .agg(
            pl.col(DISCARDED_SHARE).mean().alias("discarded_share"),
            pl.col(ROLLOUTS_DISCARDED).mean().alias("rollouts_discarded"),
            pl.col(ROLLOUTS).mean().alias("rollouts"),
            pl.col(FLOPS_TOTAL).mean().alias("flops"),
            pl.len().alias("runs"),
        )
        .sort("split", "arm")
    )


def split_estimates(df: pl.DataFrame) -> pl.DataFrame:
    """Per split and allocator: final avg@4 of the allocator minus the split's best uniform n,
    within seeds (`contrasts.compare_arms`, the claims' test on one split), with its interval;
    `note` says why a split has none. No call: the claims pool the splits and make it."""
    rows = []
    for split in splits_of(df):
        armed = with_arms(df.filter(pl.col("split") == split))
        best = armed.filter(pl.col("versus") == BEST_UNIFORM)["arm"].unique().to_list()
        for allocation in ALLOCATORS:
            r = contrasts.compare_arms(armed, Y, "versus", allocation, BEST_UNIFORM)
            lo, hi = r.interval if r.interval else (math.nan, math.nan)
            rows.append(
                {
                    "split": split,
                    "allocator": allocation,
                    "best_uniform": best[0] if best else None,
                    "estimate": r.estimate,
                    "lo": lo,
                    "hi": hi,
                    "se": r.se,
                    "runs": r.n_runs,
                    "note": r.note,
                }
            )
    schema = {
        "split": pl.String,
        "allocator": pl.String,
        "best_uniform": pl.String,
        "estimate": pl.Float64,
        "lo": pl.Float64,
        "hi": pl.Float64,
        "se": pl.Float64,
        "runs": pl.Int64,
        "note": pl.String,
    }
    return pl.DataFrame(rows, schema=schema)


def missing(df: pl.DataFrame) -> list[str]:
    """What the sweep lacks, in words: allocators with no runs, arms absent from a split, arms
    with fewer seeds than the sweep has, runs still short of their budget. Empty when complete."""
    out = []
    armed = with_arms(df)
    arms = arm_order(armed["arm"].to_list())
    absent = [a for a in ALLOCATORS if a not in arms]
    if absent:
        out.append(f"no runs yet of {', '.join(absent)}: its claim cannot be tested.")
    seeds = sorted(armed["seed"].unique().to_list()) if "seed" in armed.columns else []
    key = run_column(armed)
    last = armed.group_by(key).agg(
        pl.col("split", "arm").first(),
        pl.col("seed").first() if "seed" in armed.columns else pl.lit(None).alias("seed"),
        pl.col(FLOPS_TOTAL).max(),
    )
    short = last.filter(
        pl.col(FLOPS_TOTAL) < FINISHED_SHARE * pl.col(FLOPS_TOTAL).max().over("split")
    )
    for split in splits_of(armed):
        here = last.filter(pl.col("split") == split)
        gone = [a for a in arms if a not in here["arm"].to_list()]
        if gone:
            out.append(f"{split}: no runs of {', '.join(gone)}.")
        for arm in arms:
            have = here.filter(pl.col("arm") == arm)["seed"].to_list()
            lack = [s for s in seeds if s not in have]
            if have and lack:
                out.append(f"{split}, {arm}: seed(s) {', '.join(map(str, lack))} missing.")
    for r in short.sort("split", "arm", "seed").iter_rows(named=True):
        out.append(
            f"{r['split']}, {r['arm']}, seed {r['seed']}: last evaluated at "
            f"{fmt_sig(r[FLOPS_TOTAL])} FLOPs, short of the budget (still training?)."
        )
    return out


def allocation(data: dict[str, pl.DataFrame], scale: str = "cpu") -> Report:
    """Each allocator against the best uniform n of its split at equal FLOPs: the frontier per
    arm, the FLOPs to a stated avg@4, the discarded share, each split's estimate, the claims."""
    rep = Report("allocation", scale)
    df = data[SWEEP]
    front = frontier(df)
    reach = flops_to_target(front)
    waste = discarded(df)
    per_split = split_estimates(df)
    gaps = missing(df)
    rep.tables.update(
        frontier=front,
        flops_to_target=reach,
        discarded=waste,
        split_estimates=per_split,
        final=summaries.final(with_arms(df), ["split", "arm"], Y),
    )
    splits = splits_of(df) or ["no runs"]
    fig, axes = figure_row(len(splits))
    for ax, split in zip(axes, splits, strict=True):
        target = reach.filter(pl.col("split") == split)["target"]
        figures.plot_split_frontier(
            front.filter(pl.col("split") == split),
            ax,
            split,
            target[0] if target.len() else math.nan,
        )
    rep.figures["frontier"] = plots.tidy(fig)
    fig, axes = figure_row(1)
    figures.plot_discarded(waste, axes[0], arm_order(waste["arm"].to_list()))
    rep.figures["discarded"] = plots.tidy(fig)
    if gaps:
        rep.summary.append("Runs missing (the sweep is incomplete): " + " ".join(gaps))
    _sentences(rep, reach, waste, per_split)
    rep.findings.update(
        missing=gaps,
        flops_to_target=reach.to_dicts(),
        discarded=waste.to_dicts(),
        split_estimates=per_split.to_dicts(),
        target_share=TARGET_SHARE,
    )
    add_noise(rep, df)
    rep.add_verdicts(claims.evaluate("allocation", data))
    return rep


def _sentences(
    rep: Report, reach: pl.DataFrame, waste: pl.DataFrame, per_split: pl.DataFrame
) -> None:
    """The report's sentences: per split, the target and each arm's FLOPs ratio to it, the
    discarded shares, and each allocator's estimate against the best uniform n."""
    for split in splits_of(reach) if reach.height else []:
        part = reach.filter(pl.col("split") == split)
        target = part["target"][0]
        if not math.isfinite(target):
            why = (
                f"the best uniform n has no checkpoint at or below {TARGET_SHARE:g} of its budget"
                if part["best_uniform"].any()
                else "no uniform n has finished runs"
            )
            rep.summary.append(f"{split}: no target avg@4 ({why}).")
            continue
        best = part.filter(pl.col("best_uniform"))["arm"][0]
        arms = arm_order(part["arm"].to_list())
        said = []
        for arm in (a for a in arms if a != best):
            r = part.filter(pl.col("arm") == arm).row(0, named=True)
            said.append(
                f"{arm} {fmt(r['ratio'], 2)}×"
                if r["reached"] == "interpolated"
                else f"{arm} ≤ {fmt(r['ratio'], 2)}×"
                if r["reached"] == "by the first checkpoint"
                else f"{arm} not reached"
            )
        rep.summary.append(
            f"{split}: target avg@4 {fmt(target)} ({best}, the best uniform n, at "
            f"{TARGET_SHARE:g} of its budget); FLOPs to reach it relative to {best}: "
            + ", ".join(said)
            + "."
        )
    shares = waste.filter(pl.col("discarded_share").is_not_null())
    if shares.height:
        mean = shares.group_by("arm").agg(pl.col("discarded_share").mean())
        listing = ", ".join(
            f"{a} {fmt(mean.filter(pl.col('arm') == a)['discarded_share'][0], 2)}"
            for a in arm_order(mean["arm"].to_list())
        )
        rep.summary.append(
            f"Share of FLOPs spent on discarded rollouts (mean of splits): {listing}."
        )
    for r in per_split.filter(pl.col("estimate").is_finite()).iter_rows(named=True):
        rep.summary.append(
            f"{r['split']}, {r['allocator']} − {r['best_uniform']}: final avg@4 "
            f"{'+' if r['estimate'] >= 0 else ''}{fmt(r['estimate'])} "
            f"[{fmt(r['lo'])}, {fmt(r['hi'])}] (this split alone; no call)."
        )
