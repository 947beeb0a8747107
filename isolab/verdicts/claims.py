"""The papers' claims that the six studies test, each a stated test on the study's runs tables.

`CLAIMS` lists them (id, study, the claim in words, the sign the paper predicts, the unit of the
effect); `evaluate(study, data)` runs a study's tests and returns its `Verdict`s. The same code
runs on simulated worlds with no effect and with a planted one in
`benchmarks/verdict_calibration.py`, which measures each claim's false-call rate and power.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import polars as pl

from isolab.table import one_pool, with_lr_sum
from isolab.tracking.columns import COUNTS, counts_column
from isolab.verdicts import (
    contrasts,
    crossing,
    curves,
    fixed_batch,
    interference,
    lr_exponent,
    matched,
    mechanism,
    mixtures,
    race,
    rho_optimum,
    saturation,
    slopes,
    targets,
    testbed,
    vertex,
)
from isolab.verdicts.result import ALPHA, CI_LEVEL, StatResult, t_quantile
from isolab.verdicts.verdict import Call, Verdict, decide
from isolab.vocab import (
    EVAL_AVG,
    EVAL_BEST,
    EVAL_JUDGE,
    EVAL_WORST,
    LR_SUM,
    ROLLOUTS,
    RUN_KEY,
    STEP,
)

Y = EVAL_AVG
X = ROLLOUTS

Data = dict[str, pl.DataFrame]


@dataclass(frozen=True)
class Claim:
    """One claim of a paper and how these runs test it.

    Attributes:
        id: stable id (`<study>.<what>`).
        study: the curated study whose runs test it.
        text: the paper's claim in words.
        split: the split it is tested on (None: the whole table).
        expected: the paper's sign of the effect: `> 0`, `< 0`, `≠ 0`, or `= 1` (a share).
        unit: what the effect measures.
        run: (study data) → the test's result.
        gate: (study data) → why these data cannot test the claim at all (e.g. runs on the old
            testbed, `isolab.verdicts.testbed`), or None; `evaluate` checks it before `run`.
            The calibration's simulated worlds run the test alone: they calibrate it as it
            would run on data that pass the gate.
    """

    id: str
    study: str
    text: str
    split: str | None
    expected: str
    unit: str
    run: Callable[[Data], StatResult]
    gate: Callable[[Data], str | None] | None = None


def _split(df: pl.DataFrame, split: str | None) -> pl.DataFrame:
    return df if split is None or "split" not in df.columns else df.filter(pl.col("split") == split)


def _covariates(df: pl.DataFrame, *names: str) -> tuple[str, ...]:
    return tuple(c for c in names if c in df.columns and df[c].n_unique() > 1)


def _regularisers(split: str) -> Callable[[Data], StatResult]:
    def run(data: Data) -> StatResult:
        df = _split(data["regularisers"], split)
        return contrasts.compare_arms(df, Y, "recipe", "kl_entropy", "none")

    return run


def _old(sweep: str) -> Callable[[Data], str | None]:
    """The gate of a claim whose sweep may be on the old testbed (`testbed.old_testbed`)."""

    def gate(data: Data) -> str | None:
        return testbed.old_testbed(data[sweep])

    return gate


#: The (B, lr) grid pre-registered for η ∝ sqrt(B) on the new testbed (`lr_exponent.SPEC`), and
#: the old testbed's contest of rules that stands in for it until it is run.
LR_GRID, LR_RULES = "lr-grid", "lr-scaling"


def _lr_runs(data: Data) -> pl.DataFrame:
    return data[LR_GRID] if LR_GRID in data else data[LR_RULES]


def _lr_gate(data: Data) -> str | None:
    return testbed.old_testbed(_lr_runs(data))


def _lr_exponent(data: Data) -> StatResult:
    return lr_exponent.best_lr_exponent(_lr_runs(data), Y)


def _size_gate(data: Data) -> str | None:
    """The old testbed's reason, and the fewest updates a model got at equal FLOPs."""
    df = data["main"]
    why = testbed.old_testbed(df)
    if why is None or "M" not in df.columns or "model" not in df.columns:
        return why
    steps = df.group_by("model").agg(pl.col("M").min().alias("lo"), pl.col("M").max().alias("hi"))
    fewest = steps.sort("hi").row(0, named=True)
    return f"{why}; {fewest['model']} gets {fewest['lo']}–{fewest['hi']} steps"


