"""The statistical tests behind the verdicts: runs tables in, an estimate with its uncertainty out.

Every test reads the layout of `isolab.tracking.runs.load_runs` (one row per run × evaluation)
and models the two sources of noise a result carries: training (a run's seed) and evaluation
(sampling the validation problems). Runs of one configuration differ by both; so

- comparisons of configurations at the end of training are made within seeds when every arm ran
  every seed (OLS on configuration + seed: a seed fixes the data order and the sampling draws,
  which its runs share), else on the spread of seeds within configurations, pooled over all
  configurations of the sweep (one-way ANOVA residual); they refuse to test when no
  configuration has two seeds (the training noise is then unmeasured);
- slopes and interactions over the whole learning curve are regressions (statsmodels OLS) with
  one fixed effect per compute checkpoint and errors clustered by run (a run's evaluations share
  its seed), t-tests on G − 1 degrees of freedom for G runs.

Results carry the effect, its standard error, a two-sided p-value, the interval at 1 − α and the
smallest effect the design detects with 80% power (`isolab.verdicts.model.min_detectable`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from isolab.table import final_rows, run_column, with_cell
from isolab.verdicts.frames import cell_fit, pooled_seed_variance
from isolab.verdicts.model import ALPHA, holm, min_detectable, t_test
from isolab.verdicts.noise import eval_variance
from isolab.vocab import FLOPS_TOTAL, RHO, ROLLOUTS


@dataclass(frozen=True)
class TestResult:
    """An estimate and its uncertainty.

    Attributes:
        estimate: the effect, in the test's unit.
        se: its standard error.
        df: degrees of freedom of the t reference (inf: normal).
        p_value: two-sided p-value of "no effect" (Holm-adjusted where several looks).
        interval: the interval at 1 − α (96%: it excludes 0 exactly when p < α).
        mde: the effect detected with 80% power.
        n_runs: runs used.
        test: the test in words.
        note: a caveat, or why the test could not run (then estimate is NaN).
        extra: further numbers for the report (per-arm means, per-model slopes…).
    """

    estimate: float
    se: float
    df: float
    p_value: float | None
    interval: tuple[float, float] | None
    mde: float
    n_runs: int
    test: str
    note: str = ""
    extra: dict = field(default_factory=dict)

    @classmethod
    def refused(cls, reason: str, n_runs: int = 0, test: str = "not run") -> TestResult:
        return cls(math.nan, math.nan, math.nan, None, None, math.nan, n_runs, test, reason)

    @property
    def ran(self) -> bool:
        return math.isfinite(self.estimate)


def _from_t(estimate: float, se: float, df: float, n_runs: int, test: str, **kw) -> TestResult:
    p, ci = t_test(estimate, se, df)
    return TestResult(
        estimate, se, df, p if math.isfinite(p) else None,
        ci if math.isfinite(ci[0]) else None, min_detectable(se, df), n_runs, test, **kw,
    )  # fmt: skip


# ---- configurations compared at the end of training ------------------------------------------
#: Fewest residual degrees of freedom a seed-blocked fit must keep to be used.
MIN_BLOCKED_DF = 2


def cell_contrast(
    rows: pl.DataFrame, metric: str, weights: dict[str, float], block: str | None = None
) -> tuple[float, float, float] | None:
    """A contrast Σ w_c·mean_c of configuration means (`rows`: one per run, with a `cell`
    column), estimated by OLS of `metric` on one mean per cell plus, when `block` names a
    column, one effect per block: runs that share a seed share its data order and sampling
    draws (common random numbers), so comparing them within the seed removes the seed's
    effect from the noise. Returns (estimate, SE, residual df), or None when the contrast is
    not estimable or the fit keeps fewer than `MIN_BLOCKED_DF` residual df (with a block) or
    1 (without)."""
    fit = cell_fit(rows, metric, block) if weights else None
    if fit is None or not set(weights) <= set(fit.cells):
        return None
    if fit.dof < (MIN_BLOCKED_DF if block is not None else 1):
        return None
    L = np.zeros(fit.X.shape[1])
    for c, w in weights.items():
        L[fit.cells.index(c)] = w
    if not np.allclose(L @ fit.pinv @ fit.X, L, atol=1e-8):  # not in the row space: not estimable
        return None
    cov = fit.sigma2 * (fit.pinv @ fit.pinv.T)
    return float(L @ fit.beta), math.sqrt(max(float(L @ cov @ L), 0.0)), float(fit.dof)


def _seed_blocks(rows: pl.DataFrame, within: str | None = None) -> pl.DataFrame:
    """`block`: the seed (within `within`'s level when given), for seed-blocked fits; null
    where a run has no seed (the blocked fit then declines)."""
    if "seed" not in rows.columns:
        return rows.with_columns(block=pl.lit(None, pl.String))
    parts = [pl.col("seed").cast(pl.String)]
    if within is not None:
        parts.insert(0, pl.col(within).cast(pl.String))
    return rows.with_columns(block=pl.concat_str(parts, separator="|"))


def compare_arms(df: pl.DataFrame, metric: str, factor: str, a: object, b: object) -> TestResult:
    """Mean final `metric` of runs with `factor == a` minus those with `factor == b`.

    When the arms share seeds (the sweep runs every configuration under every seed) the
    comparison is within seeds: OLS of the final metric on configuration + seed, the noise the
    residual (a seed's data order and sampling draws are common to its runs, so its effect
    cancels). Otherwise, or with too few runs for that, the noise is the seed variance within
    configurations, pooled over every configuration in `df` (two-sample t), floored at the
    evaluation's sampling variance."""
    rows = with_cell(final_rows(df, metric))
    rows = rows.with_columns(  # the arms are cells even where `factor` is not a config field
        cell=pl.concat_str([pl.col("cell"), pl.col(factor).cast(pl.String)], separator="|")
    )
    arm_a = rows.filter(pl.col(factor) == a)
    arm_b = rows.filter(pl.col(factor) == b)
    if not arm_a.height or not arm_b.height:
        return TestResult.refused(f"no runs with {factor} = {a if not arm_a.height else b}")
    extra = {"mean_a": float(arm_a[metric].mean()), "mean_b": float(arm_b[metric].mean()),
             "runs_a": arm_a.height, "runs_b": arm_b.height}  # fmt: skip
    cells_a, cells_b = arm_a["cell"].unique().to_list(), arm_b["cell"].unique().to_list()
    weights = {c: 1 / len(cells_a) for c in cells_a} | {c: -1 / len(cells_b) for c in cells_b}
    blocked = cell_contrast(_seed_blocks(rows), metric, weights, "block")
    if blocked is not None:
        est, se, dof = blocked
        var, _ = pooled_seed_variance(rows, metric)
        return _from_t(
            est, se, dof, rows.height,
            f"paired by seed: OLS of final {metric} on configuration + seed ({dof:.0f} df)",
            extra=extra | {"seed_sd": math.sqrt(var) if math.isfinite(var) else math.nan,
                           "within_seed_se": se},
        )  # fmt: skip
    var, dof = pooled_seed_variance(rows, metric)
    test = f"two-sample t on final {metric}, seed variance pooled over configurations"
    if dof == 0:
        return TestResult.refused(
            "no configuration has two seeds: the training noise is unmeasured", rows.height, test
        )
    floor = eval_variance(rows, metric)
    if var < floor:  # few seeds can agree by chance: never below the sampling noise
        var, test = floor, test + " (floored at the evaluation's sampling variance)"
    se = math.sqrt(var * (1 / arm_a.height + 1 / arm_b.height))
    est = extra["mean_a"] - extra["mean_b"]
    return _from_t(est, se, dof, rows.height, f"{test} ({dof} df)",
                   extra=extra | {"seed_sd": math.sqrt(var)})  # fmt: skip


def contrast_best(
    df: pl.DataFrame,
    metric: str,
    factor: str,
    best: object,
    others: Sequence[object],
    stratum: str,
) -> TestResult:
    """Is `best` above every other level of `factor`? One contrast best − other per other level,
    each the mean over `stratum`'s levels of the difference of cell means (the factor's effect
    may change with the stratum: a learning-rate rule helps at one batch and hurts at another),
    Holm-adjusted. Runs sharing a seed within a stratum are compared within it (OLS on cell +
    stratum|seed) when that keeps enough df; otherwise the noise is the seed variance within
    cells. The result is the weakest contrast (the one a "best" claim hinges on), or a
    significantly negative one when there is one."""
    rows = final_rows(df, metric).filter(pl.col(factor).is_in([best, *others]))
    levels = set(rows[factor].unique().to_list())
    if best not in levels or not levels & set(others):
        return TestResult.refused(f"{factor}: need {best} and at least one of {list(others)}")
    rows = (
        _seed_blocks(rows, stratum)
        .with_columns(s_key=pl.col(stratum).cast(pl.String), f_key=pl.col(factor).cast(pl.String))
        .with_columns(cell=pl.concat_str(["s_key", "f_key"], separator="|"))
    )
    key = dict(zip(rows[factor].to_list(), rows["f_key"].to_list(), strict=True))
    present = sorted({str(o) for o in others if o in levels})
    cells, strata = set(rows["cell"].to_list()), sorted(set(rows["s_key"].to_list()))
    contrasts = []  # (other, estimate, se, p, df, how)
    for other in others:
        if other not in levels:
            continue
        weights: dict[str, float] = {}
        for s in strata:
            hi, lo = f"{s}|{key[best]}", f"{s}|{key[other]}"
            if hi in cells and lo in cells:
                weights[hi], weights[lo] = 1.0, -1.0
        if not weights:  # never at one stratum with best: no contrast (refused below)
            continue
        k = len(weights) / 2
        weights = {c: w / k for c, w in weights.items()}
        fit, how = (cell_contrast(rows, metric, weights, "block"), f"paired by {stratum}|seed")
        if fit is None:
            fit, how = cell_contrast(rows, metric, weights), "seed variance within cells"
        if fit is None:
            continue
        est, se, dof = fit
        contrasts.append((str(other), est, se, t_test(est, se, dof)[0], dof, how))
    untested = sorted(set(present) - {c[0] for c in contrasts})
    if untested:  # a "best" claim must beat every rival the data hold
        return TestResult.refused(
            f"{factor} = {best} is never at a {stratum} (with seeds enough to compare) where "
            f"{', '.join(untested)} ran: no contrast", rows.height,
        )  # fmt: skip
    adjusted = holm([c[3] for c in contrasts])
    chosen = min(range(len(contrasts)), key=lambda i: contrasts[i][1])  # the weakest
    negatives = [i for i, c in enumerate(contrasts) if c[1] < 0 and adjusted[i] < ALPHA]
    if negatives:
        chosen = negatives[0]
    other, est, se, _, dof, how = contrasts[chosen]
    p_all = max(adjusted) if all(c[1] > 0 for c in contrasts) else adjusted[chosen]
    q = _t_quantile(dof)
    return TestResult(
        est, se, dof, p_all, (est - q * se, est + q * se), min_detectable(se, dof), rows.height,
        f"cell means of final {metric} per {stratum} × {factor}, {how} ({dof:.0f} df); "
        f"contrasts {best} − {', '.join(c[0] for c in contrasts)} averaged over {stratum}, "
        f"Holm-adjusted; shown: {best} − {other}",
        extra={f"{best}-{c[0]}": c[1] for c in contrasts},
    )  # fmt: skip


def hc3_ols(formula: str, data):
    """OLS with HC3 standard errors and t references (statsmodels). A design with a point of
    leverage 1 (a configuration seen once) has no HC3 error there: its SEs come out NaN, and
    the tests refuse to call, rather than warn."""
    import statsmodels.formula.api as smf

    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return smf.ols(formula, data).fit(cov_type="HC3", use_t=True)


def _t_quantile(dof: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(1 - ALPHA / 2, dof))


# ---- regressions over the learning curves ------------------------------------------------------
def _curve_frame(
    df: pl.DataFrame, y: pl.Expr, x: str, compute: str, covariates: Sequence[str]
) -> tuple[pl.DataFrame, dict[str, float]]:
    """Rows after step 0 with `y`, centred log2 of `x`, of `compute` and of the covariates,
    a checkpoint id (log2 compute rounded) and the run as cluster."""
    key = run_column(df)
    rows = df.filter((pl.col("step") > 0) & pl.col(compute).is_finite() & (pl.col(compute) > 0))
    rows = rows.with_columns(y=y).filter(pl.col("y").is_finite())
    logs = {c: rows[c].cast(pl.Float64).log(2) for c in (x, compute, *covariates)}
    centres = {c: float(v.mean()) if len(v) else 0.0 for c, v in logs.items()}
    frame = pl.DataFrame(
        {
            "y": rows["y"],
            "xn": logs[x] - centres[x],
            "xc": logs[compute] - centres[compute],
            **{f"z{i}": logs[c] - centres[c] for i, c in enumerate(covariates)},
            "cp": (logs[compute] * 20).round().cast(pl.Int64).cast(pl.String),
            "run": rows[key].cast(pl.String),
        }
    )
    return frame, centres


def _cluster_fit(frame: pl.DataFrame, formula: str):
    import statsmodels.formula.api as smf

    data = frame.to_pandas()
    groups = data["run"].astype("category").cat.codes
    return smf.ols(formula, data).fit(
        cov_type="cluster", cov_kwds={"groups": groups, "use_correction": True}, use_t=True
    )


def _run_level(frame: pl.DataFrame, powers: Sequence[int]) -> tuple[pl.DataFrame, list[str]]:
    """Per run: the coefficients of its own evaluations (minus every run's mean at the same
    checkpoint) on (log2 C)^k for k in `powers` (0: its mean gap to the average curve), with
    its `xn` and covariates. One row per run: runs are independent, checkpoints of one run
    are not, so the second stage compares runs."""
    centred = frame.with_columns(y=pl.col("y") - pl.col("y").mean().over("cp"))
    cov = [c for c in frame.columns if c.startswith("z")]
    rows = []
    for (run,), g in centred.group_by(["run"], maintain_order=True):
        xc = g["xc"].to_numpy()
        X = np.column_stack([xc**k for k in sorted({0, *powers})])
        if len(g) < X.shape[1] or np.linalg.matrix_rank(X) < X.shape[1]:
            continue
        coef = np.linalg.lstsq(X, g["y"].to_numpy(), rcond=None)[0]
        order = sorted({0, *powers})
        rows.append(
            {"run": run, "xn": g["xn"][0], **{c: g[c][0] for c in cov},
             **{f"b{k}": coef[order.index(k)] for k in powers}}
        )  # fmt: skip
    return pl.DataFrame(rows), cov


def _two_stage(
    frame: pl.DataFrame, powers: tuple[int, ...], target: str, x: str, what: str
) -> TestResult:
    """Second stage: the run-level coefficient `target` regressed on log2 x and the
    covariates across runs (OLS, HC3); the result is the slope in log2 x."""

    runs, cov = _run_level(frame, powers)
    if runs.height < len(cov) + 4:
        return TestResult.refused(
            f"needs ≥ {len(cov) + 4} runs with enough evaluations", runs.height
        )
    formula = f"{target} ~ xn" + "".join(f" + {c}" for c in cov)
    fit = hc3_ols(formula, runs.to_pandas())
    est, se = float(fit.params["xn"]), float(fit.bse["xn"])
    return _from_t(
        est, se, float(fit.df_resid), runs.height,
        f"{what}, regressed on log2 {x} across {runs.height} runs (OLS, HC3, "
        f"{fit.df_resid:.0f} df)",
    )  # fmt: skip


def curve_interaction(
    df: pl.DataFrame,
    metric: str,
    x: str = "n",
    compute: str = ROLLOUTS,
    covariates: Sequence[str] = (),
    term: str = "linear",
) -> TestResult:
    """How the value of doubling `x` changes as compute doubles.

    Two stages: each run's evaluations, minus the mean of every run at the same checkpoint, are
    regressed on log2 C (`term = "linear"`: the run's trend against the average curve) or on
    log2 C and (log2 C)² (`"quadratic"`: its bend); across runs, that coefficient is regressed
    on log2 x and the covariates (OLS, HC3 errors, one row per run). The slope in log2 x is
    the interaction log2 x × log2 C (or × (log2 C)²): positive when larger x gains relative to
    smaller x as compute grows, i.e. the best x grows with compute (for a concave curve in
    log2 x the optimum moves by the cross-partial over the curvature)."""
    frame, _ = _curve_frame(df, pl.col(metric), x, compute, covariates)
    if frame.height == 0 or frame["xn"].n_unique() < 3 or frame["cp"].n_unique() < 3:
        return TestResult.refused(f"needs ≥ 3 values of {x} and ≥ 3 checkpoints after step 0")
    k = 1 if term == "linear" else 2
    what = "log2 C" if k == 1 else "(log2 C)²"
    return _two_stage(
        frame, (1, 2) if k == 2 else (1,), f"b{k}", x,
        f"two-stage: each run's {what} coefficient against the average curve",
    )  # fmt: skip


def gap_slope(
    df: pl.DataFrame,
    high: str,
    low: str,
    x: str = "n",
    compute: str = ROLLOUTS,
    covariates: Sequence[str] = (),
) -> TestResult:
    """How much more `high` than `low` rises per doubling of `x`: each run's mean of
    high − low (measured on the same samples) over its evaluations after step 0, against the
    mean of every run at the same checkpoint, regressed on log2 x and the covariates across
    runs (OLS, HC3, one row per run)."""
    frame, _ = _curve_frame(df, pl.col(high) - pl.col(low), x, compute, covariates)
    if frame.height == 0 or frame["xn"].n_unique() < 2:
        return TestResult.refused(f"needs ≥ 2 values of {x} after step 0")
    return _two_stage(
        frame, (0,), "b0", x, f"each run's mean {high} − {low} against the checkpoint means"
    )


def optimum_difference(
    a: pl.DataFrame,
    b: pl.DataFrame,
    metric: str,
    x: str = "n",
    compute: str = ROLLOUTS,
    covariates: Sequence[str] = (),
) -> TestResult:
    """log2 of the best x at the largest compute, table `a` minus table `b`.

    Each table gets the model of `curve_interaction`; its best x at the largest checkpoint is
    the vertex of the quadratic in log2 x there, with a delta-method standard error from the
    clustered covariance. Tested only where both curvatures are significantly negative (an
    interior optimum) and both vertices lie within one doubling of the x grid."""
    vertices = []
    for name, df in (("first", a), ("second", b)):
        frame, centres = _curve_frame(df, pl.col(metric), x, compute, covariates)
        runs = frame["run"].n_unique()
        if frame["xn"].n_unique() < 3 or runs < 6:
            return TestResult.refused(f"the {name} table needs ≥ 3 values of {x} and ≥ 6 runs")
        cov = " + ".join(f"z{i} + z{i}:xc" for i in range(len(covariates)))
        fit = _cluster_fit(
            frame, "y ~ C(cp) + xn + I(xn**2) + xn:xc" + (f" + {cov}" if cov else "")
        )
        g, d, bc = (float(fit.params[k]) for k in ("xn", "I(xn ** 2)", "xn:xc"))
        V = (
            fit.cov_params()
            .loc[["xn", "I(xn ** 2)", "xn:xc"], ["xn", "I(xn ** 2)", "xn:xc"]]
            .values
        )
        p_curv = float(fit.pvalues["I(xn ** 2)"])
        if not (d < 0 and p_curv < ALPHA):
            return TestResult.refused(
                f"no interior optimum in {x} on the {name} table (curvature {d:.3g}, p = "
                f"{p_curv:.2g}): its best {x} may lie at the edge of the grid", runs
            )  # fmt: skip
        xc_max = float(frame["xc"].max())
        num = g + bc * xc_max
        v = centres[x] - num / (2 * d)
        grad = np.array([-1 / (2 * d), num / (2 * d * d), -xc_max / (2 * d)])
        se = float(math.sqrt(max(grad @ V @ grad, 0.0)))
        lo, hi = frame["xn"].min() + centres[x], frame["xn"].max() + centres[x]
        if not lo - 1 <= v <= hi + 1:
            return TestResult.refused(
                f"the {name} table's best {x} (2^{v:.1f}) lies more than a doubling outside "
                f"the grid [2^{lo:.0f}, 2^{hi:.0f}]", runs
            )  # fmt: skip
        vertices.append((v, se, runs))
    (va, sa, ra), (vb, sb, rb) = vertices
    se = math.sqrt(sa**2 + sb**2)
    return _from_t(
        va - vb, se, min(ra, rb) - 1, ra + rb,
        "vertex of a quadratic in log2 n at the largest compute per table (clustered OLS, "
        "delta method), difference of the two",
        extra={"log2_best_first": va, "log2_best_second": vb},
    )  # fmt: skip


def slope_difference(
    df: pl.DataFrame,
    metric: str,
    x: str,
    group: str,
    first: Sequence,
    second: Sequence,
    scale: float = 1.0,
) -> TestResult:
    """Slope of the final `metric` in `x` (× `scale`) for levels `first` of `group`, minus
    that for levels `second`, with a fixed effect per level (OLS, HC3 errors)."""

    rows = final_rows(df, metric).filter(pl.col(group).is_in([*first, *second]))
    if (
        not rows.filter(pl.col(group).is_in(list(first))).height
        or not rows.filter(pl.col(group).is_in(list(second))).height
    ):
        return TestResult.refused(f"needs runs of both {list(first)} and {list(second)}")
    data = rows.select(
        pl.col(metric).alias("y"), (pl.col(x) * scale).alias("x"),
        pl.col(group).cast(pl.String).alias("g"),
        pl.col(group).is_in(list(first)).cast(pl.Float64).alias("is_first"),
    ).to_pandas()  # fmt: skip
    fit = hc3_ols("y ~ C(g) + x:is_first + x:I(1 - is_first)", data)
    if fit.df_resid < 2:
        return TestResult.refused(f"{rows.height} runs: too few to compare slopes", rows.height)
    a, b = "x:is_first", "x:I(1 - is_first)"
    est = float(fit.params[a] - fit.params[b])
    V = fit.cov_params()
    se = float(math.sqrt(V.loc[a, a] + V.loc[b, b] - 2 * V.loc[a, b]))
    return _from_t(
        est, se, float(fit.df_resid), rows.height,
        f"OLS of final {metric} on a level per {group} and one slope in {x} per group "
        f"(HC3, {fit.df_resid:.0f} df): slope of {first} − slope of {second}",
        extra={"slope_first": float(fit.params[a]), "slope_second": float(fit.params[b])},
    )  # fmt: skip


def slope_heterogeneity(df: pl.DataFrame, metric: str, x: str, group: str) -> TestResult:
    """Do the slopes of the final `metric` in log2 `x` differ between levels of `group`?
    OLS with a level and a slope per group (HC3); Wald F-test that all slopes are equal. The
    estimate is the largest difference between two groups' slopes."""

    rows = final_rows(df, metric)
    groups = sorted(rows[group].unique().to_list())
    if len(groups) < 2 or rows[x].n_unique() < 2:
        return TestResult.refused(f"needs ≥ 2 levels of {group} and ≥ 2 values of {x}")
    data = rows.select(
        pl.col(metric).alias("y"), pl.col(x).cast(pl.Float64).log(2).alias("x"),
        pl.col(group).cast(pl.String).alias("g"),
    ).to_pandas()  # fmt: skip
    fit = hc3_ols("y ~ C(g) + C(g):x - 1", data)
    if fit.df_resid < 2:
        return TestResult.refused(
            f"{rows.height} runs for {2 * len(groups)} parameters: too few to compare slopes",
            rows.height,
        )
    names = [f"C(g)[{g}]:x" for g in groups]
    slopes = {g: float(fit.params[n]) for g, n in zip(groups, names, strict=True)}
    hypotheses = [f"{names[0]} = {n}" for n in names[1:]]
    wald = fit.f_test(
        ", ".join(f"({h.split(' = ')[0]}) - ({h.split(' = ')[1]}) = 0" for h in hypotheses)
    )
    p = float(wald.pvalue)
    hi_g, lo_g = max(slopes, key=slopes.get), min(slopes, key=slopes.get)
    V = fit.cov_params()
    a, b = f"C(g)[{hi_g}]:x", f"C(g)[{lo_g}]:x"
    se = float(math.sqrt(V.loc[a, a] + V.loc[b, b] - 2 * V.loc[a, b]))
    est = slopes[hi_g] - slopes[lo_g]
    q = _t_quantile(float(fit.df_resid))
    return TestResult(
        est, se, float(fit.df_resid), p, (est - q * se, est + q * se),
        min_detectable(se, float(fit.df_resid)), rows.height,
        f"OLS of final {metric} with a level and a slope in log2 {x} per {group} (HC3); Wald "
        f"F-test of equal slopes; shown: {hi_g} − {lo_g}",
        extra={"slopes": slopes},
    )  # fmt: skip


# ---- the RACE pilot ----------------------------------------------------------------------------
def regime_calls(df: pl.DataFrame, metric: str, system: str = "reward") -> dict[str, dict]:
    """Per reward system: each configuration's RACE regime (`isolab.frontier.regime` of its
    mean ρ and FLOP shares), and the system's call — resolved when every configuration not
    significantly worse than the best (one-sided t against the best, pooled seed variance,
    Holm over configurations) falls in one regime."""
    from scipy import stats

    from isolab.frontier import regime

    rows = with_cell(final_rows(df, metric))
    shares = [
        (pl.col(f"flops/{c}") / pl.col(FLOPS_TOTAL)).alias(f"share_{c}")
        for c in ("search", "reward")
        if f"flops/{c}" in rows.columns
    ]
    rows = rows.with_columns(shares)
    var, dof = pooled_seed_variance(rows, metric)
    var = max(var, eval_variance(rows, metric)) if dof else var
    out: dict[str, dict] = {}
    for (name,), grp in rows.group_by([system], maintain_order=True):
        cells = grp.group_by("cell").agg(
            pl.col(metric).mean().alias("mean"), pl.len().alias("n"),
            pl.col(RHO).mean().alias("rho"),
            *[pl.col(c).mean() for c in ("share_search", "share_reward") if c in grp.columns],
        ).sort("mean", descending=True)  # fmt: skip
        regimes = [
            regime(r["rho"], r.get("share_reward", 0.0) or 0.0, r.get("share_search", 1.0) or 1.0)
            for r in cells.iter_rows(named=True)
        ]
        best = cells.row(0, named=True)
        p_raw = []
        for r in cells.iter_rows(named=True):
            if dof == 0 or r is None:
                p_raw.append(math.nan)
                continue
            se = math.sqrt(var * (1 / best["n"] + 1 / r["n"]))
            gap = best["mean"] - r["mean"]
            p_raw.append(float(stats.t.sf(gap / se, dof)) if se > 0 else math.nan)
        adjusted = holm(p_raw[1:])
        plausible = [0] + [i + 1 for i, p in enumerate(adjusted) if not p < ALPHA]
        seen = {regimes[i] for i in plausible}
        out[str(name)] = {
            "regimes": sorted(set(regimes)),
            "best_rho": best["rho"],
            "call": seen.pop() if len(seen) == 1 and dof > 0 else None,
        }
    return out


def regime_agreement(pilot: pl.DataFrame, full: pl.DataFrame, metric: str) -> TestResult:
    """Does the pilot call each reward system's regime as the full grid does? Compared only
    where both calls are resolved and both grids span more than one regime (a grid whose
    configurations all share one regime calls it by construction). Estimate: the share of
    compared systems whose calls agree."""
    a, b = regime_calls(pilot, metric), regime_calls(full, metric)
    compared, agree, notes = 0, 0, []
    for name in sorted(set(a) & set(b)):
        pa, fa = a[name], b[name]
        if len(pa["regimes"]) < 2 or len(fa["regimes"]) < 2:
            notes.append(f"{name}: one regime by construction")
            continue
        if pa["call"] is None or fa["call"] is None:
            notes.append(f"{name}: unresolved ({'pilot' if pa['call'] is None else 'full grid'})")
            continue
        compared += 1
        agree += pa["call"] == fa["call"]
        notes.append(f"{name}: pilot {pa['call']}, full grid {fa['call']}")
    runs = final_rows(pilot, metric).height + final_rows(full, metric).height
    test = "RACE regime of the seed-averaged best configurations, resolved by Holm-corrected t"
    if not compared:
        return TestResult.refused("no system is resolved on both grids with a ρ range that spans "
                                  "two regimes; " + "; ".join(notes), runs, test)  # fmt: skip
    share = agree / compared
    return TestResult(share, math.nan, math.nan, None, None, math.nan, runs,
                      f"{test}: {agree} of {compared} systems agree", "; ".join(notes),
                      extra={"compared": compared, "agree": agree})  # fmt: skip
