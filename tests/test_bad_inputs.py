"""A battery of bad inputs, as a careless user or team would give them: every one exits 2 with
a message naming what to fix, and none leaves a run behind (RUNNING or FAILED)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from isolab.cli import app

REPO = Path(__file__).resolve().parents[1]
SMOKE = yaml.safe_load((REPO / "studies" / "smoke.yaml").read_text())


def _alias_bomb(key: str) -> str:
    """A "billion laughs": 9 aliases of 9 aliases … of 9 strings, 9⁸ strings in ~300 bytes."""
    levels = ["&a [lol,lol,lol,lol,lol,lol,lol,lol,lol]"]
    for prev, name in zip("abcdefg", "bcdefgh", strict=True):
        levels.append(f"&{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return f"{key}: [{', '.join(levels)}]\n"


LONG_NAME = "x" * 300
#: The cores this process may use, and a number of processes (a power of 2) over them.
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
WIDE = 2 ** CORES.bit_length()

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
    # input limits: refused before any object is built, and the message stays short
    (_alias_bomb("n"), "expand to over 100,000 values"),
    ("n: 4\nB_p: 2\nn: 8\n", "key 'n' is given twice (line 3)"),
    ("eval_ks: [1, " + "x" * 100_000 + "]\n", "eval_ks.1 = '" + "x" * 27 + "...x"),
    ("seed: " + "9" * 5000 + "\n", "an integer of 5,000 digits"),
    ("seed: 18446744073709551616\n", "seed = 18446744073709551616: seeds are integers from 0"),
    ('experiment: "a\\u202eb"\n', "U+202E"),
    ('experiment: "a\\u2028b"\n', "U+2028"),
    ('experiment: "a\\x7fb"\n', "U+007F"),
    (f"experiment: {LONG_NAME}\n", "300 bytes long, over isolab's limit of 120"),
    ("model: '[/x]'\n", "model: '[/x]'"),  # rich markup in user text prints as it is
    ("M: 1:00\n", "M = '1:00'"),  # YAML 1.2: not the sexagesimal 60
    # issue 52: accepted silently before: checkpoints that are not rising rollout counts ≥ 1
    ("eval_at_rollouts: [-5, 10]\n", "eval_at_rollouts = [-5, 10]"),
    ("eval_at_rollouts: [0, 10]\n", "eval_at_rollouts = [0, 10]"),
    ("eval_at_rollouts: []\n", "eval_at_rollouts = []"),
    ("eval_at_rollouts: [20, 10]\n", "eval_at_rollouts = [20, 10]"),
    ("eval_at_rollouts: [10, 10]\n", "eval_at_rollouts = [10, 10]"),
    ("eval_at_rollouts: 64\n", "eval_at_rollouts = 64"),
    # sizes no run needs (a typo's extra digits), and every factor of a run's work
    ("lora_rank: 1000000000\n", "lora_rank = 1,000,000,000"),
    ("pool_size: 1000000000\n", "pool_size = 1,000,000,000"),
    ("max_completion_tokens: 1000000000\n", "max_completion_tokens = 1,000,000,000"),
    ("B_base: 1000000000\n", "B_base = 1,000,000,000"),
    ("num_iterations: 1e9\n", "M·num_iterations = 40,000,000,000"),
    ("M: 1000000\nnum_iterations: 2\n", "M·num_iterations = 2,000,000"),
    ("eval_every: 1000000000\n", "eval_every = 1,000,000,000"),
    ("train_limit: 1000000000\n", "train_limit = 1,000,000,000"),
    ("eval_problems: 1000000000\n", "eval_problems·eval_k_samples"),
    ("eval_k_samples: 1000000000\n", "eval_problems·eval_k_samples"),
    ("search_oversample: 1000000000\n", "search_oversample·B_p·n"),
    ("processes: 1000000000\n", "processes = 1000000000"),
    ("n: 64\nB_p: 1024\nmax_completion_tokens: 100000\n", "B·max_completion_tokens"),
    (
        "M: 100000\neval_every: 1\neval_problems: 1000\neval_k_samples: 100\n",
        "evaluations (eval_every = 1",
    ),
    (
        "n: 2\nB_p: 1\nM: 10000\neval_problems: 1000\neval_k_samples: 100\neval_at_rollouts: ["
        + ", ".join(str(2 * i) for i in range(1, 5001))
        + "]\n",
        "evaluations (eval_at_rollouts",
    ),
    # numbers past any sane training value
    ("lr_base: 1e300\n", "lr_base = 1e+300"),
    ("lr_base: 2\n", "lr_base = 2.0"),
    ("lr_base: 0.5\nlr_scaling: linear\nB_p: 64\n", "lr = lr_base·B/B_base = 4"),
    ("temperature: 1e300\n", "temperature = 1e+300"),
    ("temperature: 50\n", "temperature = 50.0"),
    ("beta: 1e300\n", "beta = 1e+300"),
    ("entropy_coef: 1e300\n", "entropy_coef = 1e+300"),
    ("max_grad_norm: 1e300\n", "max_grad_norm = 1e+300"),
    # a reward model is named by text
    ("extra: {reward_model: 5}\n", "extra.reward_model = 5"),
    ("extra: {reward_model: ''}\n", "extra.reward_model = ''"),
    ("extra: {reward_model: [a, b]}\n", "extra.reward_model = ['a', 'b']"),
    ('extra: {reward_model: "a\\0b"}\n', "extra.reward_model = 'a\\x00b'"),
    # NUL and control characters in what becomes a path or a hub id
    ('model: "tiny\\0m"\n', "model = 'tiny\\x00m'"),
    ('model: "a\\x01b"\n', "model = 'a\\x01b'"),
    ('model: "a\\nb"\n', "model = 'a\\nb'"),
    ('task: "a\\0b.yaml"\n', "task = 'a\\x00b.yaml'"),
    ('data_dir: "/tmp/\\0x"\n', "data_dir = '/tmp/\\x00x'"),
    ('data_dir: "/tmp/a\\tb"\n', "data_dir = '/tmp/a\\tb'"),
    ('eval_judge: "tiny\\0prm"\n', "eval_judge = 'tiny\\x00prm'"),
    ('eval_sets: {x: "gsm\\0k"}\n', "eval_sets.x = 'gsm\\x00k'"),
    # evaluation sets whose generator would never finish
    ('eval_sets: {x: "arithmetic:max_digits=100000000"}\n', "max_digits = 100000000: give 1 to"),
    ('eval_sets: {x: "arithmetic:max_terms=100000000"}\n', "eval_sets.x"),
    ('eval_sets: {x: "arithmetic:max_digits=' + "9" * 30 + '"}\n', "eval_sets.x"),
    ('eval_sets: {x: "arithmetic:min_digits=0"}\n', "eval_sets.x"),
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
    ("M=1:00", "M = '1:00'"),  # YAML 1.1 read it as 60
    ("seed=18446744073709551616", "seed = 18446744073709551616"),
    (f"experiment={LONG_NAME}", "over isolab's limit of 120"),
    ("eval_ks=[*x]", "YAML"),
    # issue 52: accepted silently before
    ("eval_at_rollouts=[]", "eval_at_rollouts = []"),
    ("eval_at_rollouts=[0]", "eval_at_rollouts = [0]"),
    ("eval_at_rollouts=[64,32]", "eval_at_rollouts = [64, 32]"),
    ("lora_rank=1e9", "lora_rank = 1,000,000,000"),
    ("num_iterations=1e9", "M·num_iterations"),
    ("max_completion_tokens=1e9", "max_completion_tokens = 1,000,000,000"),
    ("pool_size=1e9", "pool_size = 1,000,000,000"),
    ("B_base=1e9", "B_base = 1,000,000,000"),
    ("lr_base=1e300", "lr_base = 1e+300"),
    ("temperature=1e300", "temperature = 1e+300"),
    ("extra.reward_model=5", "extra.reward_model = 5"),
    ("eval_sets.x=arithmetic:max_digits=100000000", "eval_sets.x"),
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
    ({"name": "../outside"}, "name: '../outside'"),
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
    ({"eval_points": 300_000_000}, "eval_points: 300,000,000: give 1 to 100"),
    ({"budget_rollouts": 10**17}, "budget_rollouts: 100,000,000,000,000,000 gives M ="),
    ({"budget_rollouts": None, "budget_flops": float("inf")}, "budget_flops: inf"),
    ({"budget_rollouts": None, "budget_flops": 1e30}, "budget_flops: the budget gives M ="),
    ({"seeds": [2**64]}, "seeds: 18446744073709551616: seeds are integers from 0"),
    ({"timing": {"setup_s": -100000}}, "timing.setup_s: -100000.0"),
    ({"timing": {"step_s": float("nan")}}, "timing.step_s: nan"),
    ({"resources": {"cpus_per_run": float("nan")}}, "resources.cpus_per_run: nan"),
    ({"metric": "eval/avg@8"}, "k = 8 is not in eval_ks [1, 4]; add 8"),
    ({"metric": "eval/avg@1"}, "logged once, as eval/avg@4"),
    ({"metric": "eval/best@1"}, "best@1 and worst@1 equal avg@k"),
    ({"metric": "eval/loss"}, "metric: 'eval/loss': pick eval/avg@k"),
    ({"name": "a\u202eb"}, "name: 'a\\u202eb': holds the control or formatting character U+202E"),
    ({"name": "a\u2028b"}, "U+2028"),
    ({"name": "a\x7fb"}, "U+007F"),
    ({"name": LONG_NAME}, "name: 'xxx"),
    # issue 52: accepted silently before
    ({"seeds": 5}, "seeds: 5: give a list"),
    ({"seeds": "5"}, "seeds"),
    ({"base": {"eval_at_rollouts": [0]}}, "base.eval_at_rollouts"),
    ({"base": {"lora_rank": 10**9}}, "base.lora_rank"),
    ({"base": {"num_iterations": 10**9}}, "M·num_iterations"),
    ({"base": {"max_completion_tokens": 10**9}}, "base.max_completion_tokens"),
    ({"base": {"extra": {"reward_model": 5}}}, "extra.reward_model = 5"),
    ({"base": {"model": "tiny\0m"}}, "base.model"),
    ({"axes": {"lr_base": [1e-5, 1e300]}}, "axes.lr_base"),
    ({"axes": {"temperature": [1.0, 1e300]}}, "axes.temperature"),
    ({"axes": {"pool_size": [4000, 10**9]}}, "axes.pool_size"),
    ({"eval_ratio": 1e300}, "eval_ratio: 1e+300: the first of 3 checkpoints"),
    ({"eval_ratio": 100}, "eval_ratio: 100: the first of 3 checkpoints"),
    ({"eval_points": 9}, "lower eval_ratio or eval_points"),
    # resources no run of this machine can have: refused at plan time, naming what fits
    ({"resources": {"cpus_per_run": 1e9}}, "resources.cpus_per_run: 1e+09 cores per run"),
    ({"resources": {"cpus_per_run": CORES + 1}}, f"this machine has {CORES} cores"),
    (
        {
            "base": {"processes": WIDE, "n": WIDE, "B_p": 1},
            "axes": {"n": [WIDE]},
            "max_batch": None,
            "budget_rollouts": 4 * WIDE,
        },
        f"base.processes: processes = {WIDE} × cpus_per_run = 1",
    ),
    (
        {
            "base": {"n": WIDE, "B_p": 1},
            "axes": {"processes": [1, WIDE]},
            "max_batch": None,
            "budget_rollouts": 4 * WIDE,
        },
        f"axes.processes: processes = {WIDE} × cpus_per_run = 1",
    ),
]


@pytest.fixture
def cli(tmp_path, monkeypatch, isolab_cache, tracking_uri):
    """This file's `cli` (over conftest's): every command must exit 2; yields (invoke, uri)
    and checks afterwards that no refused input left a run in the store at `uri`."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the same answer with or without a network
    uri = tracking_uri

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