def _same_pool(data: Data, main: str, other: str) -> pl.DataFrame | None:
    """The `other` sweep's runs trained on `main`'s pool (`isolab.table.one_pool`), or None."""
    if other not in data:
        return None
    keys = data[other]["run_key"].unique()
    kept = one_pool([data[main], data[other]])[0]
    return kept.filter(pl.col("run_key").is_in(keys.implode()))


def _secondary(df: pl.DataFrame) -> str:
    """The old two-stage interaction (`curves.curve_interaction`), as a sentence."""
    r = curves.curve_interaction(df, Y, "n", X, _covariates(df, "B_p"))
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
    long = _same_pool(data, "main", "long")
    main = _split(data["main"], split)
    return saturation.plateau_gate(_split(long, split) if long is not None else None, main, Y)


def nstar_vertices(data: Data, split: str) -> tuple[StatResult, pl.DataFrame, saturation.Gate]:
    """The shift of n* with compute on `split` (`isolab.verdicts.vertex.vertex_shift`) from
    C_sat/4 on (the top half of log2 C without a saturation point), the per-checkpoint
    vertices, and the gate."""
    gate = nstar_gate(data, split)
    main = _split(data["main"], split)
    from_C = gate.C_sat / 4 if gate.C_sat is not None else None
    result, table = vertex.vertex_shift(main, Y, from_C)
    return result, table, gate


def nstar_crossing(data: Data, split: str) -> tuple[StatResult, pl.DataFrame, saturation.Gate]:
    """The crossing test of "n* grows" on `split` (`isolab.verdicts.crossing.crossing_test`,
    every checkpoint of `main`), its table of advantages with their joint bands, and the
    gate."""
    gate = nstar_gate(data, split)
    result, table = crossing.crossing_test(_split(data["main"], split), Y)
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
        main = _split(data["main"], split)
        secondary = _secondary(main)
        if not gate.passed:
            why = gate.reason if gate.reason.startswith("untested") else (
                f"untested at this scale: {gate.reason}"
            )  # fmt: skip
            reading = f"secondary reading ({crossing.crossing_summary(result)})"
            return StatResult.refused(f"{why}; {reading}; {secondary}", result.n_runs, result.test)
        from_C = gate.C_sat / 4 if gate.C_sat is not None else None
        slope = _vertex_reading(vertex.vertex_shift(main, Y, from_C)[0])
        return replace(
            result, note="; ".join(x for x in (result.note, gate.reason, slope, secondary) if x)
        )

    return run


