"""Your setting, not ours: a task card over your own file, your TRL-style reward function, your
local model folder — planned, trained and logged as the shipped tasks are; bad input refused
with the key and the fix (examples/word-problems)."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
import yaml
from helpers import run_notebook, tiny_chat_model

from isolab.config import RunConfig
from isolab.tasks import get_task, task_id
from isolab.tasks.card import CardError, load_card

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "word-problems"
CARD = EXAMPLE / "task.yaml"
#: The README's "Your own setting" commands, word for word (tests/test_readme_commands.py
#: checks the README still shows exactly these); the end-to-end test below runs each one with
#: MODEL replaced by a local model folder.
MODEL = "/path/to/your/instruct-model"
README_COMMANDS = (
    f"isolab flops examples/word-problems/run.yaml --set model={MODEL}",
    f"isolab train examples/word-problems/run.yaml --set model={MODEL}",
)


@pytest.fixture
def card_dir(tmp_path: Path) -> Path:
    """A copy of the example, to break one piece at a time."""
    out = tmp_path / "wp"
    shutil.copytree(EXAMPLE, out)
    return out


def _edit(card_dir: Path, **changes) -> Path:
    path = card_dir / "task.yaml"
    data = yaml.safe_load(path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_example_card_is_a_task():
    """60 rows: 2 few-shot examples, a quarter of the rest held out; chat prompts carry the
    system message and the examples as turns; the numeric grader reads a boxed answer."""
    card = load_card(CARD)
    train, val = card.problems("train"), card.problems("test")
    assert (len(train), len(val)) == (44, 14)
    assert not {p.id for p in train} & {p.id for p in val}
    task = get_task(str(CARD), "chat")
    messages = task.prompt(train[0])
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert messages[-1]["content"] == train[0].question
    assert task.verify(f"so it is \\boxed{{{train[0].answer}}}", train[0].answer)
    assert not task.verify("\\boxed{-1}", train[0].answer)
    assert task_id(str(CARD)) == f"word-problems-{card.digest}"


def test_run_keys_follow_the_cards_content_not_its_path(card_dir: Path):
    here = RunConfig(task=str(CARD), model="x/y", split="all")
    there = RunConfig(task=str(card_dir / "task.yaml"), model="x/y", split="all")
    assert here.run_key == there.run_key
    with (card_dir / "problems.jsonl").open("a") as f:
        f.write(json.dumps({"id": "wp999", "question": "1 + 1?", "answer": "2"}) + "\n")
    assert RunConfig(task=str(card_dir / "task.yaml"), model="x/y", split="all").run_key != (
        here.run_key
    )


@pytest.mark.parametrize(
    ("changes", "key", "fix"),
    [
        ({"answer": "solution"}, "answer", "has no field 'solution'"),
        ({"prompt": "{question} ({unit})"}, "data", "has no field 'unit'"),
        ({"data": "missing.jsonl"}, "data", "no file"),
        ({"verifier": "choice"}, "verifier", "rejects problem"),
        ({"verifier": "nope"}, "verifier", "choose one of numeric, math, exact"),
        ({"verifier": "no_such_module_xyz:check"}, "verifier", "no module no_such_module_xyz"),
        ({"verifier": "regex"}, "answer_regex", "needs answer_regex"),
        ({"few_shot": 60}, "data", "no training problems"),
        ({"name": "../up"}, "name", "letters, digits"),
        ({"colour": "red"}, "colour", "unknown key"),
        ({"name": None}, "name", "missing"),
    ],
)
def test_a_bad_card_names_the_key_and_the_fix(card_dir: Path, changes, key, fix):
    path = _edit(card_dir, **changes)
    with pytest.raises(CardError, match=key) as info:
        load_card(path)
    assert fix in str(info.value)


def test_a_file_that_does_not_parse_is_refused(card_dir: Path):
    (card_dir / "problems.jsonl").write_text('{"id": 1, "question": "x"\n')
    with pytest.raises(CardError, match="data: problems.jsonl does not parse"):
        load_card(card_dir / "task.yaml")


def test_csv_and_parquet_and_a_validation_file_and_a_verifier_of_your_own(card_dir: Path):
    import polars as pl

    rows = pl.read_ndjson(card_dir / "problems.jsonl")
    rows.head(40).write_csv(card_dir / "train.csv")
    rows.tail(20).write_parquet(card_dir / "val.parquet")
    (card_dir / "check.py").write_text(
        "def same(completion, gold):\n    return completion.strip().endswith(gold)\n"
    )
    path = _edit(
        card_dir,
        data="train.csv",
        validation="val.parquet",
        verifier="check.py:same",
        few_shot=0,
        gold_format="bare",  # the system message asks for a box, this verifier reads none
    )
    card = load_card(path)
    assert (len(card.problems("train")), len(card.problems("test"))) == (40, 20)
    task = get_task(str(path), "chat", run_code=True)  # the run config's trust_remote_code
    assert task.verify("it is 12", "12") and not task.verify("12 it is", "12")
    (card_dir / "check.py").write_text(
        "def same(completion, gold):\n"
        "    if 'boom' in completion:\n        raise KeyError(gold)\n"
        "    return 0.5 if 'half' in completion else completion.strip().endswith(gold)\n"
    )
    task = get_task(str(path), "chat", run_code=True)
    with pytest.raises(RuntimeError, match="raised KeyError.*boom"):
        task.verify("boom", "12")
    with pytest.raises(RuntimeError, match="returned 0.5.*True or False"):
        task.verify("half", "12")


def test_a_datasets_folder_is_a_hub_id_and_an_unreachable_id_is_refused_fast(
    card_dir: Path, monkeypatch
):
    """`data: {hub: {id: ...}}` reads through `datasets`: a local folder of data files (as a
    hub repository would hold them) gives the same problems as the file, and its files enter
    the card's digest; a hub id that is neither reachable nor cached is refused at once."""
    (card_dir / "ds").mkdir()
    shutil.copy(card_dir / "problems.jsonl", card_dir / "ds" / "train.jsonl")
    path = _edit(card_dir, data={"hub": {"id": "ds", "split": "train"}})
    card = load_card(path)
    assert [p.question for p in card.problems("train")] == [
        p.question for p in load_card(CARD).problems("train")
    ]
    with (card_dir / "ds" / "train.jsonl").open("a") as f:
        f.write(json.dumps({"id": "wp999", "question": "1 + 1?", "answer": "2"}) + "\n")
    assert load_card(path).digest != card.digest
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = _edit(card_dir, data={"hub": {"id": "nobody-xyz/none-abc", "split": "train"}})
    with pytest.raises(CardError, match="data: hub id 'nobody-xyz/none-abc'.*not reachable"):
        load_card(path)
    path = _edit(card_dir, data={"hub": {"id": "ds", "splitt": "train"}})
    with pytest.raises(CardError, match="unknown key 'splitt'"):
        load_card(path)


