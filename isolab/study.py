"""The curated studies behind the notebooks: their sweeps at each scale, snapshots and analyses.

A *study* is one notebook's question (`STUDIES`): one or more sweeps, each a plain sweep spec
``studies/<study>/<scale>/<sweep>.yaml`` whose MLflow experiment is ``<study>/<scale>/<sweep>``,
and an analysis function in `isolab.analyses`. Scales:

- ``smoke``: seconds per run, what CI executes;
- ``cpu``: a laptop, minutes per sweep; its snapshots are committed under ``runs/``;
- ``gpu``: real LLMs on a GPU machine.

`collect` gives each sweep's runs table: from the snapshot ``runs/<study>/<scale>/<sweep>/``
when it exists (a reader re-plots without training), otherwise by running the sweep through the
resumable runner (finished points are skipped) and then writing the snapshot. `run` is
`collect` + `analyse` + `save`: what both the notebooks and ``isolab study run`` do.

Example::

    from isolab import study
    report = study.run("nstar", "cpu")       # re-plots from runs/nstar/cpu/ when present
    print(report.summary_text())
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from isolab.study_spec import StudyPlan, StudySpec, plan_study, split_sizes

if TYPE_CHECKING:
    from isolab.analyses import Report

logger = logging.getLogger(__name__)

SCALES = ("smoke", "cpu", "gpu")
_REPO = Path(__file__).resolve().parents[1]


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
        analysis: name of the function in `isolab.analyses` that turns the runs into a report.
    """

    name: str
    notebook: str
    title: str
    question: str
    sweeps: tuple[str, ...]
    analysis: str
    source: str = ""

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
            "rate should stay constant or grow as sqrt(B) or B. The IsoCompute Playbook keeps "
            "KL + entropy on Easy sets, drops them on Hard sets, and picks sqrt scaling.",
            ("regularisers", "lr-scaling"),
            "healthy_recipe",
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
            ("main", "long"),
            "nstar",
        ),
        Study(
            "n-vs-bp",
            "03_n_vs_Bp_fixed_batch",
            "More rollouts or more problems at a fixed batch B = B_p·n",
            "At fixed B every split costs the same per step. The Playbook finds (Easy) that few "
            "steps favour more problems (large B_p) and many steps favour more rollouts (large "
            "n); on Hard the best n is non-monotone in M.",
            ("main",),
            "n_vs_bp",
        ),
        Study(
            "bestk-worstk",
            "04_bestk_worstk",
            "How the metric (avg@4, best@4, worst@4) moves n*",
            "n*(C) under coverage (best@4) and sharpening (worst@4). The Playbook finds that on "
            "Easy sets a larger n mainly lifts worst@k, on Hard sets best@k. Re-analyses the "
            "runs of `nstar`.",
            ("main", "long"),
            "bestk_worstk",
            source="nstar",
        ),
        Study(
            "reward-rho",
            "05_reward_rho_race",
            "Reward systems and the update fraction ρ at equal FLOPs; the RACE pilot",
            "Reward against ρ = C_learning / C_total per reward system, ρ* per system, and "
            "whether a cheap pilot grid calls the same regime as the full grid. Wilhelm & Kao "
            "find ρ* ≈ 0.72 for rule-based rewards, ≈ 0.44 for PRM-style ones, and a "
            "same-regime rate of 1.0 for RACE.",
            ("full", "pilot"),
            "reward_rho",
        ),
        Study(
            "model-size",
            "06_model_size",
            "Model size at equal FLOPs",
            "tiny-s, tiny-m and tiny-l trained with the same FLOP budget: a bigger model buys "
            "fewer rollouts and fewer updates. Does it still win? Wilhelm & Kao find the best "
            "allocation depends on model size.",
            ("main",),
            "model_size",
        ),
    )
}


def get(name: str) -> Study:
    """The study `name`, or a ValueError listing the studies."""
    if name not in STUDIES:
        raise ValueError(f"study {name!r} unknown; choose one of: {', '.join(STUDIES)}.")
    return STUDIES[name]


def _check_scale(scale: str) -> None:
    if scale not in SCALES:
        raise ValueError(f"scale = {scale!r}: choose one of {', '.join(SCALES)}.")


def studies_dir() -> Path:
    """Where the sweep specs live: `$ISOLAB_STUDIES_DIR`, else the repo's `studies/`."""
    return Path(os.environ.get("ISOLAB_STUDIES_DIR") or _REPO / "studies")


def results_root() -> Path:
    """Where snapshots and figures go: `$ISOLAB_RESULTS_DIR`, else the project's `runs/`
    (`isolab.tracking.runs_dir`)."""
    from isolab.tracking import runs_dir

    return Path(os.environ.get("ISOLAB_RESULTS_DIR") or runs_dir())


def spec_path(study: Study, scale: str, sweep: str) -> Path:
    return studies_dir() / study.data_study / scale / f"{sweep}.yaml"


def snapshot_dir(study: Study, scale: str, sweep: str) -> Path:
    """`runs/<data study>/<scale>/<sweep>/`: the parquet snapshot of one sweep."""
    return results_root() / study.data_study / scale / sweep


