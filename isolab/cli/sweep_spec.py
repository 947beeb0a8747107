"""The sweep spec on the command line: the `SPEC` argument of `isolab sweep plan|run|adaptive`
(`SpecPath`) and the spec read and planned, or exit 2 naming the field at fault (`load_plan`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from isolab.cli.common import console, fail, safe

if TYPE_CHECKING:  # the sweep package imports torch and MLflow: commands import it when run
    from isolab.sweep import SweepPlan

SpecPath = Annotated[Path, typer.Argument(help="Sweep spec YAML (e.g. studies/smoke.yaml).")]


def load_plan(spec_path: Path, probe: bool = False) -> SweepPlan:
    """Spec → plan, or exit 2 naming the field at fault; `probe`: wall times from a measured
    probe of the base model on this machine (`isolab.sweep.probe`)."""
    from isolab.sweep import SpecError, SweepSpec, plan_sweep, split_sizes

    try:
        spec = SweepSpec.from_yaml(spec_path)
        if probe:
            from isolab.sweep.probe import probe_timing

            timing, record = probe_timing(spec.base)
            m = record["measured"]
            console.print(
                f"probe of {safe(spec.base.model)} here ({safe(record['machine'])}): "
                f"{m['samples']} completions of {m['completion_tokens']} tokens in "
                f"{m['generate_s']:.2f} s, forward + backward {m['forward_backward_s']:.2f} s, "
                f"load {m['load_s']:.1f} s → {timing.rollout_s * 1e3:.1f} ms per rollout"
            )
            spec = dataclasses.replace(spec, timing=timing)
        return plan_sweep(spec, split_sizes(spec))
    except SpecError as exc:
        fail(f"{spec_path}: {exc}")
    raise AssertionError  # unreachable: fail raises