def test_a_card_is_labelled_by_difficulty_and_a_run_trains_on_its_easy_split(
    card_dir: Path, tmp_path: Path, monkeypatch
):
    """Labelling samples the base model on the card's problems and grades them with the card's
    verifier. This one never passes a sample for an odd gold and passes about 7 in 16 for an
    even gold, so every Easy problem (avg@16 in [0.3, 0.6]) has an even gold, every odd gold is
    Hard, and a run with `split: easy` trains and validates on Easy problems only."""
    from isolab import difficulty
    from isolab.rl.prepare import prepare

    monkeypatch.setenv("ISOLAB_CACHE", str(tmp_path / "cache"))
    (card_dir / "parity.py").write_text(
        "import zlib\n\n\ndef verify(completion, gold):\n"
        "    if completion.strip() == gold:  # the card's own check of its golds\n"
        "        return True\n"
        "    return int(gold) % 2 == 0 and zlib.crc32(completion.encode()) % 16 < 7\n"
    )
    # short prompts and completions: the sampling is 16 per problem
    card = _edit(
        card_dir, verifier="parity.py:verify", few_shot=0, system=None, max_completion_tokens=12
    )
    model = str(tiny_chat_model(tmp_path / "my-model"))
    # the card's own verifier: code from a data folder, run with the one opt-in
    splits = difficulty.load_or_label(model, str(card), pool_size=60, trust_remote_code=True)
    easy = splits.train("easy") + splits.val("easy")
    hard = {p.id for p in splits.train("hard") + splits.val("hard")}
    assert len(splits.problems) == len(load_card(card).problems("train"))
    assert len(easy) >= 10, splits.sizes()
    assert all(int(p.answer) % 2 == 0 for p in easy)
    assert {p.id for p in splits.problems if int(p.answer) % 2} <= hard
    assert difficulty.splits_path(model, str(card), 60, 0).exists()  # cached for every run
    cfg = RunConfig(
        model=model,
        task=str(card),
        split="easy",
        n=2,
        B_p=2,
        M=1,
        pool_size=60,
        trust_remote_code=True,
    )
    *_, train, val = prepare(cfg)
    assert {p.id for p in train} == {p.id for p in splits.train("easy")}
    assert {p.id for p in val} <= {p.id for p in splits.val("easy")}


