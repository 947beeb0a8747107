"""A study end to end: `collect` each sweep's runs table (from its snapshot, or by running the
sweep resumably and snapshotting it), `analyse` it, `save` figures, tables and findings; `run`
does all three, as the notebooks and `isolab study run` do.

The claims of every study form one family (issue 46: Holm is the call, over every claim of the
findings table). `analyse` binds a study's verdicts — registration and caveats
(`isolab.verdicts.preregistration`), then the family-wise call over its own verdicts and those
the other studies saved at the same scale (`family_verdicts`); `save` writes its findings and
then reads the whole family again from every study's saved findings (`restate_family`), so
that each findings.json and findings.md carries the Holm p-values of the same family."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from isolab.paths import shown
from isolab.study.registry import (
    STUDIES,
    Study,
    check_scale,
    find_snapshot,
    get,
    load_spec,
    output_dir,
    registrations,
    snapshot_dir,
    spec_path,
    study_module,
)
from isolab.study.report import Report, restate_markdown
from isolab.sweep import SweepPlan, plan_sweep, split_sizes
from isolab.tracking.snapshot import digest_mismatches
from isolab.verdicts import Verdict
from isolab.verdicts.family import familywise
from isolab.verdicts.preregistration import bind
from isolab.vocab import FINISHED, RUN_KEY, SKIPPED

logger = logging.getLogger(__name__)


def collect(
    study: Study | str,
    scale: str,
    *,
    workers: int = 2,
    rerun: bool = False,
    tracking_uri: str | None = None,
    progress: bool = True,
    runs: str | None = None,
) -> dict[str, pl.DataFrame]:
    """Each sweep's runs table: from its snapshot, or by running the sweep and snapshotting it;
    and each sensitivity sweep's (`Study.sensitivity`) where its snapshot exists (it is not run
    here: `isolab sweep run` its spec, then `isolab runs export`). With `runs`, your own sweep instead (an MLflow experiment or a snapshot folder), read as
    the study's first sweep (`main`): the notebooks' analyses then run on your setting.

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
    from isolab.tracking.runs import load_history, load_runs
    from isolab.tracking.snapshot import export_runs, is_snapshot, read_snapshot_meta

    study = get(study) if isinstance(study, str) else study
    check_scale(scale)
    if runs is not None:
        return {study.sweeps[0]: load_runs(runs, tracking_uri=tracking_uri)}
    out: dict[str, pl.DataFrame] = {}
    for sweep in study.sweeps:
        snap = snapshot_dir(study, scale, sweep)
        found = find_snapshot(study, scale, sweep)
        if is_snapshot(found) and not rerun:
            snap = found
            out[sweep] = load_runs(snap)
            _check_snapshot(snap, read_snapshot_meta(snap), study, scale, sweep)
            for sentence in digest_mismatches(out[sweep]):  # the report states it too
                logger.info("%s: %s", snap, sentence)
            continue
        spec = load_spec(study, scale, sweep)
        plan = plan_sweep(spec, split_sizes(spec))
        _run_sweep(plan, workers, tracking_uri, progress)
        keys = sorted(p.run_key for p in plan.points)
        # only this spec's points: runs of an earlier version of the spec stay out
        df = load_runs(spec.name, tracking_uri=tracking_uri).filter(pl.col(RUN_KEY).is_in(keys))
        history = load_history(spec.name, tracking_uri=tracking_uri)
        history = history.filter(pl.col(RUN_KEY).is_in(keys))
        export_runs(df, snap, experiment=spec.name, extra_meta={"run_keys": keys}, history=history)
        out[sweep] = df
    for sweep in study.sensitivity:  # never run here: read where a snapshot is committed
        found = find_snapshot(study, scale, sweep)
        if is_snapshot(found):
            out[sweep] = load_runs(found)
            _check_snapshot(found, read_snapshot_meta(found), study, scale, sweep)
    return out


