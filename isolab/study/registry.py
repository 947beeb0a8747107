"""The ten curated studies (one per notebook), their sweeps at each scale, and where their
specs, snapshots and results live."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import polars as pl

from isolab.paths import bundle_dir, results_root, studies_dir
from isolab.sweep import SweepPlan, SweepSpec, plan_sweep, split_sizes

if TYPE_CHECKING:
    from isolab.verdicts.preregistration import Registration

SCALES = ("smoke", "cpu", "gpu")


@dataclass(frozen=True)
class Study:
    """One curated study (one notebook).

    Attributes:
        name: the study's name (`isolab study run NAME`), also its folder under `studies/`.
        notebook: the notebook that presents it (`notebooks/<notebook>.ipynb`).
        title: one line.
        question: what it answers, and what the papers found.
        sweeps: the sweeps it analyses, by name (`studies/<source>/<scale>/<sweep>.yaml`).
        source: the study whose sweeps are read (its own name unless it re-analyses another's
            runs, as `bestk-worstk` does with `nstar`).
        package: its folder `isolab/study/<package>/`: `analysis.py` (the function of the same
            name that turns the runs into a report), `claims.py` (the claims it tests, `CLAIMS`)
            and `worlds.py` (their calibration worlds: `PLANTS`, `STRUCTURED_NULLS`).
        sensitivity: sweeps of the same grid with one setting changed (nstar's `lr-half`:
            lr_base/2), read from their snapshots where they exist: each is analysed on its
            own, the study's claims tested again on it, and never mixed into the main analysis.
    """

    name: str
    notebook: str
    title: str
    question: str
    sweeps: tuple[str, ...]
    package: str
    source: str = ""
    sensitivity: tuple[str, ...] = ()

    @property
    def data_study(self) -> str:
        return self.source or self.name


STUDIES: dict[str, Study] = {
    s.name: s
    for s in (
        Study(
            "healthy-recipe",
            "01_healthy_recipe",
            "The healthy GRPO recipe: regularisers per split, LR scaling with the batch",
            "KL + entropy losses on or off on Easy and Hard problems, and whether the learning "
            "rate should stay constant or grow as sqrt(B) or B: the old testbed's contest of "
            "rules (`lr-scaling`) and the new testbed's (B, lr) grid (`lr-grid`), which "
            "locates the best lr at each B. The IsoCompute Playbook keeps KL + entropy on Easy "
            "sets, drops them on Hard sets, and picks sqrt scaling.",
            sweeps=("regularisers", "lr-scaling", "lr-grid"),
            package="healthy_recipe",
        ),
        Study(
            "nstar",
            "02_nstar_vs_compute",
            "n*(C): the compute-optimal rollouts per problem, and where it saturates",
            "The frontier of reward against compute over n × B_p grids at equal rollouts, its "
            "record-breaking points, and n*(C) with a fitted saturation on Easy and Hard splits "
            "(`main`), with longer Easy runs at 4× the compute (`long`). The Playbook finds n* "
            "grows with C and saturates higher on Easy (≈512) than on Hard (≈128) for "
            "Qwen2.5-7B.",
            sweeps=("main", "long"),
            package="nstar",
            sensitivity=("lr-half",),
        ),
        Study(
            "n-vs-bp",
            "03_n_vs_Bp_fixed_batch",
            "More rollouts or more problems at a fixed batch B = B_p·n",
            "At fixed B every split costs the same per step. The Playbook finds (Easy) that few "
            "steps favour more problems (large B_p) and many steps favour more rollouts (large "
            "n); on Hard the best n is non-monotone in M; and B_p matters little in a moderate "
            "range at fixed n. Re-analyses the five fixed-B pairs of the runs of `nstar` "
            "(B_p = 16 and 64 at B = 128 … 2,048).",
            sweeps=("main",),
            package="n_vs_bp",
            source="nstar",
            sensitivity=("lr-half",),
        ),
        Study(
            "bestk-worstk",
            "04_bestk_worstk",
            "How the metric (avg@4, best@4, worst@4) moves n*",
            "n*(C) under coverage (best@4) and sharpening (worst@4). The Playbook finds that on "
            "Easy sets a larger n mainly lifts worst@k, on Hard sets best@k. Re-analyses the "
            "runs of `nstar`.",
            sweeps=("main", "long"),
            package="bestk_worstk",
            source="nstar",
            sensitivity=("lr-half",),
        ),
        Study(
            "reward-rho",
            "05_reward_rho_race",
            "Reward systems and the update fraction ρ at equal FLOPs; the RACE pilot",
            "Reward against ρ = C_learning / C_total per reward system, ρ* per system, and "
            "whether a cheap pilot grid calls the same regime as the full grid. Wilhelm & Kao "
            "find ρ* ≈ 0.72 for rule-based rewards, ≈ 0.44 for PRM-style ones, and a "
            "same-regime rate of 1.0 for RACE.",
            sweeps=("full", "pilot"),
            package="reward_rho",
        ),
        Study(
            "model-size",
            "06_model_size",
            "Model size at equal FLOPs",
            "tiny-s, tiny-m and tiny-l trained with the same FLOP budget: a bigger model buys "
            "fewer rollouts and fewer updates. Does it still win? Wilhelm & Kao find the best "
            "allocation depends on model size.",
            sweeps=("main",),
            package="model_size",
        ),
        Study(
            "interference",
            "07_interference",
            "Interference between problems: forgetting events by n at equal compute",
            "How often a problem's solve rate falls between checkpoints beyond binomial noise, "
            "per unit of compute, as n grows (and the steps M shrink). The Playbook finds that "
            "updates on a mixture of problems interfere, and that a larger n spreads them more "
            "evenly and mitigates this better than more sequential steps. Re-analyses the "
            "per-problem counts of `nstar`'s runs (validation), and `seen`: three of its Easy "
            "arms again with their own training problems evaluated too.",
            sweeps=("main", "seen"),
            package="interference",
            source="nstar",
        ),
        Study(
            "targets",
            "08_eval_targets",
            "Evaluation targets that disagree: n* on validation against a shifted distribution",
            "Whether the n that is best on the training distribution's own validation set is "
            "also best on problems the policy never trains on (sums of up to three operands). "
            "Wilhelm & Kao find that the native reward, downstream pass@1 and a judge of "
            "process quality pick different allocations. `targets`: nstar's Hard arms at B_p = "
            "16, n = 2 … 32, with the shifted set evaluated beside validation; `judge`: the same "
            "runs again with a judge of process quality (the tiny PRM) scoring every completion.",
            sweeps=("targets", "judge"),
            package="targets",
            source="nstar",
        ),
        Study(
            "mixtures",
            "09_mixtures",
            "Mixed and extremely hard sets: n* on a mix against its components, n on `never`",
            "Where n* lies on a 1:1 mix of Easy and Hard problems, against Easy's and Hard's on "
            "the same design, and what a larger n buys on problems the base never solved in 16 "
            "samples. The IsoCompute Playbook trains on heterogeneous mixtures, and finds that "
            "on hard problems a larger n expands coverage (best@k). `main`: nstar's Easy and Hard "
            "runs; `mix`: the mix on its B_p = 16 row; `never`: n = 2, 8, 32 on `never`.",
            sweeps=("main", "mix", "never"),
            package="mixtures",
            source="nstar",
        ),
        Study(
            "allocation",
            "10_allocation",
            "Per-prompt allocation: uniform n against adaptive allocators at equal FLOPs",
            "Whether spending a step's rollouts unevenly across its problems (`allocation`: "
            "DAPO's dynamic sampling, SARA-like early stopping, a knapsack-like variance split) "
            "reaches the avg@4 of the best uniform n with fewer FLOPs, every generated rollout "
            "charged, the discarded ones included. The per-prompt papers (Knapsack RL, VIP, "
            "SARA, Pilot-Commit) report savings in rollouts or steps, not at equal FLOPs. "
            "`main`: uniform n = 4, 8, 16 and the three allocators at n = 8, B = 128, on Easy, "
            "Hard and their mix, 3 seeds, IsoFLOP; `n4` (sensitivity): the allocators at n = 4, "
            "the best uniform n of `main`, uniform arms on new seeds.",
            sweeps=("main",),
            package="allocation",
            sensitivity=("n4",),
        ),
    )
}


def study_module(study: Study, part: str) -> ModuleType:
    """The module `part` (`analysis`, `claims`, `worlds`) of the study's folder."""
    return import_module(f"isolab.study.{study.package}.{part}")


