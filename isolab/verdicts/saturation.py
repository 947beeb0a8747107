"""The saturation gate of nstar (pre-registered in issue 27): "if n = 4 does not plateau by
131k rollouts, 'n* grows' is reported untested at this scale".

Why a gate. The Playbook's n* grows because small n stops gaining while larger n still does; a
testbed whose small-n curves still rise at its largest compute cannot show that shift, and a
test of it there would read the growth phase. The `long` sweep carries n = 4, B_p = 16 to twice
`main`'s budget for this one question.

The test (`plateau_gate`). Estimand: avg@4 gained per doubling of C over the last two doublings
of the `long` runs (C_max/4 → C_max: each seed's least-squares slope on log2 C through those
three checkpoints, averaged over seeds). Two doublings rather than one: a slope through three
checkpoints has half the evaluation noise of a difference of two (SE σ/√2 against σ√2), and a
curve still rising over the last two doublings has not plateaued by the last one in any sense
that matters. The curve has plateaued when the one-sided upper 1 − α bound of that gain is
below `PLATEAU_MARGIN` = 0.01 avg@4 per doubling: at that rate the last two doublings add at most
0.02, under the 0.03 the testbed's Easy comparisons must resolve (and the n effects n* is read
from), so a larger n overtaking n = 4 there is not n = 4 still climbing. Its SE: the seed-to-seed
variance of such slopes, pooled with the same slopes of every `main` configuration over its own
last two doublings (each configuration's seeds around their mean: 24 df per split on the planned
grid, where `long`'s three seeds alone give 2 and a t quantile of 3.3), floored at the evaluation
noise of a slope (`isolab.verdicts.noise`).

C_sat, the saturation point: the earliest checkpoint from which the curve's slope to C_max
passes the same test (given that the last two doublings pass): the vertex test of n*'s shift
reads the checkpoints from C_sat/4 on (`isolab.verdicts.vertex`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import stats

from isolab.table import as_float, final_rows
from isolab.verdicts.noise import noise_model
from isolab.verdicts.result import ALPHA
from isolab.verdicts.vertex import checkpoint_means
from isolab.vocab import ROLLOUTS

#: The run the gate reads: n = 4, B_p = 16 (issue 27's pre-registration).
GATE_N = 4
GATE_B_P = 16
#: avg@4 per doubling of C under which a curve has plateaued (see the module's docstring).
PLATEAU_MARGIN = 0.01
#: Doublings of C the gain is measured over, ending at the largest compute.
WINDOW_DOUBLINGS = 2


@dataclass(frozen=True)
class Gate:
    """The saturation gate's outcome.

    Attributes:
        ran: whether the data held the runs to test it.
        passed: the last two doublings gain less than `margin` per doubling (upper bound).
        C_sat: the earliest checkpoint from which the curve passes (None unless passed).
        C_max: the largest compute of the gate's runs.
        gain: avg@4 per doubling over the last two doublings, mean over seeds.
        se: its standard error.
        upper: its one-sided upper 1 − α bound.
        dof: degrees of freedom of the pooled seed variance.
        seeds: runs of the gate's configuration.
        margin: the plateau margin.
        windows: per start checkpoint: the slope to C_max, its SE and upper bound, and whether
            it passes.
        reason: the outcome in words.
    """

    ran: bool
    passed: bool
    C_sat: float | None
    C_max: float
    gain: float
    se: float
    upper: float
    dof: int
    seeds: int
    margin: float
    windows: pl.DataFrame
    reason: str


def _run_slopes(df: pl.DataFrame, metric: str, start: float) -> pl.DataFrame:
    """Per run: the least-squares slope of `metric` on log2 C over its checkpoints ≥ `start`
    (log2), with the run's configuration."""
    rows = df.filter((pl.col("step") > 0) & (pl.col(ROLLOUTS) > 0) & pl.col(metric).is_finite())
    rows = rows.with_columns(lc=(pl.col(ROLLOUTS).cast(pl.Float64).log(2) * 4).round() / 4)
    rows = rows.filter(pl.col("lc") >= start - 1e-9)
    out = []
    cfg = [c for c in ("n", "B_p") if c in rows.columns]
    for (key,), run in rows.group_by(["run_key"], maintain_order=True):
        x, y = run["lc"].to_numpy(), run[metric].to_numpy().astype(float)
        if len(np.unique(x)) < 3:
            continue
        slope = float(np.polyfit(x, y, 1)[0])
        out.append({"run_key": key, **{c: run[c][0] for c in cfg}, "slope": slope,
                    "points": len(x)})  # fmt: skip
    return pl.DataFrame(out)