def test_a_reward_function_of_yours_runs_unchanged_and_is_checked(monkeypatch):
    """TRL's signature; a raise, a NaN or a wrong length stops the run naming the problem and
    the completion."""
    from isolab.rl.rewards import get_reward
    from isolab.rl.user_rewards import RewardFunctionError

    monkeypatch.chdir(REPO)
    task = get_task(str(CARD), "chat")
    fn = get_reward("examples/word-problems/my_reward.py:my_reward", task)
    chat = [
        [{"role": "assistant", "content": "\\boxed{7}"}],
        [{"role": "assistant", "content": "x"}],
    ]
    assert fn(prompts=[[], []], completions=chat, answer=["7", "7"]) == [1.0, 0.0]
    assert RunConfig(reward="examples/word-problems/my_reward.py:my_reward").reward
    for body, says in (
        ("raise KeyError('boom')", "raised KeyError"),
        ("return [float('nan')] * len(completions)", "finite number"),
        ("return [1.0]", "list of 1 for 2 completions"),
    ):
        monkeypatch.setattr(
            "isolab.rl.user_rewards.load_function",
            lambda *a, body=body: _compiled(body),
        )
        bad = get_reward("whatever:f", task)
        with pytest.raises(RewardFunctionError, match=says) as info:
            bad(prompts=["Q1?", "Q2?"], completions=["c1", "c2"], answer=["7", "8"])
        assert "whatever:f" in str(info.value)
        if "finite" in says or "raised" in says:
            assert "Q1?" in str(info.value) and "c1" in str(info.value)


def _compiled(body: str):
    scope: dict = {}
    exec(f"def f(prompts, completions, answer, **kwargs):\n    {body}\n", scope)
    return scope["f"]


def test_a_reward_that_does_not_import_is_refused_before_any_run():
    """A missing file at the config's check; a missing function when the run imports it
    (`get_reward`, before the run exists): checking a config imports none of your code."""
    from isolab.rl.rewards import get_reward

    with pytest.raises(ValueError, match="reward = .*no file"):
        RunConfig(reward="nowhere/my_reward.py:my_reward")
    with pytest.raises(ValueError, match="has no function nothing"):
        get_reward(f"{EXAMPLE / 'my_reward.py'}:nothing", get_task("arithmetic", "raw"))


def test_bad_input_exits_2_and_leaves_no_run(cli, card_dir: Path, tmp_path: Path):
    _edit(card_dir, answer="solution")
    run = yaml.safe_load((EXAMPLE / "run.yaml").read_text())
    run["task"] = str(card_dir / "task.yaml")
    run["reward"] = "sparse"
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(run))
    db = tmp_path / "store.db"
    r = cli("train", str(cfg), "--tracking-uri", f"sqlite:///{db}")
    assert r.exit_code == 2, r.output
    assert "answer" in r.output and "solution" in r.output
    assert not db.exists() or "RUNNING" not in db.read_bytes().decode("latin-1")