def _jsonl(*rows: str) -> str:
    return "".join(row + "\n" for row in rows)


_Q = '{"id": "p%d", "question": "%d+1", "answer": "%d"}'
#: Good rows of a card's data (ids p1…p6), then the rows that spoil them.
GOOD_ROWS = [_Q % (i, i, i + 1) for i in range(1, 7)]

#: (data file name, its text, card keys beyond name/data/prompt/answer, what the message names)
CARD_DATA = [
    ("p.jsonl", _jsonl(*GOOD_ROWS, '{"id": "p7", "question": "7+1", "answer": null}'),
     {"verifier": "exact"}, "data: p.jsonl line 7: answer is null"),
    ("p.jsonl", _jsonl(*GOOD_ROWS, '{"id": "p7", "question": "7+1", "answer": "  "}'),
     {"verifier": "exact"}, "data: p.jsonl line 7: answer is empty"),
    ("p.jsonl", _jsonl(*GOOD_ROWS, '{"id": "p7", "question": "7+1", "answer": [8, 9]}'),
     {"verifier": "exact"}, "data: p.jsonl line 7: answer = [8, 9]"),
    ("p.jsonl", _jsonl(*GOOD_ROWS, '{"id": "p7", "question": "7+1", "answer": null}'),
     {}, "data: p.jsonl line 7: answer is null"),
    ("p.jsonl", _jsonl(*GOOD_ROWS, '{"id": "p2", "question": "7+1", "answer": "8"}'),
     {"id": "id"}, "data: p.jsonl line 7: id 'p2' is also line 2's"),
    ("p.jsonl", _jsonl(*GOOD_ROWS, '{"id": null, "question": "7+1", "answer": "8"}'),
     {"id": "id"}, "data: p.jsonl line 7: id is null"),
    ("p.jsonl", _jsonl(*GOOD_ROWS[:3], "", *GOOD_ROWS[3:], '{"id": "p7", "question": "7+1", '
     '"answer": "8", "answer": "9"}'), {}, "data: p.jsonl line 8: key 'answer' is given twice"),
    ("p.jsonl", _jsonl(*GOOD_ROWS, '{"id": "p7", "question": "2+1", "answer": "4"}'),
     {}, "data: p.jsonl line 7: the problem of line 2 again, with answer '4' (line 2: '3')"),
    ("p.csv", "id,question,answer,answer\n" + "".join(f"p{i},{i}+1,{i + 1},0\n" for i in
     range(1, 8)), {}, "data: p.csv: column 'answer' is given twice"),
    ("p.csv", "id,question,answer\n" + "".join(f"p{i},{i}+1,{i + 1}\n" for i in range(1, 7))
     + "p1,7+1,8\n", {"id": "id"}, "data: p.csv row 7: id 'p1' is also row 1's"),
    ("p.jsonl", _jsonl(*GOOD_ROWS), {"id": "id", "validation": "v.jsonl"},
     "validation: v.jsonl line 1: id 'p3' is also data's line 3"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("file", "text", "keys", "named"), CARD_DATA, ids=[c[3] for c in CARD_DATA]
)
def test_bad_task_card_data(cli, tmp_path, file, text, keys, named):
    """Null, empty or duplicate answers and ids in a card's data: refused when the card is
    read, naming the file, the line (or row) and the field."""
    invoke, uri = cli
    (tmp_path / file).write_text(text)
    (tmp_path / "v.jsonl").write_text(_Q % (3, 30, 31) + "\n")
    card = {"name": "bad", "data": file, "prompt": "{question}", "answer": "answer", **keys}
    (tmp_path / "task.yaml").write_text(yaml.safe_dump(card))
    (tmp_path / "run.yaml").write_text("task: task.yaml\nmodel: smollm2-135m\n")
    assert named in invoke("train", "run.yaml", "--tracking-uri", uri)


@pytest.mark.parametrize("command", ["report", "frontier"])
@pytest.mark.parametrize("budget", ["inf", "nan", "-1", "0", "-inf"])
def test_a_budget_must_be_a_positive_finite_compute(cli, command, budget):
    """`report --budget inf` wrote a page recommending for no compute at all."""
    invoke, _ = cli
    snapshot = REPO / "tests" / "fixtures" / "smoke-snapshots" / "nstar" / "main"
    assert f"--budget {budget}" in invoke(command, str(snapshot), "--budget", budget)
    assert not Path("runs").exists()  # nothing written


@pytest.mark.parametrize(
    "kind", ["directory", "binary", "empty", "missing", "run config", "too large"]
)
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
    elif kind == "too large":
        path.write_text("# padding\n" * 200_000)
    assert "spec" in invoke("sweep", "plan", str(path)).lower()


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("name: a\nname: b\n", "spec: {spec} is not a readable YAML file (key 'name' is given"),
        (_alias_bomb("description"), "expand to over 100,000 values"),
        ("BASE: .\n", "base: {dir} is not a readable run config YAML (a folder"),
        (
            "BASE: weights.bin\n",
            "base: {dir}/weights.bin is not a readable run config YAML (not UTF-8",
        ),
        ("BASE: dup.yaml\n", "key 'n' is given twice (line 2)"),
    ],
    ids=["duplicate key", "alias bomb", "base folder", "base binary", "base duplicate key"],
)
def test_spec_files_read_under_limits(cli, tmp_path, text, named):
    """Duplicate keys, alias bombs, and a `base:` that is a folder or a binary file."""
    invoke, _ = cli
    (tmp_path / "weights.bin").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "dup.yaml").write_text("n: 4\nn: 8\n")
    spec = {k: v for k, v in SMOKE.items() if k != "base"}
    body = yaml.safe_dump(spec) if text.startswith("BASE") else ""
    path = tmp_path / "spec.yaml"
    path.write_text(body + text.replace("BASE", "base") + ("" if body else yaml.safe_dump(spec)))
    out = invoke("sweep", "plan", str(path))
    assert named.format(spec=path, dir=tmp_path) in out
    assert len(out) < 1000  # never a repr of the expanded value