def _easy_above_hard(data: Data) -> StatResult:
    """log2 n* at the largest compute, Easy − Hard: tested only where both optima are
    interior; the slopes of avg@4 in log2 n there (Easy − Hard) are the secondary reading."""
    main = data["main"]
    ends, slopes, dofs = {}, {}, {}
    for split in ("easy", "hard"):
        ends[split], fits = vertex.optimum_at_end(_split(main, split), Y)
        dofs[split] = fits.dof[-1] if fits.lc else 0
        slopes[split] = vertex.slope_at_end(_split(main, split), Y)
    (se_, sse, de), (sh, ssh, dh) = slopes["easy"], slopes["hard"]
    diff, sd = se_ - sh, math.sqrt(sse**2 + ssh**2)
    q = t_quantile(min(de, dh)) if min(de, dh) > 0 else math.nan
    secondary = (
        f"secondary reading: slope of avg@4 per doubling of n at the largest C, Easy {se_:+.3f}, "
        f"Hard {sh:+.3f}, Easy − Hard {diff:+.3f} ({CI_LEVEL} CI [{diff - q * sd:+.3f}, "
        f"{diff + q * sd:+.3f}])"
    )
    runs = main["run_key"].n_unique()
    test = (
        "vertex of a quadratic in log2 n (+ log2 B_p) of the seed-mean avg@4 per configuration "
        "at the largest compute, per split (delta method); Easy − Hard"
    )
    missing = [s for s in ("easy", "hard") if not ends[s]]
    if missing:
        return StatResult.refused(f"no {', '.join(missing)} runs at the largest C; {secondary}",
                                  runs, test)  # fmt: skip
    bad = [f"{s.capitalize()}: {ends[s]['reason']}" for s in ("easy", "hard")
           if not ends[s]["qualifies"]]  # fmt: skip
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
        },  # fmt: skip
    )


def _more_n_with_steps(data: Data) -> StatResult:
    return fixed_batch.advantage_trend(_split(data["main"], "easy"), Y)


def _nonmonotone(data: Data) -> StatResult:
    return fixed_batch.sign_changes(_split(data["main"], "hard"), Y)


def _bp_little(data: Data) -> StatResult:
    return fixed_batch.bp_equivalence(data["main"], Y)


def _mechanism(split: str, metric: str) -> Callable[[Data], StatResult]:
    def run(data: Data) -> StatResult:
        return mechanism.matched_mechanism(_split(data["main"], split), metric)

    return run


def _forgetting(
    split: str, sweep: str = "main", counts: str = COUNTS
) -> Callable[[Data], StatResult]:
    """The interference claim on `split` of `sweep`, read on the counts `counts` (validation,
    or an evaluation set's) (`isolab.verdicts.interference`): the slope at equal gain and level;
    the slope per unit of compute alone is the secondary reading."""

    def run(data: Data) -> StatResult:
        df = _split(data[sweep], split)
        result, raw = interference.forgetting_trends(df, counts, adjusts=(interference.ADJUST, ()))
        if raw.ran and raw.interval is not None:
            secondary = (
                f"secondary reading, per unit of compute alone (not adjusted for gain and level, which "
                f"the structured nulls show it confounds): {raw.estimate:+.2g} per doubling of "
                f"n ({CI_LEVEL} CI [{raw.interval[0]:+.2g}, {raw.interval[1]:+.2g}])"
            )
        else:
            secondary = ""  # refused for the same reason as the test itself
        return replace(result, note="; ".join(x for x in (result.note, secondary) if x))

    return run


def _targets(data: Data) -> StatResult:
    return targets.optimum_difference(_split(data["targets"], "hard"))


def _judge(data: Data) -> StatResult:
    return targets.optimum_difference(_split(data["judge"], "hard"), EVAL_AVG, EVAL_JUDGE)


def _mix_between(data: Data) -> StatResult:
    return mixtures.between(data["main"], _split(data["mix"], mixtures.MIX))


def _never_coverage(data: Data) -> StatResult:
    return mixtures.coverage_expansion(_split(data["never"], "never"))


def _rho_rule_vs_model(data: Data) -> StatResult:
    return rho_optimum.rho_optimum_difference(data["full"], Y)


def _learning_to_search(data: Data) -> StatResult:
    return rho_optimum.learning_to_search(data["full"], Y)


def _race(data: Data) -> StatResult:
    return race.regime_agreement(data["pilot"], data["full"], Y)


def _size(data: Data) -> StatResult:
    return slopes.slope_heterogeneity(data["main"], Y, "n", "model")