@pytest.mark.slow  # make test runs tests/test_researcher_loop.py, its superset but for the
# README's lines word for word and the probe's cache (≈ 35 s: make test stays within 10 min)
def test_your_problems_your_reward_your_model_plan_train_sweep_and_plot(
    cli, tmp_path: Path, monkeypatch
):
    """The README's commands on the example (card, reward function) with a local model folder:
    `isolab flops` plans a run and `isolab train` trains it (README_COMMANDS, word for word),
    `isolab sweep run` trains two points (n = 2, 4), `isolab
    frontier` reads them back into its figures and tables. The plan's FLOPs match each run's
    ledger within 10%, the reward costs 0 FLOPs, and every run finishes with its evaluation of
    the card's held-out problems logged."""
    from isolab.planning import plan_config
    from isolab.tracking.runs import load_runs
    from isolab.vocab import EVAL_AVG

    model = tiny_chat_model(tmp_path / "my-model")
    monkeypatch.chdir(REPO)  # the example's paths are relative to the repository root
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # `isolab train` logs there, not to runs/
    run = yaml.safe_load((EXAMPLE / "run.yaml").read_text())
    planned, trained = (
        cli(*shlex.split(line.replace(MODEL, str(model)))[1:]) for line in README_COMMANDS
    )
    assert planned.exit_code == 0, planned.output
    assert "reward" in planned.output and "0.000e+00" in planned.output
    assert trained.exit_code == 0, trained.output
    assert "validation: base → final" in trained.output
    base = {k: v for k, v in run.items() if k not in ("experiment", "n", "M")}
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "my-setting",
                "base": {**base, "model": str(model), "eval_problems": 6},
                "axes": {"n": [2, 4]},
                "budget_rollouts": 32,
                "seeds": [0],
                "eval_points": 2,
                "metric": EVAL_AVG,
            }
        )
    )
    probed = cli("sweep", "plan", str(spec), "--probe")
    assert probed.exit_code == 0, probed.output
    assert "probe of" in probed.output and "ms per rollout" in probed.output
    from isolab.sweep.probe import timing_path

    cached = timing_path(RunConfig.from_dict({**base, "model": str(model)}))
    assert json.loads(cached.read_text())["measured"]["samples"] == 16  # reused from now on
    swept = cli("sweep", "run", str(spec), "--workers", "1", "--tracking-uri", uri)
    assert swept.exit_code == 0, swept.output
    runs = load_runs("my-setting", tracking_uri=uri)
    finals = runs.sort("step").group_by("run_key").last()
    assert sorted(finals["n"].to_list()) == [2, 4]
    assert (finals["flops/reward"] == 0).all() and finals[EVAL_AVG].is_not_null().all()
    for row in finals.iter_rows(named=True):
        cfg = RunConfig.from_dict({**base, "model": str(model), "n": row["n"], "M": row["M"]})
        plan = plan_config(cfg)
        assert plan["flops/reward"] == 0
        assert row["flops/total"] / plan["flops/total"] == pytest.approx(1.0, abs=0.10)
    out = tmp_path / "frontier"
    plotted = cli("frontier", "my-setting", "--tracking-uri", uri, "--out", str(out), "--no-log")
    assert plotted.exit_code == 0, plotted.output
    assert any(out.rglob("*.png")) and any(out.rglob("*.csv")), sorted(out.rglob("*"))
    # and through the curated notebook 02 (n* against compute), on its snapshot, unsaved; 03 and
    # 04 take `runs` the same way (run by hand on this sweep: each says what its grid lacks),
    # left out for the suite's time
    snap = tmp_path / "snap"
    assert cli("runs", "export", "my-setting", str(snap), "--tracking-uri", uri).exit_code == 0

    def reports() -> dict[Path, int]:
        return {p: p.stat().st_mtime_ns for p in (REPO / "runs").glob("*/cpu/*") if p.is_file()}

    before, said = reports(), {}
    for name in ("02_nstar_vs_compute",):
        outputs = run_notebook(
            name, tmp_path / f"{name}.ipynb", {"scale": "cpu", "runs": str(snap)}
        )
        said[name] = (
            sum("image/png" in o.get("data", {}) for o in outputs),
            "\n".join(o.get("text", "") for o in outputs),
        )
    assert said["02_nstar_vs_compute"][0] >= 2, said
    assert "n* grows with compute" in said["02_nstar_vs_compute"][1]
    assert reports() == before, "a report of your sweep was saved over a study's"


