"""The runs table from a real (temporary) MLflow store, snapshots, and the analysis CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from isolab import paths
from isolab.config import RunConfig
from isolab.synthetic import make_isocompute_runs, make_rho_runs
from isolab.tracking import KIND_TAG, RUN_KEY_TAG, RunLogger
from isolab.tracking.importing import import_runs
from isolab.tracking.runs import load_history, load_runs
from isolab.tracking.snapshot import export_runs, is_snapshot

STUDY = "unit-study"


def _log_run(uri: str, cfg: RunConfig, status: str, *, old: bool = False) -> str:
    """A run written the way `isolab.rl.train` writes it: resolved params, MLflow-safe metric names,
    per-step compute/FLOP metrics, TRL's own metrics, evaluations at steps 0, 5 and 10."""
    run = RunLogger(cfg.experiment, cfg.run_name, cfg.run_key, uri)
    run.log_params(cfg.resolved())
    B = cfg.B
    for step in range(cfg.M + 1):
        m: dict[str, float] = {"compute/rollouts": float(B * step), "loss": 0.1, "reward": 0.3}
        if not old:
            m.update({"flops/total": 1e9 * step, "flops/learning": 7e8 * step})
            if step:
                m["compute/rho"] = 0.7
            m["flops_step/total"] = 1e9  # per-step values stay out of the table
        if step % 5 == 0:
            m.update({"eval/avg@4": 0.2 + 0.01 * step + 0.001 * cfg.n, "eval/best@4": 0.5})
        run.log_metrics(m, step=step)
    run.end(status)
    return run.run_id


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp_path = tmp_path_factory.mktemp("store")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    base = RunConfig(experiment=STUDY, n=4, B_p=2, M=10)
    ids = {
        "a": _log_run(uri, base, "FINISHED"),
        "b": _log_run(uri, base.replace(n=8, lr_base=1e-4), "FINISHED", old=True),
        "failed": _log_run(uri, base.replace(n=16), "FAILED"),
    }
    client = MlflowClient(tracking_uri=uri)
    # a metric written twice at one step (a resumed run): the later write must win
    client.log_batch(ids["a"], metrics=[Metric("eval/avg_at_4", 0.99, 10**13, 10)])
    # an analysis run holding figures is not a training run
    exp = client.get_experiment_by_name(STUDY)
    r = client.create_run(exp.experiment_id, tags={KIND_TAG: "analysis"})
    client.log_metric(r.info.run_id, "eval/avg_at_4", 1.0, step=0)
    client.set_terminated(r.info.run_id)
    return {"uri": uri, "ids": ids, "base": base, "tmp": tmp_path}


def test_load_runs_follows_the_store_conventions(store: dict) -> None:
    df = load_runs(STUDY, tracking_uri=store["uri"])
    assert df["run_id"].n_unique() == 2  # FINISHED only; the FAILED and the analysis run are out
    assert df.height == 2 * 3  # one row per run × evaluation step (0, 5, 10)
    assert sorted(df["step"].unique().to_list()) == [0, 5, 10]
    # params typed back from MLflow's strings
    for col in ("n", "B_p", "B", "M", "seed", "num_iterations", "lora_rank"):
        assert df[col].dtype == pl.Int64, col
    for col in ("lr", "beta", "entropy_coef"):
        assert df[col].dtype == pl.Float64, col
    a = df.filter(pl.col("run_id") == store["ids"]["a"]).sort("step")
    cfg = store["base"]
    assert a["run_key"][0] == cfg.run_key
    assert a["B"][0] == cfg.B and a["lr"][0] == pytest.approx(cfg.lr)
    # metrics under isolab's names, taken at the evaluation steps
    assert a["compute/rollouts"].to_list() == [0.0, 5.0 * cfg.B, 10.0 * cfg.B]
    assert a["eval/avg@4"][-1] == 0.99  # the later write at step 10
    assert a["compute/rho"][0] is None and a["compute/rho"][1] == 0.7
    assert not {"loss", "flops_step/total"} & set(df.columns)
    assert a["reward"][0] == "sparse"  # the reward-system param, not TRL's `reward` metric
    assert not any("_at_" in c for c in df.columns if "/" in c)  # eval/avg_at_4 → eval/avg@4
    # an old run without the FLOP ledger: missing, not zero
    b = df.filter(pl.col("run_id") == store["ids"]["b"])
    assert b["flops/total"].null_count() == b.height


