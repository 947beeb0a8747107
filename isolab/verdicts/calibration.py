"""Calibration of the verdicts: the same claim tests on simulated sweeps with no effect (a call
is a false call), with structured nulls (effects a claim must not be mistaken for), and with a
planted effect of the paper's sign (an `agrees` is a detection).

A world keeps a design — a study's runs tables (configurations, seeds, compute checkpoints:
`setting_of`), or a planned design before its runs exist (`planned_setting`, from
`isolab.verdicts.planned`) — and replaces the metrics by a mean plus noise at the design's
levels (`isolab.verdicts.noise` per split, or the planned ones), drawn by
`isolab.verdicts.worlds.simulate_world`. The pure-noise null gives every configuration its
group's mean learning curve (split, reward system or model size); `PLANTS` states each claim's
planted effect; `STRUCTURED_NULLS` the structured nulls and the claims each applies to
(`nulls_for`). `benchmarks/verdict_calibration.py` prints every rate with its 95% bound.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import polars as pl

from isolab.verdicts import effects as fx
from isolab.verdicts import interference_worlds as iw
from isolab.verdicts import lr_exponent as le
from isolab.verdicts import mixtures as mx
from isolab.verdicts import rho_optimum as ro
from isolab.verdicts import targets as tg
from isolab.verdicts.claims import CLAIMS, SEEN_COUNTS, verdict
from isolab.verdicts.fixed_batch import BP_MARGIN
from isolab.verdicts.noise import noise_model, seed_share
from isolab.verdicts.planned import NSTAR_LONG, NSTAR_MAIN, Grid, planned_study
from isolab.verdicts.verdict import decide
from isolab.verdicts.worlds import null_means, simulate_world
from isolab.vocab import DEFAULT_METRICS, EVAL_AVG, EVAL_BEST, EVAL_JUDGE, EVAL_WORST, ROLLOUTS

Data = dict[str, pl.DataFrame]
#: Groups whose curves differ in the null world (never an effect of the claims).
GROUPS = ("split", "reward", "model")


@dataclass(frozen=True)
class Plant:
    """A planted effect: its size in words and the function that adds it.

    Attributes:
        size: the effect in the claim's unit (what the power refers to).
        describe: the planted world in words.
        add: (sweep name, null means) → {metric: added values per row} (`isolab.verdicts.
            effects`).
        null_add: the same for the claim's own null world (default: nothing added; for an
            equivalence claim, the effect at its margin).
        world: (seed) → one simulated study with the effect, for a claim whose test needs a
            design its committed runs do not have (the rho claims: `isolab.verdicts.
            rho_optimum.study_world`); `add` and `null_add` are then unused.
        null_world: the same for the claim's own null.
    """

    size: float
    describe: str
    add: fx.Effect = fx.nothing
    null_add: fx.Effect | None = None
    world: Callable[[int], Data] | None = None
    null_world: Callable[[int], Data] | None = None


@dataclass(frozen=True)
class StructuredNull:
    """A world with an effect that a claim must not be called on.

    Attributes:
        describe: the world in words.
        claims: the claim ids it applies to.
        add: its effect on a design's null means (`isolab.verdicts.effects`), or None when
            `world` draws whole worlds.
        world: (seed) → one simulated study (sweep name → runs table), for a null that brings
            its own design (e.g. `isolab.verdicts.rho_optimum`'s); None when `add` is given.
    """

    describe: str
    claims: tuple[str, ...]
    add: fx.Effect | None = None
    world: Callable[[int], Data] | None = None


@dataclass(frozen=True)
class Setting:
    """A world's fixed parts, per sweep: the null means, the noise (metric → (evaluation SD,
    training SD) per row) and the share of training noise a seed's runs have in common."""

    means: dict[str, pl.DataFrame]
    noise: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]
    shares: dict[str, np.ndarray]