def test_more_evaluation_sets_log_under_their_own_prefix(tracking_uri, isolab_cache):
    """tiny-m (trained on 1–3-digit sums) evaluated beside its validation split on 4–5-digit
    sums, a shifted distribution: logged as eval-shifted/… at the same checkpoints, loaded
    into the runs table, with its per-problem counts; it solves fewer of them."""
    import mlflow

    from isolab.rl.train import train
    from isolab.tracking.runs import load_runs

    cfg = RunConfig(
        experiment="eval-sets",
        model="tiny-m",
        split="easy",
        n=2,
        B_p=4,
        M=2,
        eval_problems=48,
        eval_k_samples=4,
        eval_sets={"shifted": "arithmetic:min_digits=4,max_digits=5", "seen": "train"},
    )
    result = train(cfg, tracking_uri=tracking_uri)
    assert result.status == "FINISHED"
    runs = load_runs("eval-sets", tracking_uri=tracking_uri)
    assert {"eval-shifted/avg@4", "eval-shifted/best@4", "eval/avg@4"} <= set(runs.columns)
    assert runs.height == 2  # the start and the end, both sets at each
    assert runs["eval-shifted/avg@4"].null_count() == 0
    assert (runs["eval-shifted/avg@4"] < runs["eval/avg@4"]).all()
    local = mlflow.MlflowClient(tracking_uri).download_artifacts(
        result.run_id, "eval-shifted/per_problem_counts.json"
    )
    counts = json.loads(Path(local).read_text())
    assert len(counts["problem_ids"]) == 48 and set(counts["correct_counts_by_step"]) == {"0", "2"}
    # `train`: the first 48 of the run's own training problems, at the same checkpoints
    from isolab.difficulty import load_or_label

    assert runs["eval-seen/avg@4"].null_count() == 0
    local = mlflow.MlflowClient(tracking_uri).download_artifacts(
        result.run_id, "eval-seen/per_problem_counts.json"
    )
    seen = json.loads(Path(local).read_text())
    trained = load_or_label("tiny-m", "arithmetic", pool_size=cfg.pool_size).train("easy")
    assert seen["problem_ids"] == [p.id for p in trained[:48]]
    assert set(seen["correct_counts_by_step"]) == {"0", "2"}


def test_a_judge_scores_every_evaluation_apart_from_the_runs_compute(tracking_uri, isolab_cache):
    """`eval_judge: tiny-prm`: the process reward model scores every evaluation completion,
    on validation and on each extra set, logged as eval/judge and eval-<set>/judge; its forward
    is charged to flops/judge — the FLOPs FlopCounterMode measures when the same completions are
    scored again — and never to flops/total."""
    from torch.utils.flop_counter import FlopCounterMode

    from isolab.compute.ledger import FlopLedger
    from isolab.difficulty import load_or_label
    from isolab.models import reward as reward_models
    from isolab.planning import model_config
    from isolab.rl.evaluate import Evaluator
    from isolab.rl.rewards import prm
    from isolab.rl.train import train
    from isolab.tracking.runs import load_runs

    reward_models.build("tiny-prm")
    cfg = RunConfig(
        experiment="judge",
        model="tiny-m",
        split="easy",
        n=2,
        B_p=4,
        M=2,
        eval_problems=24,
        eval_k_samples=4,
        eval_sets={"shifted": "arithmetic:max_terms=3"},
        eval_judge="tiny-prm",
    )
    assert train(cfg, tracking_uri=tracking_uri).status == "FINISHED"
    runs = load_runs("judge", tracking_uri=tracking_uri)
    assert runs.height == 2  # the start and the end
    for column in ("eval/judge", "eval-shifted/judge", "flops/judge"):
        assert runs[column].null_count() == 0, column
    assert (
        runs["eval/judge"].is_between(0, 1).all()
        and runs["eval-shifted/judge"].is_between(0, 1).all()
    )
    end = runs.sort("step").row(-1, named=True)
    assert end["flops/judge"] > 0
    assert end["flops/total"] == end["flops/search"] + end["flops/learning"] + end["flops/reward"]

    # the charge is the judge's measured forward (FlopCounterMode, one unpadded sequence at a
    # time: model FLOPs, no padding), and the score its mean over every sample
    problems = load_or_label("tiny-m", "arithmetic", pool_size=cfg.pool_size).val("easy")[:2]
    task = get_task("arithmetic", "raw")
    judge = prm(task, "tiny-prm")
    ledger = FlopLedger(model_config("tiny-m"))
    evaluator = Evaluator(
        cfg.replace(eval_k_samples=2, eval_ks=(1, 2)), task, problems, None, ledger, judge
    )
    texts = [problems[0].answer[::-1], "7", problems[1].answer[::-1], "123"]
    score = evaluator.judged(judge, texts)
    with FlopCounterMode(display=False) as counter:
        one_by_one = [
            judge(prompts=[prompt], completions=[text])[0]
            for prompt, text in zip(
                [evaluator.prompts[0]] * 2 + [evaluator.prompts[1]] * 2, texts, strict=True
            )
        ]
    assert ledger.state_dict()["judge"] == counter.get_total_flops() > 0
    assert score == pytest.approx(sum(one_by_one) / 4)
    assert ledger.state_dict()["search"] == 0 and ledger.end_step(0)["flops/total"] == 0