def test_load_runs_status_filter_and_errors(store: dict, tmp_path: Path) -> None:
    every = load_runs(STUDY, tracking_uri=store["uri"], statuses=None)
    assert set(every["status"].unique()) == {"FINISHED", "FAILED"}
    with pytest.raises(ValueError, match=f"experiments there: .*{STUDY}"):
        load_runs("no-such-study", tracking_uri=store["uri"])
    with pytest.raises(ValueError, match="no runs with status"):
        load_runs(STUDY, tracking_uri=store["uri"], statuses=["KILLED"])
    with pytest.raises(FileNotFoundError, match="no MLflow store"):
        load_runs(STUDY, tracking_uri=f"sqlite:///{tmp_path}/absent.db")  # a path: checked below
    assert not (tmp_path / "absent.db").exists()  # reading never creates an empty store
    with pytest.raises(FileNotFoundError, match="snapshot"):
        load_runs(tmp_path / "missing-snapshot")


def test_snapshot_roundtrip_through_parquet_and_mlflow(
    store: dict, tmp_path: Path, tracking_uri: str
) -> None:
    df = load_runs(STUDY, tracking_uri=store["uri"])
    snap = export_runs(df, tmp_path / "runs" / STUDY)
    assert is_snapshot(snap) and (snap / "snapshot.json").exists()
    assert load_runs(snap).equals(df)

    uri2 = tracking_uri  # the import's store, apart from the module's
    name, done, skipped = import_runs(snap, tracking_uri=uri2)
    assert (name, done, skipped) == (STUDY, 2, 0)
    back = load_runs(STUDY, tracking_uri=uri2)
    cols = [c for c in df.columns if c != "run_id"]
    assert back.select(cols).sort("run_key", "step").equals(df.select(cols).sort("run_key", "step"))
    assert import_runs(snap, tracking_uri=uri2)[1:] == (0, 2)  # idempotent


def test_import_keeps_every_metric_its_times_and_the_sweep_parent(
    store: dict, tmp_path: Path, tracking_uri: str
):
    """With history.parquet an import keeps TRL's curves (loss, reward) at their steps and
    timestamps, each run's start and end time, and nests the runs under the sweep's parent."""
    uri = store["uri"]
    df = load_runs(STUDY, tracking_uri=uri)
    snap = export_runs(df, tmp_path / "snap", history=load_history(STUDY, tracking_uri=uri))
    assert (snap / "history.parquet").exists()
    uri2 = tracking_uri  # the import's store, apart from the module's
    assert import_runs(snap, tracking_uri=uri2)[1] == 2
    src, dst = MlflowClient(uri), MlflowClient(uri2)
    exp = dst.get_experiment_by_name(STUDY)
    (parent,) = dst.search_runs([exp.experiment_id], "tags.`isolab.kind` = 'sweep'")
    children = [
        r for r in dst.search_runs([exp.experiment_id]) if r.info.run_id != parent.info.run_id
    ]
    assert len(children) == 2
    original = {
        r.data.tags[RUN_KEY_TAG]: r for r in (src.get_run(i) for i in store["ids"].values())
    }
    for run in children:
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        old = original[run.data.tags[RUN_KEY_TAG]]
        assert (run.info.start_time, run.info.end_time) == (old.info.start_time, old.info.end_time)
        for key in ("loss", "reward", "eval/avg_at_4", "flops_step/total"):
            if key not in old.data.metrics:
                continue
            mine = {
                (m.step, m.value, m.timestamp) for m in dst.get_metric_history(run.info.run_id, key)
            }
            theirs = {
                (m.step, m.value, m.timestamp) for m in src.get_metric_history(old.info.run_id, key)
            }
            assert mine == theirs, key


