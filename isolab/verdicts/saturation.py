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

C_sat, the saturation point (issue 45): the earliest checkpoint from which the curve has
plateaued in every window that starts there or later: the first doubling after it
(`LOCAL_DOUBLINGS`) and every window of at least two doublings from it, or from any later
checkpoint, to C_max, each passing the same test. Why the first doubling: a window that spans a
steep rise and a long plateau averages to a small slope, so a gate reading only the windows to
C_max put C_sat at the start of rising-then-flat curves, before the rise had ended. A flat
first doubling cannot hide a rise (the rise is in it), and the longer windows to C_max, each
with several checkpoints, show that nothing rises later. The conclusion "plateaued from C_sat"
needs all of them (an intersection-union test: each at α, no adjustment). The gate itself
still passes on the last two doublings alone (issue 27's pre-registration); where no checkpoint's
first doubling is resolved under the margin, C_sat is left unplaced and the reason says so.
Calibrated on planted breaks (`isolab.synthetic.make_plateau_runs`,
`benchmarks/nstar_calibration.py`, docs/statistics.md): C_sat never falls before the rise ends
by more than the margin's worth of gain (0 of 1,600 worlds), and falls within a doubling after
the break in 92–99% of worlds with 8 seeds, 62–83% with 3 (a one-doubling window is noisy, and
a failed one moves C_sat later, never earlier); a curve still rising at the end never passes.
The vertex test of n*'s shift reads the checkpoints from C_sat/4 on
(`isolab.verdicts.vertex`); the crossing test reads every checkpoint
(`isolab.verdicts.crossing`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import stats

from isolab.table import final_rows
from isolab.verdicts.noise import noise_model
from isolab.verdicts.result import ALPHA
from isolab.verdicts.vertex import checkpoint_means
from isolab.vocab import ROLLOUTS, RUN_KEY, STEP

#: The run the gate reads: n = 4, B_p = 16 (issue 27's pre-registration).
GATE_N = 4
GATE_B_P = 16
#: avg@4 per doubling of C under which a curve has plateaued (see the module's docstring).
PLATEAU_MARGIN = 0.01
#: Doublings of C the gain is measured over, ending at the largest compute.
WINDOW_DOUBLINGS = 2
#: The first window after C_sat that must also stay under the margin (issue 45).
LOCAL_DOUBLINGS = 1
#: How C_sat is placed: `every` (the first doubling after each checkpoint from C_sat on, and
#: every window to C_max), `first` (the first doubling after C_sat only, and every window to
#: C_max) or `tail` (the windows to C_max only: the gate before issue 45).
C_SAT_RULE = "first"


@dataclass(frozen=True)
class Gate:
    """The saturation gate's outcome.

    Attributes:
        ran: whether the data held the runs to test it.
        passed: the last two doublings gain less than `margin` per doubling (upper bound): the
            curve has plateaued by C_max (issue 27's pre-registered gate).
        C_sat: the earliest checkpoint from which every window passes (None where the gate
            fails, or where no checkpoint's first doubling is resolved under the margin).
        C_max: the largest compute of the gate's runs.
        gain: avg@4 per doubling over the last two doublings, mean over seeds.
        se: its standard error.
        upper: its one-sided upper 1 − α bound.
        dof: degrees of freedom of the pooled seed variance.
        seeds: runs of the gate's configuration.
        margin: the plateau margin.
        windows: per window (start and end checkpoint): the slope, its SE and upper bound, and
            whether it passes.
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


@dataclass(frozen=True)
class _Runs:
    """Runs as trajectories: a configuration id per run, the checkpoints (log2 C, binned to a
    quarter doubling) and the metric per run × checkpoint (NaN where not evaluated)."""

    config: np.ndarray
    lc: np.ndarray
    y: np.ndarray


def _trajectories(df: pl.DataFrame, metric: str) -> _Runs:
    rows = df.filter((pl.col(STEP) > 0) & (pl.col(ROLLOUTS) > 0) & pl.col(metric).is_finite())
    cfg = [c for c in ("n", "B_p") if c in rows.columns]
    rows = rows.with_columns(
        lc=(pl.col(ROLLOUTS).cast(pl.Float64).log(2) * 4).round() / 4,
        cfg=pl.concat_str([pl.col(c).cast(pl.String) for c in cfg], separator="|")
        if cfg
        else pl.lit(""),
    )
    wide = rows.pivot(on="lc", index=[RUN_KEY, "cfg"], values=metric, aggregate_function="mean")
    cols = sorted((c for c in wide.columns if c not in (RUN_KEY, "cfg")), key=float)
    y = wide.select(cols).to_numpy().astype(float) if cols else np.zeros((wide.height, 0))
    return _Runs(wide["cfg"].to_numpy(), np.array([float(c) for c in cols]), y)


def _run_slopes(runs: _Runs, start: float, end: float) -> tuple[np.ndarray, np.ndarray]:
    """Per run: the least-squares slope on log2 C over its checkpoints in [`start`, `end`]
    (NaN for a run without them: a window of one doubling needs its two ends, a longer one
    three checkpoints over at least a doubling), and its checkpoint count."""
    on = (runs.lc >= start - 1e-9) & (runs.lc <= end + 1e-9)
    x, y = runs.lc[on], runs.y[:, on]
    ok = np.isfinite(y)
    k = ok.sum(axis=1)
    X = np.where(ok, x, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = X.sum(axis=1) / k
        dx = np.where(ok, x - mx[:, None], 0.0)
        slope = (dx * np.where(ok, y, 0.0)).sum(axis=1) / (dx**2).sum(axis=1)
        span = np.where(ok, x, -np.inf).max(axis=1) - np.where(ok, x, np.inf).min(axis=1)
    need = 2 if end - start <= 1 else 3
    keep = (k >= need) & (span >= min(end - start, 1) - 1e-9)
    return np.where(keep, slope, np.nan), k


def _pooled(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[float, int]:
    """Within-configuration variance of run slopes (configuration and checkpoint count alike),
    pooled over the parts' configurations; a part is (slopes, counts, configuration ids)."""
    ss, dof = 0.0, 0
    for slope, k, cfg in parts:
        ok = np.isfinite(slope)
        groups: dict[tuple, list[float]] = {}
        for v, kk, c in zip(slope[ok], k[ok], cfg[ok], strict=True):
            groups.setdefault((c, int(kk)), []).append(float(v))
        for v in groups.values():
            if len(v) > 1:
                a = np.asarray(v)
                ss += float(np.sum((a - a.mean()) ** 2))
                dof += len(a) - 1
    return (ss / dof if dof else math.nan), dof


def _window(
    runs: _Runs,
    main: _Runs | None,
    start: float,
    end: float,
    eval_sd: float,
    margin: float,
) -> dict | None:
    """One window's row: the seeds' mean slope over [`start`, `end`] (log2 C), its SE (the
    seed variance of such slopes pooled with `main`'s over its own last `end − start`
    doublings, floored at the evaluation noise of a slope) and upper 1 − α bound."""
    own, k = _run_slopes(runs, start, end)
    if not np.isfinite(own).any():
        return None
    width = end - start
    parts = [(own, k, runs.config)]
    if main is not None and main.lc.size:
        top = float(main.lc.max())
        slope, kk = _run_slopes(main, round((top - width) * 4) / 4, top)
        parts.append((slope, kk, main.config))
    var, dof = _pooled(parts)
    xs = runs.lc[(runs.lc >= start - 1e-9) & (runs.lc <= end + 1e-9)]
    floor = eval_sd**2 / float(np.sum((xs - xs.mean()) ** 2))
    var = max(var, floor) if dof else floor
    seeds = int(np.isfinite(own).sum())
    gain = float(np.nanmean(own))
    se = math.sqrt(var / seeds)
    q = float(stats.t.ppf(1 - ALPHA, dof)) if dof else float(stats.norm.ppf(1 - ALPHA))
    return {
        "start_C": 2.0**start,
        "end_C": 2.0**end,
        "doublings": width,
        "gain_per_doubling": gain,
        "se": se,
        "dof": dof,
        "upper": gain + q * se,
        "passes": gain + q * se < margin,
    }


def saturation_point(windows: pl.DataFrame, C_max: float, rule: str = C_SAT_RULE) -> float | None:
    """C_sat from a gate's `windows` (see the module's docstring and `C_SAT_RULE`): the
    earliest start of a window to C_max of at least `WINDOW_DOUBLINGS` doublings from which
    the windows `rule` names all pass; None when no start qualifies."""
    tails = windows.filter(
        (pl.col("end_C") == C_max) & (pl.col("doublings") >= WINDOW_DOUBLINGS - 1e-9)
    )
    local = windows.filter((pl.col("doublings") - LOCAL_DOUBLINGS).abs() < 1e-9)
    starts = sorted(tails["start_C"].to_list())
    tail_ok = dict(zip(tails["start_C"].to_list(), tails["passes"].to_list(), strict=True))
    local_ok = dict(zip(local["start_C"].to_list(), local["passes"].to_list(), strict=True))
    for s in starts:
        if not all(tail_ok[t] for t in starts if t >= s):
            continue
        if rule == "first" and not local_ok.get(s, False):
            continue
        if rule == "every" and not all(ok for t, ok in local_ok.items() if t >= s):
            continue
        return float(s)
    return None


def plateau_gate(
    long: pl.DataFrame | None,
    main: pl.DataFrame | None,
    metric: str,
    n: int = GATE_N,
    B_p: int = GATE_B_P,
    margin: float = PLATEAU_MARGIN,
    rule: str = C_SAT_RULE,
) -> Gate:
    """Has n = `n`, B_p = `B_p` plateaued by the largest compute of `long` (one split's runs),
    and from where? See the module's docstring; `main` (the same split's main sweep) lends its
    seed variance of slopes."""
    runs = (
        long.filter((pl.col("n") == n) & (pl.col("B_p") == B_p))
        if long is not None and {"n", "B_p"} <= set(long.columns)
        else pl.DataFrame()
    )
    if not runs.height:
        return _not_run(
            math.nan,
            0,
            margin,
            f"no n = {n}, B_p = {B_p} runs in the long sweep: the saturation gate cannot run",
        )
    means = checkpoint_means(runs, [metric])
    lcs = sorted(set(means["lc"].to_list()))
    C_max = 2.0 ** lcs[-1]
    seeds = runs[RUN_KEY].n_unique()
    starts = [lc for lc in lcs if lcs[-1] - lc >= WINDOW_DOUBLINGS - 1e-9]
    if not starts:
        return _not_run(
            C_max, seeds, margin, f"the long runs span less than {WINDOW_DOUBLINGS} doublings of C"
        )
    ev = noise_model(final_rows(runs, metric), (metric,)).get(metric)
    eval_sd = ev.eval_sd if ev is not None and math.isfinite(ev.eval_sd) else 0.0
    spans = [(s, lcs[-1]) for s in starts]
    if rule != "tail":
        spans += [(s, s + LOCAL_DOUBLINGS) for s in lcs if s + LOCAL_DOUBLINGS <= lcs[-1] + 1e-9]
    own = _trajectories(runs, metric)
    lend = _trajectories(main, metric) if main is not None and main.height else None
    rows = [_window(own, lend, a, b, eval_sd, margin) for a, b in spans]
    windows = pl.DataFrame([r for r in rows if r is not None]).sort("start_C", "doublings")
    last = windows.filter(
        (pl.col("end_C") == C_max) & (pl.col("start_C") == 2.0 ** starts[-1])
    ).row(0, named=True)
    span = f"from {last['start_C']:,.0f} to {C_max:,.0f} rollouts"
    if not last["passes"]:
        reason = (
            f"untested at this scale: n = {n} (B_p = {B_p}) still gains "
            f"{last['gain_per_doubling']:+.3f} avg@4 per doubling of C {span} (upper "
            f"{1 - ALPHA:.0%} bound {last['upper']:+.3f}, plateau margin {margin})"
        )
        return _ran(False, None, C_max, last, seeds, margin, windows, reason)
    C_sat = saturation_point(windows, C_max, rule)
    where = (
        f"C_sat = {C_sat:,.0f} (every window from there on, its first doubling included, under "
        "the margin)"
        if C_sat is not None
        else "C_sat not placed: no checkpoint's first doubling is resolved under the margin"
    )
    reason = (
        f"n = {n} (B_p = {B_p}) plateaus: {last['gain_per_doubling']:+.3f} avg@4 per doubling "
        f"{span} (upper {1 - ALPHA:.0%} bound {last['upper']:+.3f} < {margin}); {where}"
    )
    return _ran(True, C_sat, C_max, last, seeds, margin, windows, reason)


def _not_run(C_max: float, seeds: int, margin: float, reason: str) -> Gate:
    """A gate that could not run: no estimate, no windows, the reason in words."""
    nan = math.nan
    return Gate(False, False, None, C_max, nan, nan, nan, 0, seeds, margin, pl.DataFrame(), reason)


def _ran(
    passed: bool,
    C_sat: float | None,
    C_max: float,
    last: dict,
    seeds: int,
    margin: float,
    windows: pl.DataFrame,
    reason: str,
) -> Gate:
    """A gate that ran, its estimate that of the last window (`last`, a row of `windows`)."""
    gain, se, upper, dof = (last[k] for k in ("gain_per_doubling", "se", "upper", "dof"))
    return Gate(True, passed, C_sat, C_max, gain, se, upper, dof, seeds, margin, windows, reason)