PER_DOUBLING_SQ = "avg@4 per doubling of n per doubling of C"
#: The counts of the run's own training problems (`eval_sets: {seen: train}`).
SEEN_COUNTS = counts_column("seen")
FORGETTING = (
    "excess share of problems with a forgetting event per interval C → 2C, per doubling of n, "
    "at equal mean gain and level"
)
FORGETTING_TEXT = (
    "a larger n lowers forgetting events per unit of compute: it spreads updates over problems "
    "and mitigates interference better than more sequential steps M (Playbook)"
)
NSTAR_SHIFT = (
    "doublings of n between the crossing's winners (log2 n_b − log2 n_a; > 0: n* grows, < 0: "
    "it falls)"
)
CLAIMS: dict[str, Claim] = {
    c.id: c
    for c in (
        Claim(
            id="healthy.kl_entropy_easy",
            study="healthy-recipe",
            text="KL + entropy losses help on Easy sets (IsoCompute Playbook keeps them on)",
            split="easy",
            expected="> 0",
            unit="final avg@4, on − off",
            run=_regularisers("easy"),
            gate=_old("regularisers"),
        ),
        Claim(
            id="healthy.kl_entropy_hard",
            study="healthy-recipe",
            text="KL + entropy losses do not help on Hard sets (the Playbook drops them)",
            split="hard",
            expected="< 0",
            unit="final avg@4, on − off",
            run=_regularisers("hard"),
            gate=_old("regularisers"),
        ),
        Claim(
            id="healthy.lr_sqrt",
            study="healthy-recipe",
            text="η ∝ sqrt(B) beats constant and linear scaling of the learning rate (Playbook)",
            split=None,
            expected=f"≈ {lr_exponent.SQRT}",
            unit=f"exponent e of the best learning rate in the batch (lr* ∝ B^e); equivalence "
            f"margin ±{lr_exponent.MARGIN} around {lr_exponent.SQRT} (sqrt nearer than constant "
            "or linear)",
            run=_lr_exponent,
            gate=_lr_gate,
        ),
        Claim(
            id="nstar.grows_easy",
            study="nstar",
            text="n* grows with compute (Playbook)",
            split="easy",
            expected="> 0",
            unit=NSTAR_SHIFT,
            run=_nstar_grows("easy"),
        ),
        Claim(
            id="nstar.grows_hard",
            study="nstar",
            text="n* grows with compute (Playbook)",
            split="hard",
            expected="> 0",
            unit=NSTAR_SHIFT,
            run=_nstar_grows("hard"),
        ),
        Claim(
            id="nstar.easy_above_hard",
            study="nstar",
            text="n* is larger on Easy than on Hard at large compute (≈512 vs ≈128 for Qwen2.5-7B)",
            split=None,
            expected="> 0",
            unit="log2 n*, Easy − Hard, at the largest compute",
            run=_easy_above_hard,
        ),
        Claim(
            id="nvsbp.more_n_with_steps",
            study="n-vs-bp",
            text="at fixed B, few steps favour more problems, many steps more rollouts (Easy)",
            split="easy",
            expected="> 0",
            unit=PER_DOUBLING_SQ,
            run=_more_n_with_steps,
        ),
        Claim(
            id="nvsbp.nonmonotone_hard",
            study="n-vs-bp",
            text="at fixed B on Hard the best n is non-monotone in the number of steps",
            split="hard",
            expected="≠ 0",
            unit="the larger n's advantage at fixed B (avg@4 per doubling of n, mean over the B "
            "strata) between two located sign changes (> 0: the larger n best in the middle of "
            "the range)",
            run=_nonmonotone,
        ),
        Claim(
            id="nvsbp.bp_matters_little",
            study="n-vs-bp",
            text="B_p matters little in a moderate range (Playbook: varying n moves Easy reward "
            "9.2%, varying B_p 1.9%)",
            split=None,
            expected="≈ 0",
            unit=f"avg@4 per doubling of B_p at fixed n and C (equivalence margin "
            f"±{fixed_batch.BP_MARGIN})",
            run=_bp_little,
        ),
        Claim(
            id="bestk.worst_easy",
            study="bestk-worstk",
            text="on Easy sets a larger n lifts worst@k more than best@k (sharpening)",
            split="easy",
            expected="> 0",
            unit="worst@4 per doubling of n at equal avg@4",
            run=_mechanism("easy", EVAL_WORST),
        ),
        Claim(
            id="bestk.best_hard",
            study="bestk-worstk",
            text="on Hard sets a larger n lifts best@k more than worst@k (coverage)",
            split="hard",
            expected="> 0",
            unit="best@4 per doubling of n at equal avg@4",
            run=_mechanism("hard", EVAL_BEST),
        ),
        Claim(
            id="interference.less_forgetting_easy",
            study="interference",
            text=FORGETTING_TEXT,
            split="easy",
            expected="< 0",
            unit=FORGETTING,
            run=_forgetting("easy"),
        ),
        Claim(
            id="interference.less_forgetting_hard",
            study="interference",
            text=FORGETTING_TEXT,
            split="hard",
            expected="< 0",
            unit=FORGETTING,
            run=_forgetting("hard"),
        ),
        Claim(
            id="interference.less_forgetting_seen",
            study="interference",
            text=FORGETTING_TEXT + ", on the problems it trains on",
            split="easy",
            expected="< 0",
            unit=FORGETTING.replace("problems", "seen training problems", 1),
            run=_forgetting("easy", "seen", SEEN_COUNTS),
        ),
        Claim(
            id="targets.different_nstar",
            study="targets",
            text="different evaluation targets select different allocations (Wilhelm & Kao): "
            "here n* on the training distribution's validation set against a shifted one",
            split="hard",
            expected="≠ 0",
            unit="log2 n*, validation − shifted (up to three operands), at the budget",
            run=_targets,
        ),
        Claim(
            id="targets.judge_nstar",
            study="targets",
            text="different evaluation targets select different allocations (Wilhelm & Kao): "
            "here n* on validation pass rates against a judge of process quality (the tiny PRM's "
            "mean score of every completion)",
            split="hard",
            expected="≠ 0",
            unit="log2 n*, validation avg@4 − the judge's score, at the budget",
            run=_judge,
        ),
        Claim(
            id="mixtures.nstar_between",
            study="mixtures",
            text="on a heterogeneous mixture of Easy and Hard problems, n* lies between "
            "Easy's and Hard's (IsoCompute Playbook)",
            split="mix",
            expected="> 0",
            unit="doublings of n that the mix's n* lies inside the range of Easy's and Hard's "
            "(the nearer end; negative: outside), at the budget",
            run=_mix_between,
        ),
        Claim(
            id="mixtures.never_coverage",
            study="mixtures",
            text="on problems the base model does not solve, a larger n expands coverage "
            "(best@k): it finds the rare successes (IsoCompute Playbook)",
            split="never",
            expected="> 0",
            unit="each run's highest best@k over its checkpoints (the largest k evaluated: 16 at "
            "cpu scale) per doubling of n",
            run=_never_coverage,
        ),
        Claim(
            id="rho.rule_above_model",
            study="reward-rho",
            text="rule-based rewards favour a larger update fraction ρ than reward-model ones "
            "(ρ* ≈ 0.72 vs ≈ 0.44)",
            split=None,
            expected="> 0",
            unit="logit ρ*, rule-based − model-based (the paper's: 1.19)",
            run=_rho_rule_vs_model,
        ),
        Claim(
            id="rho.learning_to_search",
            study="reward-rho",
            text="the ρ* gap is more than the reward model's FLOPs: rule-based systems want more "
            "learning per search FLOP (isolab's split of the paper's gap; the paper does not "
            "state it)",
            split=None,
            expected="> 0",
            unit="ln(C_learning / C_search)*, rule-based − model-based",
            run=_learning_to_search,
        ),
        Claim(
            id="rho.race_same_regime",
            study="reward-rho",
            text="a small pilot grid calls the same regime as the full grid (RACE, rate 1.0)",
            split=None,
            expected="= 1",
            unit="share of systems called alike",
            run=_race,
        ),
        Claim(
            id="size.best_n_depends",
            study="model-size",
            text="the best allocation depends on model size (Wilhelm & Kao)",
            split=None,
            expected="≠ 0",
            unit="avg@4 per doubling of n, largest − smallest slope between sizes",
            run=_size,
            gate=_size_gate,
        ),
    )
}


