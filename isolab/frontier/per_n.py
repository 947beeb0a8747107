"""What each n's reward curve is fitted to in `optimal_n`: the points chosen per n, the
cluster-bootstrap replicates of the seed means that give the fits their intervals, and the
table of the fitted curves that figures draw."""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
import polars as pl

from isolab.frontier.envelope import frontier, record_points
from isolab.table import CONFIG_COLUMNS, as_float, run_column
from isolab.vocab import STEP


def best_config(grp: pl.DataFrame, x: str, y: str) -> pl.DataFrame:
    """Points of the configuration (e.g. B_p) of one n with the highest mean reward over the
    upper half (in log compute) of the compute range all its configurations share: a single
    choice among few configurations, so the chosen curve's points keep their noise unbiased
    (unlike a running maximum), made at equal compute."""
    cfg = [c for c in CONFIG_COLUMNS if c in grp.columns and c != "n" and grp[c].n_unique() > 1]
    if not cfg:
        return grp
    pos = grp.filter(pl.col(x) > 0)
    ends = pos.group_by(cfg).agg(pl.col(x).min().alias("lo"), pl.col(x).max().alias("hi"))
    lo, hi = as_float(ends["lo"].max()), as_float(ends["hi"].min())
    window = pos.filter(pl.col(x).is_between(math.sqrt(lo * hi), hi)) if hi >= lo else pos
    score = (
        (window if window.height else pos)
        .group_by(cfg)
        .agg(pl.col(y).mean().alias("_score"))
        .sort("_score", descending=True)
    )
    # a parameter logged as null by some runs (one added after they ran) is still one value
    return grp.join(score.head(1).select(cfg), on=cfg, how="semi", nulls_equal=True)


def seed_replicates(
    df: pl.DataFrame, avg: pl.DataFrame, x: str, y: str, n_boot: int, rng
) -> np.ndarray | None:
    """Cluster-bootstrap replicates of the seed means in `avg` (rows of `seed_average`, in its
    order): each replicate draws each configuration's seeds with replacement. A configuration
    with one seed gets Gaussian noise of the seed SD pooled over configurations with several
    (what a second seed would have shown). Shape (n_boot, rows of `avg`).

    None when no configuration has two seeds: there is no seed spread to resample, and
    replicates that all equal the data would give intervals of width zero (the caller falls
    back on resampling the fits' residuals)."""
    cfg = [c for c in CONFIG_COLUMNS if c in df.columns]
    key = run_column(df)
    wide = df.pivot(on=STEP, index=[*cfg, key], values=y, aggregate_function="mean")
    steps = [c for c in wide.columns if c not in (*cfg, key)]
    out = np.full((n_boot, avg.height), np.nan)
    row_of = {(*(r[c] for c in cfg), r[STEP]): r["_row"] for r in avg.iter_rows(named=True)}
    cells = wide.partition_by(cfg, as_dict=True) if cfg else {(): wide}
    with warnings.catch_warnings():  # a step only one seed reached has no variance: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        spread = [
            np.nanvar(part.select(steps).to_numpy().astype(float), axis=0, ddof=1)
            for part in cells.values()
            if part.height > 1
        ]
    if not spread:
        return None
    sd = np.sqrt(np.nanmean(spread, axis=0))
    for values, part in cells.items():
        V = part.select(steps).to_numpy().astype(float)  # seeds × steps
        S = V.shape[0]
        if S > 1:
            draws = V[rng.integers(0, S, size=(n_boot, S))].mean(axis=1)
        else:
            draws = V[0] + rng.standard_normal((n_boot, len(steps))) * np.nan_to_num(sd)
        for j, step in enumerate(steps):
            row = row_of.get((*values, int(step)))
            if row is not None:
                out[:, row] = draws[:, j]
    return out


class PerNPoints(NamedTuple):
    """What one n's sigmoid is fitted to, and the compute range its fitted curve is trusted
    over (that of all the n's runs, not only the chosen points)."""

    C: np.ndarray  #: compute of the chosen points
    R: np.ndarray  #: their seed-mean reward
    C_lo: float  #: the n's smallest positive compute (NaN when it has none)
    C_hi: float  #: the n's largest compute
    rows: np.ndarray | None  #: the points' rows of the seed means (`_row`), None for records


def per_n_points(
    avg: pl.DataFrame, x: str, y: str, per_n: str, bin_width: float
) -> dict[int, PerNPoints]:
    """Per n (ascending): the points its sigmoid is fitted to, chosen by `per_n` from the seed
    means `avg` (see `PerNPoints`)."""
    out = {}
    for (n,), grp in avg.group_by(["n"], maintain_order=True):
        if per_n == "records":
            pts = record_points(grp, x, y, bin_width=bin_width).select(x, y)
            # Anchor the plateau: after the last record the frontier stays flat up to the
            # largest compute of this n; without this point the fit is free to rise there.
            last = frontier(grp, x, y).tail(1)
            if last[x][0] > pts[x][-1]:
                pts = pl.concat([pts, last.select(x, pl.col("frontier").alias(y))])
            pts = pts.drop("_row", strict=False)
        elif per_n == "all":
            pts = grp
        elif per_n == "best_config":
            pts = best_config(grp, x, y)
        else:
            raise ValueError(f"per_n = {per_n!r}: choose 'records', 'best_config' or 'all'.")
        pos = grp.filter(pl.col(x) > 0)[x]
        out[int(n)] = PerNPoints(
            C=pts[x].to_numpy().astype(float),
            R=pts[y].to_numpy().astype(float),
            C_lo=as_float(pos.min()) if len(pos) else float("nan"),
            C_hi=as_float(grp[x].max()),
            rows=pts["_row"].to_numpy() if "_row" in pts.columns else None,
        )
    return dict(sorted(out.items()))


def per_n_curves(fits: dict, points: dict[int, PerNPoints], grid_points: int) -> pl.DataFrame:
    """Long table (`n`, `C`, `reward_fit`, `reward_lo`, `reward_hi`, `status`) of each n's
    fitted curve over the compute its runs cover, `grid_points` log-spaced points per n.

    A ``flat`` fit (no significant rise) is drawn as what was observed, not as its sigmoid,
    whose A, C_mid and B describe noise and can bend below the base score: its level is the
    mean of the points it was fitted to (compute > 0), `reward_lo` / `reward_hi` that ± their
    standard deviation. Other fits have no band here (NaN)."""
    rows = []
    for n, f in fits.items():
        pts = points[n]
        if not f.identifiable or not (np.isfinite(pts.C_lo) and pts.C_hi > pts.C_lo):
            continue
        C = np.geomspace(pts.C_lo, pts.C_hi, grid_points)
        if f.status == "flat":
            R = pts.R[pts.C > 0]
            level = float(np.mean(R))
            sd = float(np.std(R, ddof=1)) if len(R) > 1 else 0.0
            fit, lo, hi = (
                np.full_like(C, level),
                np.full_like(C, level - sd),
                np.full_like(C, level + sd),
            )
        else:
            fit, lo, hi = f.predict(C), np.full_like(C, np.nan), np.full_like(C, np.nan)
        rows.append(
            pl.DataFrame(
                {
                    "n": np.full(len(C), n),
                    "C": C,
                    "reward_fit": fit,
                    "reward_lo": lo,
                    "reward_hi": hi,
                    "status": np.full(len(C), f.status),
                }
            )
        )
    if not rows:
        return pl.DataFrame()
    return pl.concat(rows).filter(pl.col("reward_fit").is_not_nan())
