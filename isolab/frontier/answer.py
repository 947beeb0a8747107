"""A sweep's answer, stated once: the allocation `recommend` gives at the budget and what the
runs' noise lets one tell apart, in one sentence that every place printing an answer prints
word for word: `isolab frontier`, `isolab report`, notebook 02's summary and the sweep's MLflow
description. The experiment description once named the highest final score (0.188 for n8·bp2,
without its noise) while the report, hedging, advised another point of the same tie: two
answers to one question. Here there is one function, `stated`, and one way to read the runs,
`answers`.

The sentence leaves out n*'s bootstrap interval (it depends on the replicates a caller asks
for: `isolab frontier --n-boot`), so that a statement made with or without a bootstrap is the
same; the hedges beyond noise (the held-out checks, the grid's edge) follow it where there is
room (`Recommendation.hedges`).
"""

from __future__ import annotations

import logging
from typing import Any

from isolab.frontier.advice import Recommendation
from isolab.frontier.allocation import comparison_axis, groups
from isolab.frontier.recommend import recommend
from isolab.table import as_float, to_polars
from isolab.vocab import DEFAULT_X, DEFAULT_Y

log = logging.getLogger(__name__)

#: How a statement opens: the reader looks for it under this word in every output.
ANSWER_LABEL = "recommendation"


def stated(rec: Recommendation, label: str = "") -> str:
    """The answer in one sentence: the allocation at the budget (or why none is given there,
    and the furthest one vouched for) and the runs' noise — the n within noise of the best, or
    the lead beyond it, or a ranking without a margin — labelled by its setting."""
    title = f" ({label})" if label else ""
    sentence = "; ".join([rec.allocation(ci=False), *rec.noise_text])
    return f"{ANSWER_LABEL}{title}: {sentence}."


def answers(
    df: Any,
    *,
    x: str = DEFAULT_X,
    y: str = DEFAULT_Y,
    budget: float | None = None,
    n_boot: int = 0,
) -> list[str]:
    """The answer of a runs table (FINISHED runs) per setting, and per allocator where the runs
    vary `allocation` (read at equal FLOPs then, as `isolab frontier` does), each `stated`: at
    `budget`, by default the largest compute of that group's runs. Settings that vary no n, or lack
    B_p or `y`, have none. `n_boot` only narrows n*'s interval, which the sentence leaves out:
    0 by default (fast)."""
    df = to_polars(df)
    if not {"n", "B_p", y} <= set(df.columns):
        return []
    x, _ = comparison_axis(df, x, budget)  # equal FLOPs where allocators differ
    if x not in df.columns:
        return []
    out = []
    for group in groups(df):  # as `isolab frontier` reads them
        if group.frame["n"].n_unique() < 2:
            continue
        at = budget or as_float(group.frame[x].max())
        rec = recommend(group.frame, at, x=x, y=y, n_boot=n_boot)
        out.append(stated(rec, group.spoken))
    return out


def sweep_answers(experiment: str, uri: str, y: str = DEFAULT_Y) -> tuple[str, ...]:
    """`answers` of an experiment's FINISHED runs in the store at `uri`, for its MLflow
    description once a sweep has finished (`isolab.tracking.parents.finish_parent`): the
    statement `isolab frontier <experiment>` and `isolab report <experiment>` print. Best
    effort: runs that cannot be read or fitted leave no statement (the description then
    sends the reader to `isolab report`), and a warning, never a failed sweep."""
    from isolab.tracking.runs import load_runs

    try:
        return tuple(answers(load_runs(experiment, tracking_uri=uri), y=y))
    except (ValueError, RuntimeError, OSError) as exc:
        log.warning("no answer stated in the description of %s: %s", experiment, exc)
        return ()
