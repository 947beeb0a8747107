"""A sweep over your own card, planned and described honestly (issue 48, items 4 and 5): no
tiny-model wall time for a model without a timing, a warning where the recommendation's C/2
self-check would be off, and a sweep description that names no noise-free winner."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from helpers import tiny_chat_model

from isolab.tracking.describe import sweep_note

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "word-problems"


def _spec(folder: Path, base: dict, axes: dict, budget: int = 64) -> Path:
    spec = folder / "sweep.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "my-card-sweep",
                "base": base,
                "axes": axes,
                "budget_rollouts": budget,
                "seeds": [0],
                "eval_points": 3,
            }
        )
    )
    return spec


def test_a_model_without_a_timing_is_planned_unknown_until_probed(cli, tmp_path: Path):
    """A local model folder on the example card: `sweep plan` prints `unknown` per run and in
    the total (it once printed a tiny-model `2 s` for SmolLM2) and names `--probe`; the probe
    measures it once, and a later plan without `--probe` estimates from that cached probe."""
    card = tmp_path / "wp"
    shutil.copytree(EXAMPLE, card)
    model = tiny_chat_model(tmp_path / "model")
    base = {
        "model": str(model),
        "task": str(card / "task.yaml"),
        "reward": "sparse",
        "split": "all",
        "max_completion_tokens": 8,
        "eval_problems": 4,
        "eval_k_samples": 4,
    }
    spec = _spec(tmp_path, base, {"n": [2, 4]})
    before = cli("sweep", "plan", str(spec))
    text = " ".join(before.output.split())
    assert before.exit_code == 0, before.output
    assert "est. wall=unknown" in text and "estimated wall time unknown" in text
    assert f"no wall-time estimate for {model}" in text and "--probe" in text
    assert " 2 s" not in text
    probed = cli("sweep", "plan", str(spec), "--probe")
    assert probed.exit_code == 0, probed.output
    assert "timing: given" in " ".join(probed.output.split())  # the probe's, given to the plan
    after = cli("sweep", "plan", str(spec))
    text = " ".join(after.output.split())
    assert after.exit_code == 0, after.output
    assert "unknown" not in text and "timing: cached probe" in text


def test_tiny_arithmetic_presets_keep_their_measured_defaults(cli, tmp_path: Path):
    spec = _spec(tmp_path, {"model": "tiny-m", "split": "easy"}, {"n": [2, 4]})
    result = cli("sweep", "plan", str(spec))
    assert result.exit_code == 0, result.output
    assert "timing: tiny defaults" in " ".join(result.output.split())


def test_a_point_too_coarse_for_the_self_check_is_warned_of(cli, tmp_path: Path):
    """n = 8, B_p = 8 spends the 64-rollout budget in one step: its only evaluation is at C, so
    the recommendation's checks from C/2 and C/4 could not be made (once silently off)."""
    from isolab.sweep import SweepSpec, plan_sweep
    from isolab.sweep.plan import self_check_gaps

    spec = _spec(tmp_path, {"model": "tiny-m", "split": "easy"}, {"n": [2, 8], "B_p": [2, 8]})
    gaps = self_check_gaps(plan_sweep(SweepSpec.from_yaml(spec)))
    assert len(gaps) == 2 and "C/2 = 32 rollouts" in gaps[0] and "C/4 = 16" in gaps[1]
    assert all("n8·bp8" in g and "n2·bp2" not in g for g in gaps)
    result = cli("sweep", "plan", str(spec))
    text = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "warning: no evaluation near C/2" in text and "self-check will be off" in text
    fine = _spec(tmp_path, {"model": "tiny-m", "split": "easy"}, {"n": [2, 4], "B_p": [2, 4]})
    assert self_check_gaps(plan_sweep(SweepSpec.from_yaml(fine))) == []


def test_a_sweeps_description_names_no_winner_without_its_noise():
    """The experiment's description once said "Best final avg@4: 0.188 (…n8·bp2)" where the
    report, hedging within noise, advised n ≈ 4: it now sends the reader to the one answer."""
    points = [
        {
            "name": f"tiny-m·easy·n{n}·bp2·s0",
            "params": {"n": str(n), "B_p": "2"},
            "metrics": {"eval/avg_at_4": score},
        }
        for n, score in ((4, 0.180), (8, 0.188))
    ]
    note = sweep_note("my-card-sweep", points)
    assert "Best final" not in note and "0.188" not in note
    assert "`isolab report my-card-sweep`" in note and "noise" in note
    assert "n ∈ {4, 8}" in note
    assert "isolab report" not in sweep_note("empty", [{"name": "a", "params": {}, "metrics": {}}])
    # once the sweep has finished, the description states the answer itself, as given (the
    # sentence `isolab.frontier.answer.stated` makes), and no longer sends the reader away
    answer = (
        "recommendation: at C = 64 use n ≈ 4, B_p ≈ 2, M ≈ 8; n ∈ {4, 8} are within "
        "noise of the best",
    )
    stated = sweep_note("my-card-sweep", points, answer=answer)
    assert answer[0] in stated and "isolab report" not in stated and "0.188" not in stated


def test_a_tiny_arithmetic_model_on_a_card_is_refused_at_plan(cli, tmp_path: Path):
    """tiny-m on a card: `sweep plan` once printed `nan FLOPs` and a wall time; it now exits 2
    naming `model` and the preset that runs cards, and only the tiny arms are dropped where
    the model is an axis."""
    card = tmp_path / "wp"
    shutil.copytree(EXAMPLE, card)
    base = {"task": str(card / "task.yaml"), "split": "all", "B_p": 2}
    refused = cli("sweep", "plan", str(_spec(tmp_path, {**base, "model": "tiny-m"}, {"n": [2, 4]})))
    text = " ".join(refused.output.split())
    assert refused.exit_code == 2, refused.output
    assert "model: model tiny-m runs the arithmetic task only" in text
    assert "tiny-chat" in text and "nan" not in text
    both = cli("sweep", "plan", str(_spec(tmp_path, base, {"model": ["tiny-m", "tiny-chat"]})))
    text = " ".join(both.output.split())
    assert both.exit_code == 0, both.output
    assert "tiny-m runs the arithmetic task only" in text  # the dropped point and its reason
