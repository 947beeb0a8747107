"""01 · The healthy recipe: KL + entropy on or off per split, and LR scaling with the batch."""

from __future__ import annotations

import polars as pl

from isolab import plots
from isolab.study import claims, summaries
from isolab.study.healthy_recipe import lr_exponent
from isolab.study.report import Report, X, Y, add_noise, figure_row, fmt, splits_of
from isolab.verdicts import testbed
from isolab.vocab import RUN_KEY


def healthy_recipe(data: dict[str, pl.DataFrame], scale: str = "cpu") -> Report:
    """KL + entropy on/off per split; final reward against B per LR-scaling rule."""
    rep = Report("healthy-recipe", scale)
    reg, lr = data["regularisers"], data["lr-scaling"]

    fin = summaries.final(reg, ["split", "recipe"], Y)
    rep.tables["regularisers"] = fin
    splits = splits_of(reg)
    fig, axes = figure_row(len(splits))
    for ax, split in zip(axes, splits, strict=True):
        ax.set_xscale("log")
        cur = summaries.curves(reg.filter(pl.col("split") == split), ["recipe"], X, Y)
        plots.plot_curves(cur, ax, x=X, y=Y, by="recipe")
        ax.set_title(f"{split} split: KL + entropy on (kl_entropy) or off (none)", fontsize="small")
    rep.figures["regularisers"] = plots.tidy(fig)

    for split in splits:
        rows = {r["recipe"]: r for r in fin.filter(pl.col("split") == split).iter_rows(named=True)}
        on, off = rows.get("kl_entropy"), rows.get("none")
        if on is None or off is None:
            continue
        rep.findings[f"regularisers_{split}"] = {"on": on, "off": off}
        rep.summary.append(
            f"{split.capitalize()} split: with KL + entropy avg@4 goes {fmt(on['base'])} → "
            f"{fmt(on['final'])} (±{fmt(on['final_std'])} over {on['n_seeds']} seeds), without "
            f"{fmt(off['base'])} → {fmt(off['final'])} (±{fmt(off['final_std'])})."
        )
    add_noise(rep, reg)

    fin_lr = summaries.final(lr, ["lr_scaling", "B"], Y)
    rep.tables["lr_scaling"] = fin_lr
    fig, axes = figure_row(1)
    axes[0].set_xscale("log", base=2)
    plots.plot_final(fin_lr, axes[0], x="B", by="lr_scaling", y_label="final avg@4")
    B_base = int(lr["B_base"][0]) if "B_base" in lr.columns else 64
    axes[0].axvline(B_base, color="0.6", ls=":", lw=1)
    axes[0].set_title(f"η = η_base·f(B / B_base), B_base = {B_base} (dotted)", fontsize="small")
    rep.figures["lr_scaling"] = plots.tidy(fig)
    means = (
        fin_lr.filter(pl.col("B") != B_base)
        .group_by("lr_scaling")
        .agg(pl.col("final").mean())
        .sort("final", descending=True)
    )
    rep.findings["lr_scaling"] = dict(zip(means["lr_scaling"], means["final"], strict=True))
    listing = ", ".join(f"{r} {fmt(v)}" for r, v in means.select("lr_scaling", "final").rows())
    rep.summary.append(
        f"LR scaling, final avg@4 averaged over the batches B ≠ {B_base} where the rules differ: "
        f"{listing}."
    )
    if "lr-grid" in data:
        _lr_grid(rep, data["lr-grid"])
    old = {sweep: testbed.old_testbed(df) for sweep, df in data.items()}
    rep.findings["testbed"] = old
    if any(old.values()):
        rep.summary.append(
            "These runs are on the old testbed ("
            + "; ".join(
                f"{s}: {why.removeprefix('untested (old testbed: ').rstrip(')')}"
                for s, why in old.items()
                if why
            )
            + "): their claims are untested until re-run on the new one."
            + (
                " η ∝ sqrt(B) is tested on the new testbed's (B, lr) grid (`lr-grid`) instead."
                if "lr-grid" in data
                else f" The re-test of η ∝ sqrt(B) is pre-registered as a (B, lr) grid "
                f"({lr_exponent.SPEC}): the exponent of the best lr in B against 0, 0.5 and 1."
            )
        )
    rep.add_verdicts(claims.evaluate("healthy-recipe", data))
    return rep


def _lr_grid(rep: Report, grid: pl.DataFrame) -> None:
    """The (B, lr) grid: final avg@4 against lr at each B (seed mean ± std), each B's best lr
    (the fitted vertex, `lr_exponent.best_lr_exponent`) marked, and the exponent in words."""
    fin = summaries.final(grid, ["B", "lr"], Y).sort("B", "lr")
    rep.tables["lr_grid"] = fin
    fig, axes = figure_row(1)
    axes[0].set_xscale("log", base=2)
    plots.plot_final(fin, axes[0], x="lr", by="B", y_label="final avg@4")
    fit = lr_exponent.best_lr_exponent(grid, Y)
    for opt in fit.extra.get("optima", []):
        axes[0].axvline(2 ** opt["vertex"], color="0.6", ls=":", lw=1)
    axes[0].set_title(
        f"best lr ∝ B^{fit.estimate:.2f} (dotted: each B's fitted best lr)", fontsize="small"
    )
    rep.figures["lr_grid"] = plots.tidy(fig)
    rep.findings["lr_grid"] = {"exponent": fit.estimate, "interval": list(fit.interval or ())}
    rep.summary.append(
        f"LR grid on the new testbed ({grid[RUN_KEY].n_unique()} runs, B = "
        f"{', '.join(str(b) for b in sorted(set(grid['B'].to_list())))}): {fit.note}."
    )
