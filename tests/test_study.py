"""The curated studies: specs at every scale, `isolab study list|run`, re-plotting from the
committed cpu-scale snapshots, and the small tables behind the findings."""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from isolab import study
from isolab.study import claims, summaries
from isolab.sweep import SweepSpec, plan_sweep

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("scale", ["smoke", "cpu"])
def test_every_study_plans_at_smoke_and_cpu_scale(scale):
    for s in study.STUDIES.values():
        for sweep, plan in study.plans(s, scale).items():
            assert plan.spec.name == f"{s.data_study}/{scale}/{sweep}"  # the MLflow experiment
            assert plan.points and all(p.config.experiment == plan.spec.name for p in plan.points)
            if scale == "smoke":  # CI: a few seconds per run
                assert plan.est_wall_s < 120, (s.name, sweep, plan.est_wall_s)


def test_gpu_specs_parse_and_name_their_experiments():
    for s in study.STUDIES.values():
        for sweep in s.sweeps:
            spec = SweepSpec.from_yaml(study.spec_path(s, "gpu", sweep))
            assert spec.name == f"{s.data_study}/gpu/{sweep}"
            assert spec.resources.gpus_per_run == 1


def test_gpu_rollout_specs_plan_from_local_data():
    """IsoCompute GPU specs plan offline once the data set is local (IsoFLOP ones need the
    hub's reward-model and policy configs, which this machine cannot reach)."""
    spec = SweepSpec.from_yaml(study.spec_path(study.get("nstar"), "gpu", "main"))
    data = REPO.parent / "shared" / "data"
    if not (data / "gsm8k").exists():
        pytest.skip(f"no local GSM8K under {data}")
    plan = plan_sweep(spec.replace(base=spec.base.replace(data_dir=str(data))))
    assert plan.points and all(p.planned_flops > 0 for p in plan.points)
    assert {p.config.model for p in plan.points} == {"smollm2-135m"}
    # the planned prompt length is the chat prompt's token count, measured here another way
    from transformers import AutoTokenizer

    from isolab.models.smollm2 import pretrained_source
    from isolab.paths import cache_root
    from isolab.planning import expected_lengths
    from isolab.tasks import get_task

    source, kwargs = pretrained_source(cache_root() / "models")
    tok = AutoTokenizer.from_pretrained(source, **kwargs)
    task = get_task("gsm8k", "chat")
    problems = task.problems(split="train", limit=200, data_dir=str(data))
    texts = [
        tok.apply_chat_template(task.prompt(p), tokenize=False, add_generation_prompt=True)
        for p in problems
    ]
    measured = sum(len(tok.encode(t, add_special_tokens=False)) for t in texts) / len(texts)
    planned, _ = expected_lengths(
        "smollm2-135m", "gsm8k", spec.base.max_completion_tokens, str(data)
    )
    assert planned == pytest.approx(measured, rel=0.01) and planned > 50, (planned, measured)


