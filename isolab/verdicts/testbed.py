"""Which CPU testbed a sweep's runs come from, and why runs of the old one leave a claim untested
(issue 46).

The CPU testbed was rebuilt for issue 27: a 96,000-problem pool (≈5.4k Easy training problems,
so a run sees each at most a few times), lr_base and a gradient clip from the lr pilot (5e-5
and 5.0: the clip binds on 0.1–6% of steps). The studies run before it — `healthy-recipe`
(regularisers, lr-scaling) and `model-size` — trained on the old one: a 4,000-problem pool,
lr_base 1.5e-4 and TRL's clip at 1.0, which bound on most steps. A clip that binds on most steps
makes every update the same length whatever the learning rate, so an lr or a regulariser is
compared under a different optimizer than the one the new testbed's claims use. Their claims
are marked untested, with the numbers that say why, until the sweeps are re-run.
"""

from __future__ import annotations

import polars as pl

#: The new testbed's pool (`pool_size` of studies/nstar/cpu/main.yaml; a test checks it).
NEW_POOL = 96_000
#: Per old-testbed sweep, the share of optimizer steps whose gradient norm exceeded the clip
#: (1.0), lowest and highest over its configurations (the mean over each configuration's runs),
#: from the sweep's committed history (grad_norm per step; tests/test_referee_calls.py
#: recomputes them).
CLIP_BINDING: dict[str, tuple[float, float]] = {
    "healthy-recipe/cpu/lr-scaling": (0.68, 0.95),
    "healthy-recipe/cpu/regularisers": (0.17, 0.96),
    "model-size/cpu/main": (0.47, 0.89),
}


def old_testbed(df: pl.DataFrame) -> str | None:
    """Why `df`'s runs are on the old testbed (`untested (old testbed: pool 4,000, lr_base
    1.5e-4, clip binding on 68–95% of steps)`), or None where they are on the new one (every
    run's `pool_size` is `NEW_POOL`)."""
    if "pool_size" not in df.columns or not df.height:
        return None
    pools = sorted(set(df["pool_size"].drop_nulls().to_list()))
    if pools == [NEW_POOL]:
        return None
    parts = [f"pool {', '.join(f'{p:,}' for p in pools)}"]
    if "lr_base" in df.columns:
        parts.append("lr_base " + ", ".join(_sci(v) for v in sorted(set(df["lr_base"]))))
    experiment = df["experiment"][0] if "experiment" in df.columns else None
    if experiment in CLIP_BINDING:
        lo, hi = CLIP_BINDING[experiment]
        parts.append(f"clip binding on {lo * 100:.0f}–{hi:.0%} of steps")
    return f"untested (old testbed: {', '.join(parts)}; the new testbed's pool is {NEW_POOL:,})"


def _sci(value: float) -> str:
    """`1.5e-4` (not `0.00015` or `1.50e-04`)."""
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"