@pytest.mark.parametrize("damage", ["truncated", "empty", "random", "bad-json", "bad-status"])
def test_a_corrupt_snapshot_imports_nothing(
    store: dict, tmp_path: Path, tracking_uri: str, damage: str
) -> None:
    df = load_runs(STUDY, tracking_uri=store["uri"], statuses=None)
    snap = export_runs(df, tmp_path / "snap")
    runs = snap / "runs.parquet"
    if damage == "truncated":
        runs.write_bytes(runs.read_bytes()[: runs.stat().st_size // 2])
    elif damage == "empty":
        runs.write_bytes(b"")
    elif damage == "random":
        runs.write_bytes(np.random.default_rng(0).bytes(4096))
    elif damage == "bad-json":
        (snap / "snapshot.json").write_text("{not json")
    else:  # a bad value in the last run: nothing of the earlier runs may be created either
        last = df["run_key"].unique(maintain_order=True)[-1]
        df.with_columns(
            pl.when(pl.col("run_key") == last)
            .then(pl.lit("WEIRD"))
            .otherwise("status")
            .alias("status")
        ).write_parquet(runs)
    uri2 = tracking_uri  # the import's store, apart from the module's
    with pytest.raises(ValueError, match="snapshot|status|JSON"):
        import_runs(snap, tracking_uri=uri2)
    client = MlflowClient(uri2)
    exp = client.get_experiment_by_name(STUDY)
    assert exp is None or not client.search_runs([exp.experiment_id])


def test_synthetic_store_roundtrip_keeps_every_value(tmp_path: Path, tracking_uri: str) -> None:
    df = make_isocompute_runs(seeds=1, max_runs=6, eval_points=12)
    snap = export_runs(df, tmp_path / "snap")
    uri = tracking_uri
    import_runs(snap, tracking_uri=uri)
    back = load_runs("synthetic-isocompute", tracking_uri=uri)
    assert back.height == df.height
    a, b = df.sort("run_key", "step"), back.sort("run_key", "step")
    for col in ("n", "B_p", "step", "compute/rollouts", "eval/avg@4", "eval/worst@4"):
        assert np.allclose(a[col].to_numpy(), b[col].to_numpy()), col


# ---- CLI (the `cli` fixture: tests/conftest.py) ------------------------------------------------
def test_cli_help_lists_every_command(cli) -> None:
    for args in (
        ["--help"],
        ["frontier", "--help"],
        ["runs", "export", "--help"],
        ["runs", "import", "--help"],
    ):
        res = cli(*args)
        assert res.exit_code == 0, res.output
    assert "Frontier analysis" in cli("frontier", "--help").output


def test_cli_export_import_and_frontier(cli, store: dict, tracking_uri: str) -> None:
    uri = store["uri"]
    res = cli("runs", "export", STUDY, "--tracking-uri", uri)
    assert res.exit_code == 0, res.output
    assert Path("runs", STUDY, "runs.parquet").exists()
    uri2 = tracking_uri  # the import's store, apart from the module's
    res = cli("runs", "import", f"runs/{STUDY}", "--tracking-uri", uri2)
    assert res.exit_code == 0 and "imported 2 runs" in res.output, res.output
    assert load_runs(STUDY, tracking_uri=uri2)["run_key"].n_unique() == 2


def test_cli_frontier_on_a_snapshot_writes_its_own_folder_and_logs_when_asked(
    cli, tmp_path: Path, tracking_uri: str
) -> None:
    iso = make_isocompute_runs(seeds=1, eval_points=25)
    export_runs(iso, tmp_path / "runs" / "iso")
    export_runs(make_rho_runs(seeds=1, eval_points=25), tmp_path / "runs" / "rho")
    uri = tracking_uri
    args = ["frontier", "runs/iso", "--n-boot", "20", "--tracking-uri", uri, "--log"]
    res = cli(*args)
    assert res.exit_code == 0, res.output
    assert "recommendation" in res.output and "metric_effect" in res.output
    assert "validated by fitting on ≤ C/2" in res.output  # recommend checks itself
    out = Path("runs/frontier/synthetic-isocompute")  # its own folder, not the snapshot's
    figs = {p.name for p in (out / "figures").glob("*.png")}
    assert figs == {"frontier.png", "n_star.png", "metric_effect.png", "lr_sum.png", "tradeoff.png"}
    assert (out / "findings.md").exists() and not Path("runs/iso/figures").exists()
    # the figures are logged on the sweep's parent run, which load_runs leaves out
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("synthetic-isocompute")  # the snapshot's experiment
    (run,) = client.search_runs([exp.experiment_id])
    assert run.data.tags[KIND_TAG] == "sweep"
    where = "analysis/synthetic-isocompute"  # analysis/<report>/
    logged = {a.path for a in client.list_artifacts(run.info.run_id, f"{where}/figures")}
    assert f"{where}/figures/n_star.png" in logged
    tables = {a.path for a in client.list_artifacts(run.info.run_id, f"{where}/tables")}
    assert f"{where}/tables/metric_effect.json" in tables  # log_table: the UI shows it
    # logged again: the table is replaced, not appended to (MLflow's log_table appends)
    assert cli(*args).exit_code == 0
    path = client.download_artifacts(run.info.run_id, f"{where}/tables/metric_effect.json", ".")
    rows = json.loads(Path(path).read_text())["data"]
    assert len(rows) == len(Path(out / "metric_effect.csv").read_text().splitlines()) - 1
    marked = json.loads(client.get_run(run.info.run_id).data.tags["mlflow.loggedArtifacts"])
    assert marked.count({"path": f"{where}/tables/metric_effect.json", "type": "table"}) == 1

    res = cli("frontier", "runs/rho", "--n-boot", "0", "--out", "rho-out")
    assert res.exit_code == 0, res.output
    assert "rho_frontier" in res.output and Path("rho-out/figures/rho_frontier.png").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["frontier", "runs/nowhere.parquet"], "not found"),
        (["frontier", "no-study"], "no MLflow store"),
        (["frontier", "runs/iso", "--metric", "eval/pass@8", "--no-log"], "eval/avg@4"),
        (["frontier", "runs/iso", "--band", "abc", "--no-log"], "--band"),
        (["frontier", "runs/iso", "--x", "flops/nope", "--no-log"], "compute column"),
        (["runs", "import", "runs/nowhere"], "not a snapshot"),
        (["runs", "export", "runs/iso"], "already a snapshot"),
    ],
)
def test_cli_bad_input_exits_2_naming_the_problem(
    cli, tmp_path: Path, args: list[str], message: str
) -> None:
    export_runs(make_isocompute_runs(seeds=1, max_runs=4, eval_points=8), tmp_path / "runs" / "iso")
    res = cli(*args)
    assert res.exit_code == 2, res.output
    assert message in " ".join(res.output.split()), res.output
    assert math.isfinite(res.exit_code)


