"""nstar's claims: n* grows with compute (Easy, Hard), and n* is larger on Easy than on Hard.

"n* grows" is the crossing test (`isolab.verdicts.crossing`) where the saturation gate passes
(`isolab.verdicts.saturation`, issue 45); the vertex slope (`isolab.verdicts.vertex`) and the old
two-stage interaction (`isolab.verdicts.curves`) are its secondary readings.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import polars as pl

from isolab.verdicts import crossing, curves, saturation, vertex
from isolab.verdicts.claim import (
    Claim,
    Data,
    X,
    Y,
    covariates,
    matched_per_split,
    matched_readings,
    on_split,
    same_pool,
)
from isolab.verdicts.result import CI_LEVEL, StatResult, t_quantile
from isolab.vocab import RUN_KEY


def _secondary(df: pl.DataFrame) -> str:
    """The old two-stage interaction (`curves.curve_interaction`), as a sentence."""
    r = curves.curve_interaction(df, Y, "n", X, covariates(df, "B_p"))
    if not r.ran or r.interval is None:
        return f"secondary reading (two-stage log2 n × log2 C interaction): {r.note}"
    return (
        f"secondary reading (two-stage log2 n × log2 C interaction): {r.estimate:+.2g} avg@4 "
        f"per doubling of n per doubling of C ({CI_LEVEL} CI [{r.interval[0]:+.2g}, "
        f"{r.interval[1]:+.2g}], p = {r.p_value:.2g})"
    )


def nstar_gate(data: Data, split: str) -> saturation.Gate:
    """The saturation gate of `split` (`isolab.verdicts.saturation`): n = 4's `long` runs on
    `main`'s pool, with `main`'s seed variance of slopes."""
    long = same_pool(data, "main", "long")
    main = on_split(data["main"], split)
    return saturation.plateau_gate(on_split(long, split) if long is not None else None, main, Y)


def nstar_vertices(data: Data, split: str) -> tuple[StatResult, pl.DataFrame, saturation.Gate]:
    """The shift of n* with compute on `split` (`isolab.verdicts.vertex.vertex_shift`) from
    C_sat/4 on (the top half of log2 C without a saturation point), the per-checkpoint
    vertices, and the gate."""
    gate = nstar_gate(data, split)
    main = on_split(data["main"], split)
    from_C = gate.C_sat / 4 if gate.C_sat is not None else None
    result, table = vertex.vertex_shift(main, Y, from_C)
    return result, table, gate


def nstar_crossing(data: Data, split: str) -> tuple[StatResult, pl.DataFrame, saturation.Gate]:
    """The crossing test of "n* grows" on `split` (`isolab.verdicts.crossing.crossing_test`,
    every checkpoint of `main`), its table of advantages with their joint bands, and the
    gate."""
    gate = nstar_gate(data, split)
    result, table = crossing.crossing_test(on_split(data["main"], split), Y)
    return result, table, gate


def _vertex_reading(result: StatResult) -> str:
    """The vertex slope (`isolab.verdicts.vertex.vertex_shift`), as a secondary sentence."""
    if not result.ran or result.interval is None:
        return f"secondary reading (vertex slope): {result.note}"
    return (
        f"secondary reading (vertex slope): {result.estimate:+.2g} doublings of n* per doubling "
        f"of C ({CI_LEVEL} CI [{result.interval[0]:+.2g}, {result.interval[1]:+.2g}], p = "
        f"{result.p_value:.2g})"
    )


def _nstar_grows(split: str) -> Callable[[Data], StatResult]:
    """The crossing test where the saturation gate passes (issue 45); untested at this scale
    where it does not, with the crossing test's own reading, the vertex slope and the two-stage
    interaction as secondary readings."""

    def run(data: Data) -> StatResult:
        result, _, gate = nstar_crossing(data, split)
        main = on_split(data["main"], split)
        secondary = _secondary(main)
        if not gate.passed:
            why = (
                gate.reason
                if gate.reason.startswith("untested")
                else (f"untested at this scale: {gate.reason}")
            )
            reading = f"secondary reading ({crossing.crossing_summary(result)})"
            return StatResult.refused(f"{why}; {reading}; {secondary}", result.n_runs, result.test)
        from_C = gate.C_sat / 4 if gate.C_sat is not None else None
        slope = _vertex_reading(vertex.vertex_shift(main, Y, from_C)[0])
        return replace(
            result, note="; ".join(x for x in (result.note, gate.reason, slope, secondary) if x)
        )

    return run


def optimum_at_end(df: pl.DataFrame, metric: str) -> tuple[dict, vertex.CheckpointFits]:
    """The vertex row (`isolab.verdicts.vertex.vertex_table`) of the last checkpoint of `df`, with the fits."""
    means = vertex.checkpoint_means(df, [metric])
    last = means.filter(pl.col("lc") == pl.col("lc").max())
    fits = vertex.fit_checkpoints(last, metric)
    rows = vertex.vertex_table(fits, vertex.pure_error(df, metric)).to_dicts() if fits.lc else []
    return (rows[-1] if rows else {}), fits


def slope_at_end(df: pl.DataFrame, metric: str) -> tuple[float, float, int]:
    """The linear slope of the seed-mean `metric` in log2 n at the last checkpoint (plus log2
    B_p where it varies): (slope per doubling of n, its OLS SE, residual df). Defined whether
    or not the optimum is interior: the boundary-proof reading of where the best n lies."""
    means = vertex.checkpoint_means(df, [metric])
    last = means.filter(pl.col("lc") == pl.col("lc").max())
    fits = vertex.fit_checkpoints(last, metric, power=1)
    if not fits.lc:
        return math.nan, math.nan, 0
    V = fits.cov(0, 0)
    return float(fits.coef[0][1]), math.sqrt(max(V[1, 1], 0.0)), fits.dof[0]


def _easy_above_hard(data: Data) -> StatResult:
    """log2 n* at the largest compute, Easy − Hard: tested only where both optima are
    interior; the slopes of avg@4 in log2 n there (Easy − Hard) are the secondary reading."""
    main = data["main"]
    ends, slopes, dofs = {}, {}, {}
    for split in ("easy", "hard"):
        ends[split], fits = optimum_at_end(on_split(main, split), Y)
        dofs[split] = fits.dof[-1] if fits.lc else 0
        slopes[split] = slope_at_end(on_split(main, split), Y)
    (se_, sse, de), (sh, ssh, dh) = slopes["easy"], slopes["hard"]
    diff, sd = se_ - sh, math.sqrt(sse**2 + ssh**2)
    q = t_quantile(min(de, dh)) if min(de, dh) > 0 else math.nan
    secondary = (
        f"secondary reading: slope of avg@4 per doubling of n at the largest C, Easy {se_:+.3f}, "
        f"Hard {sh:+.3f}, Easy − Hard {diff:+.3f} ({CI_LEVEL} CI [{diff - q * sd:+.3f}, "
        f"{diff + q * sd:+.3f}])"
    )
    runs = main[RUN_KEY].n_unique()
    test = (
        "vertex of a quadratic in log2 n (+ log2 B_p) of the seed-mean avg@4 per configuration "
        "at the largest compute, per split (delta method); Easy − Hard"
    )
    missing = [s for s in ("easy", "hard") if not ends[s]]
    if missing:
        return StatResult.refused(
            f"no {', '.join(missing)} runs at the largest C; {secondary}", runs, test
        )
    bad = [
        f"{s.capitalize()}: {ends[s]['reason']}"
        for s in ("easy", "hard")
        if not ends[s]["qualifies"]
    ]
    if bad:
        return StatResult.refused(
            "both optima must be interior: " + "; ".join(bad) + f"; {secondary}", runs, test
        )
    e, h = ends["easy"], ends["hard"]
    return StatResult.from_t(
        e["log2_n_star"] - h["log2_n_star"],
        math.sqrt(e["se"] ** 2 + h["se"] ** 2),
        min(dofs.values()),
        n_runs=runs,
        test=test,
        note=f"n* ≈ {e['n_star']:.3g} on Easy, {h['n_star']:.3g} on Hard at C = "
        f"{e['C']:,.0f}; {secondary}",
        extra={
            "log2_best_easy": e["log2_n_star"],
            "log2_best_hard": h["log2_n_star"],
            "slope_easy": se_,
            "slope_hard": sh,
        },
    )


NSTAR_SHIFT = (
    "doublings of n between the crossing's winners (log2 n_b − log2 n_a; > 0: n* grows, < 0: "
    "it falls)"
)
CLAIMS = (
    Claim(
        id="nstar.grows_easy",
        study="nstar",
        text="n* grows with compute (Playbook)",
        split="easy",
        expected="> 0",
        unit=NSTAR_SHIFT,
        run=_nstar_grows("easy"),
        readings=matched_readings("main", "easy", term="slope"),
    ),
    Claim(
        id="nstar.grows_hard",
        study="nstar",
        text="n* grows with compute (Playbook)",
        split="hard",
        expected="> 0",
        unit=NSTAR_SHIFT,
        run=_nstar_grows("hard"),
        readings=matched_readings("main", "hard", term="slope"),
    ),
    Claim(
        id="nstar.easy_above_hard",
        study="nstar",
        text="n* is larger on Easy than on Hard at large compute (≈512 vs ≈128 for Qwen2.5-7B)",
        split=None,
        expected="> 0",
        unit="log2 n*, Easy − Hard, at the largest compute",
        run=_easy_above_hard,
        readings=matched_per_split(),
    ),
)