Reading = Callable[[Data], str]


def _matched(
    sweep: str,
    split: str | None,
    metric: str = Y,
    term: str = "main",
    level: str = Y,
    factor: str = "n",
) -> Reading:
    """The claim's readings at equal C, equal Σlr and equal `level` (`isolab.verdicts.matched`)
    on `split` of `sweep`."""

    def read(data: Data) -> str:
        df = _split(data[sweep], split)
        return matched.readings(df, metric, factor, term, level=level)[0]

    return read


def _matched_per_split(factor: str = "n") -> Reading:
    """`_matched` on `main`'s Easy and Hard splits, side by side."""

    def read(data: Data) -> str:
        parts = [matched.readings(_split(data["main"], s), Y, factor, prefix=f"{s.capitalize()}, ")[0]
                 for s in ("easy", "hard")]  # fmt: skip
        return "secondary readings (issue 45): " + "; ".join(parts)

    return read


def _never_readings(data: Data) -> str:
    """The claim the `never` runs support (a larger n keeps coverage at equal compute,
    `mixtures.coverage_keeps`), then the matched readings of best@k."""
    df = _split(data["never"], "never")
    best, avg = mixtures.coverage_metric(df, "best"), mixtures.coverage_metric(df, "avg")
    if best is None or avg is None:
        return ""
    keeps = mixtures.coverage_keeps(df)
    said = (
        f"{keeps.estimate:+.3f} {best} per doubling of n at the budget ({CI_LEVEL} CI "
        f"[{keeps.interval[0]:+.3f}, {keeps.interval[1]:+.3f}], p = {keeps.p_value:.2g}); "
        f"{keeps.note}"
        if keeps.ran and keeps.interval is not None and keeps.p_value is not None
        else keeps.note
    )
    return (
        f"secondary reading, the claim these runs support (a larger n keeps coverage at equal "
        f"compute, not a call): {said}; {matched.readings(df, best, level=avg)[0]}"
    )