def test_an_eval_set_that_cannot_load_is_refused():
    with pytest.raises(ValueError, match="eval_sets.shifted: .*knob=integer"):
        RunConfig(eval_sets={"shifted": "arithmetic:digits=4"})
    with pytest.raises(ValueError, match="eval_sets.'Bad': name a set"):
        RunConfig(eval_sets={"Bad": "arithmetic"})
    with pytest.raises(ValueError, match="eval_sets.x: task = 'nope'"):
        RunConfig(eval_sets={"x": "nope"})


def test_a_sum_of_rewards_trains_with_each_part_logged(tracking_uri, isolab_cache, monkeypatch):
    """`reward: sparse + my_reward.py:my_reward` with weights: TRL gets both functions and logs
    each one's mean; bad sums are refused before any run."""
    import mlflow

    from isolab.rl.train import train

    monkeypatch.chdir(REPO)
    mine = "examples/word-problems/my_reward.py:my_reward"
    with pytest.raises(ValueError, match="at most one model-based part"):
        RunConfig(reward="orm + prm")
    with pytest.raises(ValueError, match="one weight per part of reward"):
        RunConfig(reward=f"sparse + {mine}", extra={"grpo": {"reward_weights": [1.0]}})
    with pytest.raises(ValueError, match="an empty part"):
        RunConfig(reward="sparse + ")
    cfg = RunConfig(
        experiment="reward-sum",
        model="tiny-m",
        split="easy",
        reward=f"sparse + {mine}",
        extra={"grpo": {"reward_weights": [0.8, 0.2]}},
        n=2,
        B_p=4,
        M=2,
        eval_problems=8,
        eval_k_samples=4,
    )
    result = train(cfg, tracking_uri=tracking_uri)
    assert result.status == "FINISHED" and result.final_metrics["flops/reward"] == 0
    metrics = mlflow.MlflowClient(tracking_uri).get_run(result.run_id).data.metrics
    assert {"rewards/sparse_reward/mean", "rewards/my_reward/mean"} <= set(metrics)


def test_a_reward_model_of_yours_from_a_folder_is_charged_as_planned(tmp_path: Path, monkeypatch):
    """`reward: orm` with `extra: {reward_model: <folder>}`: a local sequence classifier scores
    the rollouts, and the ledger charges its forward passes as the plan does (within 10%)."""
    from isolab.planning import plan_config
    from isolab.rl.train import train

    monkeypatch.chdir(REPO)
    policy = tiny_chat_model(tmp_path / "policy")
    judge = tiny_chat_model(tmp_path / "judge", reward_model=True)
    run = yaml.safe_load((EXAMPLE / "run.yaml").read_text())
    cfg = RunConfig.from_dict(
        {
            **run,
            "model": str(policy),
            "reward": "orm",
            "extra": {"reward_model": str(judge)},
            "M": 2,
            "eval_problems": 4,
        }
    )
    plan = plan_config(cfg)
    result = train(cfg, tracking_uri=f"sqlite:///{tmp_path / 'store.db'}")
    assert result.status == "FINISHED"
    charged = result.final_metrics["flops/reward"]
    assert charged > 0 and plan["flops/reward"] > 0
    assert charged / plan["flops/reward"] == pytest.approx(1.0, abs=0.10)