def test_yaml_1_2_numbers_in_files_and_set(tmp_path):
    """`010` is ten, not the octal 8 (YAML 1.1); `1:00` is text, not the sexagesimal 60."""
    from isolab.config import RunConfig, apply_overrides

    assert apply_overrides({}, ["n=010", "M=1:00", "lr_base=1e-4"]) == {
        "n": 10,
        "M": "1:00",
        "lr_base": 1e-4,
    }
    path = tmp_path / "run.yaml"
    path.write_text("n: 010\nB_p: 0x10\n")
    assert (RunConfig.from_yaml(path).n, RunConfig.from_yaml(path).B_p) == (10, 16)


def test_an_alias_bomb_is_refused_at_once():
    from isolab.userinput import load_yaml

    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="expand to over 100,000 values"):
        load_yaml(_alias_bomb("n"))
    assert time.perf_counter() - t0 < 1.0


def test_user_text_with_rich_markup_prints_as_it_is(cli, tmp_path):
    """`[/x]` in a path or a name is text, not rich markup (it raised MarkupError)."""
    invoke, _ = cli
    folder = tmp_path / "[" / "x]"
    folder.mkdir(parents=True)
    spec = {**SMOKE, "name": "[/x]"}
    (folder / "bad.yaml").write_text(yaml.safe_dump({**spec, "budget_rollouts": 1}))
    assert "[/x]/bad.yaml: budget_rollouts" in invoke("sweep", "plan", str(folder / "bad.yaml"))
    (folder / "ok.yaml").write_text(yaml.safe_dump(spec))
    res = CliRunner().invoke(app, ["sweep", "plan", str(folder / "ok.yaml")])
    assert res.exit_code == 0 and "sweep [/x]" in res.output, res.output


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        ("not a snapshot", "not a snapshot"),
        ("truncated", "not a readable snapshot"),
        ("random", "not a readable snapshot"),
        ("bad json", "not valid JSON"),
        ("traversal", "names become folders"),
        ("bad status", "status 'WEIRD'"),
        ("no run key", "every row needs a run_key"),
        ("null run keys", "every row needs a run_key"),
    ],
)
def test_bad_snapshots_import_nothing(cli, tmp_path, damage, named):
    from isolab.synthetic import make_isocompute_runs
    from isolab.tracking.snapshot import export_runs

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
    elif damage == "no run key":
        import polars as pl

        pl.read_parquet(runs).drop("run_key", "run_id").write_parquet(runs)
    elif damage == "null run keys":  # imported as one run named "None" before
        import polars as pl

        df = pl.read_parquet(runs)
        df.with_columns(pl.lit(None, pl.Utf8).alias("run_key")).write_parquet(runs)
    else:
        import polars as pl

        pl.read_parquet(runs).with_columns(pl.lit("WEIRD").alias("status")).write_parquet(runs)
    assert named in invoke("runs", "import", str(snap), "--tracking-uri", uri)
    if Path(uri.removeprefix("sqlite:///")).exists():  # nor an experiment
        assert [e.name for e in MlflowClient(uri).search_experiments()] == ["Default"]


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


