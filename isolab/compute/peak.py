"""The device's peak FLOP/s, for model FLOPs utilisation (MFU = model FLOPs per second / peak).

A GPU's dense peak comes from its datasheet (`PEAK_TFLOPS`, bf16 and fp32 without sparsity); a
CPU's is measured with a matmul probe of the threads this process uses, since no table covers
CPUs. `ISOLAB_PEAK_TFLOPS` (per device, at the run's dtype) overrides both. A GPU that is not in
the table and has no override gets no MFU figure at all: the reason is logged instead.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass

#: Dense peak TFLOP/s by device-name fragment (first match wins: `A100` before `A10`), from
#: NVIDIA's datasheets; fp32 is the non-tensor-core rate (PyTorch's default matmul precision).
PEAK_TFLOPS: dict[str, dict[str, float]] = {
    "H200": {"bf16": 989.0, "fp32": 67.0},
    "H100 PCIe": {"bf16": 756.0, "fp32": 51.0},
    "H100": {"bf16": 989.0, "fp32": 67.0},
    "A100": {"bf16": 312.0, "fp32": 19.5},
    "L40S": {"bf16": 362.0, "fp32": 91.6},
    "A10": {"bf16": 125.0, "fp32": 31.2},
    "L4": {"bf16": 121.0, "fp32": 30.3},
}
OVERRIDE_ENV = "ISOLAB_PEAK_TFLOPS"


@dataclass(frozen=True)
class Peak:
    """Peak FLOP/s of one device (None where unknown) and where the figure comes from."""

    flops_per_s: float | None
    source: str


def device_peak(dtype: str, cuda_name: str | None = None) -> Peak:
    """This process's device at `dtype` (`bf16` or `fp32`): the override, the GPU table
    (`cuda_name`, the device's name), or a CPU matmul probe."""
    override = os.environ.get(OVERRIDE_ENV)
    if override:
        try:
            value = float(override)
        except ValueError:
            value = -1.0
        if not value > 0:
            raise ValueError(f"{OVERRIDE_ENV} = {override!r}: give the device's peak in TFLOP/s")
        return Peak(value * 1e12, f"{OVERRIDE_ENV}={override}")
    if cuda_name is not None:
        for key, peaks in PEAK_TFLOPS.items():
            if key in cuda_name:
                return Peak(peaks[dtype] * 1e12, f"datasheet: {key} dense {dtype}")
        return Peak(None, f"unknown GPU {cuda_name!r}: set {OVERRIDE_ENV} for an MFU figure")
    measured = cpu_matmul_peak()
    return Peak(measured, f"measured: fp32 matmul probe, {_threads()} thread(s)")


def _threads() -> int:
    import torch

    return torch.get_num_threads()


@functools.cache
def cpu_matmul_peak(size: int = 1024, repeats: int = 5) -> float:
    """FLOP/s of the fastest of `repeats` fp32 `size`² matmuls on this process's threads: a
    practical peak (what PyTorch's CPU GEMM reaches), cached per process."""
    import torch

    a = torch.randn(size, size)
    b = torch.randn(size, size)
    torch.mm(a, b)  # warm-up: thread pool, allocator
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t0)
    return 2 * size**3 / best
