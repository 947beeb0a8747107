"""Calibration of every curated study's claims: each claim's test on simulated worlds with no
effect (a call is a false call), with structured nulls (effects it must not be mistaken for),
and with a planted effect of the paper's sign (an `agrees` is a detection).

This module only iterates over the registry: each study states its claims' planted effects
(`PLANTS`) and structured nulls (`STRUCTURED_NULLS`) in its folder's `worlds.py`
(`isolab/study/<study>/worlds.py`), built from `isolab.verdicts.calibration` (the `Setting` of a
design, `world`) and `isolab.verdicts.effects`. `benchmarks/verdict_calibration.py` prints every
rate with its 95% bound.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from functools import partial

from isolab.study.claims import CLAIMS
from isolab.study.registry import STUDIES, study_module
from isolab.verdicts.calibration import Data, Plant, Setting, StructuredNull, setting_of, world
from isolab.verdicts.claim import verdict
from isolab.verdicts.planned import Grid, planned_study

#: Every claim's planted effect, study by study in the registry's order.
PLANTS: dict[str, Plant] = {
    k: v for s in STUDIES.values() for k, v in study_module(s, "worlds").PLANTS.items()
}
#: Every structured null by name, with the claim ids it applies to (`nulls_for`).
STRUCTURED_NULLS: dict[str, StructuredNull] = {
    k: v for s in STUDIES.values() for k, v in study_module(s, "worlds").STRUCTURED_NULLS.items()
}

#: nstar's `main` sweep as planned in issue 27: split × B_p ∈ {16, 64} × n ∈ {2 … 128}, B ≤ 2,048 (7 values
#: of n at B_p = 16, 5 at B_p = 64), 65,536 rollouts, 9 checkpoints from 256, seeds 0–2.
NSTAR_MAIN = Grid(
    "main", ("easy", "hard"), (2, 4, 8, 16, 32, 64, 128), (16, 64), 65_536, 9, max_batch=2048
)
#: nstar's `long` sweep: n = 4, B_p = 16 to 131,072 rollouts on both splits (the saturation gate).
NSTAR_LONG = Grid("long", ("easy", "hard"), (4,), (16,), 131_072, 10)
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


def nulls_for(claim_id: str) -> list[str]:
    """The structured nulls that apply to `claim_id`."""
    return [name for name, n in STRUCTURED_NULLS.items() if claim_id in n.claims]


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
    the part of their training noise the design measured as common to a seed
    (`isolab.verdicts.calibration.seed_shares`; none with `shared_seeds=False`). Returns a
    Counter of calls."""
    claim = CLAIMS[claim_id]
    if null is not None:
        s = STRUCTURED_NULLS[null]
        own, add = s.world, s.add
    else:
        plant = PLANTS[claim_id]
        own = plant.world if planted else plant.null_world
        add = plant.add if planted else plant.null_add
    if own is None:  # a world on the design of `data`, with the effect added to its means
        setting = data if isinstance(data, Setting) else setting_of(data, shared_seeds)
        own = partial(world, setting, add)
    calls: Counter = Counter()
    for k in range(sims):
        calls[verdict(claim, claim.run(own(seed + k))).call] += 1
    return calls