def test_study_cli_lists_and_rejects_bad_input_naming_the_fix():
    from typer.testing import CliRunner

    from isolab.cli import app

    runner = CliRunner()
    out = runner.invoke(app, ["study", "list"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    for s in study.STUDIES.values():
        assert s.name in out.output
    bad = runner.invoke(app, ["study", "run", "nope"])
    assert bad.exit_code == 2 and "nstar" in bad.output  # lists the studies
    bad = runner.invoke(app, ["study", "run", "nstar", "--scale", "huge"])
    assert bad.exit_code == 2 and "smoke, cpu, gpu" in bad.output


def test_a_missing_scale_says_which_file_to_write(tmp_path, monkeypatch):
    monkeypatch.setenv("ISOLAB_STUDIES_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"nstar/cpu/main.yaml is missing"):
        study.load_specs(study.get("nstar"), "cpu")


@pytest.fixture
def committed(tmp_path, monkeypatch, tracking_uri):
    """A copy of the committed cpu-scale snapshots and findings, as a reader with only the repo
    has them: a study re-run there reads its claims in the family of every committed claim."""
    root = tmp_path / "runs"
    for s in study.STUDIES.values():
        findings = REPO / "runs" / s.name / "cpu" / "findings.json"
        (root / s.name / "cpu").mkdir(parents=True, exist_ok=True)
        shutil.copy(findings, root / s.name / "cpu" / "findings.json")
        for sweep in (*s.sweeps, *s.sensitivity):
            src = REPO / "runs" / s.data_study / "cpu" / sweep
            if not (src / "runs.parquet").exists():
                if sweep in s.sensitivity:
                    continue  # read where committed
                pytest.fail(f"no committed snapshot {src}: run `isolab study run {s.name}`")
            dst = root / s.data_study / "cpu" / sweep
            if not dst.exists():
                shutil.copytree(src, dst)
    monkeypatch.setenv("ISOLAB_RESULTS_DIR", str(root))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_uri)
    return root


def test_every_study_replots_from_its_committed_snapshot(committed, capsys):
    """No training: figures, tables and findings from runs/<study>/cpu/ alone, logged to a fresh
    MLflow store, with the committed verdicts reached again; 02 reports the direction of n*(C) per split, and a saturation with its
    interval only where n* grows."""
    from mlflow.tracking import MlflowClient

    times = {}
    for s in study.STUDIES.values():
        t0 = time.perf_counter()
        report = study.run(s.name, "cpu", progress=False)
        times[s.name] = time.perf_counter() - t0
        out = study.output_dir(s, "cpu")
        assert sorted(p.stem for p in (out / "figures").glob("*.png")) == sorted(report.figures)
        assert report.summary and report.versus_paper
        assert report.versus_paper == [v.sentence() for v in report.verdicts]
        findings = json.loads((out / "findings.json").read_text())
        _same_verdicts(s.name, findings["verdicts"])
        for sweep, arm in findings.get("sensitivity", {}).items():  # lr-half: its own calls
            _same_verdicts(s.name, arm["verdicts"], ("sensitivity", sweep))
        for sweep in s.sweeps:  # the analysis on the parent run of every sweep it reads
            client = MlflowClient()
            exp = client.get_experiment_by_name(f"{s.data_study}/cpu/{sweep}")
            (parent,) = client.search_runs([exp.experiment_id], "tags.`isolab.kind` = 'sweep'")
            logged = client.list_artifacts(parent.info.run_id, f"analysis/{s.name}/figures")
            assert {Path(a.path).stem for a in logged} == set(report.figures)
    nstar = json.loads((committed / "nstar" / "cpu" / "findings.json").read_text())
    for split in ("easy", "hard"):
        f = nstar[split]
        assert f["direction"] in ("growing", "falling", "flat", "not resolved"), f
        if f["direction"] == "growing" and f["n_saturation"] is not None:
            lo, hi = f["ci"]
            assert lo <= f["n_saturation"] <= hi
        else:
            assert f["n_saturation"] is None  # a fall or a flat n* is not a saturation
    with capsys.disabled():
        print("\nre-plot from runs/: " + ", ".join(f"{k} {v:.1f} s" for k, v in times.items()))


def _same_verdicts(name: str, saved: list[dict], where: tuple[str, ...] = ()) -> None:
    """Machine-readable verdicts, and the same ones as the committed findings — calls read in
    the family of every committed claim, registrations and caveats included: the code that
    derives them may be reorganised, never the verdicts it reaches from the same snapshots
    (numbers to float tolerance: BLAS kernels differ between CPUs in the last digits)."""
    import math

    def numbers(value) -> list[float]:  # a number or an interval, null (undefined) as NaN
        values = value if isinstance(value, list) else [value]
        return [math.nan if v is None else float(v) for v in values]

    committed = json.loads((REPO / "runs" / name / "cpu" / "findings.json").read_text())
    for key in where:
        committed = committed[key]
    assert saved and len(saved) == len(committed["verdicts"]), name
    for new, old in zip(saved, committed["verdicts"], strict=True):
        assert {
            "claim",
            "split",
            "call",
            "statistic",
            "p_value",
            "interval",
            "min_detectable_effect",
        } <= set(new)
        assert new["call"] in ("agrees", "disagrees", "inconclusive")
        for key in (
            "claim",
            "split",
            "call",
            "test",
            "n_runs",
            "note",
            "per_claim_call",
            "per_claim_only",
            "preregistered",
            "revised_after_data",
            "caveats",
        ):
            assert new.get(key) == old.get(key), (name, key, new, old)
        for key in ("statistic", "p_value", "holm_p", "interval", "min_detectable_effect"):
            assert numbers(new.get(key)) == pytest.approx(
                numbers(old.get(key)), rel=1e-6, nan_ok=True
            ), (name, key)


def _runs(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema=["run_key", "arm", "step", "compute/rollouts", "eval/avg@4"],
        orient="row",
    )


def test_final_averages_seeds_at_each_runs_last_evaluation():
    df = _runs(
        [
            ("a0", "x", 0, 0, 0.2),
            ("a0", "x", 4, 64, 0.5),
            ("a1", "x", 0, 0, 0.3),
            ("a1", "x", 4, 64, 0.7),
            ("b0", "y", 0, 0, 0.25),
            ("b0", "y", 2, 32, 0.4),
        ]
    )
    f = summaries.final(df, ["arm"], "eval/avg@4")
    x = f.filter(pl.col("arm") == "x").row(0, named=True)
    assert x["base"] == pytest.approx(0.25) and x["final"] == pytest.approx(0.6)
    assert x["gain"] == pytest.approx(0.35) and x["n_seeds"] == 2 and x["rollouts"] == 64
    assert x["final_std"] == pytest.approx(math.sqrt(0.02))
    y = f.filter(pl.col("arm") == "y").row(0, named=True)
    assert y["final"] == pytest.approx(0.4) and y["steps"] == 2
    c = summaries.curves(df, ["arm"], "compute/rollouts", "eval/avg@4")
    assert c.filter(pl.col("arm") == "x")["mean"].to_list() == pytest.approx([0.25, 0.6])


# ---- the verdicts against the papers, on planted runs ------------------------------------------
def _tradeoff_runs(gap: float, noise: float = 0.02) -> pl.DataFrame:
    """Easy split, B = 64, 3 seeds: n = 2 leads early and n = 32 late, each by `gap`; every
    evaluation carries `noise` of sampling."""
    rng = np.random.default_rng(0)
    rows = []
    for n in (2, 8, 32):
        for seed in (0, 1, 2):
            for step in (0, 4, 8, 16, 32, 64, 128):
                early, late = step <= 16, step >= 64
                r = 0.4 + 0.001 * step + (step > 0) * noise * rng.standard_normal()
                r += gap * ((n == 2) * early + (n == 32) * late)
                rows.append(
                    (
                        f"k{n}-{seed}",
                        "easy",
                        n,
                        64 // n,
                        seed,
                        step,
                        step * 64,
                        r,
                        0.8,
                        0.1,
                        64,
                        8,
                        "tiny-m",
                    )
                )
    cols = ["run_key", "split", "n", "B_p", "seed", "step", "compute/rollouts", "eval/avg@4"]
    cols += ["eval/best@4", "eval/worst@4", "eval_problems", "eval_k_samples", "model"]
    return pl.DataFrame(rows, schema=cols, orient="row")


def _nvsbp_call(df: pl.DataFrame) -> str:
    from isolab.study.n_vs_bp.analysis import n_vs_bp

    report = n_vs_bp({"main": df})
    return next(v.call for v in report.verdicts if v.claim == "nvsbp.more_n_with_steps")


def test_n_vs_bp_is_called_only_when_the_data_resolve_it():
    assert _nvsbp_call(_tradeoff_runs(0.10)) == "agrees"
    assert _nvsbp_call(_tradeoff_runs(0.0)) == "inconclusive"
    reversed_ = _tradeoff_runs(0.10).with_columns(
        pl.col("n").replace({2: 32, 32: 2}), pl.col("B_p").replace({32: 2, 2: 32})
    )
    assert _nvsbp_call(reversed_) == "disagrees"


def test_n_star_direction_is_read_from_the_test():
    from isolab.verdicts import Verdict
    from isolab.verdicts.claim import direction

    def v(call: str, interval: tuple[float, float]) -> Verdict:
        return Verdict("nstar.grows", "", "easy", call, "", 0.0, 0.5, interval, 0.001, "", "> 0", 8)

    assert direction(v("agrees", (0.001, 0.003)), 0.002) == "growing"
    assert direction(v("disagrees", (-0.003, -0.001)), 0.002) == "falling"
    assert direction(v("inconclusive", (-0.001, 0.0015)), 0.002) == "flat"
    assert direction(v("inconclusive", (-0.001, 0.005)), 0.002) == "not resolved"


def _curve(key: str, n: int, values: list[float], limit: int | None) -> pl.DataFrame:
    C = [0.0] + [256.0 * 2**i for i in range(len(values) - 1)]
    return pl.DataFrame(
        {
            "run_key": key,
            "n": n,
            "split": "easy",
            "train_limit": limit,
            "step": list(range(len(values))),
            "compute/rollouts": C,
            "eval/avg@4": values,
        },
        schema_overrides={"train_limit": pl.Int64},
    )


def test_a_plateau_starts_where_the_curve_stops_gaining():
    from isolab.study.nstar.analysis import plateaus

    flat = _curve("a", 2, [0.2, 0.3, 0.4, 0.5, 0.55, 0.552, 0.548, 0.551], 64)  # flat from 2,048
    rising = _curve("b", 8, [0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55], 64)
    table = plateaus(pl.concat([flat, rising]))
    a, b = table.row(0, named=True), table.row(1, named=True)
    assert a["from_C"] == 2048 and a["doublings"] == 3 and abs(a["gain_per_doubling"]) < 0.01
    assert b["from_C"] is None and b["doublings"] == 0


def test_runs_on_a_cut_pool_stay_out_of_the_frontier_and_the_tests():
    from isolab.study.summaries import combined, cut_pool
    from isolab.table import one_pool

    main = _curve("m", 4, [0.2, 0.3, 0.4], None)
    same = _curve("l", 8, [0.2, 0.3, 0.4, 0.45], None)
    cut = _curve("c", 2, [0.2, 0.3, 0.4, 0.45], 64)
    data = {"long": pl.concat([same, cut]), "main": main}
    assert sorted(combined(data)["run_key"].unique()) == ["l", "m"]
    assert cut_pool(data)["run_key"].unique().to_list() == ["c"]
    both, rest = one_pool([cut, main])  # the first table's pool decides
    assert both["run_key"].unique().to_list() == ["c"] and rest["run_key"].unique().to_list() == [
        "m"
    ]


def test_findings_are_strict_json_even_when_a_fit_fails(tmp_path, monkeypatch):
    from isolab.study.report import Report

    monkeypatch.setenv("ISOLAB_RESULTS_DIR", str(tmp_path))
    report = Report("nstar", "smoke", findings={"easy": {"n_saturation": math.nan, "ci": [1.0]}})
    out = study.save("nstar", "smoke", report, log=False)

    def reject(constant: str) -> None:
        raise ValueError(f"{constant} in findings.json")

    data = json.loads((out / "findings.json").read_text(), parse_constant=reject)
    assert data["easy"]["n_saturation"] is None


def test_a_field_some_runs_predate_does_not_merge_their_configurations():
    """A null config value (a run logged before the field existed) is a value of its own: the
    committed nstar main mixed null and {} eval_sets on Hard, and concat_str's null made 14 runs
    of 7 configurations one cell, which the contrasts took for one configuration."""
    from isolab.table import with_cell
    from isolab.tracking.runs import load_runs

    df = pl.DataFrame(
        {"n": [2, 4, 8, 2], "B_p": [16, 16, 16, 64], "lr_scaling": [None, None, "sqrt", "sqrt"]}
    )
    cells = with_cell(df)["cell"]
    assert cells.null_count() == 0 and cells.n_unique() == 4
    snap = with_cell(load_runs(REPO / "runs" / "nstar" / "cpu" / "main"))
    per_cell = snap.group_by("split", "cell").agg(pl.col("run_key").n_unique())
    assert per_cell["run_key"].max() == 3  # each configuration's 3 seeds, none merged


def test_a_sensitivity_arm_is_tested_on_its_own_and_kept_out_of_the_main_analysis():
    """nstar's `lr-half` arm (lr_base/2) has its claims tested again on its runs alone; its runs
    never enter the main analysis, whose verdicts (and Holm family) stay as they were."""
    import dataclasses

    s = dataclasses.replace(study.get("model-size"), sensitivity=("arm",))
    data = study.collect(s, "cpu", progress=False)
    arm = (
        data["main"]
        .filter(pl.col("seed") == 0)
        .with_columns(pl.col("run_key") + "-arm", pl.col("lr_base") / 2)
    )
    alone = study.analyse(s, data, "cpu")
    both = study.analyse(s, {**data, "arm": arm}, "cpu")
    assert [v.to_dict() for v in both.verdicts] == [v.to_dict() for v in alone.verdicts]
    assert both.findings["holm_family"] == alone.findings["holm_family"]
    expected = [v.to_dict() for v in claims.evaluate("model-size", {"main": arm})]
    found = both.findings["sensitivity"]["arm"]
    assert found["verdicts"] == expected
    assert found["runs"] == arm["run_key"].n_unique() and found["seeds"] == 1
    assert found["changed"] == {"lr_base": [1.5e-4, 7.5e-5]}
    assert "Sensitivity arm `arm`" in both.summary[-1] and "lr_base 7.5e-05" in both.summary[-1]
    assert "## Sensitivity arm `arm`" in both.markdown()
    assert "sensitivity_arm" in both.tables and "sensitivity" not in alone.findings


def test_points_another_runner_holds_are_named_as_such_not_as_failed(tracking_uri):
    """`isolab study run` beside a running `isolab sweep run` on the same store: its points
    are SKIPPED (held elsewhere). That said "12 run(s) failed"; it says who holds them."""
    from isolab.study.pipeline import _run_sweep
    from isolab.sweep import split_sizes
    from isolab.tracking import leases

    spec = SweepSpec.from_yaml(REPO / "studies" / "smoke.yaml")
    plan = plan_sweep(spec, split_sizes(spec))
    keys = [p.run_key for p in plan.points]
    with leases.lease(spec.name, keys, tracking_uri) as held:  # the other runner
        assert held
        with pytest.raises(RuntimeError, match="being trained by another runner") as caught:
            _run_sweep(plan, 1, tracking_uri, progress=False)
    assert "failed" not in str(caught.value)
    assert f"{len(keys)} point(s)" in str(caught.value)