def _bestk_readings(split: str, metric: str) -> Reading:
    """κ (`mechanism.mechanism_ratio`, the test before issue 46, whose sign follows n's effect
    on avg@4), then the matched readings of `metric` on `split`."""

    def read(data: Data) -> str:
        df = _split(data["main"], split)
        k = mechanism.mechanism_ratio(df, metric)
        kappa = (
            f"{k.estimate:+.2f} ({CI_LEVEL} CI [{k.interval[0]:+.2f}, {k.interval[1]:+.2f}]); "
            f"{k.note}"
            if k.ran and k.interval is not None
            else k.note
        )
        return (
            f"secondary reading, κ ({metric.removeprefix('eval/')} per unit of avg@4 along n "
            f"beyond the compute mapping; its sign flips where a larger n lowers avg@4): {kappa}; "
            + matched.readings(df, metric)[0]
        )

    return read


def _forgetting_matched(split: str, sweep: str = "main", counts: str = COUNTS) -> Reading:
    """The interference claim's readings: its own test holds mean gain and level equal (a
    reading at equal avg@4); beside it, every interval C → 2C of every run (not only those all
    runs share, which fix Σlr by n and B_p) with the excess share regressed on log2 n at equal
    gain and level, at equal C and at equal Σlr (each at the interval's end)."""

    def read(data: Data) -> str:
        df = with_lr_sum(_split(data[sweep], split))
        iv = interference.intervals(df, counts) if counts in df.columns else pl.DataFrame()
        head = ("secondary readings (issue 45): at equal avg@4: the test itself compares runs at "
                "equal mean gain and level")  # fmt: skip
        if not iv.height or LR_SUM not in df.columns:
            return head
        ends = df.select(RUN_KEY, pl.col(X).cast(pl.Float64).alias("C_to"), STEP, LR_SUM, X)
        frame = iv.with_columns(pl.col("C_to").cast(pl.Float64)).join(ends, on=[RUN_KEY, "C_to"])
        adj = interference.ADJUST
        at_c = matched.factor_effect(frame, "excess", X, adjust=adj)
        at_lr = matched.factor_effect(frame, "excess", LR_SUM, adjust=adj)
        return (
            f"{head}; over every interval C → 2C, at equal gain and level, excess share per "
            f"doubling of n at equal C: {matched.describe(at_c)}; at equal Σlr: "
            f"{matched.describe(at_lr)}"
        )

    return read


