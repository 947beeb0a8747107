"""A sweep point's wall-time estimate: a `Timing` (the spec's, a probe's cached on this machine,
or the tiny presets' defaults) applied to a run's steps, rollouts and evaluations.

Any model without a timing here is `unknown` (`TimingSource`), and says so rather than a
tiny-model figure (SmolLM2 was once planned at 2 s a run).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from isolab import models
from isolab.config import RunConfig
from isolab.sweep.spec import SweepSpec, Timing

#: Where a point's wall-time estimate comes from: the spec's `timing` (or `--probe`'s), a probe
#: of its model cached on this machine, the tiny presets' defaults, or nowhere.
TimingSource = Literal["given", "cached probe", "tiny defaults", "unknown"]


def estimate_wall_s(cfg: RunConfig, n_evals: int, timing: Timing) -> float:
    """Rough wall time of a run (see `Timing`)."""
    steps = cfg.M * cfg.num_iterations
    samples = n_evals * cfg.eval_problems * cfg.eval_k_samples
    # every rollout generated once, those trained on once more per extra update pass
    rollouts = cfg.rollouts + cfg.B * cfg.M * (cfg.num_iterations - 1)
    return (
        timing.setup_s
        + steps * timing.step_s
        + rollouts * timing.rollout_s
        + samples * timing.eval_sample_s
    )


def timing_of(
    spec: SweepSpec, cfg: RunConfig, completion_len: float | None = None
) -> tuple[Timing, TimingSource]:
    """The `Timing` of a point's wall-time estimate and where it comes from: the spec's own
    when it gives one (`--probe` puts its measurement there), else a probe of the point's model,
    task and completion length cached on this machine (`isolab.sweep.probe`), else the defaults
    for the tiny arithmetic presets, fitted to their committed CPU sweeps. Any other model
    (SmolLM2, a hub id, `tiny-chat`'s few-hundred-byte prompts) is `unknown`: `Timing()` then
    only weighs the point in a progress bar.

    A probe times completions at the cap; with a measured mean `completion_len`
    (`isolab.sweep.lengths`) its per-rollout and per-sample times are scaled to it (generation
    and the passes over a completion grow with its length), never below the defaults."""
    from isolab.sweep.probe import cached_timing

    cached = None if models.is_tiny(cfg.model) else cached_timing(cfg)
    if spec.timing != Timing():
        if spec.timing != cached:  # a person's timing: taken as it is
            return spec.timing, "given"
        return _at_length(spec.timing, cfg, completion_len), "given"  # `--probe`'s
    if models.is_tiny(cfg.model):
        return Timing(), "tiny defaults"
    if cached is None:
        return Timing(), "unknown"
    return _at_length(cached, cfg, completion_len), "cached probe"


def _at_length(probe: Timing, cfg: RunConfig, completion_len: float | None) -> Timing:
    """A probe's `Timing` (completions at the cap) for completions of `completion_len` tokens."""
    if completion_len is None:
        return probe
    share = min(1.0, completion_len / cfg.max_completion_tokens)
    default = Timing()
    return dataclasses.replace(
        probe,
        rollout_s=max(default.rollout_s, probe.rollout_s * share),
        eval_sample_s=max(default.eval_sample_s, probe.eval_sample_s * share),
    )