def get(name: str) -> Study:
    """The study `name`, or a ValueError listing the studies."""
    if name not in STUDIES:
        raise ValueError(f"study {name!r} unknown; choose one of: {', '.join(STUDIES)}.")
    return STUDIES[name]


def check_scale(scale: str) -> None:
    if scale not in SCALES:
        raise ValueError(f"scale = {scale!r}: choose one of {', '.join(SCALES)}.")


def spec_path(study: Study, scale: str, sweep: str) -> Path:
    return studies_dir() / study.data_study / scale / f"{sweep}.yaml"


def snapshot_dir(study: Study, scale: str, sweep: str) -> Path:
    """`runs/<data study>/<scale>/<sweep>/`: the parquet snapshot of one sweep, where it is
    written; `find_snapshot` also finds the one isolab ships."""
    return results_root() / study.data_study / scale / sweep


def find_snapshot(study: Study, scale: str, sweep: str) -> Path:
    """The snapshot to read: the project's (`snapshot_dir`), else the committed one that the
    installed package carries (`isolab.paths.bundle_dir`), else the project's path (absent)."""
    from isolab.tracking.snapshot import is_snapshot

    mine = snapshot_dir(study, scale, sweep)
    shipped = bundle_dir() / "runs" / study.data_study / scale / sweep
    return shipped if not is_snapshot(mine) and is_snapshot(shipped) else mine