# ---- a busy store, an unwritable artifacts folder: said at once, in a sentence ------------------
def test_a_held_store_lock_names_its_holder(cli, tmp_path, monkeypatch):
    import fcntl

    from isolab.cli.common import EXIT_STORE_BUSY
    from isolab.tracking import locks

    _, uri = cli
    monkeypatch.setattr(locks, "LOCK_WAIT_S", 0.2)
    smoke = str(REPO / "studies" / "smoke.yaml")
    with open(tmp_path / ".mlflow.db.lock", "a+") as lock:  # as another isolab process holds it
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.write("pid 4242 on host (isolab sweep run big.yaml)\n")
        lock.flush()
        res = CliRunner().invoke(app, ["sweep", "run", smoke, "--tracking-uri", uri])
    out = " ".join(res.output.split())
    assert res.exit_code == EXIT_STORE_BUSY, out
    assert "is locked by pid 4242 on host (isolab sweep run big.yaml)" in out
    assert "retry when that process is done" in out and "Traceback" not in out


def test_a_locked_sqlite_database_names_the_process_holding_it(cli, tmp_path, monkeypatch):
    """SQLite's `database is locked` (after MLflow's 20 s wait, mimicked here): who holds it."""
    import subprocess
    import sys

    from mlflow.exceptions import MlflowException

    from isolab.cli.common import EXIT_STORE_BUSY

    _, uri = cli
    db = tmp_path / "mlflow.db"
    MlflowClient(uri).search_experiments()  # the store exists
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import sqlite3, time; c = sqlite3.connect({str(db)!r}); "
            "c.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    smoke = str(REPO / "studies" / "smoke.yaml")
    try:
        assert holder.stdout.readline().strip() == "held"

        def locked(*args, **kwargs):
            raise MlflowException("(sqlite3.OperationalError) database is locked")

        with monkeypatch.context() as patch:
            patch.setattr(MlflowClient, "search_experiments", locked)
            res = CliRunner().invoke(app, ["sweep", "run", smoke, "--tracking-uri", uri])
    finally:
        holder.kill()
        holder.wait()
    out = " ".join(res.output.split())
    assert res.exit_code == EXIT_STORE_BUSY, out
    assert f"the store {db} is locked by pid {holder.pid} (" in out and "Traceback" not in out


