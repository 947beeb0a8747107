"""A battery of bad inputs, as a careless user or team would give them: every one exits 2 with
a message naming what to fix, and none leaves a run behind (RUNNING or FAILED)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from isolab.cli import app

REPO = Path(__file__).resolve().parents[1]
SMOKE = yaml.safe_load((REPO / "studies" / "smoke.yaml").read_text())

#: (run config YAML, what the message must name)
CONFIGS = [
    ("# nothing\n", "empty"),
    ("n: 8.5\n", "n = 8.5"),
    ("n: 1\n", "n = 1"),
    ("n: 0\n", "n = 0"),
    ("n: -4\n", "n = -4"),
    ("n: true\n", "n = True"),
    ("n: abc\n", "n = 'abc'"),
    ("n: [2, 4]\n", "n = [2, 4]"),
    ("n: 100000\n", "n = 100,000"),
    ("n: .nan\n", "n = nan"),
    ("B_p: 0\n", "B_p = 0"),
    ("B_p: 2.5\n", "B_p = 2.5"),
    ("B_p: 20000\nn: 8\n", "B = B_p·n"),
    ("M: 0\n", "M = 0"),
    ("M: 2000000\n", "M = 2,000,000"),
    ("lr_base: .inf\n", "lr_base = inf"),
    ("lr_base: .nan\n", "lr_base = nan"),
    ("lr_base: -1e-5\n", "lr_base = -1e-05"),
    ("lr_base: 0\n", "lr_base = 0"),
    ("lr_base: fast\n", "lr_base = 'fast'"),
    ("temperature: .nan\n", "temperature = nan"),
    ("temperature: 0\n", "temperature = 0"),
    ("temperature: -1\n", "temperature = -1"),
    ("temperature: .inf\n", "temperature = inf"),
    ("max_completion_tokens: 0\n", "max_completion_tokens = 0"),
    ("B_base: 0\n", "B_base = 0"),
    ("lr_scaling: cubic\n", "lr_scaling = 'cubic'"),
    ("recipe: magic\n", "recipe = 'magic'"),
    ("split: medium\n", "split = 'medium'"),
    ("reward: judge\n", "reward = 'judge'"),
    ("generation: tpu\n", "generation = 'tpu'"),
    ("task: chess\n", "task = 'chess'"),
    ("beta: -0.1\n", "beta = -0.1"),
    ("beta: .nan\n", "beta = nan"),
    ("entropy_coef: -1\n", "entropy_coef = -1"),
    ("num_iterations: 0\n", "num_iterations = 0"),
    ("lora_rank: -1\n", "lora_rank = -1"),
    ("eval_every: -1\n", "eval_every = -1"),
    ("eval_problems: 0\n", "eval_problems = 0"),
    ("eval_problems: 100000\neval_k_samples: 1000\n", "eval_problems·eval_k_samples"),
    ("eval_k_samples: 2\neval_ks: [1, 4]\n", "eval_k_samples = 2"),
    ("eval_ks: []\n", "eval_ks"),
    ("eval_ks: [0]\n", "eval_ks"),
    ("eval_ks: [1, x]\n", "eval_ks.1 = 'x'"),
    ("eval_at_rollouts: [a]\n", "eval_at_rollouts.0 = 'a'"),
    ("pool_size: 0\n", "pool_size = 0"),
    ("seed: -1\n", "seed = -1"),
    ("seed: 1.5\n", "seed = 1.5"),
    ("experiment: ../../x\n", "experiment = '../../x'"),
    ("experiment: /abs/path\n", "experiment = '/abs/path'"),
    ("experiment: ''\n", "experiment = ''"),
    ("experiment: 123\n", "experiment = 123"),
    ("experiment: a//b\n", "experiment = 'a//b'"),
    ("model: ''\n", "model = ''"),
    ("model: nosuch-model\n", "model: 'nosuch-model' is not a preset"),
    ("model: ./no/such/folder\n", "is not a model folder"),
    ("model: /tmp\n", "holds no config.json"),
    ("model: a/b/c/d\n", "valid hub id"),
    ("data_dir: 5\n", "data_dir = 5"),
    ("gradient_checkpointing: maybe\n", "gradient_checkpointing = 'maybe'"),
    ("study: a\nexperiment: b\n", "experiment"),
    ("rollouts_per_problem: 3\n", "rollouts_per_problem"),
    ("extra: {grpo: {learning_rate: 1.0e-6}}\n", "extra.grpo.learning_rate"),
    ("extra: {grpo: {report_to: wandb}}\n", "extra.grpo.report_to"),
    ("extra: {grpo: {num_generations: 4}}\n", "extra.grpo.num_generations"),
    ("extra: {grpo: {max_steps: 4}}\n", "extra.grpo.max_steps"),
    ("extra: {grpo: {output_dir: /tmp/x}}\n", "extra.grpo.output_dir"),
    ("extra: {grpo: {top_pp: 1}}\n", "extra.grpo.top_pp"),
    ("extra: {grpo: 3}\n", "extra.grpo = 3"),
    ("extra: {foo: 1}\n", "extra.foo"),
    ("extra: 5\n", "extra = 5"),
    ("- n: 8\n", "mapping"),
    ("n: [1, 2\n", "YAML"),
    ("axes: {n: [2, 4]}\nbase: {}\n", "isolab sweep"),
]

#: (--set override on a valid config, what the message must name)
OVERRIDES = [
    ("n=8.5", "n = 8.5"),
    ("n", "FIELD=VALUE"),
    ("=3", "FIELD=VALUE"),
    ("n.x=1", "n is not a mapping"),
    ("lr_base=.inf", "lr_base = inf"),
    ("lr_base=[1", "YAML"),
    ("extra.grpo.learning_rate=1", "extra.grpo.learning_rate"),
    ("nosuch=1", "nosuch"),
    ("experiment=../x", "experiment = '../x'"),
    ("temperature=.nan", "temperature = nan"),
]

#: (changes to the smoke sweep spec, what the message must name)
SPECS = [
    ({"axes": {"n": [2, 2.0]}}, "axes.n"),
    ({"axes": {"n": []}}, "axes.n"),
    ({"axes": {"temperture": [1.0]}}, "axes.temperture"),
    ({"axes": {"M": [2, 4]}}, "axes.M"),
    ({"axes": {"n": [2, "x"]}}, "axes.n"),
    ({"axes": {"n": list(range(2, 502)), "B_p": list(range(1, 401))}}, "grid points"),
    ({"axes": "n"}, "axes"),
    ({"budget_rollouts": 1}, "budget_rollouts"),
    ({"budget_rollouts": -5}, "budget_rollouts"),
    ({"budget_rollouts": "lots"}, "budget_rollouts"),
    ({"seeds": []}, "seeds"),
    ({"seeds": [0, 0]}, "seeds"),
    ({"seeds": ["a"]}, "seeds"),
    ({"name": None}, "name"),
    ({"name": "../outside"}, "experiment = '../outside'"),
    ({"base": {"n": 1}}, "base.n"),
    ({"base": {"lr_base": float("nan")}}, "base.lr_base"),
    ({"base": {"M": 10}}, "base.M"),
    ({"base": {"nosuch": 1}}, "base.nosuch"),
    ({"base": 5}, "base"),
    ({"eval_points": 0}, "eval_points"),
    ({"eval_ratio": 1}, "eval_ratio"),
    ({"metric": "loss"}, "metric"),
    ({"max_batch": 1}, "max_batch"),
    ({"workers": 3}, "workers"),
]


@pytest.fixture
def cli(tmp_path, monkeypatch, isolab_cache):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the same answer with or without a network
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"

    def invoke(*args: str) -> str:
        res = CliRunner().invoke(app, list(args))
        assert res.exit_code == 2, f"{args} → exit {res.exit_code}\n{res.output}"
        return " ".join(res.output.split())  # rich wraps long lines

    yield invoke, uri
    if Path(uri.removeprefix("sqlite:///")).exists():  # no refused input left a run behind
        client = MlflowClient(uri)
        exps = [e.experiment_id for e in client.search_experiments()]
        assert not client.search_runs(exps)


@pytest.mark.parametrize(("text", "named"), CONFIGS, ids=[c[0][:30] for c in CONFIGS])
def test_bad_run_configs(cli, tmp_path, text, named):
    invoke, uri = cli
    path = tmp_path / "run.yaml"
    path.write_text(text)
    assert named in invoke("train", str(path), "--tracking-uri", uri)


@pytest.mark.parametrize(("override", "named"), OVERRIDES, ids=[o[0] for o in OVERRIDES])
def test_bad_set_overrides(cli, override, named):
    invoke, uri = cli
    example = str(REPO / "examples" / "tiny-easy.yaml")
    assert named in invoke("train", example, "--set", override, "--tracking-uri", uri)


@pytest.mark.parametrize(("changes", "named"), SPECS, ids=[s[1] for s in SPECS])
def test_bad_sweep_specs(cli, tmp_path, changes, named):
    invoke, uri = cli
    spec = {**SMOKE, **changes}
    if "base" in changes and isinstance(changes["base"], dict):
        spec["base"] = {**SMOKE["base"], **changes["base"]}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert named in invoke("sweep", "plan", str(path))
    assert named in invoke("sweep", "run", str(path), "--tracking-uri", uri)


@pytest.mark.parametrize("kind", ["directory", "binary", "empty", "missing", "run config"])
def test_files_that_are_not_specs(cli, tmp_path, kind):
    invoke, _ = cli
    path = tmp_path / "spec.yaml"
    if kind == "directory":
        path.mkdir()
    elif kind == "binary":
        path.write_bytes(bytes(range(256)) * 4)
    elif kind == "empty":
        path.write_text("")
    elif kind == "run config":
        path.write_text((REPO / "examples" / "tiny-easy.yaml").read_text())
    assert "spec" in invoke("sweep", "plan", str(path)).lower()


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        ("not a snapshot", "not a snapshot"),
        ("truncated", "not a readable snapshot"),
        ("random", "not a readable snapshot"),
        ("bad json", "not valid JSON"),
        ("traversal", "names become folders"),
        ("bad status", "status 'WEIRD'"),
    ],
)
def test_bad_snapshots_import_nothing(cli, tmp_path, damage, named):
    from isolab.synthetic import make_isocompute_runs
    from isolab.tracking.runs import export_runs

    invoke, uri = cli
    snap = export_runs(make_isocompute_runs(seeds=1, max_runs=3, eval_points=3), tmp_path / "s")
    runs = snap / "runs.parquet"
    meta = json.loads((snap / "snapshot.json").read_text())
    if damage == "not a snapshot":
        runs.unlink()
    elif damage == "truncated":
        runs.write_bytes(runs.read_bytes()[:100])
    elif damage == "random":
        runs.write_bytes(bytes(range(256)) * 8)
    elif damage == "bad json":
        (snap / "snapshot.json").write_text("{oops")
    elif damage == "traversal":
        meta["experiment"] = "../../elsewhere"
        (snap / "snapshot.json").write_text(json.dumps(meta))
    else:
        import polars as pl

        pl.read_parquet(runs).with_columns(pl.lit("WEIRD").alias("status")).write_parquet(runs)
    assert named in invoke("runs", "import", str(snap), "--tracking-uri", uri)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["sweep", "run", "SMOKE", "--limit", "-1"], "--limit"),
        (["sweep", "run", "SMOKE", "--limit", "0"], "--limit"),
        (["sweep", "run", "SMOKE", "--workers", "0"], "--workers"),
        (["sweep", "run", "SMOKE", "--backend", "gpu"], "--backend"),
        (["sweep", "run", "SMOKE", "--address", "ray://x:1"], "--address"),
        (["study", "run", "nosuch"], "nosuch"),
        (["study", "run", "nstar", "--scale", "huge"], "--scale"),
        (["study", "run", "nstar", "--workers", "0"], "--workers"),
        (["frontier", "no/such/experiment"], "no MLflow"),
        (["runs", "export", "../../x"], "experiment"),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else a,
)
def test_bad_command_line_options(cli, args, named):
    invoke, uri = cli
    args = [str(REPO / "studies" / "smoke.yaml") if a == "SMOKE" else a for a in args]
    assert named in invoke(*args)


def test_frontier_of_an_experiment_without_runs(cli):
    invoke, uri = cli
    MlflowClient(uri).create_experiment("zero")
    assert "has no runs" in invoke("frontier", "zero", "--tracking-uri", uri)