#: Each n-claim's secondary readings — its effect at equal compute, at equal summed learning
#: rate Σlr (equal optimizer progress) and at equal avg@4 (`isolab.verdicts.matched`) — added
#: to its note by `evaluate`, beside the claim's own test (the call does not use them). The
#: simulated worlds of the calibration run `Claim.run` only, without these.
MATCHED: dict[str, Reading] = {
    "nstar.grows_easy": _matched("main", "easy", term="slope"),
    "nstar.grows_hard": _matched("main", "hard", term="slope"),
    "nstar.easy_above_hard": _matched_per_split(),
    "nvsbp.more_n_with_steps": _matched("main", "easy", term="slope"),
    "nvsbp.nonmonotone_hard": _matched("main", "hard", term="curvature"),
    "nvsbp.bp_matters_little": _matched_per_split("B_p"),
    "bestk.worst_easy": _bestk_readings("easy", EVAL_WORST),
    "bestk.best_hard": _bestk_readings("hard", EVAL_BEST),
    "interference.less_forgetting_easy": _forgetting_matched("easy"),
    "interference.less_forgetting_hard": _forgetting_matched("hard"),
    "interference.less_forgetting_seen": _forgetting_matched("easy", "seen", SEEN_COUNTS),
    "targets.different_nstar": _matched("targets", "hard", targets.SHIFTED),
    "targets.judge_nstar": _matched("judge", "hard", EVAL_JUDGE),
    "mixtures.nstar_between": _matched("mix", mixtures.MIX),
    "mixtures.never_coverage": _never_readings,
}


def _bp_caveat(data: Data) -> str:
    """What "B_p matters little" rests on: the B_p levels, the margin over their range against
    n's spread on each split (`fixed_batch.bp_equivalence` on the split alone), and B_p's effect
    at equal Σlr (`matched.factor_effect`), which the equal-compute call nets against the Σlr a
    larger B_p costs."""
    df = data["main"]
    levels = sorted(df["B_p"].unique().to_list())
    span = math.log2(levels[-1] / levels[0]) if len(levels) > 1 and levels[0] > 0 else math.nan
    room = fixed_batch.BP_MARGIN * span
    spreads, at_lr = [], []
    for split in ("easy", "hard"):
        part = _split(df, split)
        spread = fixed_batch.bp_equivalence(part, Y).extra.get("n_spread", math.nan)
        spreads.append(
            f"{split.capitalize()} {spread:.3f} (the range's margin is {room / spread:.0%} of it)"
        )
        lr = matched.factor_effect(part, Y, LR_SUM, "B_p")
        if lr.ran:
            at_lr.append(f"{lr.estimate:+.4f} ± {lr.se:.4f} (SE) on {split.capitalize()}")
    return (
        f"caveat: only {len(levels)} B_p levels ({', '.join(map(str, levels))}: a "
        f"{2**span:g}× range); the margin ±{fixed_batch.BP_MARGIN} per doubling of B_p allows "
        f"±{room:.3f} over that range, against n's spread of avg@4 across its grid: "
        f"{', '.join(spreads)}: loose where n itself moves avg@4 little; at equal Σlr a "
        f"doubling of B_p is worth {', '.join(at_lr)} (avg@4), offset at equal C by the Σlr it "
        "costs (a larger B_p takes fewer steps)"
    )