def test_runs_dir_is_the_projects_runs_folder_from_any_subfolder(tmp_path, monkeypatch):
    """A notebook runs in notebooks/: it must share the project's store and caches."""
    from isolab import tracking

    monkeypatch.delenv("ISOLAB_RUNS", raising=False)
    monkeypatch.delenv("ISOLAB_CACHE", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "project" / "runs").mkdir(parents=True)
    (tmp_path / "project" / "pyproject.toml").write_text("")
    (tmp_path / "project" / "notebooks").mkdir()
    (tmp_path / "project" / "notebooks" / "runs").mkdir()  # not a project: no marker
    (tmp_path / "project" / "notebooks" / "runs" / "stray.txt").write_text("")
    monkeypatch.chdir(tmp_path / "project" / "notebooks")
    assert paths.runs_dir() == tmp_path / "project" / "runs"
    assert tracking.resolve_uri() == f"sqlite:///{tmp_path / 'project' / 'runs' / 'mlflow.db'}"
    assert paths.cache_root() == tmp_path / "project" / "runs" / "cache"
    monkeypatch.chdir(tmp_path)  # no project above: a new runs/ here
    if not any((f / "runs" / "mlflow.db").exists() for f in tmp_path.parents):
        assert paths.runs_dir() == Path("runs")
    monkeypatch.setenv("ISOLAB_RUNS", str(tmp_path / "elsewhere"))
    assert paths.runs_dir() == tmp_path / "elsewhere"


