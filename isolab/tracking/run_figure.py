"""The figure every run carries (`figures/flop_split.png`): where its compute went.

Left, the FLOP ledger's cumulative split — search (generating rollouts), learning (policy
forward and backward), reward (a reward model's forwards) — stacked against the rollouts done,
so the top line is `flops/total`; right, ρ = C_learning / C_total (Wilhelm & Kao's update
fraction) against the same axis. MLflow's own charts show the three FLOP metrics as three
unrelated panels of raw numbers; this is the one picture of them.

Logged at the end of training (`logger.RunLogger.end`) and by an import (`importing`), from
the run's metric history: a tidy frame of `key`, `step`, `value`. One panel, ρ on a second
y-axis: an import draws 72 of these, and a second panel costs as much again (≈ 0.1 s of CPU
against 0.07 s a figure, measured).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from isolab.vocab import FLOPS_LEARNING, FLOPS_REWARD, FLOPS_SEARCH, RHO, ROLLOUTS, STEP

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Where the figure goes among a run's artifacts.
FIGURE_FILE = "figures/flop_split.png"
#: The ledger's components, bottom to top, with their colours (Wilhelm & Kao's three terms).
COMPONENTS = (
    (FLOPS_SEARCH, "search", "#4C72B0"),
    (FLOPS_LEARNING, "learning", "#DD8452"),
    (FLOPS_REWARD, "reward", "#55A868"),
)
KEYS = (ROLLOUTS, RHO, *(key for key, _, _ in COMPONENTS))


def compute_curves(history: pl.DataFrame) -> pl.DataFrame:
    """One row per step that logged the rollouts so far: `compute/rollouts`, `compute/rho` and
    the cumulative `flops/*` of each component (0 for a component the run never logged),
    sorted by rollouts. `history` has columns `key`, `step`, `value` (MLflow's metric
    history, or a snapshot's `history.parquet`)."""
    rows = history.filter(pl.col("key").is_in(KEYS)).select("key", STEP, "value")
    if rows.is_empty() or ROLLOUTS not in set(rows["key"]):
        return pl.DataFrame(schema={k: pl.Float64 for k in KEYS})
    wide = rows.pivot(on="key", index=STEP, values="value", aggregate_function="last")
    wide = wide.with_columns(
        [pl.lit(0.0).alias(k) for k, _, _ in COMPONENTS if k not in wide.columns]
        + ([pl.lit(None, pl.Float64).alias(RHO)] if RHO not in wide.columns else [])
    )
    return (
        wide.filter(pl.col(ROLLOUTS).is_not_null())
        .with_columns(
            pl.col(k).fill_null(strategy="forward").fill_null(0.0) for k, _, _ in COMPONENTS
        )
        .sort(ROLLOUTS, STEP)
        .select(ROLLOUTS, RHO, *(k for k, _, _ in COMPONENTS))
    )


def _rollouts_axis(ax: Axes) -> None:
    """x: compute in rollouts, with short tick labels (20k, not 20000)."""
    from matplotlib.ticker import EngFormatter, MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(5))
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.set_xlabel("compute C (rollouts)")


def plot_flop_split(curves: pl.DataFrame, ax: Axes) -> Axes:
    """Cumulative FLOPs by component, stacked, against rollouts (`compute_curves`); each
    component's share of the total in the legend. Replaces a stack drawn on `ax` before."""
    x = curves[ROLLOUTS].to_numpy()
    ys = [curves[k].to_numpy() for k, _, _ in COMPONENTS]
    total = sum(float(y[-1]) for y in ys) if len(x) else 0.0
    labels = [
        f"{name} {100 * float(y[-1]) / total:.0f}%" if total else name
        for (_, name, _), y in zip(COMPONENTS, ys, strict=True)
    ]
    colors = [color for _, _, color in COMPONENTS]
    for old in list(ax.collections):
        old.remove()
    ax.stackplot(x, *ys, labels=labels, colors=colors, alpha=0.85)
    ax.relim()
    ax.autoscale_view()
    _rollouts_axis(ax)
    ax.set_ylabel("model FLOPs, cumulative")
    ax.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    return ax


def plot_rho(curves: pl.DataFrame, ax: Axes) -> Axes:
    """ρ = C_learning / C_total, cumulative, against rollouts (`compute_curves`), labelled
    with its last value. Replaces a ρ line drawn on `ax` before."""
    rho = curves.filter(pl.col(RHO).is_not_null())
    x, y = rho[ROLLOUTS].to_numpy(), rho[RHO].to_numpy()
    label = f"ρ = {y[-1]:.3f}" if len(y) else "ρ"
    if ax.lines:
        ax.lines[0].set_data(x, y)
        ax.lines[0].set_label(label)
    else:
        ax.plot(x, y, color="black", lw=2, label=label)
    ax.set_ylim(0, 1)
    ax.set_ylabel("ρ = C_learning / C_total")
    return ax


class RunFigures:
    """Runs' figures (`run_figure`), drawn one after another on one matplotlib figure: an
    import draws 72, and redrawing one figure's data costs a third less than making each
    anew (0.08 s against 0.12 s of CPU a figure, measured). One thread at a time."""

    def __init__(self) -> None:
        self._axes: tuple[Figure, Axes, Axes] | None = None

    def draw(self, history: pl.DataFrame, title: str = "") -> Figure | None:
        """The run's figure; None when its history has no rollouts to plot against. The
        figure is this object's: save it before drawing the next."""
        curves = compute_curves(history)
        if curves.is_empty():
            return None
        if self._axes is None:
            from matplotlib.figure import Figure

            # `Figure`, not pyplot: no global registry to leak figures into; a fixed layout:
            # constrained layout doubles the drawing time
            fig = Figure(figsize=(7, 3.6), dpi=90)
            flops = fig.subplots()
            fig.subplots_adjust(left=0.1, right=0.88, bottom=0.14, top=0.86)
            self._axes = (fig, flops, flops.twinx())
        fig, flops, rho = self._axes
        plot_flop_split(curves, flops)
        plot_rho(curves, rho)
        handles = [h for ax in (flops, rho) for h in ax.get_legend_handles_labels()[0]]
        flops.legend(handles=handles, loc="upper left", fontsize="small")
        fig.suptitle(title or "FLOP split and ρ against compute", fontsize="medium")
        return fig

    def save(self, history: pl.DataFrame, folder: Path, title: str = "") -> bool:
        """Save the run's figure as `folder / FIGURE_FILE` (a folder of artifacts to log at
        once); False when there was nothing to plot."""
        fig = self.draw(history, title)
        if fig is None:
            return False
        path = folder / FIGURE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
        return True


def run_figure(history: pl.DataFrame, title: str = "") -> Figure | None:
    """The FLOP split, stacked, and ρ on a second y-axis, against rollouts; None when the
    history has no rollouts to plot against."""
    return RunFigures().draw(history, title)


def log_run_figure(client: Any, run_id: str, history: pl.DataFrame, title: str = "") -> bool:
    """Draw and log the run's figure as `FIGURE_FILE`; False when there was nothing to plot."""
    fig = run_figure(history, title)
    if fig is None:
        return False
    client.log_figure(run_id, fig, FIGURE_FILE)
    return True


def stored_history(client: Any, run_id: str) -> pl.DataFrame:
    """The metric history `run_figure` reads, from the store (a few keys: a few queries)."""
    rows = [
        (m.key, m.step, m.value) for key in KEYS for m in client.get_metric_history(run_id, key)
    ]
    return pl.DataFrame(
        rows, schema={"key": pl.Utf8, STEP: pl.Int64, "value": pl.Float64}, orient="row"
    )