def noise_levels(df: pl.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per metric, (evaluation SD, training SD) for every row, measured per split (or on the
    whole table) from the design; a training SD the seeds do not resolve is taken as the
    evaluation SD (a conservative guess)."""
    groups = ["split"] if "split" in df.columns else []
    ev = {m: np.zeros(df.height) for m in DEFAULT_METRICS}
    tr = {m: np.zeros(df.height) for m in DEFAULT_METRICS}
    parts = df.partition_by(groups, as_dict=True) if groups else {("all",): df}
    for key, part in parts.items():
        mask = np.ones(df.height, bool)
        if groups:
            mask = (df["split"] == key[0]).to_numpy()
        for m, n in noise_model(part).items():
            ev[m][mask] = n.eval_sd
            tr[m][mask] = n.train_sd if math.isfinite(n.train_sd) else n.eval_sd
    return {m: (ev[m], tr[m]) for m in DEFAULT_METRICS if m in df.columns}


def seed_shares(df: pl.DataFrame) -> np.ndarray:
    """Per row, the share of the training variance common to one seed's runs, measured per split
    (`isolab.verdicts.noise.seed_share`)."""
    if "split" not in df.columns:
        return np.full(df.height, seed_share(df))
    out = np.zeros(df.height)
    for split in df["split"].unique().to_list():
        mask = (df["split"] == split).to_numpy()
        out[mask] = seed_share(df.filter(pl.col("split") == split))
    return out


def setting_of(data: Data, shared_seeds: bool = True) -> Setting:
    """The setting of a study's runs tables: their design, the noise they measured, their null
    means (each group's mean learning curve); seed shares as measured (0 with
    `shared_seeds=False`)."""
    return Setting(
        means={
            name: null_means(df, [m for m in DEFAULT_METRICS if m in df.columns], GROUPS)
            for name, df in data.items()
        },
        noise={name: noise_levels(df) for name, df in data.items()},
        shares={
            name: seed_shares(df) if shared_seeds else np.zeros(df.height)
            for name, df in data.items()
        },
    )


#: The sweeps each study reads on the planned design of issue 27 (n-vs-bp and bestk-worstk read
#: nstar's runs).
PLANNED_SWEEPS: dict[str, tuple[Grid, ...]] = {
    # nstar's `long` as committed (runs/nstar/cpu/long): 8 seeds per split
    "nstar": (NSTAR_MAIN, replace(NSTAR_LONG, seeds=tuple(range(8)))),
    "n-vs-bp": (NSTAR_MAIN,),
    "bestk-worstk": (NSTAR_MAIN, NSTAR_LONG),
}


def planned_setting(study: str, seed_share: float = 0.0, long_seeds: int | None = None) -> Setting:
    """The setting of `study` on the planned nstar design (`PLANNED_SWEEPS`,
    `isolab.verdicts.planned`); `long_seeds` seeds for the `long` sweep instead of its 3."""
    grids = PLANNED_SWEEPS[study]
    if long_seeds is not None:
        grids = tuple(
            replace(g, seeds=tuple(range(long_seeds))) if g.name == "long" else g for g in grids
        )
    p = planned_study(grids, seed_share=seed_share)
    return Setting(means=p.means, noise=p.noise, shares=p.shares)


def world(setting: Setting, effect: fx.Effect | None, seed: int) -> Data:
    """One simulated study on `setting`, with `effect` added to its means (None: the null)."""
    out = {}
    for i, (name, means) in enumerate(setting.means.items()):
        added = effect(name, means) if effect is not None else None
        out[name] = simulate_world(
            means, setting.noise[name], seed * 101 + i, added, setting.shares[name]
        )
    return out


def _vertex_rising(v_end: float, per_doubling: float, end: float = 16.0):
    return lambda lc: v_end + per_doubling * (lc - end)


def arm_curves(
    split: str | None,
    slow: Callable[[np.ndarray], np.ndarray],
    lift: Callable[[np.ndarray], np.ndarray],
) -> fx.Effect:
    """Each n on its own learning curve made from the split's mean curve R (`fx.base_curve`):
    avg@4 = R₀ + (R(C·2^(−slow(x))) − R₀)·(1 + lift(x)), x = log2 n − 2 (n = 4 keeps the
    split's curve, so the saturation gate reads it unchanged), R₀ the step-0 level: an n with
    slow(x) > 0 rises later, one with lift(x) > 0 plateaus higher. With larger n slower and
    higher, a larger n is behind early and ahead late: the Playbook's n* growing (issue 45);
    with the optimum both fastest and highest, n* never moves. On `split` (None: every split);
    best@4 and worst@4 through the mapping."""

    def add(_: str, means: pl.DataFrame) -> dict[str, np.ndarray]:
        R = fx.base_curve(means)
        on = fx._mask(means, split) & (means["step"] > 0).to_numpy()
        lc = np.log2(np.maximum(means[ROLLOUTS].to_numpy().astype(float), 1.0))
        x = fx.log2_of(means, "n") - 2.0
        start = R(on, np.full(means.height, -60.0))
        shaped = start + (R(on, lc - slow(x)) - start) * (1.0 + lift(x))
        d = np.where(on, shaped - means[EVAL_AVG].to_numpy().astype(float), 0.0)
        return fx.through_mapping(means, d)

    return add


def fixed_b_advantage(split: str, shape: Callable[[np.ndarray], np.ndarray]) -> fx.Effect:
    """avg@4 + shape(log2 C)·(log2 n − its mean) on `split` after step 0: within a fixed-B pair
    the larger n's advantage is shape(log2 C) avg@4 per doubling of n at every C (what
    `isolab.verdicts.fixed_batch.sign_changes` reads); best@4 and worst@4 through the mapping."""

    def add(_: str, means: pl.DataFrame) -> dict[str, np.ndarray]:
        on = fx._mask(means, split) & (means["step"] > 0).to_numpy()
        lc = fx.log2_of(means, ROLLOUTS)
        return fx.through_mapping(means, np.where(on, shape(lc) * fx.centred_log2(means, "n"), 0.0))

    return add


def rise_and_fall(peak: float) -> Callable[[np.ndarray], np.ndarray]:
    """An advantage `peak` at C = 2^12, zero at 2^9.5 and 2^14.5, −1.56·`peak` at 2^8 and 2^16:
    the larger n best in the middle of the range only (two sign changes)."""
    return lambda lc: peak * (1.0 - ((lc - 12.0) / 2.5) ** 2)


def sharpening(split: str, metric: str, per_doubling: float, vertex: float = 4.0) -> fx.Effect:
    """n moves avg@4 on `split` (concave in log2 n, vertex n = 2^`vertex`: at 16 the smaller n
    of the grid lie below the optimum; `fx.mechanism`), best@4 and worst@4 through the mapping,
    and `metric` by `per_doubling` per doubling of n (centred) × the share of training done
    beyond it: at equal avg@4 a larger n moves `metric` by that much."""
    base = fx.mechanism(split, None, 0.0, vertex)

    def add(name: str, means: pl.DataFrame) -> dict[str, np.ndarray]:
        out = base(name, means)
        on = fx._mask(means, split) & (means["step"] > 0).to_numpy()
        out[metric] = out[metric] + per_doubling * fx.centred_log2(means, "n") * fx.frac(means) * on
        return out

    return add


def _paper_growth(split: str, lift: float) -> fx.Effect:
    """The Playbook's shape: each doubling of n rises 0.75 doublings of C later, and plateaus
    higher up to n = 32 (lift·(6x − x²) of the split's gain, x = log2 n − 2)."""
    return arm_curves(split, lambda x: 0.75 * x, lambda x: lift * (6.0 * x - x**2))


PLANTS: dict[str, Plant] = {
    "healthy.kl_entropy_easy": Plant(
        size=0.06,
        describe="KL + entropy on lifts Easy avg@4 by 0.06 by the end",
        add=fx.arm("easy", "recipe", "kl_entropy", 0.06),
    ),
    "healthy.kl_entropy_hard": Plant(
        size=-0.03,
        describe="KL + entropy on lowers Hard avg@4 by 0.03",
        add=fx.arm("hard", "recipe", "kl_entropy", -0.03),
    ),
    "healthy.lr_sqrt": Plant(
        size=le.SQRT,
        describe=f"the best lr ∝ B^{le.SQRT} on the pre-registered (B, lr) grid ({le.SPEC}), "
        f"final avg@4 falling {le.CURVATURE} per doubling² of lr from it, noise SD "
        f"{le.NOISE_SD} (null: B^{le.SQRT - le.MARGIN}, the lower margin)",
        world=partial(le.study_world, le.SQRT),
        null_world=partial(le.study_world, le.SQRT - le.MARGIN),
    ),
    "nstar.grows_easy": Plant(
        size=3.0,
        describe="the Playbook's shape on Easy: each doubling of n rises 0.75 doublings of C "
        "later and plateaus higher up to n = 32 (0.03·(6x − x²) of the split's gain, x = log2 n "
        "− 2; n = 4 on the split's curve): a larger n behind early and ahead late, n* moving "
        "from 2 at 256 rollouts to 16 at 65,536 (3 doublings)",
        add=_paper_growth("easy", 0.03),
    ),
    "nstar.grows_hard": Plant(
        size=3.0,
        describe="the same shape on Hard (0.06·(6x − x²) of its smaller gain): n* from 2 to 16 "
        "(not found on the planned design: Hard's early lead is below its evaluation noise)",
        add=_paper_growth("hard", 0.06),
    ),
    "nstar.easy_above_hard": Plant(
        size=2.5,
        describe="avg@4 concave in log2 n (−0.012 per doubling²), best n 32 on Easy, 2^2.5 on Hard",
        add=fx.optimum_by_split(5.0, 2.5),
        null_add=fx.optimum_by_split(3.5, 3.5),
    ),
    "nvsbp.more_n_with_steps": Plant(
        size=0.005,
        describe="log2 n × log2 C interaction of 0.005 on Easy",
        add=fx.interaction("easy", 0.005),
    ),
    "nvsbp.nonmonotone_hard": Plant(
        size=0.006,
        describe="on Hard the larger n's advantage at fixed B rises and falls across C: +0.006 "
        "avg@4 per doubling of n at C = 2^12, zero at 2^9.5 and 2^14.5, −0.009 at 2^8 and 2^16 "
        "(two sign changes: the best n small, large, small)",
        add=fixed_b_advantage("hard", rise_and_fall(0.006)),
    ),
    "nvsbp.bp_matters_little": Plant(
        size=0.0,
        describe=f"no effect of B_p (null: {BP_MARGIN} avg@4 per doubling of B_p, the margin)",
        add=fx.nothing,
        null_add=fx.bp_effect(BP_MARGIN),
    ),
    "bestk.worst_easy": Plant(
        size=0.005,
        describe="on Easy n moves avg@4 (concave, vertex n = 16: the smaller n below the "
        "optimum) and worst@4 0.005 per doubling of n beyond the mapping (the committed runs "
        "read +0.0043 at equal avg@4)",
        add=sharpening("easy", EVAL_WORST, 0.005),
    ),
    "bestk.best_hard": Plant(
        size=0.003,
        describe="on Hard n moves avg@4 (concave, vertex n = 16) and best@4 0.003 per doubling "
        "of n beyond the mapping (the committed runs read +0.0011 at equal avg@4)",
        add=sharpening("hard", EVAL_BEST, 0.003),
    ),
    "rho.rule_above_model": Plant(
        size=ro.PAPER_GAP,
        describe="ρ* = 0.72 rule-based, 0.44 model-based (Δ logit 1.19), avg@4 concave in "
        "logit ρ, on the (k, μ) design (null: ρ* = 0.59 for every system)",
        world=partial(ro.study_world, "paper"),
        null_world=partial(ro.study_world, "rho-null"),
    ),
    "rho.learning_to_search": Plant(
        size=ro.PAPER_GAP,
        describe="the paper's 1.19 gap on ln(C_learning / C_search) (null: every system "
        "responds alike to k and μ, the knob null)",
        world=partial(ro.study_world, "preference"),
        null_world=partial(ro.study_world, "knob-null"),
    ),
    "rho.race_same_regime": Plant(
        size=1.0,
        describe="reward concave in ρ (−2 per unit²), peak at 0.9 for rule-based and 0.1 for "
        "model-based systems",
        add=fx.race(2.0),
    ),
    **{
        f"interference.less_forgetting_{split}": Plant(
            size=-0.005 if split == "easy" else -0.0008,
            describe=f"transient falls (logit −{iw.DROP}) of {iw.PLANTED_SHARE:.0%} of the "
            f"problems per interval at n = 2, {iw.PLANTED_SLOPE:.0%} fewer per doubling of n, "
            "on each arm's own measured curve (null: every arm on the split's mean curve, "
            "nothing falls)",
            world=partial(iw.study_world, "planted"),
            null_world=partial(iw.study_world, "flat"),
        )
        for split in ("easy", "hard")
    },
    "interference.less_forgetting_seen": Plant(
        size=-0.005,
        describe="the same on the seen training problems of `seen` (n = 2, 8, 32 on Easy)",
        world=partial(iw.study_world, "planted", sweep="seen", counts=SEEN_COUNTS),
        null_world=partial(iw.study_world, "flat", sweep="seen", counts=SEEN_COUNTS),
    ),
    "targets.different_nstar": Plant(
        size=-tg.WORLDS["apart"][0],
        describe=f"the shifted target's optimum {tg.WORLDS['apart'][0]} doublings of n above "
        "validation's, each a quadratic in log2 n at its measured level, curvature and noise "
        "(null: one optimum for both)",
        world=partial(tg.world, "apart"),
        null_world=partial(tg.world, "same"),
    ),
    "mixtures.nstar_between": Plant(
        size=1.5,
        describe="Easy's n* = 2^2.5, Hard's 2^5.5, the mix's midway (1.5 doublings inside "
        "either end), all curved at −0.006 per doubling², at each split's measured level, seed "
        "spread and noise (null: the mix's optimum at Easy's, the end of the range)",
        world=partial(mx.world, "between"),
        null_world=partial(mx.world, "at-easy"),
    ),
    "mixtures.never_coverage": Plant(
        size=0.05,
        describe="best@16 on `never`, every checkpoint, 0.05 higher per doubling of n by the end "
        "(growing with the share of training done) on the mean curve over n, at the measured "
        "noise (null: every n on the mean curve)",
        world=partial(mx.coverage_world, "flat", 0.05),
        null_world=partial(mx.coverage_world, "flat", 0.0),
    ),
    "targets.judge_nstar": Plant(
        size=-tg.WORLDS["apart"][0],
        describe=f"the judge's optimum {tg.WORLDS['apart'][0]} doublings of n above validation's, "
        "each a quadratic in log2 n at its measured level, curvature and noise (null: one "
        "optimum for both)",
        world=partial(tg.world, "apart", sweep="judge", second=EVAL_JUDGE),
        null_world=partial(tg.world, "same", sweep="judge", second=EVAL_JUDGE),
    ),
    "size.best_n_depends": Plant(
        size=0.03,
        describe="slopes in log2 n that differ by 0.03 from the smallest to the largest model",
        add=fx.size_slopes(0.03),
    ),
}

_GROWS = ("nstar.grows_easy", "nstar.grows_hard")
_BESTK = ("bestk.worst_easy", "bestk.best_hard")
_FORGETTING = ("interference.less_forgetting_easy", "interference.less_forgetting_hard")

#: Structured nulls by name. Another module adds its own with
#: `STRUCTURED_NULLS["name"] = StructuredNull(describe, claims=(claim id, …), world=...)`
#: (`isolab.verdicts.rho_optimum` brings its ρ-null and knob-null worlds that way).
STRUCTURED_NULLS: dict[str, StructuredNull] = {
    "fixed-optimum": StructuredNull(
        "avg@4 concave in log2 n (−0.012·frac per doubling² on Easy, −0.004 on Hard) with n* = "
        "2^3.5 at every C",
        _GROWS,
        fx.optimum(lambda lc: np.full_like(lc, 3.5), 0.012, curvature_hard=0.004),
    ),
    "fixed-optimum-edge": StructuredNull(
        "the same with n* = 4 at every C, one doubling above the grid's lower edge",
        _GROWS,
        fx.optimum(lambda lc: np.full_like(lc, 2.0), 0.012, curvature_hard=0.004),
    ),
    "compute-shift-rising": StructuredNull(
        "curves differ by a compute shift only: avg@4 = R(C·2^(0.5·(log2 n − 4))), R the "
        "split's mean curve (a larger n always better)",
        _GROWS,
        fx.compute_shift(lambda x: 0.5 * (x - 4.0)),
    ),
    "compute-shift-peaked": StructuredNull(
        "curves differ by a compute shift only: avg@4 = R(C·2^(−0.25·(log2 n − 2)²)), n = 4 "
        "best at every C (larger n catch up as R flattens)",
        _GROWS,
        fx.compute_shift(lambda x: -0.25 * (x - 2.0) ** 2),
    ),
    "compute-shift-slower": StructuredNull(
        "every n reaches the split's plateau, each doubling of n 0.75 doublings of C later: n = 2 "
        "best at every C, larger n behind early and tied late (a tie is not a better n)",
        _GROWS,
        arm_curves(None, lambda x: 0.75 * (x + 1.0), lambda x: np.zeros_like(x)),
    ),
    "fixed-optimum-arms-cross": StructuredNull(
        "n* = 8 at every C (fastest and highest); above it each doubling of n 1.25 doublings of "
        "C slower but only 2% lower, below it as fast but 10% lower per doubling²: n = 32 "
        "overtakes n = 2 while n = 8 stays best",
        _GROWS,
        arm_curves(
            None,
            lambda x: 1.25 * np.maximum(x - 1.0, 0.0),
            lambda x: -0.1 * np.minimum(x - 1.0, 0.0) ** 2 - 0.02 * np.maximum(x - 1.0, 0.0),
        ),
    ),
    "one-mapping": StructuredNull(
        "n moves avg@4 alone (concave, vertex n = 16); best@4 and worst@4 follow it through "
        "the split's compute mapping",
        _BESTK,
        fx.mechanism(None, None, 0.0),
    ),
    **{
        f"{name}{suffix}": StructuredNull(describe, ids, world=partial(iw.study_world, kind, **kw))
        for suffix, ids, kw in (
            ("", _FORGETTING, {}),
            (
                "-seen",
                ("interference.less_forgetting_seen",),
                {"sweep": "seen", "counts": SEEN_COUNTS},
            ),
        )  # fmt: skip
        for name, kind, describe in (
            (
                "no-falls-levels",
                "levels",
                "every arm on its own measured curve (levels and gains differ by n as in "
                "nstar's runs), every problem rising on its own: nothing falls",
            ),
            (
                "equal-wobble",
                "wobble",
                f"the same plus an independent wobble of every problem (logit SD {iw.WOBBLE}) "
                "at every checkpoint, equal for every n: real falls, no interference, no "
                "effect of n",
            ),
            (
                "falls-track-progress",
                "movement",
                f"the same with a wobble SD of {iw.WOBBLE_PER_GAIN:g} × the arm's mean gain "
                "per interval: an arm that learns more forgets more, no effect of n beyond "
                "progress",
            ),
        )
    },
    "same-optimum-flatter": StructuredNull(
        "one optimum for both targets, the shifted one half as curved (a target that cares "
        "less about n, not one that prefers another n)",
        ("targets.different_nstar",),
        world=partial(tg.world, "same-flatter"),
    ),
    "same-optimum-curved": StructuredNull(
        "one optimum for both targets, both curved at −0.006 per doubling² (where the design "
        "can locate them; planted 1.5 doublings apart there, `tg.world('apart-curved')`, the "
        "test finds it 181 times in 200)",
        ("targets.different_nstar",),
        world=partial(tg.world, "same-curved"),
    ),
    "judge-same-optimum-curved": StructuredNull(
        "one optimum for validation and the judge, both curved at −0.006 per doubling²",
        ("targets.judge_nstar",),
        world=partial(tg.world, "same-curved", sweep="judge", second=EVAL_JUDGE),
    ),
    "mix-at-hard": StructuredNull(
        "separated components (n* = 2^2.5 and 2^5.5), the mix's optimum at Hard's: the other "
        "end of the range",
        ("mixtures.nstar_between",),
        world=partial(mx.world, "at-hard"),
    ),
    "mix-one-optimum": StructuredNull(
        "one optimum (n* = 16) for Easy, Hard and the mix: nothing to lie between",
        ("mixtures.nstar_between",),
        world=partial(mx.world, "same"),
    ),
    "lr-exponent-upper-margin": StructuredNull(
        f"the best lr ∝ B^{le.SQRT + le.MARGIN}: the upper margin, as near linear as sqrt",
        ("healthy.lr_sqrt",),
        world=partial(le.study_world, le.SQRT + le.MARGIN),
    ),
    "advantage-concave-decline": StructuredNull(
        "on Hard the larger n's advantage at fixed B is 0 up to C = 2^12, then falls as "
        "−0.0003·(log2 C − 12)² (−0.005 at the budget, as the committed runs read): concave, "
        "never positive: the best n is the same (ties, then the smaller n) at every M",
        ("nvsbp.nonmonotone_hard",),
        fixed_b_advantage("hard", lambda lc: -0.0003 * np.maximum(lc - 12.0, 0.0) ** 2),
    ),
    "advantage-one-switch": StructuredNull(
        "on Hard the larger n's advantage falls linearly from +0.01 at C = 2^8 to −0.01 at "
        "2^16: one sign change, the best n switches once (monotone in M)",
        ("nvsbp.nonmonotone_hard",),
        fixed_b_advantage("hard", lambda lc: -0.0025 * (lc - 12.0)),
    ),
    "coverage-kept-not-expanded": StructuredNull(
        "each n on its own measured best@16 curve on `never`, shifted so that every n peaks at "
        "the same coverage: the smaller n lose it late, so a larger n is ahead at the budget "
        "without expanding coverage (what the committed runs show)",
        ("mixtures.never_coverage",),
        world=partial(mx.coverage_world, "kept", 0.0),
    ),
    "rho-low-edge": StructuredNull(
        "every reward system best below the grid's lowest ρ (ρ* = 0.018): a monotone response, "
        "no optimum to locate (what the committed μ-only runs show)",
        ("rho.rule_above_model", "rho.learning_to_search"),
        world=partial(ro.study_world, "low-edge"),
    ),
}


def gate_passes(setting: Setting, split: str, sims: int, gain: float = 0.0, seed: int = 0) -> int:
    """Worlds (of `sims`) in which nstar's saturation gate passes on `split`, when n = 4's
    `long` curve gains `gain` avg@4 more per doubling of C than the setting's own curve over
    its last two doublings (0: the setting's curve; the planned one gains < 0.004 there)."""
    from isolab.verdicts.claims import nstar_gate

    def add(name: str, means: pl.DataFrame) -> dict[str, np.ndarray]:
        if name != "long" or gain == 0:
            return {}
        lc = fx.log2_of(means, ROLLOUTS)
        top = float(lc.max())
        return fx.through_mapping(means, gain * np.clip(lc - (top - 2), 0, None))

    return sum(nstar_gate(world(setting, add, seed + k), split).passed for k in range(sims))


def calibrate_shift(
    split: str, setting: Setting, sims: int, effect: fx.Effect | None, seed: int = 0
) -> Counter:
    """Calls (`> 0` expected) of the test of "n* grows" alone, without the saturation gate: the
    crossing test on every checkpoint of `main` (`isolab.verdicts.crossing.crossing_test`, the
    claims' primary test since issue 45): how the test behaves where the gate lets it run,
    whatever the gate's own pass rate."""
    from isolab.verdicts.claims import Y
    from isolab.verdicts.crossing import crossing_test

    calls: Counter = Counter()
    for k in range(sims):
        main = world(setting, effect, seed + k)["main"].filter(pl.col("split") == split)
        r, _ = crossing_test(main, Y)
        calls[decide(r.estimate, r.p_value, "> 0")] += 1
    return calls


def nulls_for(claim_id: str) -> list[str]:
    """The structured nulls that apply to `claim_id`."""
    return [name for name, n in STRUCTURED_NULLS.items() if claim_id in n.claims]


def _setting(data: Data | Setting, shared_seeds: bool) -> Setting:
    return data if isinstance(data, Setting) else setting_of(data, shared_seeds)


def calibrate(
    claim_id: str,
    data: Data | Setting,
    sims: int,
    planted: bool,
    seed: int = 0,
    shared_seeds: bool = True,
    null: str | None = None,
) -> Counter:
    """Calls of `claim_id` over `sims` simulated worlds on the design of `data` (a study's runs
    tables, or a `Setting` such as `planned_setting`): with no effect (`planted=False`; the
    plant's `null_add` when it has one), with the planted effect (`planted=True`), or with the
    structured null named `null` (then `planted` is ignored). A world's runs of one seed share
    the part of their training noise the design measured as common to a seed (`seed_shares`;
    none with `shared_seeds=False`). Returns a Counter of calls."""
    claim = CLAIMS[claim_id]
    if null is not None:
        s = STRUCTURED_NULLS[null]
        own, add = s.world, s.add
    else:
        plant = PLANTS[claim_id]
        own = plant.world if planted else plant.null_world
        add = plant.add if planted else plant.null_add
    if own is None:  # a world on the design of `data`, with the effect added to its means
        setting = _setting(data, shared_seeds)
        own = partial(world, setting, add)
    calls: Counter = Counter()
    for k in range(sims):
        calls[verdict(claim, claim.run(own(seed + k))).call] += 1
    return calls