def output_dir(study: Study, scale: str) -> Path:
    """`runs/<study>/<scale>/`: the study's figures, tables and findings."""
    return results_root() / study.name / scale


def load_spec(study: Study, scale: str, sweep: str) -> StudySpec:
    """One sweep's spec at a scale (a missing file says which to write)."""
    _check_scale(scale)
    path = spec_path(study, scale, sweep)
    if not path.exists():
        have = sorted(p.name for p in path.parent.parent.glob("*") if p.is_dir())
        raise FileNotFoundError(
            f"no {scale}-scale spec for study {study.name!r}: {path} is missing "
            f"(scales with specs: {', '.join(have) or 'none'})."
        )
    return StudySpec.from_yaml(path)


def load_specs(study: Study, scale: str) -> dict[str, StudySpec]:
    """The sweep specs of a study at a scale."""
    return {sweep: load_spec(study, scale, sweep) for sweep in study.sweeps}


def plans(study: Study, scale: str) -> dict[str, StudyPlan]:
    return {k: plan_study(s, split_sizes(s)) for k, s in load_specs(study, scale).items()}


def has_snapshots(study: Study, scale: str) -> bool:
    from isolab.runs import is_snapshot

    return all(is_snapshot(snapshot_dir(study, scale, s)) for s in study.sweeps)


def describe(study: Study, scale: str) -> pl.DataFrame:
    """One row per sweep: its spec, points, budget, estimated wall time, snapshot present."""
    from isolab.runs import is_snapshot

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
                "snapshot": is_snapshot(snapshot_dir(study, scale, sweep)),
            }
        )
    return pl.DataFrame(rows)


def collect(
    study: Study | str,
    scale: str,
    *,
    workers: int = 2,
    rerun: bool = False,
    tracking_uri: str | None = None,
    progress: bool = True,
) -> dict[str, pl.DataFrame]:
    """Each sweep's runs table: from its snapshot, or by running the sweep and snapshotting it.

    Args:
        study: the study or its name.
        scale: `smoke`, `cpu` or `gpu`.
        workers: runs at once (local worker processes) when a sweep must run; 1 runs them one
            after another in this process, which saves the workers' start-up (tens of seconds)
            on small sweeps.
        rerun: run the sweeps even where a snapshot exists (the runner still skips points
            already FINISHED in the store), then rewrite the snapshots.
        tracking_uri: MLflow store (default `$MLFLOW_TRACKING_URI`, else runs/mlflow.db).
        progress: show a progress bar while sweeps run.

    Raises:
        RuntimeError: when a sweep leaves failed points (their errors are in the message) or
            is interrupted; finished runs are kept, so calling again resumes.
    """
    from isolab.runs import (
        digest_mismatches,
        export_runs,
        is_snapshot,
        load_runs,
        read_snapshot_meta,
    )

    study = get(study) if isinstance(study, str) else study
    _check_scale(scale)
    out: dict[str, pl.DataFrame] = {}
    for sweep in study.sweeps:
        snap = snapshot_dir(study, scale, sweep)
        if is_snapshot(snap) and not rerun:
            out[sweep] = load_runs(snap)
            _check_snapshot(snap, read_snapshot_meta(snap), study, scale, sweep)
            for sentence in digest_mismatches(out[sweep]):
                logger.warning("%s: %s", snap, sentence)
            continue
        spec = load_spec(study, scale, sweep)
        plan = plan_study(spec, split_sizes(spec))
        _run_sweep(plan, workers, tracking_uri, progress)
        keys = sorted(p.run_key for p in plan.points)
        # only this spec's points: runs of an earlier version of the spec stay out
        df = load_runs(spec.name, tracking_uri=tracking_uri).filter(pl.col("run_key").is_in(keys))
        export_runs(df, snap, study=spec.name, extra_meta={"run_keys": keys})
        out[sweep] = df
    return out


def _check_snapshot(snap: Path, meta: dict, study: Study, scale: str, sweep: str) -> None:
    """Warn when a snapshot was made from other points than the spec now plans (an edited
    spec): the analysis then shows the snapshot's runs, and `rerun=True` runs the missing ones."""
    saved = set(meta.get("run_keys") or [])
    if not saved:
        return
    try:
        spec = load_spec(study, scale, sweep)
        planned = {p.run_key for p in plan_study(spec, split_sizes(spec)).points}
    except (OSError, ValueError) as exc:  # a spec that cannot be planned here (gpu, offline)
        logger.info("cannot check %s against its spec: %s", snap, exc)
        return
    if planned != saved:
        logger.warning(
            "%s holds %d runs the spec %s no longer plans and lacks %d it plans: showing the "
            "snapshot; pass rerun=True (isolab study run --rerun) to run the missing points",
            snap,
            len(saved - planned),
            spec_path(study, scale, sweep),
            len(planned - saved),
        )


