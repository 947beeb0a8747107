"""When a sweep's runs evaluate: checkpoints geometric in compute up to the budget, the same for
every run, and whether they let the recommendation check itself (its advice made from the
evaluations at ≤ C/2 and ≤ C/4, scored at C: `isolab.frontier.validate`).
"""

from __future__ import annotations

import math

from isolab.config import RunConfig
from isolab.frontier.recommend import CHECK_FACTORS
from isolab.sweep.grid import SweepPlan
from isolab.sweep.spec import SpecError, SweepSpec


def eval_fractions(points: int, ratio: float) -> tuple[float, ...]:
    """Checkpoint fractions of the budget, geometric, ending at 1: (1/ratio^(k-1), …, 1)."""
    return tuple(ratio ** -(points - 1 - j) for j in range(points))


def checkpoints(budget_rollouts: float, fractions: tuple[float, ...]) -> tuple[int, ...]:
    """Rollout counts at which a run is evaluated: the fractions of its budget, ≥ 1, distinct."""
    return tuple(sorted({max(1, int(round(budget_rollouts * f))) for f in fractions}))


def check_first_checkpoint(spec: SweepSpec) -> None:
    """The first checkpoint, budget / eval_ratio^(eval_points - 1), is at least one rollout:
    else the checkpoints under one merge into one and a run has fewer than `eval_points`."""
    gaps = spec.eval_points - 1
    budget = spec.budget_rollouts
    if budget is not None and gaps * math.log(spec.eval_ratio) > math.log(budget):
        raise SpecError(
            "eval_ratio",
            f"{spec.eval_ratio:g}: the first of {spec.eval_points} checkpoints would be at "
            f"budget_rollouts / eval_ratio^{gaps} = {budget:,} / {spec.eval_ratio:g}^{gaps}, "
            f"under one rollout, so a run would have fewer than {spec.eval_points}; lower "
            "eval_ratio or eval_points.",
        )


def eval_steps(cfg: RunConfig) -> list[int]:
    """The optimizer steps after which a run evaluates (`isolab.rl.evaluate.Evaluator.due`):
    the first step whose rollouts reach each checkpoint of `eval_at_rollouts`, and the last."""
    per_step = cfg.rollouts_per_step
    return sorted({min(-(-c // per_step), cfg.M) for c in cfg.eval_at_rollouts or ()} | {cfg.M})


def self_check_gaps(plan: SweepPlan, factors: tuple[float, ...] = CHECK_FACTORS) -> list[str]:
    """Why the recommendation's held-out self-checks (`isolab.frontier.validate`: the advice
    made from the evaluations at ≤ C / factor, scored at C, C the compute every run reaches)
    will be off, one sentence per factor naming the points: a point whose evaluation nearest
    C / factor (in log compute) is at C or beyond has seen C already, so that check cannot be
    made, and without the C/2 one `recommend` vouches for no budget beyond the data (it was
    once switched off so, silently). Iso-compute sweeps only: an IsoFLOP grid's runs reach
    different rollouts."""
    if plan.spec.budget_rollouts is None or not plan.points:
        return []
    reached = {
        p.run_key: [s * p.config.rollouts_per_step for s in eval_steps(p.config)]
        for p in plan.points
    }
    C = min(r[-1] for r in reached.values())
    out = []
    for factor in factors:
        target = math.log(C / factor)
        late = [
            p.config.run_name
            for p in plan.points
            if min(reached[p.run_key], key=lambda r: abs(math.log(r) - target)) >= C
        ]
        if late:
            out.append(
                f"no evaluation near C/{factor:g} = {C / factor:,.0f} rollouts before C = "
                f"{C:,.0f} for {', '.join(dict.fromkeys(late))}: the recommendation's "
                f"C/{factor:g} self-check will be off (raise budget_rollouts or lower B_p·n "
                "so that each takes more steps, or place a checkpoint near it with eval_points "
                "and eval_ratio)"
            )
    return out