def preregistration_path(study: Study) -> Path:
    """`studies/<study>/preregistered.yaml`: each claim's test, estimand, unit and gate, and
    when the test was fixed (`isolab.verdicts.preregistration`)."""
    return studies_dir() / study.name / "preregistered.yaml"


def registrations(study: Study) -> dict[str, Registration]:
    """The study's registered claims (empty where it has no preregistered.yaml)."""
    from isolab.verdicts.preregistration import load_registrations

    path = preregistration_path(study)
    if not path.exists():
        return {}
    return load_registrations(path, f"studies/{study.name}/preregistered.yaml")


def shipped_runs(name: str, sweep: str, scale: str = "cpu") -> pl.DataFrame:
    """The runs table of the sweep `sweep` that study `name` reads, from the snapshot isolab
    ships (`isolab.paths.bundle_dir`: the same bytes wherever it is installed): what the
    calibration worlds of a study are drawn on."""
    study = get(name)
    return pl.read_parquet(
        bundle_dir() / "runs" / study.data_study / scale / sweep / "runs.parquet"
    )


def output_dir(study: Study, scale: str) -> Path:
    """`runs/<study>/<scale>/`: the study's figures, tables and findings."""
    return results_root() / study.name / scale


def load_spec(study: Study, scale: str, sweep: str) -> SweepSpec:
    """One sweep's spec at a scale (a missing file says which to write)."""
    check_scale(scale)
    path = spec_path(study, scale, sweep)
    if not path.exists():
        have = sorted(p.name for p in path.parent.parent.glob("*") if p.is_dir())
        raise FileNotFoundError(
            f"no {scale}-scale spec for study {study.name!r}: {path} is missing "
            f"(scales with specs: {', '.join(have) or 'none'})."
        )
    return SweepSpec.from_yaml(path)


def load_specs(study: Study, scale: str) -> dict[str, SweepSpec]:
    """The sweep specs of a study at a scale."""
    return {sweep: load_spec(study, scale, sweep) for sweep in study.sweeps}


def plans(study: Study, scale: str) -> dict[str, SweepPlan]:
    return {k: plan_sweep(s, split_sizes(s)) for k, s in load_specs(study, scale).items()}


def has_snapshots(study: Study, scale: str) -> bool:
    from isolab.tracking.snapshot import is_snapshot

    return all(is_snapshot(find_snapshot(study, scale, s)) for s in study.sweeps)


def describe(study: Study, scale: str) -> pl.DataFrame:
    """One row per sweep: its spec, points, budget, estimated wall time, snapshot present."""
    from isolab.tracking.snapshot import is_snapshot

    rows = []
    for sweep, plan in plans(study, scale).items():
        spec = plan.spec
        budget = (
            f"{spec.budget_rollouts:,} rollouts"
            if spec.budget_rollouts is not None
            else f"{spec.budget_flops:.3g} FLOPs"
        )
        rows.append(
            {
                "sweep": sweep,
                "experiment": spec.name,
                "points": len(plan.points),
                "budget": budget,
                "est_serial_min": round(plan.est_wall_s / 60, 1),
                "snapshot": is_snapshot(find_snapshot(study, scale, sweep)),
            }
        )
    return pl.DataFrame(rows)
