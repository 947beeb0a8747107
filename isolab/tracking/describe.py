"""What a run is, in a sentence: the descriptions MLflow's UI shows on a run's page and above
an experiment's runs table (MLflow's `mlflow.note.content` tag, Markdown), and the short run
names that carry a point's grid coordinates.

Pure functions of a run's params and last metric values; `parents` and `importing` write them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from isolab.tracking.run_figure import FIGURE_FILE
from isolab.tracking.tags import canonical_key, mlflow_key
from isolab.tracking.views import eval_key
from isolab.vocab import (
    EVAL_PREFIX,
    FLOPS_LEARNING,
    FLOPS_REWARD,
    FLOPS_SEARCH,
    FLOPS_TOTAL,
    RHO,
    ROLLOUTS,
)

#: MLflow's description tag, on runs and on experiments: the UI renders it as Markdown.
NOTE_TAG = "mlflow.note.content"
#: How a sweep's description opens (`sweep_note`): a description that does not is a person's.
SWEEP_NOTE_START = "**Sweep `"
#: Where a sweep's description sends a reader for its answer when it was not stated with it (a
#: sweep still running, an import): the one recommendation, hedged by the runs' noise and
#: checked on held-out compute (`isolab.frontier.answer`).
ANSWER = (
    "Which allocation to use at a budget, with the runs' noise and the n within it of the best: "
    "`isolab report {name}`. The highest final score alone is a maximum over noisy runs, not "
    "an answer."
)


def point_name(run_name: str, seed: Any) -> str:
    """A run's name with its seed (`tiny-m·easy·n8·bp16·s0`): the runs of one grid point
    differ only by it, and the UI shows names only."""
    suffix = f"·s{seed}"
    return run_name if seed is None or run_name.endswith(suffix) else run_name + suffix


def _num(value: Any) -> str:
    """1234567 → 1,234,567; 4.46e14 → 4.46e+14; 0.61729 → 0.617."""
    x = float(value)
    if x.is_integer() and abs(x) < 1e9:
        return f"{int(x):,}"
    return f"{x:.3g}" if abs(x) >= 1e9 or abs(x) < 1e-3 else f"{x:.3f}"


def _final(metrics: Mapping[str, float], key: str) -> float | None:
    """The last value of metric `key` (isolab's name or MLflow's) in `metrics`."""
    value = metrics.get(mlflow_key(key), metrics.get(canonical_key(key)))
    return None if value is None else float(value)


def _label(key: str) -> str:
    """`eval/avg_at_4` → `avg@4`."""
    return canonical_key(key).removeprefix(EVAL_PREFIX)


def avg_key(metrics: Iterable[str]) -> str | None:
    """MLflow's name of the avg@k a run logged that its description quotes: avg@4, else the
    largest k."""
    return eval_key("avg", {mlflow_key(k) for k in metrics})


def run_note(
    params: Mapping[str, Any], metrics: Mapping[str, float], figure_link: str | None = None
) -> str:
    """A training run's description: its grid point, and where it ended — avg@k, the compute
    spent (rollouts, FLOPs and their split) and ρ; `figure_link` opens its FLOP-split figure.
    `metrics` holds last values (MLflow's names or isolab's)."""
    point = ", ".join(f"{p} = {params[p]}" for p in ("n", "B_p", "M") if p in params)
    seed = f", seed {params['seed']}" if "seed" in params else ""
    setting = " · ".join(str(params[p]) for p in ("model", "split", "reward") if p in params)
    lines = [f"**{point}{seed}**" + (f" ({setting})" if setting else "")]
    avg = avg_key(metrics)
    rollouts, total = _final(metrics, ROLLOUTS), _final(metrics, FLOPS_TOTAL)
    ended = []
    if avg is not None:
        ended.append(f"final {_label(avg)} **{_num(_final(metrics, avg))}**")
    if rollouts is not None:
        ended.append(f"after C = {_num(rollouts)} rollouts")
    if total:
        shares = [
            f"{name} {100 * (_final(metrics, key) or 0.0) / total:.0f}%"
            for key, name in (
                (FLOPS_SEARCH, "search"),
                (FLOPS_LEARNING, "learning"),
                (FLOPS_REWARD, "reward"),
            )
        ]
        ended.append(f"{_num(total)} model FLOPs ({', '.join(shares)})")
    rho = _final(metrics, RHO)
    if rho is not None:
        ended.append(f"ρ = {rho:.3f}")
    if ended:
        lines.append(", ".join(ended) + ".")
    figure = f"[{FIGURE_FILE}]({figure_link})" if figure_link else f"`{FIGURE_FILE}` (Artifacts)"
    lines.append(f"The FLOP split and ρ against compute: {figure}.")
    return "\n\n".join(lines)


def sweep_note(
    name: str,
    points: list[dict[str, Any]],
    *,
    table_link: str | None = None,
    charts_link: str | None = None,
    parent_link: str | None = None,
    answer: Sequence[str] = (),
) -> str:
    """A sweep's description: its grid (the values each coordinate takes), where its answer is
    stated, and links to its runs table, its charts against compute and the run holding its
    analysis. `points` are the runs' names, params and last metrics (dicts with `name`,
    `params` and `metrics`); `answer`, the sentences `isolab.frontier.answer.stated` made from
    the finished runs (the sweep layer computes them: this one reads no fits).

    It names no best point of its own: the highest final score is a maximum over noisy runs,
    and once named a winner without its noise (0.188 for n8·bp2) where the report, hedging,
    advised another of a tie. It states `answer`, the sentence `isolab frontier`, `isolab
    report` and notebook 02 print; without one, it sends the reader to `isolab report`
    (`ANSWER`)."""
    lines = [f"{SWEEP_NOTE_START}{name}`**: {len(points)} runs, one per grid point and seed."]
    grid = []
    for p in ("model", "split", "reward", "n", "B_p", "M", "seed"):
        values = {pt["params"][p] for pt in points if p in pt["params"]}
        if values:
            grid.append(f"{p} ∈ {{{', '.join(sorted(map(str, values), key=_order))}}}")
    if grid:
        lines.append("Grid: " + "; ".join(grid) + ".")
    if answer:
        lines.extend(answer)
    elif any(avg_key(pt["metrics"]) is not None for pt in points):
        lines.append(ANSWER.format(name=name))
    links = [
        f"[{text}]({url})"
        for text, url in (
            ("the runs, best first", table_link),
            ("their metrics against compute", charts_link),
            ("the sweep's run: its analysis, figures and table of points", parent_link),
        )
        if url
    ]
    if links:
        lines.append("Open " + " · ".join(links) + ".")
    return "\n\n".join(lines)


def _order(value: str) -> tuple[int, float, str]:
    """Numbers in numeric order, before words."""
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)