@pytest.mark.parametrize("how", ["a file in the way", "read-only"])
def test_an_unwritable_artifacts_folder_is_refused_before_training(cli, tmp_path, monkeypatch, how):
    import os
    import stat

    from isolab.tracking import store

    invoke, uri = cli
    artifacts = tmp_path / "artifacts"
    if how == "a file in the way":
        artifacts.write_text("")
    else:
        artifacts.mkdir()
        artifacts.chmod(stat.S_IRUSR | stat.S_IXUSR)
        if os.geteuid() == 0:  # root writes into read-only folders: as a read-only mount does

            def refused(*args, **kwargs):
                raise PermissionError(30, "Read-only file system")

            monkeypatch.setattr(store.tempfile, "TemporaryFile", refused)
    example = str(REPO / "examples" / "tiny-easy.yaml")
    assert "the artifacts folder" in invoke("train", example, "--tracking-uri", uri)
    smoke = str(REPO / "studies" / "smoke.yaml")
    assert "the artifacts folder" in invoke("sweep", "run", smoke, "--tracking-uri", uri)


# ---- clean ends -------------------------------------------------------------------------------
def test_a_finished_sweep_lets_its_workers_exit_quietly(monkeypatch):
    """Workers past their last point end on SIGTERM without raising KeyboardInterrupt (which
    printed `Exception ignored in atexit callback` after every clean sweep), and the pool lets
    them exit on their own before it terminates any."""
    import signal

    from isolab.sweep import local as runner

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        signal.signal(signal.SIGTERM, runner._interrupt_once)
        runner._end_quietly()
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)

    calls = []

    class Worker:  # exits by itself 0.1 s into the join, as one past its sentinel does
        exitcode = None

        def join(self, timeout=None):
            calls.append(("join", timeout))
            self.exitcode = 0

        def terminate(self):
            calls.append(("terminate", None))

    pool = runner._LocalPool.__new__(runner._LocalPool)
    pool.procs = [Worker(), Worker()]
    pool.tasks = pool.results = type("Q", (), {"cancel_join_thread": lambda self: None})()
    pool.close()
    assert ("terminate", None) not in calls and calls[0][1] > 0