def _check_snapshot(snap: Path, meta: dict, study: Study, scale: str, sweep: str) -> None:
    """Warn when a snapshot was made from other points than the spec now plans (an edited
    spec): the analysis then shows the snapshot's runs, and `rerun=True` runs the missing ones."""
    saved = set(meta.get("run_keys") or [])
    if not saved:
        return
    try:
        spec = load_spec(study, scale, sweep)
        planned = {p.run_key for p in plan_sweep(spec, split_sizes(spec)).points}
    except (OSError, ValueError) as exc:  # a spec that cannot be planned here (gpu, offline)
        logger.info("cannot check %s against its spec: %s", snap, exc)
        return
    if planned != saved:
        logger.warning(
            "%s holds %d runs the spec %s no longer plans and lacks %d it plans: showing the "
            "snapshot; pass rerun=True (isolab study run --rerun) to run the missing points",
            shown(snap),
            len(saved - planned),
            shown(spec_path(study, scale, sweep)),
            len(planned - saved),
        )


def _run_sweep(plan: SweepPlan, workers: int, tracking_uri: str | None, progress: bool) -> None:
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
        from isolab.logs import quiet_libraries

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
    # SKIPPED: another runner holds the point or finished it, which is no failure
    failed = [o for o in outcomes if o.status not in (FINISHED, SKIPPED)]
    if interrupted or failed:
        what = "interrupted" if interrupted else f"{len(failed)} run(s) failed"
        errors = "; ".join(f"{o.run_name}: {o.error or o.status}" for o in failed[:5])
        raise RuntimeError(
            f"sweep {plan.spec.name} {what} ({errors}). Finished runs are kept in the store: "
            "call again to resume the remaining points."
        )
    if any(o.status == SKIPPED for o in outcomes):
        held, _ = sweep.pending(plan, tracking_uri)  # what another runner has not finished
        if held:
            raise RuntimeError(
                f"sweep {plan.spec.name}: {len(held)} point(s) are being trained by another "
                "runner on this store; call again when it finishes (its runs and this one's "
                "are kept), and the analysis will read them all."
            )


def analyse(study: Study | str, data: dict[str, pl.DataFrame], scale: str = "cpu") -> Report:
    """The study's analysis (`isolab.study.<package>.analysis.<package>`) over its runs tables;
    a sensitivity sweep's table among them (`Study.sensitivity`) has its claims tested again,
    on its own (`isolab.study.sensitivity.add_sensitivity`). The verdicts come back bound: registration and
    caveats (`registered_verdicts`), then the call read in the family of every claim saved at
    `scale` (`family_verdicts`; Holm is the call)."""
    from isolab.study.sensitivity import add_sensitivity

    study = get(study) if isinstance(study, str) else study
    fn: Callable[..., Report] = getattr(study_module(study, "analysis"), study.package)
    arms = {k: v for k, v in data.items() if k in study.sensitivity}
    data = {k: v for k, v in data.items() if k not in arms}
    report = fn(data, scale=scale)
    for sweep, df in arms.items():
        add_sensitivity(report, study.name, sweep, df, data.get("main"))
    # results tie to their base weights: say so when these runs came from other ones
    notes = sorted({f"Base model — {s}." for df in data.values() for s in digest_mismatches(df)})
    report.summary[:0] = notes
    report.findings["base_model_notes"] = notes
    mine = registered_verdicts(study, report.verdicts, data)
    family = {study.name: mine, **family_verdicts(scale, exclude=study.name)}
    report.findings["holm_family"] = family_summary(family)
    report.set_verdicts(familywise(_flat(family))[: len(mine)])  # mine come first
    return report


def registered_verdicts(
    study: Study, verdicts: list[Verdict], data: dict[str, pl.DataFrame]
) -> list[Verdict]:
    """Each verdict with its registration (`studies/<study>/preregistered.yaml`) read against
    the runs that tested it: `preregistered`, `revised_after_data`, caveats."""
    found = registrations(study)
    return [bind(v, found.get(v.claim), data) for v in verdicts]


def family_verdicts(scale: str, exclude: str | None = None) -> dict[str, list[Verdict]]:
    """Study name → the verdicts it saved at `scale` (`runs/<study>/<scale>/findings.json`),
    for every study but `exclude`; a study without saved verdicts is not in the family."""
    out = {}
    for name, s in STUDIES.items():
        path = output_dir(s, scale) / "findings.json"
        saved = json.loads(path.read_text()).get("verdicts") if path.is_file() else None
        if name != exclude and saved:
            out[name] = [Verdict.from_dict(v) for v in saved]
    return out


