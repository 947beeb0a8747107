"""Where each class of reward systems puts its best update fraction ρ* (Wilhelm & Kao, arXiv
2607.13389: rule-based rewards favour ρ* ≈ 0.72, PRM-style ones ρ* ≈ 0.44), tested as the
vertex of a concave response in logit ρ, and what part of the gap is the reward model's FLOPs.

The design moves ρ = C_learning / C_total with two knobs (`RHO_GRID`): the search oversampling
k (generate k·B_p groups, train on the B_p most varied: search and reward FLOPs grow with k, so
ρ falls) and the update passes μ (`num_iterations`: learning FLOPs grow with μ, so ρ rises).

- `rho_optimum_difference`: Δ = logit ρ*_rule − logit ρ*_model, the paper's estimand
  (logit 0.72 − logit 0.44 ≈ 1.19).
- `learning_to_search`: the same vertex test on ln(C_learning / C_search), the axis on which
  the reward model's FLOPs do not count: it separates accounting from preference.
- `best_cells`, `knob_caveat`: each system's best (k, μ) cell, and the caveat it puts on ρ*
  (issue 46: on the committed runs every system is best at k = 1).
- their calibration, simulated sweeps of that design: `isolab.study.reward_rho.worlds`.

Why logit ρ and not ρ: with S, L, R the search, learning and reward FLOPs,
``logit ρ = ln(L / (S + R)) = ln(L / S) − ln(1 + R / S)``. Learning grows with μ and search and
reward with k, so ln(L / S) = ln(ℓ·μ / k) moves with the knobs alone, and a reward model that
costs r = R / S shifts a system's whole axis by −ln(1 + r): on logit ρ accounting is a
translation, where on ρ it is a compression near 1 that differs per class (what confounded the
earlier test of slopes in raw ρ between classes).

What the two estimands answer: a world where every system responds identically to the knobs
(the same best L / S) still has rule-based systems reach their best at a larger ρ, by exactly
the reward model's ln(1 + r). That is the paper's claim as stated ("the reward model eats
budget"), so `rho_optimum_difference` calls it; `learning_to_search` does not (its Δ is 0
there), and calls only a difference in the preferred learning / search balance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import polars as pl
from scipy import special, stats

from isolab.table import final_rows
from isolab.verdicts.ols import hc3_arrays
from isolab.verdicts.quadratic import quadratic_vertex
from isolab.verdicts.result import ALPHA, StatResult
from isolab.vocab import (
    EVAL_AVG,
    FLOPS_LEARNING,
    FLOPS_REWARD,
    FLOPS_SEARCH,
    MODEL_BASED,
    RHO,
    RULE_BASED,
)

Axis = Literal["logit_rho", "learning_to_search"]

#: The design column of the search oversampling k (`RunConfig.search_oversample`: k·B_p groups
#: generated, the B_p most varied trained on).
OVERSAMPLING = "search_oversample"
#: (k, μ) of the pre-registered design: ρ falls with k, rises with μ.
RHO_GRID: tuple[tuple[int, int], ...] = ((8, 1), (4, 1), (2, 1), (1, 1), (1, 2), (1, 4))
#: C_learning / C_search of one update pass at k = 1, as runs/reward-rho/cpu/full measured it
#: (tiny-m, n = 8, B_p = 8, μ = 1: 4.51 for every reward system).
LEARNING_PER_SEARCH = 4.51
#: C_reward / C_search at any k (the reward model scores every generated group), measured on
#: the same table; rule-based systems cost 0.
REWARD_PER_SEARCH: dict[str, float] = {"orm": 1.127, "prm": 1.127, "proxy-prm": 3.776}
#: The paper's optima (Wilhelm & Kao, from the abstract's summary; not verified in full text).
PAPER_RHO_RULE, PAPER_RHO_MODEL = 0.72, 0.44
#: Response used to calibrate: avg@4 falls 0.03 one logit unit from the vertex (0.12 at two).
#: On runs/reward-rho/cpu/full (μ alone moves ρ) this test's quadratic has −0.078 per logit² for
#: the rule-based systems and none resolved for the model-based ones, so 0.03 is a cautious
#: middle; the design keeps power 0.96 at 0.012 and 0.85 at 0.010 (`calibration_table`).
CURVATURE = 0.03
#: Noise of one run's final avg@4 on that table: training (seed) SD 0.029, evaluation SD
#: 0.0086 (106 problems × 16 samples), a tenth of the training variance shared by a seed's runs.
SEED_SD, EVAL_SD, SEED_SHARE = 0.03, 0.008, 0.1

LABELS = ("rule-based", "model-based")


def logit(p: float) -> float:
    return math.log(p / (1 - p))


def expit(x: float) -> float:
    """The inverse of `logit` (scipy's, which does not overflow far from 0)."""
    return float(special.expit(x))


@dataclass(frozen=True)
class _ClassFit:
    """One class's quadratic in the axis: vertex (axis units), its SE, curvature and range."""

    label: str
    vertex: float
    se: float
    curvature: float
    p_curvature: float
    lo: float
    hi: float
    runs: int


def axis_values(axis: Axis) -> pl.Expr:
    if axis == "logit_rho":
        return (pl.col(RHO) / (1 - pl.col(RHO))).log()
    return (pl.col(FLOPS_LEARNING) / pl.col(FLOPS_SEARCH)).log()


def _dummies(values: np.ndarray, drop_first: bool) -> np.ndarray:
    levels = np.unique(values)
    cols = levels[1:] if drop_first else levels
    return (values[:, None] == cols[None, :]).astype(float)


def _vertex_test(
    df: pl.DataFrame,
    metric: str,
    axis: Axis,
    group: str,
    first: Sequence[str],
    second: Sequence[str],
    labels: tuple[str, str],
) -> tuple[StatResult, list[_ClassFit]]:
    """Fit y ~ system + seed + per class (x − x̄_class) + (x − x̄_class)², HC3; the vertex of
    each class and Δ = vertex_first − vertex_second by the delta method, behind the gates."""
    name = "logit ρ" if axis == "logit_rho" else "ln(C_learning / C_search)"
    rows = (
        final_rows(df, metric)
        .lazy()
        .filter(pl.col(group).is_in([*first, *second]))
        .with_columns(_x=axis_values(axis), _first=pl.col(group).is_in(list(first)))
        .filter(pl.col("_x").is_finite())
        .collect()
    )
    is_first = rows["_first"].to_numpy()
    n = rows.height
    for mask, label in ((is_first, labels[0]), (~is_first, labels[1])):
        distinct = np.unique(np.round(rows["_x"].to_numpy()[mask], 2)).size
        if distinct < 3:
            return StatResult.refused(
                f"{label} runs reach {distinct} distinct value(s) of {name}: a vertex needs ≥ 3",
                n,
            ), []
    y = rows[metric].to_numpy().astype(float)
    x = rows["_x"].to_numpy().astype(float)
    centre = {True: x[is_first].mean(), False: x[~is_first].mean()}
    xc = x - np.where(is_first, centre[True], centre[False])
    blocks = [_dummies(rows[group].cast(pl.String).to_numpy(), drop_first=False)]
    if "seed" in rows.columns and rows["seed"].n_unique() > 1 and not rows["seed"].null_count():
        blocks.append(_dummies(rows["seed"].cast(pl.String).to_numpy(), drop_first=True))
    slopes = [m * xc**k for m in (is_first, ~is_first) for k in (1, 2)]
    X = np.column_stack([*blocks, *slopes])
    beta, cov, dof = hc3_arrays(X, y)
    if dof < 2:
        return StatResult.refused(f"{n} runs for {X.shape[1]} parameters: too few", n), []
    j = X.shape[1] - 4  # the class terms: b1 first, b2 first, b1 second, b2 second
    fits, grads = [], []
    for c, (mask, label) in enumerate(((is_first, labels[0]), (~is_first, labels[1]))):
        b1, b2 = float(beta[j + 2 * c]), float(beta[j + 2 * c + 1])
        se_b2 = math.sqrt(cov[j + 2 * c + 1, j + 2 * c + 1])
        p_b2 = float(2 * stats.t.sf(abs(b2 / se_b2), dof)) if se_b2 > 0 else math.nan
        # vertex of b1·u + b2·u², u = x − x̄, with its delta-method gradient
        v, g = quadratic_vertex(b1, b2, float(centre[c == 0]))
        grad = np.zeros(X.shape[1])
        if b2 != 0:
            grad[j + 2 * c], grad[j + 2 * c + 1] = g
        grads.append(grad)
        finite = b2 != 0 and bool(np.all(np.isfinite(cov)))
        se = math.sqrt(max(float(grad @ cov @ grad), 0.0)) if finite else math.nan
        fits.append(
            _ClassFit(
                label=label,
                vertex=v,
                se=se,
                curvature=float(b2),
                p_curvature=p_b2,
                lo=float(x[mask].min()),
                hi=float(x[mask].max()),
                runs=int(mask.sum()),
            )
        )
    extra = {
        "axis": name,
        **{
            f.label: {
                "vertex": f.vertex,
                "vertex_se": f.se,
                **({"rho_star": expit(f.vertex)} if axis == "logit_rho" else {}),
                **(
                    {"ratio_star": float(np.exp(np.clip(f.vertex, -700, 700)))}
                    if axis != "logit_rho"
                    else {}
                ),
                "curvature": f.curvature,
                "p_curvature": f.p_curvature,
                "range": (f.lo, f.hi),
                "runs": f.runs,
            }
            for f in fits
        },
    }
    test = (
        f"vertex of a quadratic in {name} per class (OLS of final {metric} on a level per "
        f"{group}, per seed, and a quadratic per class; HC3, {dof} df; delta method): "
        f"{labels[0]} − {labels[1]}"
    )
    if not np.all(np.isfinite(cov)):
        reason = "a configuration seen once has no HC3 error (leverage 1): add seeds"
        return replace(StatResult.refused(reason, n, test), extra=extra), fits
    failed = []
    # The delta method divides by the curvature: near 0 the vertex and its SE blow up, and a
    # convex fit has a minimum, not an optimum. Only a clearly concave response has a best ρ.
    for f in fits:
        if not (f.curvature < 0 and f.p_curvature < ALPHA):
            failed.append(
                f"{f.label}: no interior optimum (curvature {f.curvature:.3g} per unit², "
                f"p = {f.p_curvature:.2g})"
            )
    # A vertex outside the runs' range is the quadratic's extrapolation, not a measurement.
    for f in fits:
        if f.curvature < 0 and not f.lo <= f.vertex <= f.hi:
            star = f"ρ* = {expit(f.vertex):.2f}, " if axis == "logit_rho" else ""
            failed.append(
                f"{f.label} optimum at the grid's edge: {star}vertex {name} {f.vertex:.2f} "
                f"outside its runs' [{f.lo:.2f}, {f.hi:.2f}]"
            )
    if failed:
        return replace(StatResult.refused("; ".join(failed), n, test), extra=extra), fits
    grad = grads[0] - grads[1]
    se = math.sqrt(max(float(grad @ cov @ grad), 0.0))
    result = StatResult.from_t(
        fits[0].vertex - fits[1].vertex, se, float(dof), n_runs=n, test=test, extra=extra
    )
    return result, fits


def rho_optimum_difference(
    df: pl.DataFrame,
    metric: str = EVAL_AVG,
    *,
    group: str = "reward",
    first: Sequence[str] = RULE_BASED,
    second: Sequence[str] = MODEL_BASED,
    labels: tuple[str, str] = LABELS,
) -> StatResult:
    """Δ = logit ρ*_first − logit ρ*_second: how much larger an update fraction the `first`
    class of reward systems (rule-based) prefers than the `second` (model-based).

    One row per run (its last evaluation with a finite `metric`, and its cumulative ρ there).
    OLS of the final metric on a level per system (`group`), a level per seed, and per class a
    linear and a quadratic term in logit ρ (centred on the class's mean); each class's ρ* is
    the vertex of its quadratic, and Δ's SE is the delta method's on the joint covariance.

    Errors: HC3 (`ols.hc3_arrays`), with seed fixed effects. The runs of one seed share their data order,
    an additive shift the seed levels absorb; what is left is independent across runs but not
    of equal variance (one system, or one ρ, can be noisier than another), which HC3 allows.
    Clustering by seed instead would leave 4 clusters: a t reference on 3 df and a covariance
    estimated from 4 scores, unreliable at that size. A seed bootstrap has only 35 distinct
    resamples of 4 seeds, and a vertex (a ratio) of a resample can diverge; the delta method's
    coverage is measured on simulated worlds instead (tests/test_rho_optimum.py).

    Gates (the result is refused, naming the gate, unless all pass): ≥ 3 distinct ρ per class;
    each class's curvature negative with p < α; each vertex inside the logit-ρ range its
    class's runs reached. `extra` holds both vertices (logit and ρ), their SEs, curvatures and
    p-values and ranges, refused or not."""
    return _vertex_test(df, metric, "logit_rho", group, first, second, labels)[0]


def learning_to_search(
    df: pl.DataFrame,
    metric: str = EVAL_AVG,
    *,
    group: str = "reward",
    first: Sequence[str] = RULE_BASED,
    second: Sequence[str] = MODEL_BASED,
    labels: tuple[str, str] = LABELS,
) -> StatResult:
    """Preference, with the accounting taken out: Δ = ln(C_learning / C_search)* of the
    `first` class − that of the `second`, the same vertex test and gates as
    `rho_optimum_difference` on the axis ln(flops/learning / flops/search), where a reward
    model's FLOPs do not count.

    Since logit ρ = ln(L / S) − ln(1 + R / S) for every run, the ρ* gap splits as
    ``Δ logit ρ* ≈ Δ ln(L / S)* + accounting``, accounting = mean ln(1 + R / S) of the second
    class's runs − that of the first's (the reward model's FLOPs per search FLOP). `extra`
    adds, per class, the ratio C_learning / C_search at its optimum (`ratio_star`) and its
    `reward_per_search` (mean R / S), and the split: `preference` (this Δ), `accounting`, and
    `implied_logit_gap` (their sum). A ρ* gap that is all accounting (preference ≈ 0) says
    both classes want the same learning per search FLOP, and the reward model's bill alone
    lowers the model-based ρ*."""
    result, fits = _vertex_test(df, metric, "learning_to_search", group, first, second, labels)
    rows = final_rows(df, metric).filter(pl.col(group).is_in([*first, *second]))
    if not fits or FLOPS_REWARD not in rows.columns:
        return result
    shift = {}
    for members, label in ((first, labels[0]), (second, labels[1])):
        part = rows.filter(pl.col(group).is_in(list(members)))
        r = (part[FLOPS_REWARD].fill_null(0.0) / part[FLOPS_SEARCH]).to_numpy()
        shift[label] = float(np.log1p(r).mean())
        result.extra.setdefault(label, {})["reward_per_search"] = float(r.mean())
    accounting = shift[labels[1]] - shift[labels[0]]
    preference = fits[0].vertex - fits[1].vertex
    result.extra.update(
        preference=preference, accounting=accounting, implied_logit_gap=preference + accounting
    )
    return result


def best_cells(df: pl.DataFrame, metric: str = EVAL_AVG, group: str = "reward") -> pl.DataFrame:
    """Per reward system (`group`), its best design cell: the (k, μ) whose seed-mean final
    `metric` is highest, with that mean."""
    knobs = [c for c in (OVERSAMPLING, "num_iterations") if c in df.columns]
    cells = final_rows(df, metric).group_by(group, *knobs).agg(pl.col(metric).mean())
    return (
        cells.sort(group, metric, descending=[False, True])
        .group_by(group, maintain_order=True)
        .head(1)
    )


def knob_caveat(df: pl.DataFrame, metric: str = EVAL_AVG, group: str = "reward") -> str:
    """`best_cells` as the caveat a ρ* finding carries: which systems do best at k = 1 (no
    oversampling), and that the ρ axis mixes k and μ."""
    if OVERSAMPLING not in df.columns or "num_iterations" not in df.columns:
        return ""
    best = best_cells(df, metric, group)
    at_one = best.filter(pl.col(OVERSAMPLING) == 1)
    cells = ", ".join(
        f"{r[group]} (k {r[OVERSAMPLING]}, μ {r['num_iterations']}: {r[metric]:.3f})"
        for r in best.iter_rows(named=True)
    )
    share = (
        f"all {best.height}"
        if at_one.height == best.height
        else f"{at_one.height} of {best.height}"
    )
    return (
        f"caveat: {share} reward systems do best at k = 1 (no oversampling): {cells}; the ρ axis "
        "mixes two knobs (k lowers ρ, μ raises it), so ρ* marks where oversampling stops hurting "
        "and extra passes stop helping, not one knob's optimum"
    )
