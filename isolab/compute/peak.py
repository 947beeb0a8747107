"""The device's peak FLOP/s, for model FLOPs utilisation (MFU = model FLOPs per second / peak).

A GPU's dense peak comes from its datasheet (`PEAK_TFLOPS`, bf16 and fp32 without sparsity).
A CPU's is the fastest fp32 matmul rate ever measured on this host at this thread count: no
table covers CPUs, and the instruction set does not give a bound either (the FMA width per cycle
is not in /proc/cpuinfo — Zen 4 runs AVX-512 at half width — and its "cpu MHz" is not the boost
clock: a 2-core EPYC reporting 2.6 GHz measures 104 GFLOP/s on one thread, 40 FLOP/cycle at that
clock where Zen 4 does 32). `ISOLAB_PEAK_TFLOPS` (per device, at the run's dtype) overrides both.
A GPU that is not in the table and has no override gets no MFU figure: the reason is logged.

Why the *fastest ever*: a probe run beside a busy neighbour (a sweep runs 2 workers on 2 cores)
reads low — a thread descheduled mid-matmul stalls it — and a low peak makes MFU high, even above
1: in reward-rho/cpu/full, workers that probed 17–29 GFLOP/s (others 65–96) kept that figure for
all their runs, 28 of the sweep's 29 runs whose `mfu/run` went above 1. So the probe
times many short matmuls (one fits in a scheduler slice) and keeps the fastest, on one thread
(times the thread count) as well as on all (`_probe`), and the host's best is cached per (CPU
model, threads, dtype) in `$ISOLAB_CACHE/peak/cpu.json`: a neighbour can slow a probe but never
lower the peak. A measured rate above the peak raises it (`raised_peak`, with a warning), so no
MFU exceeds 1 because of the probe.
"""

from __future__ import annotations

import fcntl
import functools
import json
import logging
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

from isolab.paths import cache_root

log = logging.getLogger(__name__)

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
#: The host's best CPU matmul rates, under `cache_root()`: {"<cpu> · <threads> threads · fp32": FLOP/s}
CPU_PEAK_FILE = Path("peak") / "cpu.json"


@dataclass(frozen=True)
class Peak:
    """Peak FLOP/s of one device (None where unknown) and where the figure comes from."""

    flops_per_s: float | None
    source: str


def device_peak(dtype: str, cuda_name: str | None = None) -> Peak:
    """This process's device at `dtype` (`bf16` or `fp32`): the override, the GPU table
    (`cuda_name`, the device's name), or this host's best CPU matmul rate."""
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
    return Peak(
        cpu_matmul_peak(),
        f"measured: fastest fp32 matmul on this host, {_threads()} thread(s) "
        f"({cache_root() / CPU_PEAK_FILE})",
    )


def run_device_peak() -> Peak:
    """The peak a run's MFU divides by: on CUDA the GPU's bf16 (runs train in bf16 there,
    `isolab.rl.prepare.grpo_args`) from the table by torch's device name; else this host's fp32
    CPU rate. torch is imported here, not with the module (planning never pays for it)."""
    import torch

    if torch.cuda.is_available():
        return device_peak("bf16", torch.cuda.get_device_name())
    return device_peak("fp32")


def cpu_matmul_peak(threads: int | None = None) -> float:
    """This host's CPU peak at `threads` (default: this process's): the fastest fp32 matmul
    rate measured here — this process's probe (`probe_matmul`, once per process and thread
    count) or any earlier one recorded in the host's cache, which the probe raises where it
    beats it."""
    threads = threads or _threads()
    return record_cpu_peak(_probe(threads), threads=threads)


def record_cpu_peak(flops_per_s: float, threads: int | None = None) -> float:
    """Record a measured CPU rate in the host's cache (kept if it beats the best there) and
    return the host's best at `threads` (default: this process's)."""
    key = _cpu_key(threads or _threads())
    path = cache_root() / CPU_PEAK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:  # sweep workers probe at the same time
        fcntl.flock(lock, fcntl.LOCK_EX)
        best = _read(path)
        if flops_per_s <= best.get(key, 0.0):
            return best[key]
        best[key] = float(flops_per_s)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(best, indent=1, sort_keys=True) + "\n")
        tmp.replace(path)
        return best[key]


def raised_peak(peak: float, flops: float, seconds: float, what: str) -> float:
    """`peak`, or the rate `flops / seconds` that `what` (a step, its search, …) measured where
    that beats it, logged: a measured rate is a rate the device reaches, so an MFU
    never exceeds 1. (Count only FLOPs that ran: a charged-but-not-run reward is no rate.)"""
    if seconds <= 0 or flops / seconds <= peak:
        return peak
    rate = flops / seconds
    log.info(
        "%s ran at %.4g FLOP/s, above the peak %.4g: the peak is raised to it (MFU ≤ 1)",
        what,
        rate,
        peak,
    )
    return rate


def probe_matmul(size: int = 512, budget_s: float = 0.3, min_repeats: int = 10) -> float:
    """FLOP/s of the fastest fp32 `size`² matmul on this process's threads, timed one by one
    for `budget_s` (at least `min_repeats`): at 512 one takes ~3 ms on a core, short enough that
    some run whole between a busy neighbour's time slices, so the fastest reads the idle rate."""
    import torch

    a = torch.randn(size, size)
    b = torch.randn(size, size)
    torch.mm(a, b)  # warm-up: thread pool, allocator
    best = float("inf")
    start = time.perf_counter()
    repeats = 0
    while repeats < min_repeats or time.perf_counter() - start < budget_s:
        t0 = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t0)
        repeats += 1
    return 2 * size**3 / best


@functools.cache
def _probe(threads: int) -> float:
    """This process's probe at `threads` (probed once each): the faster of a `threads`-thread
    matmul and `threads` × a 1-thread one. A neighbour barely slows the latter (99 vs 103
    GFLOP/s on one core beside a 2-thread matmul loop) while it stalls a 2-thread matmul at
    every barrier (15 vs ~200 GFLOP/s on a 2-core host running a sweep); it assumes one core
    per thread, as torch's default does (on SMT siblings it overstates: MFU reads low, never
    high)."""
    import torch

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        single = probe_matmul()
        if threads == 1:
            return single
        torch.set_num_threads(threads)  # its own count, whatever the caller's thread holds
        return max(threads * single, probe_matmul())
    finally:
        torch.set_num_threads(before)


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def _cpu_key(threads: int) -> str:
    return f"{_cpu_model()} · {threads} threads · fp32"


@functools.cache
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _read(path: Path) -> dict[str, float]:
    """The cache's rates; an unreadable file (cut short, hand-edited) starts afresh, warned."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
        return {str(k): float(v) for k, v in data.items() if float(v) > 0}
    except (ValueError, TypeError, AttributeError) as err:
        log.warning("%s is not a {key: FLOP/s} table (%s): replacing it", path, err)
        return {}