def _rho_caveat(data: Data) -> str:
    return rho_optimum.knob_caveat(data["full"], Y)


#: What a reader must know beside a kept call (issue 46), added to its note by `evaluate`
#: before the matched readings; the calibration runs `Claim.run` only, without them.
CAVEATS: dict[str, Reading] = {
    "nvsbp.bp_matters_little": _bp_caveat,
    "rho.rule_above_model": _rho_caveat,
}


def _call(claim: Claim, result: StatResult) -> tuple[Call, float | None]:
    """The call and the p-value it rests on (see `decide`; a share must be 1 to agree; an
    equivalence (`≈ 0`, `≈ 0.5`) agrees when its two one-sided tests put the effect inside the
    margin, disagrees when the effect lies beyond it at α, with that test's p-value)."""
    if not result.ran:
        return "inconclusive", result.p_value
    if claim.expected == "= 1":
        return ("agrees" if result.estimate == 1 else "disagrees"), result.p_value
    if claim.expected.startswith("≈"):
        beyond = result.extra.get("p_beyond")
        if result.p_value is not None and result.p_value < ALPHA:
            return "agrees", result.p_value
        if beyond is not None and beyond < ALPHA:
            return "disagrees", float(beyond)
        return "inconclusive", result.p_value
    return decide(result.estimate, result.p_value, claim.expected), result.p_value


def verdict(claim: Claim, result: StatResult) -> Verdict:
    """The claim's `Verdict` from its test's result (the call: `_call`)."""
    call, p_value = _call(claim, result)
    return Verdict(
        claim=claim.id,
        text=claim.text,
        split=claim.split,
        call=call,
        test=result.test,
        statistic=result.estimate,
        p_value=p_value,
        interval=result.interval,
        min_detectable_effect=result.mde,
        unit=claim.unit,
        expected=claim.expected,
        n_runs=result.n_runs,
        note=result.note.strip(),
    )


def evaluate(study: str, data: Data) -> list[Verdict]:
    """Every claim of `study` tested on its runs tables (a claim whose sweep is missing from
    `data` is inconclusive with that reason, one whose gate refuses the data is untested with
    the gate's reason), each note followed by the claim's caveats (`CAVEATS`) and its readings
    at equal C, Σlr and avg@4 (`MATCHED`)."""
    out = []
    for claim in CLAIMS.values():
        if claim.study != study:
            continue
        why = None
        try:
            why = claim.gate(data) if claim.gate is not None else None
            result = StatResult.refused(why) if why else claim.run(data)
        except KeyError as missing:
            result = StatResult.refused(f"sweep {missing} is not in the data")
        extras = []
        for reading in (CAVEATS.get(claim.id), MATCHED.get(claim.id)):
            try:
                extras.append(reading(data) if reading is not None and not why else "")
            except KeyError:  # the sweep is missing: the claim's note says so already
                extras.append("")
        if any(extras):
            result = replace(result, note="; ".join(x for x in (result.note, *extras) if x))
        out.append(verdict(claim, result))
    return out


def direction(v: Verdict, flat_margin: float) -> str:
    """n*(C) as `growing` / `falling` (the shift of the vertex resolved a sign), `flat` (not
    resolved, and its interval excludes shifts beyond ±`flat_margin` doublings of n* per
    doubling of C), or `not resolved` (an untested claim has no interval)."""
    if v.call == "agrees":
        return "growing"
    if v.call == "disagrees":
        return "falling"
    if v.interval is not None and -flat_margin < v.interval[0] and v.interval[1] < flat_margin:
        return "flat"
    return "not resolved"