def _run_sweep(plan: StudyPlan, workers: int, tracking_uri: str | None, progress: bool) -> None:
    from isolab import sweep

    todo, state = sweep.pending(plan, tracking_uri)
    logger.info(
        "%s: %d points, %d finished (skipped), %d to run",
        plan.spec.name,
        len(plan.points),
        len(state.finished),
        len(todo),
    )
    if not todo:
        return
    if workers == 1:  # runs in this process: keep its output to the progress bar
        from isolab.cli import quiet_libraries

        quiet_libraries()
    bar = None
    if progress:
        from tqdm.std import tqdm  # text: it reads the same in a terminal and a saved notebook

        est = sum(p.est_wall_s for p in todo) / max(1, workers)
        eta = f"{est / 60:.0f} min" if est >= 90 else f"{est:.0f} s"
        bar = tqdm(
            total=len(todo),
            desc=f"{plan.spec.name} (est. {eta})",
            unit="run",
        )

    def on_result(outcome: Any, point: Any) -> None:
        if bar is not None:
            value = "—" if math.isnan(outcome.metric) else f"{outcome.metric:.3f}"
            bar.set_postfix_str(f"{outcome.run_name} {outcome.status} {value}")
            bar.update(1)

    try:
        # one worker on CPU: in this process. On GPUs keep process isolation: several
        # generation engines in one process do not reliably free GPU memory between runs.
        inline = workers == 1 and plan.spec.resources.gpus_per_run == 0
        backend = "inline" if inline else "local"
        outcomes, interrupted = sweep.execute(
            todo, plan, tracking_uri, workers=workers, backend=backend, on_result=on_result
        )
    finally:
        if bar is not None:
            bar.close()
    failed = [o for o in outcomes if o.status != "FINISHED"]
    if interrupted or failed:
        what = "interrupted" if interrupted else f"{len(failed)} run(s) failed"
        errors = "; ".join(f"{o.run_name}: {o.error or o.status}" for o in failed[:5])
        raise RuntimeError(
            f"sweep {plan.spec.name} {what} ({errors}). Finished runs are kept in the store: "
            "call again to resume the remaining points."
        )


def analyse(study: Study | str, data: dict[str, pl.DataFrame], scale: str = "cpu") -> Report:
    """The study's analysis (`isolab.analyses.<study.analysis>`) over its runs tables."""
    from isolab import analyses

    study = get(study) if isinstance(study, str) else study
    fn: Callable[..., Report] = getattr(analyses, study.analysis)
    return fn(data, scale=scale)


def save(
    study: Study | str,
    scale: str,
    report: Report,
    *,
    log: bool = True,
    tracking_uri: str | None = None,
) -> Path:
    """Write the report's figures (PNG), tables (CSV) and findings (JSON, Markdown) under
    `runs/<study>/<scale>/`, and log them to MLflow as the analysis run of experiment
    `<study>/<scale>`. Returns the folder."""
    study = get(study) if isinstance(study, str) else study
    out = output_dir(study, scale)
    figs = out / "figures"
    figs.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fig in report.figures.items():
        path = figs / f"{name}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        paths.append(path)
    for name, table in report.tables.items():
        path = out / f"{name}.csv"
        _csv_safe(table).write_csv(path)
        paths.append(path)
    (out / "findings.json").write_text(
        json.dumps(_finite(report.findings), indent=2, default=_json_default, allow_nan=False)
        + "\n"
    )
    (out / "findings.md").write_text(report.markdown())
    paths += [out / "findings.json", out / "findings.md"]
    if log:
        _log(f"{study.name}/{scale}", paths, tracking_uri)
    return out


def _csv_safe(df: pl.DataFrame) -> pl.DataFrame:
    """CSV cannot hold nested columns: write lists as text."""
    return df.with_columns(
        [
            pl.col(c).cast(pl.List(pl.Utf8)).list.join(",")
            for c, t in df.schema.items()
            if t == pl.List
        ]
    )


def _finite(value: Any) -> Any:
    """NaN and ±inf → None, recursively (JSON has no NaN; strict parsers reject it)."""
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def _log(experiment: str, paths: list[Path], tracking_uri: str | None) -> None:
    from mlflow.tracking import MlflowClient

    from isolab import tracking
    from isolab.runs import KIND_TAG

    uri = tracking.resolve_uri(tracking_uri)
    client = MlflowClient(tracking_uri=uri)
    run = client.create_run(
        tracking.experiment_id(experiment, uri), run_name="analysis", tags={KIND_TAG: "analysis"}
    )
    try:
        for path in paths:
            sub = "figures" if path.suffix == ".png" else "tables"
            client.log_artifact(run.info.run_id, str(path), artifact_path=sub)
        client.set_terminated(run.info.run_id, status="FINISHED")
    except Exception:
        client.set_terminated(run.info.run_id, status="FAILED")
        raise


def run(
    name: str,
    scale: str = "cpu",
    *,
    workers: int = 2,
    rerun: bool = False,
    log: bool = True,
    tracking_uri: str | None = None,
    progress: bool = True,
) -> Report:
    """`collect` + `analyse` + `save`: the whole study, as the notebook runs it."""
    study = get(name)
    data = collect(
        study, scale, workers=workers, rerun=rerun, tracking_uri=tracking_uri, progress=progress
    )
    report = analyse(study, data, scale=scale)
    save(study, scale, report, log=log, tracking_uri=tracking_uri)
    return report