def _with_columns(card_dir: Path, reward: str) -> Path:
    """The example card with two more columns (`final`, the answer as a number; `unit`) and a
    reward file `by_final.py` whose function `f` has `reward` as its body."""
    rows = [json.loads(line) for line in (card_dir / "problems.jsonl").read_text().splitlines()]
    with (card_dir / "problems.jsonl").open("w") as f:
        for row in rows:
            f.write(json.dumps({**row, "final": int(row["answer"]), "unit": "items"}) + "\n")
    (card_dir / "by_final.py").write_text(f"def f(prompts, completions, **kwargs):\n    {reward}\n")
    return card_dir / "task.yaml"


def test_a_reward_reading_its_own_column_trains_as_under_trl(
    card_dir: Path, tmp_path: Path, monkeypatch
):
    """TRL's contract: every column of the card's data reaches the reward under its own name
    (`final` as the row has it, an int), the answer field also as `answer` (text), with
    `completion_ids`, `trainer_state`, `log_extra` and `log_metric` as TRL passes them."""
    from isolab.rl.train import train

    keys = tmp_path / "keys.txt"
    card = _with_columns(
        card_dir,
        f"open({str(keys)!r}, 'a').write(' '.join(sorted(kwargs)) + '\\n')\n"
        "    assert all(type(x) is int for x in kwargs['final']), kwargs['final']\n"
        "    assert all(type(x) is str for x in kwargs['answer'])\n"
        "    return [float(str(g) in c[-1]['content']) for c, g in zip(completions, kwargs['final'])]",
    )
    monkeypatch.chdir(card_dir)
    run = yaml.safe_load((EXAMPLE / "run.yaml").read_text())
    cfg = RunConfig.from_dict(
        {
            **run,
            "model": str(tiny_chat_model(tmp_path / "model")),
            "task": str(card),
            "reward": "by_final.py:f",
            "n": 2,
            "B_p": 2,
            "M": 1,
            "eval_problems": 2,
        }
    )
    result = train(cfg, tracking_uri=f"sqlite:///{tmp_path / 'store.db'}")
    assert result.status == "FINISHED"
    calls = keys.read_text().splitlines()
    assert len(calls) >= 2  # the pre-flight, then the run's own calls
    assert set(calls) == {
        "answer completion_ids final id log_extra log_metric question trainer_state unit"
    }


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("return kwargs['finall']", "read 'finall', which is not among the keyword arguments it "
         "got (answer, completion_ids, completions, final, id, log_extra, log_metric, prompts, "
         "question, trainer_state, unit)"),
        ("return [1.0]", "returned list of 1 for 4 completions"),
        ("return [0.0] * len(completions)",
         "scores every deliberately wrong answer as high as the gold"),
    ],
)  # fmt: skip
def test_a_bad_reward_is_refused_before_the_model_loads(
    card_dir: Path, tmp_path: Path, monkeypatch, body: str, says: str
):
    """A reward that reads a column the data lacks, returns the wrong length, or scores a
    deliberately wrong answer as high as the gold, is called once on gold answers and wrong
    ones before any model loads: refused in seconds, naming the function, the key and the keys
    it got, with no run left behind."""
    import time

    from isolab.rl import train as train_module
    from isolab.rl.user_rewards import RewardFunctionError

    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded before the reward's pre-flight")

    monkeypatch.setattr(train_module.models, "load", no_model)
    monkeypatch.setattr(train_module.difficulty, "load_or_label", no_model)
    card = _with_columns(card_dir, body)
    monkeypatch.chdir(card_dir)
    cfg = RunConfig(
        model=str(tmp_path / "never-loaded"), task=str(card), reward="by_final.py:f", split="all"
    )
    started = time.perf_counter()
    with pytest.raises(RewardFunctionError, match="before the run") as info:
        train_module.train(cfg, tracking_uri=f"sqlite:///{tmp_path / 'store.db'}")
    assert time.perf_counter() - started < 10
    assert "reward by_final.py:f" in str(info.value) and says in str(info.value)
    assert not (tmp_path / "store.db").exists()