def test_per_problem_counts_reach_the_table_and_survive_a_snapshot(tmp_path: Path) -> None:
    """Each evaluation's correct counts per validation problem (the noise model's input) are
    read from the run's artifact into `eval_counts`, kept in the parquet, and logged back as
    the artifact on import; so are an evaluation set's (`eval_counts-seen`)."""
    from isolab.tracking.columns import COUNTS, COUNTS_ARTIFACT, counts_artifact, param_columns

    uri = f"sqlite:///{tmp_path}/counts.db"  # two stores: this one, and back.db to import into
    cfg = RunConfig(experiment="counts", n=4, B_p=2, M=10)
    run = RunLogger(cfg.experiment, cfg.run_name, cfg.run_key, uri)
    run.log_params(cfg.resolved())
    for step, value in ((0, 0.25), (10, 0.5)):
        run.log_metrics({"eval/avg@4": value, "compute/rollouts": 8.0 * step}, step=step)
    by_step = {"0": [2, 0, 1, 5], "10": [4, 3, 2, 7]}
    run.log_dict({"n_samples": 8, "correct_counts_by_step": by_step}, COUNTS_ARTIFACT)
    seen = {"0": [1, 1], "10": [8, 0]}
    run.log_dict({"n_samples": 8, "correct_counts_by_step": seen}, counts_artifact("seen"))
    run.end("FINISHED")
    other = RunLogger(cfg.experiment, "only-seen", "only-seen", uri)  # no validation counts
    other.log_params(cfg.resolved())
    other.log_metrics({"eval/avg@4": 0.5, "compute/rollouts": 0.0}, step=0)
    other.log_dict({"n_samples": 8, "correct_counts_by_step": {"0": [3]}}, counts_artifact("seen"))
    other.end("FINISHED")
    df = load_runs("counts", tracking_uri=uri)
    alone = df.filter(pl.col("run_key") == "only-seen")
    assert alone["eval_counts-seen"].to_list() == [[3]] and alone[COUNTS].to_list() == [None]
    df = df.filter(pl.col("run_key") != "only-seen")
    assert counts_artifact("seen") == "eval-seen/per_problem_counts.json"
    assert df.sort("step")[COUNTS].to_list() == [[2, 0, 1, 5], [4, 3, 2, 7]]
    assert df.sort("step")["eval_counts-seen"].to_list() == [[1, 1], [8, 0]]
    assert "eval_counts-seen" not in param_columns(df)
    snap = export_runs(df, tmp_path / "snap")
    assert load_runs(snap)[COUNTS].to_list() == df[COUNTS].to_list()
    uri2 = f"sqlite:///{tmp_path}/back.db"
    import_runs(snap, experiment="back", tracking_uri=uri2)
    back = load_runs("back", tracking_uri=uri2).sort("step")
    assert back[COUNTS].to_list() == [[2, 0, 1, 5], [4, 3, 2, 7]]
    assert back["eval_counts-seen"].to_list() == [[1, 1], [8, 0]]


def test_a_resumed_sweeps_parent_keeps_one_points_row_per_run(tmp_path, tracking_uri, caplog):
    """A sweep resumed on an imported snapshot (nstar long's last runs) warned "could not
    describe sweep": MLflow's `load_table` finds no table its `log_table` did not write. The
    parent's points table is now replaced, every child once, best first."""
    import logging

    import pandas as pd

    from isolab.tracking.parents import POINTS_TABLE, finish_parent

    snap = tmp_path / "iso"
    export_runs(make_isocompute_runs(seeds=1, max_runs=4, eval_points=4), snap)
    name, created, _ = import_runs(snap, tracking_uri=tracking_uri)
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name(name)
    (parent,) = client.search_runs([exp.experiment_id], f"tags.`{KIND_TAG}` = 'sweep'")
    with caplog.at_level(logging.WARNING):
        for _ in range(2):  # the runner's finish after each resumed chunk
            finish_parent(name, parent.info.run_id, tracking_uri)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    local = client.download_artifacts(parent.info.run_id, POINTS_TABLE, str(tmp_path))
    table = pd.read_json(local, orient="split")
    assert sorted(table["run_id"]) == sorted(
        r.info.run_id
        for r in client.search_runs(
            [exp.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"
        )
    )
    assert len(table) == created
    score = next(c for c in table.columns if c.startswith("eval/"))
    assert table[score].is_monotonic_decreasing
