"""Shipped base models: the same bytes on every machine, digest-checked, with their split sizes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from isolab import difficulty, models
from isolab.models import reward as reward_models
from isolab.tracking.snapshot import digest_mismatches

SHIPPED = [*models.TINY_PRESETS, *models.CHAT_PRESETS, *reward_models.REWARD_MODEL_PRESETS]


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch) -> Path:
    """An empty model cache: what a fresh clone has."""
    monkeypatch.setenv("ISOLAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_file_matches_its_recorded_digest(name):
    info = models.shipped_info(name)
    assert info is not None, f"isolab/presets/{name} is missing"
    assert info["files"][models.WEIGHTS] == info["digest"]
    for file, digest in info["files"].items():
        assert models.sha256_file(models.shipped_dir(name) / file) == digest, file


def test_build_installs_the_shipped_weights_and_they_load(fresh_cache):
    path = models.build("tiny-s")
    assert path == fresh_cache / "models" / "tiny-s"
    assert models.digest("tiny-s") == models.shipped_info("tiny-s")["digest"]
    model, tok = models.load("tiny-s")
    assert sum(p.numel() for p in model.parameters()) == models.shipped_info("tiny-s")["params"]
    assert tok("12+34=")["input_ids"] and model.config.hidden_size == 64


def test_a_damaged_shipped_file_is_refused(fresh_cache, tmp_path, monkeypatch):
    presets = tmp_path / "presets"
    shutil.copytree(models.shipped_dir("tiny-s"), presets / "tiny-s")
    weights = presets / "tiny-s" / models.WEIGHTS
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    monkeypatch.setattr("isolab.models.weights.presets_dir", lambda: presets)
    with pytest.raises(RuntimeError, match="damaged.*--from-scratch"):
        models.build("tiny-s")
    assert not (fresh_cache / "models" / "tiny-s").exists()


@pytest.mark.parametrize("name", list(models.TINY_PRESETS))
def test_shipped_labels_give_the_recorded_split_sizes(fresh_cache, name):
    """A fresh cache cuts the splits the build record states, from the shipped labels."""
    record = models.shipped_info(name)["difficulty"]
    splits = difficulty.load_or_label(name, "arithmetic", pool_size=4000)
    assert splits.source == "shipped"
    assert splits.model_digest == models.shipped_info(name)["digest"]
    assert splits.sizes() == record["sizes"]
    assert splits.histogram()[0].tolist() == record["histogram"]
    # the warm start's target (Easy ≥ 10%, Hard ≥ 10% of a 500-problem probe; ±1.3% of
    # sampling error from probe to pool): both splits have problems to train on
    assert record["shares"]["easy"] >= 0.08 and record["shares"]["hard"] >= 0.08


@pytest.mark.parametrize("name", list(models.TINY_PRESETS))
def test_every_shipped_labels_file_matches_its_recorded_digest(name):
    """Labels decide which problems a run trains on: each shipped file is digest-checked too."""
    files = sorted((models.shipped_dir(name) / "difficulty").glob("*.json"))
    recorded = models.shipped_info(name)[difficulty.LABEL_DIGESTS]
    assert files and sorted(recorded) == [f.name for f in files]
    for f in files:
        assert models.sha256_file(f) == recorded[f.name], f.name


def test_the_cpu_testbed_pool_has_5k_easy_training_problems():
    """The studies' 96,000-problem pool (issue 27): ≥ 5,000 Easy training problems, so that a run
    of 65,536 rollouts sees each problem a few times, as the Playbook's 6k-problem sets do. Cut
    from the shipped counts as `difficulty.cut` does (drawing the 96,000 problems takes ≈ 10 s;
    the sweeps' runs load them)."""
    path = difficulty.shipped_labels_path("tiny-m", "arithmetic", 96000, 0)
    counts = json.loads(path.read_text())["counts"]
    bands = difficulty.DEFAULT_BANDS
    for split, least in (("easy", 5000), ("hard", 5000)):
        size = sum(bands.split_of(c / difficulty.SHIPPED_K) == split for c in counts)
        held_out = min(round(size * 0.25), difficulty.MAX_VAL)
        assert size - held_out >= least, (split, size, held_out)


def test_a_damaged_labels_file_is_refused(fresh_cache, tmp_path, monkeypatch):
    presets = tmp_path / "presets"
    shutil.copytree(models.shipped_dir("tiny-s"), presets / "tiny-s")
    monkeypatch.setattr("isolab.models.weights.presets_dir", lambda: presets)
    labels = presets / "tiny-s" / "difficulty" / "arithmetic__pool4000__seed0.json"
    data = json.loads(labels.read_text())
    data["counts"][0] = 16 - data["counts"][0]
    labels.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    with pytest.raises(RuntimeError, match="damaged"):
        difficulty.load_or_label("tiny-s", "arithmetic", pool_size=4000)


def test_labels_of_other_weights_are_not_reused(fresh_cache):
    splits = difficulty.load_or_label("tiny-s", "arithmetic", pool_size=4000)
    path = difficulty.splits_path("tiny-s", "arithmetic", 4000, 0)
    data = json.loads(path.read_text())
    data["model_digest"] = "0" * 64  # labelled by other weights (e.g. a from-scratch build)
    data["splits"]["easy"]["train"] = []
    path.write_text(json.dumps(data))
    again = difficulty.load_or_label("tiny-s", "arithmetic", pool_size=4000)
    assert again.sizes() == splits.sizes() and again.source == "shipped"


def test_models_list_shows_digests_and_split_sizes(fresh_cache):
    from isolab.cli import app

    models.build("tiny-s")
    result = CliRunner().invoke(app, ["models", "list"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for name in SHIPPED:
        assert models.shipped_info(name)["digest"][:12] in result.output, name
    tiny_m = models.shipped_info("tiny-m")["difficulty"]["sizes"]
    assert f"{tiny_m['easy']['train']}/{tiny_m['easy']['val']}" in result.output
    row = next(r for r in models.list_models() if r["name"] == "tiny-s")
    assert row["installed"] == "shipped" and row["matches_shipped"]


def test_snapshots_say_when_their_base_differs_from_the_model_in_use(fresh_cache):
    shipped = models.shipped_info("tiny-m")["digest"]
    same = pl.DataFrame({"model": ["tiny-m"], "base_digest": [shipped]})
    assert digest_mismatches(same) == []
    other = pl.DataFrame({"model": ["tiny-m"], "base_digest": ["f" * 64]})
    assert "another base" in digest_mismatches(other)[0]
    legacy = pl.DataFrame({"model": ["tiny-m"], "n": [4]})
    assert "no base-model digest" in digest_mismatches(legacy)[0]


@pytest.mark.slow
def test_sampling_again_reproduces_the_shipped_labels(fresh_cache):
    """The shipped counts are what the shipped weights sample on this machine (≈ 45 s)."""
    shipped = difficulty.load_or_label("tiny-m", "arithmetic", pool_size=4000)
    sampled = difficulty.load_or_label("tiny-m", "arithmetic", pool_size=4000, force=True)
    a = np.rint(np.asarray(shipped.avg) * 16)
    b = np.rint(np.asarray(sampled.avg) * 16)
    print(f"\nidentical counts: {np.mean(a == b):.4f}; sizes {sampled.sizes()}")
    assert np.mean(np.abs(a - b) <= 1) > 0.99
    for split in ("easy", "hard"):
        assert sampled.sizes()[split]["train"] == pytest.approx(
            shipped.sizes()[split]["train"], rel=0.05
        )


@pytest.mark.slow
def test_a_warm_start_from_scratch_lands_in_the_shipped_regime(fresh_cache):
    """`--from-scratch` trains to the target, not a step count: on any CPU its split sizes come
    within ±30% of the shipped model's (≈ 8 min on 2 cores)."""
    models.build("tiny-m", from_scratch=True)
    info = json.loads((models.model_dir("tiny-m") / models.BUILD_INFO).read_text())
    assert info["source"] == "from-scratch" and info["target_met"], info["probes"][-3:]
    splits = difficulty.load_or_label("tiny-m", "arithmetic", pool_size=4000, force=True)
    shipped = models.shipped_info("tiny-m")["difficulty"]["sizes"]
    print(f"\nfrom scratch: step {info['sft_steps']}, sizes {splits.sizes()}; shipped {shipped}")
    for split in ("easy", "hard"):
        got, want = splits.sizes()[split]["train"], shipped[split]["train"]
        assert abs(got - want) <= 0.3 * want, (split, got, want)