def test_a_deliberately_wrong_answer_is_wrong():
    """The pre-flight's wrong answer beside each gold: a number plus one, the next choice
    letter, other text reversed; never the gold itself."""
    from isolab.rl.user_rewards import wrong_answer

    cases = {"49": "50", "-1": "0", "2.50": "3.50", "B": "C", "J": "A", "Paris": "siraP"}
    for gold, wrong in cases.items():
        assert wrong_answer(gold) == wrong
    assert wrong_answer("abba") == "wrong"


def test_a_reward_of_yours_in_a_sum_may_ignore_correctness(card_dir: Path, monkeypatch):
    """The right-from-wrong check is for a reward of the user's that is the whole reward: a
    format or length term in a sum scores the gold and the wrong answer alike, and passes."""
    from isolab.rl.rewards import get_rewards
    from isolab.rl.user_rewards import preflight

    (card_dir / "length.py").write_text(
        "def f(prompts, completions, **kwargs):\n    return [0.5] * len(completions)\n"
    )
    monkeypatch.chdir(card_dir)
    task = get_task(str(card_dir / "task.yaml"), "chat")
    problems = task.problems("train")
    preflight("sparse + length.py:f", get_rewards("sparse + length.py:f", task), task, problems)
    from isolab.rl.user_rewards import RewardFunctionError

    with pytest.raises(RewardFunctionError, match="reward length.py:f scores every"):
        preflight("length.py:f", get_rewards("length.py:f", task), task, problems)


@pytest.mark.parametrize(
    ("column", "answer", "fix"),
    [
        ("trainer_state", "answer", "rename the column (e.g. trainer_state_text)"),
        ("completion_ids", "answer", "TRL passes a reward function its own 'completion_ids'"),
        ("prompt", "answer", "rename the column (e.g. prompt_text)"),
        ("answer", "final", "a reward gets the gold answer (answer: final) as `answer`"),
    ],
)
def test_a_column_named_as_trls_own_arguments_is_refused_at_load(
    card_dir: Path, column: str, answer: str, fix: str
):
    rows = [json.loads(line) for line in (card_dir / "problems.jsonl").read_text().splitlines()]
    with (card_dir / "problems.jsonl").open("w") as f:
        for row in rows:
            f.write(json.dumps({**row, "final": row["answer"], column: "x"}) + "\n")
    with pytest.raises(CardError, match=f"data: column '{column}'") as info:
        load_card(_edit(card_dir, answer=answer))
    assert fix in str(info.value)


def test_a_prompt_column_that_is_the_prompt_and_mixed_types_are_kept(card_dir: Path):
    """`prompt: prompt` names the column TRL reads as the prompt: kept (a reward gets it as
    `prompts`); a column whose values no one type holds reaches a reward as text."""
    from isolab.rl.user_rewards import reward_dataset

    rows = [json.loads(line) for line in (card_dir / "problems.jsonl").read_text().splitlines()]
    with (card_dir / "problems.jsonl").open("w") as f:
        for i, row in enumerate(rows):
            prompt = row.pop("question")
            f.write(json.dumps({**row, "prompt": prompt, "note": i if i % 2 else "odd"}) + "\n")
    path = _edit(card_dir, prompt="prompt")
    task = get_task(str(path), "chat")
    problems = task.problems("train")
    data = reward_dataset(task, problems)
    assert data.column_names == ["prompt", "id", "answer", "note"]
    assert data[0]["prompt"] == task.prompt(problems[0])
    assert {type(v) for v in data["note"]} == {str} and "3" in data["note"]
