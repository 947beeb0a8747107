"""isolab's CUDA-only decisions, taken on a CPU: each test makes torch report a GPU (or checks
the decision function) so that the first GPU run meets no branch that never ran (issue 50).

A GPU is the one thing these tests cannot have, so `torch.cuda.is_available` (and the device's
name) are monkeypatched; everything downstream is the real code. Branches not reachable from
here are listed in docs/gpu.md.
"""

from __future__ import annotations

import pytest
import torch

from isolab.cli import gpu_check
from isolab.compute.peak import OVERRIDE_ENV, PEAK_TFLOPS, device_peak, run_device_peak
from isolab.config import RunConfig
from isolab.rl import engines
from isolab.rl.trainer import logits_lens


@pytest.fixture
def on_cuda(monkeypatch):
    """torch reports one CUDA device, an H200 (the machine issue 50 targets)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    monkeypatch.delenv(OVERRIDE_ENV, raising=False)


def _cfg(**changes) -> RunConfig:
    return RunConfig(experiment="cuda-branches", model="tiny-m", n=2, B_p=2, M=1, **changes)


@pytest.mark.parametrize(
    ("cuda", "vllm", "expected"),
    [(True, True, "vllm"), (True, False, "hf"), (False, True, "hf"), (False, False, "hf")],
)
def test_auto_generation_takes_vllm_only_on_cuda_with_vllm(monkeypatch, cuda, vllm, expected):
    monkeypatch.setattr(engines, "_cuda", lambda: cuda)
    monkeypatch.setattr(engines, "vllm_installed", lambda: vllm)
    assert engines.engine(_cfg(generation="auto")) == expected
    assert engines.engine(_cfg(generation="hf")) == "hf"  # an explicit choice stands


def test_vllm_on_cuda_keeps_sleep_mode_and_sets_no_cpu_engine_env(monkeypatch):
    for key in engines.CPU_ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(engines, "_cuda", lambda: True)
    args = engines.vllm_grpo_args(_cfg(), max_model_tokens=512)
    assert args == {"use_vllm": True, "vllm_mode": "colocate", "vllm_max_model_length": 512}
    assert not any(key in __import__("os").environ for key in engines.CPU_ENV)
    # and the CPU branch, for contrast: sleep mode off (it frees GPU memory only), KV cache set
    monkeypatch.setattr(engines, "_cuda", lambda: False)
    args = engines.vllm_grpo_args(_cfg(), max_model_tokens=512)
    assert args["vllm_enable_sleep_mode"] is False
    assert (
        __import__("os").environ["VLLM_CPU_KVCACHE_SPACE"]
        == engines.CPU_ENV["VLLM_CPU_KVCACHE_SPACE"]
    )


def test_on_cuda_a_run_trains_in_bf16_on_the_gpu(monkeypatch, on_cuda, tmp_path):
    """The GRPOConfig a run builds on CUDA: bf16, not `use_cpu`. transformers refuses to build
    a CUDA TrainingArguments without CUDA, so TRL's class records what isolab passes."""
    import trl

    from isolab.rl.prepare import grpo_args

    seen: dict = {}
    monkeypatch.setattr(trl, "GRPOConfig", lambda **kwargs: seen.update(kwargs) or kwargs)
    grpo_args(_cfg(generation="hf"), str(tmp_path), max_completion_tokens=16)
    assert seen["bf16"] is True and seen["use_cpu"] is False
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    grpo_args(_cfg(generation="hf"), str(tmp_path), max_completion_tokens=16)
    assert seen["bf16"] is False and seen["use_cpu"] is True


def test_trl_projects_only_completion_positions_on_cuda(monkeypatch, on_cuda):
    """The ledger counts the positions TRL's log-prob head projects: on CUDA its fused path
    takes the completion positions only; on CPU every position but the last (TRL 1.16)."""
    assert logits_lens([10, 7], [4, 2]) == [4, 2]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert logits_lens([10, 7], [4, 2]) == [9, 6]


@pytest.mark.parametrize(
    ("name", "dtype", "tflops"),
    [
        ("NVIDIA H200", "bf16", 989.0),
        ("NVIDIA H100 PCIe", "bf16", 756.0),  # before the SXM part's "H100"
        ("NVIDIA H100 80GB HBM3", "bf16", 989.0),
        ("NVIDIA A100-SXM4-80GB", "bf16", 312.0),  # not the A10's 125
        ("NVIDIA A10", "fp32", 31.2),
        ("NVIDIA L40S", "bf16", 362.0),  # not the L4's 121
    ],
)
def test_the_peak_table_finds_each_gpu_by_its_torch_name(monkeypatch, name, dtype, tflops):
    monkeypatch.delenv(OVERRIDE_ENV, raising=False)
    assert device_peak(dtype, name).flops_per_s == pytest.approx(tflops * 1e12)


def test_an_unknown_gpu_gets_no_peak_and_the_reason(monkeypatch):
    monkeypatch.delenv(OVERRIDE_ENV, raising=False)
    found = device_peak("bf16", "NVIDIA B300")
    assert found.flops_per_s is None and OVERRIDE_ENV in found.source
    monkeypatch.setenv(OVERRIDE_ENV, "2250")
    assert device_peak("bf16", "NVIDIA B300").flops_per_s == 2250e12


def test_a_run_on_cuda_divides_by_the_gpus_bf16_peak(on_cuda):
    found = run_device_peak()
    assert found.flops_per_s == PEAK_TFLOPS["H200"]["bf16"] * 1e12
    assert "H200" in found.source and "bf16" in found.source


def test_gpu_check_takes_cuda_and_vllm_where_torch_sees_them(monkeypatch, on_cuda):
    monkeypatch.setattr(engines, "vllm_installed", lambda: True)
    assert gpu_check.resolve_device("auto") == "cuda"
    assert gpu_check.engines_to_measure("cuda") == ["hf", "vllm"]
    assert gpu_check.engines_to_measure("cpu") == ["hf"]  # vLLM's start-up: not on a CPU
    assert gpu_check.peak("cuda")["peak_flops_per_s"] == 989e12


def test_gpu_check_refuses_cuda_where_there_is_none(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.resolve_device("auto") == "cpu"
    with pytest.raises(ValueError, match="--device cuda: torch sees no CUDA device"):
        gpu_check.resolve_device("cuda")


def test_the_cpu_fallback_keeps_each_shapes_head_ratio():
    """`--device cpu` cuts the two shapes to CPU size with the same grouped-query ratio, so the
    same attention code (and key-value repetition) runs as on the GPU."""
    for shape in gpu_check.SHAPES.values():
        small = gpu_check.tiny(shape)
        assert small.arch == shape.arch
        assert (
            small.num_attention_heads // small.num_key_value_heads
            == shape.num_attention_heads // shape.num_key_value_heads
        )
        assert small.hidden_size % small.num_attention_heads == 0