def family_summary(family: dict[str, list[Verdict]]) -> dict[str, Any]:
    """The family's size, as findings.json records it under `holm_family`: claims, claims
    with a p-value (`tested`, what Holm adjusts over), and the studies."""
    everything = _flat(family)
    tested = sum(v.p_value is not None for v in everything)
    return {"claims": len(everything), "tested": tested, "studies": sorted(family)}


def _flat(family: dict[str, list[Verdict]]) -> list[Verdict]:
    return [v for verdicts in family.values() for v in verdicts]


def restate_family(scale: str) -> None:
    """Read every study's saved findings at `scale` as one family again (`familywise`) and
    write each one's family-wise fields back: the verdicts and `holm_family` in findings.json,
    the verdict section of findings.md."""
    family = family_verdicts(scale)
    bound = iter(familywise(_flat(family)))
    summary = family_summary(family)
    for name, verdicts in family.items():
        out = output_dir(get(name), scale)
        findings = json.loads((out / "findings.json").read_text())
        restated = [next(bound) for _ in verdicts]
        findings["verdicts"] = [v.to_dict() for v in restated]
        findings["holm_family"] = summary
        write_findings(out, findings)
        md = out / "findings.md"
        if md.is_file():
            md.write_text(restate_markdown(md.read_text(), restated, summary))


def save(
    study: Study | str,
    scale: str,
    report: Report,
    *,
    log: bool = True,
    tracking_uri: str | None = None,
) -> Path:
    """Write the report under `runs/<study>/<scale>/` and, with `log`, on the parent run of
    every sweep it analyses (see `save_report`). Returns the folder."""
    study = get(study) if isinstance(study, str) else study
    experiments = [f"{study.data_study}/{scale}/{s}" for s in study.sweeps] if log else None
    out = save_report(report, output_dir(study, scale), experiments, tracking_uri)
    restate_family(scale)
    return out


def save_report(
    report: Report,
    out: Path,
    experiments: list[str] | None = None,
    tracking_uri: str | None = None,
) -> Path:
    """Write a report's figures (`figures/*.png`), tables (CSV) and findings (JSON, Markdown)
    into `out`; with `experiments` (sweeps), also log them on each sweep's parent run
    (`log_analysis`)."""
    figs = out / "figures"
    figs.mkdir(parents=True, exist_ok=True)
    for name, fig in report.figures.items():
        fig.savefig(figs / f"{name}.png", dpi=110, bbox_inches="tight")
    for name, table in report.tables.items():
        _csv_safe(table).write_csv(out / f"{name}.csv")
    write_findings(out, report.findings)
    (out / "findings.md").write_text(report.markdown())
    for experiment in experiments or []:
        log_analysis(experiment, report, out, tracking_uri)
    return out


def write_findings(out: Path, findings: dict[str, Any]) -> None:
    """`out/findings.json`: strict JSON (NaN and ±inf as null), two-space indent."""
    (out / "findings.json").write_text(
        json.dumps(_finite(findings), indent=2, default=_json_default, allow_nan=False) + "\n"
    )


def log_analysis(
    experiment: str, report: Report, out: Path, tracking_uri: str | None = None
) -> str:
    """The report on the parent run of sweep `experiment` (created when missing), under
    `analysis/<study>/`: figures through `log_figure`, tables through `log_table` (the UI shows
    both), the findings as files. Returns the parent's run id."""
    from isolab import tracking
    from isolab.logs import quiet_libraries
    from isolab.tracking.tables import replace_table

    quiet_libraries()  # a notebook kernel never ran the CLI's: no artifact download bars
    uri = tracking.resolve_uri(tracking_uri)
    client = tracking.client(uri)
    parent = tracking.sweep_parent(experiment, experiment, uri)
    where = f"analysis/{report.study}"
    for name, fig in report.figures.items():
        client.log_figure(parent, fig, f"{where}/figures/{name}.png")
    for name, table in report.tables.items():  # replaced: `log_table` would append
        replace_table(client, parent, _csv_safe(table).to_pandas(), f"{where}/tables/{name}.json")
    for file in ("findings.json", "findings.md"):
        client.log_artifact(parent, str(out / file), artifact_path=where)
    return parent


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