def _pooled(slopes: list[pl.DataFrame]) -> tuple[float, int]:
    """Within-configuration variance of run slopes, pooled over the frames' configurations."""
    ss, dof = 0.0, 0
    for s in slopes:
        if not s.height:
            continue
        cfg = [c for c in ("n", "B_p", "points") if c in s.columns]
        for _, g in s.group_by(cfg, maintain_order=True):
            v = g["slope"].to_numpy()
            if len(v) > 1:
                ss += float(np.sum((v - v.mean()) ** 2))
                dof += len(v) - 1
    return (ss / dof if dof else math.nan), dof


def plateau_gate(
    long: pl.DataFrame | None,
    main: pl.DataFrame | None,
    metric: str,
    n: int = GATE_N,
    B_p: int = GATE_B_P,
    margin: float = PLATEAU_MARGIN,
) -> Gate:
    """Has n = `n`, B_p = `B_p` plateaued by the largest compute of `long` (one split's runs)?
    See the module's docstring; `main` (the same split's main sweep) lends its seed variance of
    slopes."""
    empty = pl.DataFrame()
    runs = (
        long.filter((pl.col("n") == n) & (pl.col("B_p") == B_p))
        if long is not None and {"n", "B_p"} <= set(long.columns)
        else pl.DataFrame()
    )
    if not runs.height:
        return Gate(False, False, None, math.nan, math.nan, math.nan, math.nan, 0, 0, margin,
                    empty, f"no n = {n}, B_p = {B_p} runs in the long sweep: the saturation "
                    "gate cannot run")  # fmt: skip
    means = checkpoint_means(runs, [metric])
    lcs = sorted(set(means["lc"].to_list()))
    C_max = 2.0 ** lcs[-1]
    seeds = runs["run_key"].n_unique()
    starts = [lc for lc in lcs if lcs[-1] - lc >= WINDOW_DOUBLINGS - 1e-9]
    if not starts:
        return Gate(False, False, None, C_max, math.nan, math.nan, math.nan, 0, seeds, margin,
                    empty, f"the long runs span less than {WINDOW_DOUBLINGS} doublings of C")  # fmt: skip
    ev = noise_model(final_rows(runs, metric), (metric,)).get(metric)
    eval_sd = ev.eval_sd if ev is not None else 0.0
    rows = []
    for start in starts:
        own = _run_slopes(runs, metric, start)
        width = lcs[-1] - start
        other = pl.DataFrame()
        if main is not None and main.height:
            top = math.log2(as_float(main.filter(pl.col("step") > 0)[ROLLOUTS].max()))
            other = _run_slopes(main, metric, round((top - width) * 4) / 4)
        var, dof = _pooled([own, other])
        xs = np.array([lc for lc in lcs if lc >= start - 1e-9])
        floor = eval_sd**2 / float(np.sum((xs - xs.mean()) ** 2))
        var = max(var, floor) if dof else floor
        gain = as_float(own["slope"].mean()) if own.height else math.nan
        se = math.sqrt(var / max(own.height, 1))
        q = float(stats.t.ppf(1 - ALPHA, dof)) if dof else float(stats.norm.ppf(1 - ALPHA))
        rows.append({"start_C": 2.0**start, "doublings": width, "gain_per_doubling": gain,
                     "se": se, "dof": dof, "upper": gain + q * se,
                     "passes": gain + q * se < margin})  # fmt: skip
    windows = pl.DataFrame(rows)
    last = windows.row(-1, named=True)
    span = f"from {windows['start_C'][-1]:,.0f} to {C_max:,.0f} rollouts"
    if not last["passes"]:
        reason = (
            f"untested at this scale: n = {n} (B_p = {B_p}) still gains "
            f"{last['gain_per_doubling']:+.3f} avg@4 per doubling of C {span} (upper "
            f"{1 - ALPHA:.0%} bound {last['upper']:+.3f}, plateau margin {margin})"
        )
        return Gate(True, False, None, C_max, last["gain_per_doubling"], last["se"],
                    last["upper"], last["dof"], seeds, margin, windows, reason)  # fmt: skip
    C_sat = float(windows.filter(pl.col("passes"))["start_C"][0])
    reason = (
        f"n = {n} (B_p = {B_p}) plateaus: {last['gain_per_doubling']:+.3f} avg@4 per doubling "
        f"{span} (upper {1 - ALPHA:.0%} bound {last['upper']:+.3f} < {margin}); C_sat = "
        f"{C_sat:,.0f}"
    )
    return Gate(True, True, C_sat, C_max, last["gain_per_doubling"], last["se"], last["upper"],
                last["dof"], seeds, margin, windows, reason)  # fmt: skip
