"""05 · Reward systems and the update fraction ρ at equal FLOPs; the RACE pilot."""

from __future__ import annotations

import polars as pl

from isolab import frontier as fr
from isolab import plots
from isolab.study import claims
from isolab.study.report import Report, Y, add_noise, figure_row, fmt, n_boot
from isolab.study.reward_rho.optimum import best_cells
from isolab.study.reward_rho.race import regime_calls
from isolab.vocab import FLOPS_PREFIX, FLOPS_TOTAL, RHO, RUN_ID, RUN_KEY, STEP


def _flop_shares(df: pl.DataFrame) -> pl.DataFrame:
    """Per (reward, μ): each run's final avg@4, ρ and FLOP shares, averaged over seeds."""
    key = RUN_KEY if RUN_KEY in df.columns else RUN_ID
    last = df.filter(pl.col(STEP) == pl.col(STEP).max().over(key))
    return (
        last.group_by("reward", "num_iterations")
        .agg(
            pl.col(Y).mean().alias("final"),
            pl.col(RHO).mean().alias("rho"),
            pl.col(FLOPS_TOTAL).mean().alias("flops"),
            *[
                (pl.col(f"{FLOPS_PREFIX}{c}") / pl.col(FLOPS_TOTAL)).mean().alias(f"share_{c}")
                for c in ("search", "learning", "reward")
            ],
            pl.col(key).n_unique().alias("n_seeds"),
        )
        .sort("reward", "num_iterations")
    )


def reward_rho(data: dict[str, pl.DataFrame], scale: str = "cpu") -> Report:
    """ρ frontier per reward system at iso-FLOP, ρ*, and the RACE pilot's regime calls."""
    rep = Report("reward-rho", scale)
    full, pilot = data["full"], data["pilot"]
    rho = fr.rho_frontier(full, y=Y, n_boot=n_boot(scale))
    race = fr.race(pilot, full, y=Y)
    fig, axes = figure_row(2)
    plots.plot_rho_frontier(rho, axes[0])
    plots.plot_race(race, axes[1])
    rep.figures["rho_frontier"] = plots.tidy(fig)
    rep.tables["runs"] = _flop_shares(full)
    rep.tables["rho_fits"] = rho.fits
    rep.tables["race"] = race.table
    calls = regime_calls(full, Y)
    for r in rho.fits.iter_rows(named=True):
        call = calls.get(str(r["reward"]), {}).get("call")
        star = f"ρ* = {fmt(r['rho_star'], 2)} (CI [{fmt(r['rho_lo'], 2)}, {fmt(r['rho_hi'], 2)}])"
        rep.summary.append(
            f"{r['reward']}: "
            + (
                star
                if r["status"] == "ok"
                else f"{star}, uncertain: {r['reason']}"
                if r["status"] == "extrapolated"
                else f"ρ* not identifiable ({r['reason']}); best configuration at ρ = "
                f"{fmt(r['rho_best_observed'], 2)}"
            )
            + f", {r['n_runs']} runs in the IsoFLOP band; regime "
            + (
                f"{call} (every configuration not worse than the best shares it)."
                if call
                else "not resolved (configurations not worse than the best span two regimes)."
            )
        )
    rep.findings = {
        "best_cells": best_cells(full, Y).to_dicts(),
        "band": list(rho.band),
        "regimes_full": calls,
        "regimes_pilot": regime_calls(pilot, Y),
        "pilot_flops_fraction": race.pilot_flops_fraction,
    }
    rep.summary.append(
        f"RACE: the pilot spends ≈{race.pilot_flops_fraction:.0%} of the full grid's FLOPs; a "
        "regime call is compared only where both grids span two regimes and resolve one."
    )
    add_noise(rep, full)
    rep.add_verdicts(claims.evaluate("reward-rho", data))
    return rep