def test_ctrl_c_during_a_store_write_waits_for_it(tracking_uri, monkeypatch):
    """SIGINT inside `log_params` is held until the write is done, then raised: the run's
    params are whole and it ends KILLED (a KeyboardInterrupt inside SQLAlchemy once left this
    process deadlocked on its own transaction, the run RUNNING)."""
    import os
    import signal

    from isolab.tracking import RunLogger

    uri = tracking_uri
    logger = RunLogger("interrupted", "run", "key", uri)
    write = logger.client.log_batch

    def interrupted_write(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # lands here, in the middle of the write
        time.sleep(0.05)
        return write(*args, **kwargs)

    monkeypatch.setattr(logger.client, "log_batch", interrupted_write)
    with pytest.raises(KeyboardInterrupt):
        logger.log_params({"n": 8, "B_p": 4})
    monkeypatch.undo()
    logger.end("KILLED")
    run = MlflowClient(uri).get_run(logger.run_id)
    assert run.data.params == {"n": "8", "B_p": "4"} and run.info.status == "KILLED"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# ---- issue 52: inputs that gave exit-1 tracebacks ----------------------------------------------
def _snapshot(tmp_path: Path) -> Path:
    from isolab.synthetic import make_isocompute_runs
    from isolab.tracking.snapshot import export_runs

    return export_runs(make_isocompute_runs(seeds=1, max_runs=3, eval_points=3), tmp_path / "s")


def _card(tmp_path: Path, **changes) -> str:
    """A run config whose task is a copy of examples/word-problems' card, with `changes`."""
    source = REPO / "examples" / "word-problems"
    (tmp_path / "problems.jsonl").write_text((source / "problems.jsonl").read_text())
    card = {**yaml.safe_load((source / "task.yaml").read_text()), **changes}
    (tmp_path / "task.yaml").write_text(yaml.safe_dump(card))
    (tmp_path / "run.yaml").write_text(f"task: {tmp_path / 'task.yaml'}\n")
    return str(tmp_path / "run.yaml")


def _nul_config(tmp_path, uri, patch):
    (tmp_path / "run.yaml").write_bytes(b"n: 8\nB_p: 4\x00\n")
    return ["train", str(tmp_path / "run.yaml"), "--tracking-uri", uri]


def _nul_spec(tmp_path, uri, patch):
    (tmp_path / "spec.yaml").write_bytes(yaml.safe_dump(SMOKE).encode() + b"# \x00\n")
    return ["sweep", "run", str(tmp_path / "spec.yaml"), "--tracking-uri", uri]


def _truncated(tmp_path, uri, patch):
    runs = _snapshot(tmp_path) / "runs.parquet"
    runs.write_bytes(runs.read_bytes()[:100])
    return ["report", str(runs.parent)]


def _silent_server(tmp_path, uri, patch):
    """A port that takes connections and never answers (a wedged server, a firewall's tarpit)."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    # held until the test ends: monkeypatch's undo drops the last reference, which closes it
    patch.setattr(_silent_server, "listener", listener, raising=False)
    return ["frontier", "zz", "--tracking-uri", f"http://127.0.0.1:{listener.getsockname()[1]}"]


def _read_only_mount(tmp_path, uri, patch):
    """As on a read-only mount (root passes chmod): the lock file beside the store is EROFS."""
    from isolab.tracking import store

    def refused(db, *args, **kwargs):
        raise OSError(30, "Read-only file system", str(db.parent / f".{db.name}.lock"))

    patch.setattr(store, "store_lock", refused)
    return ["runs", "import", str(_snapshot(tmp_path)), "--tracking-uri", uri]


def _read_only_file(tmp_path, uri, patch):
    """A store file this process may not write (`os.access`, which a read-only mount fails)."""
    db = tmp_path / "mlflow.db"
    MlflowClient(uri).search_experiments()  # the store exists
    access = os.access
    patch.setattr(os, "access", lambda p, mode, **kw: Path(p) != db and access(p, mode, **kw))
    return ["train", str(REPO / "examples" / "tiny-easy.yaml"), "--tracking-uri", uri]


def _disk_full(tmp_path, uri, patch):
    """The disk fills while the second run's files are written: the first run is whole."""
    from isolab.tracking import importing

    upload, calls = importing.upload_files, []

    def full(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device", str(tmp_path / "artifacts" / "x.png"))
        return upload(*args, **kwargs)

    patch.setattr(importing, "upload_files", full)
    return ["runs", "import", str(_snapshot(tmp_path)), "--tracking-uri", uri]


def _args(*args):
    return lambda tmp_path, uri, patch: [
        str(_snapshot(tmp_path)) if a == "SNAP" else a.replace("URI", uri) for a in args
    ]


#: (what, a setup(tmp_path, uri, monkeypatch) giving the command line, what the message names):
#: each raised a traceback and exited 1 before (its exception in the comment)
TRACEBACKS = [
    ("NUL in a run config", _nul_config, "U+0000 at line 2 is not allowed in YAML"),  # ReaderError
    ("NUL in a sweep spec", _nul_spec, "U+0000 at line"),  # ReaderError
    (  # IndexError while formatting the first row
        "card prompt {question[99]}",
        lambda t, u, p: ["flops", _card(t, prompt="Q: {question[99]} {question}")],
        "prompt: '{question[99]}': a template names whole fields",
    ),
    (
        "card prompt {question.x}",  # AttributeError
        lambda t, u, p: ["flops", _card(t, prompt="{question.x}")],
        "prompt: '{question.x}'",
    ),
    (
        "card prompt names no field of the rows",
        lambda t, u, p: ["flops", _card(t, prompt="{nosuch}")],
        "prompt: row 0 of data has no field 'nosuch'",
    ),
    (  # PermissionError: the whole disk walked from /
        "card hub id /",
        lambda t, u, p: ["flops", _card(t, data={"hub": {"id": "/"}})],
        "data: hub: id '/': give a hub id (owner/name)",
    ),
    (
        "card hub id a b",
        lambda t, u, p: ["flops", _card(t, data={"hub": {"id": "a b/c/d"}})],
        "is neither a folder of data files next to the card nor a valid hub id",
    ),
    ("report of a truncated parquet", _truncated, "runs.parquet: not a readable snapshot"),
    (  # ValueError, MemoryError in the bootstrap's arrays
        "report --n-boot 10^12",
        _args("report", "SNAP", "--n-boot", "1000000000000"),
        "--n-boot 1,000,000,000,000: use 0 (no intervals) to 100,000",
    ),
    (
        "frontier --n-boot 10^12",
        _args("frontier", "SNAP", "--n-boot", "1000000000000"),
        "--n-boot 1,000,000,000,000",
    ),
    (  # UnsupportedModelRegistryStoreURIException
        "--tracking-uri garbage://x",
        _args("frontier", "zz", "--tracking-uri", "garbage://x"),
        "--tracking-uri 'garbage://x': isolab does not know the scheme 'garbage'; give sqlite:///",
    ),
    (  # MlflowException: the file store is in maintenance mode
        "--tracking-uri file://",
        _args("runs", "import", "SNAP", "--tracking-uri", "file:///tmp/mlruns"),
        "--tracking-uri 'file:///tmp/mlruns': MLflow 3 no longer writes the file store; use a "
        "SQLite store, e.g. sqlite:////tmp/mlruns/mlflow.db",
    ),
    (
        "--tracking-uri http://[::1",
        _args("frontier", "zz", "--tracking-uri", "http://[::1"),
        "not a URI (Invalid IPv6 URL)",
    ),
    (  # NotADirectoryError after the whole analysis
        "frontier --out /dev/null/x",
        _args("frontier", "SNAP", "--out", "/dev/null/x"),
        "--out /dev/null/x: /dev/null is not a folder",
    ),
    ("report --out /dev/null/x", _args("report", "SNAP", "--out", "/dev/null/x"), "/dev/null is"),
    (  # FileExistsError
        "init on an existing file",
        lambda t, u, p: (t / "afile").touch() or ["init", str(t / "afile")],
        "afile is a file in the way; move it, or pick another FOLDER",
    ),
    (  # NotADirectoryError, half the project laid out
        "init with a file named runs",
        lambda t, u, p: (t / "runs").touch() or ["init", str(t), "--force"],
        "runs is a file in the way",
    ),
    (  # PermissionError / OSError making the lock file
        "a store on a read-only mount",
        _read_only_mount,
        "mlflow.db cannot be written (",
    ),
    ("a read-only store file", _read_only_file, "mlflow.db is read-only: runs are written there"),
    (  # OSError(ENOSPC) out of `runs import`, the runs written so far deleted
        "a full disk during runs import",
        _disk_full,
        "stopped partway through its 3 runs: No space left on device",
    ),
    (  # over 120 s of MLflow's retries, then MlflowException
        "an unreachable tracking server",
        _args("frontier", "zz", "--tracking-uri", "http://127.0.0.1:9"),
        "--tracking-uri 'http://127.0.0.1:9': no MLflow server answers there (Connection refused)"
        ": is `mlflow server` running, on that host and port?",
    ),
    ("a tracking server that never answers", _silent_server, "(no answer within 3 s)"),
    (
        "MLFLOW_TRACKING_URI garbage://x",
        lambda t, u, p: p.setenv("MLFLOW_TRACKING_URI", "garbage://x") or ["frontier", "zz"],
        "MLFLOW_TRACKING_URI 'garbage://x': isolab does not know the scheme",
    ),
]


@pytest.mark.parametrize(
    ("setup", "named"), [c[1:] for c in TRACEBACKS], ids=[c[0] for c in TRACEBACKS]
)
def test_inputs_that_gave_tracebacks(cli, tmp_path, monkeypatch, setup, named):
    invoke, uri = cli
    args = setup(tmp_path, uri, monkeypatch)
    t0 = time.perf_counter()
    out = invoke(*args)
    assert named in out and "Traceback" not in out
    assert time.perf_counter() - t0 < 15  # a server that does not answer: not 2 min of retries


def test_names_with_dollar_signs_are_drawn_as_they_are(cli, tmp_path):
    """`$` in a sweep's name is text in the figures, not matplotlib math (ParseException)."""
    snap = _snapshot(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    for name in ("runs.parquet", "snapshot.json"):
        (other / name).write_bytes((snap / name).read_bytes())
    meta = json.loads((other / "snapshot.json").read_text())
    (other / "snapshot.json").write_text(json.dumps({**meta, "experiment": "x$^$y"}))
    res = CliRunner().invoke(app, ["compare", str(snap), str(other), "--out", "c.html"])
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "x$^$y" in (tmp_path / "c.html").read_text()


@pytest.mark.parametrize("value", [None, 0])
def test_a_snapshot_without_eval_sizes_reports(cli, tmp_path, value):
    """A column of nulls (runs logged without eval_problems) reads as no column: the noise
    model's defaults, not int(None) (TypeError); 0 is no size either (ZeroDivisionError)."""
    import polars as pl

    from isolab.synthetic import make_isocompute_runs
    from isolab.tracking.snapshot import export_runs

    df = make_isocompute_runs(seeds=1, max_runs=6, eval_points=3).with_columns(
        pl.lit(value, pl.Int64).alias("eval_problems"), pl.lit(4).alias("eval_k_samples")
    )
    snap = export_runs(df, tmp_path / "s")
    res = CliRunner().invoke(app, ["report", str(snap), "--out", "r.html", "--n-boot", "20"])
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output


def test_a_gpu_spec_plans_here_with_a_note_and_its_run_is_refused(cli, tmp_path):
    """A spec for a GPU machine (more cores per run than this one has) is still worth planning
    on a laptop: `sweep plan` prints it with a note, `sweep run` refuses it before any run."""
    invoke, uri = cli
    spec = {**SMOKE, "resources": {"cpus_per_run": CORES + 1, "gpus_per_run": 1}}
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump(spec))
    res = CliRunner().invoke(app, ["sweep", "plan", str(path)])
    out = " ".join(res.output.split())
    assert res.exit_code == 0, out
    assert f"this machine has {CORES} cores" in out and "`sweep run` here refuses it" in out
    assert f"this machine has {CORES} cores" in invoke(
        "sweep", "run", str(path), "--tracking-uri", uri
    )
