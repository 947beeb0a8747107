"""The CPU peak behind MFU: a busy neighbour cannot lower it, the host's best is kept, and a
measured rate above it raises it (see `isolab.compute.peak`)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time

import pytest
import torch

from isolab.compute import peak
from isolab.compute.peak import CPU_PEAK_FILE, OVERRIDE_ENV, device_peak, raised_peak

#: A neighbour doing fp32 matmuls on every core (a sweep's other worker, at its busiest).
BUSY = "import torch\ntorch.set_num_threads(2)\na = torch.randn(1024, 1024)\nwhile True: a @ a"


@pytest.fixture
def host_cache(tmp_path, monkeypatch):
    """An empty host cache, and no override or earlier probe of this process."""
    monkeypatch.setenv("ISOLAB_CACHE", str(tmp_path))
    monkeypatch.delenv(OVERRIDE_ENV, raising=False)
    peak._probe.cache_clear()
    yield tmp_path / CPU_PEAK_FILE
    peak._probe.cache_clear()


@pytest.mark.parametrize("threads", [1, 2])
def test_a_busy_neighbour_does_not_lower_the_cpu_peak(host_cache, threads):
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        core = peak.probe_matmul()  # one core's rate, before the neighbour starts
        neighbour = subprocess.Popen([sys.executable, "-c", BUSY])
        try:
            time.sleep(1.0)  # its matmul loop running
            found = peak.cpu_matmul_peak(threads)
        finally:
            neighbour.kill()
            neighbour.wait()
    finally:
        torch.set_num_threads(before)
    # the old probe (the fastest of five 1024² matmuls on all threads) read 47 GFLOP/s here at
    # 2 threads beside this neighbour, for a core's 103
    assert found > 0.75 * threads * core, (found, core)
    assert json.loads(host_cache.read_text()) == {peak._cpu_key(threads): found}


def test_the_host_keeps_its_best_rate_per_cpu_and_threads(host_cache):
    assert peak.record_cpu_peak(5e9, threads=3) == 5e9
    assert peak.record_cpu_peak(2e9, threads=3) == 5e9  # a slower probe never lowers it
    assert peak.record_cpu_peak(7e9, threads=3) == 7e9
    assert peak.record_cpu_peak(1e9, threads=4) == 1e9  # another thread count: its own entry
    table = json.loads(host_cache.read_text())
    assert table == {peak._cpu_key(3): 7e9, peak._cpu_key(4): 1e9}
    # a best on record above this process's probe is the peak the run uses
    threads = torch.get_num_threads()
    peak.record_cpu_peak(1e15, threads=threads)
    found = device_peak("fp32")
    assert found.flops_per_s == 1e15
    assert f"measured: fastest fp32 matmul on this host, {threads} thread(s)" in found.source


def test_an_unreadable_cache_is_replaced(host_cache, caplog):
    host_cache.parent.mkdir(parents=True)
    host_cache.write_text("{cut short")
    with caplog.at_level(logging.WARNING, logger="isolab.compute.peak"):
        assert peak.record_cpu_peak(3e9, threads=1) == 3e9
    assert "replacing it" in caplog.text
    assert json.loads(host_cache.read_text()) == {peak._cpu_key(1): 3e9}


def test_a_rate_above_the_peak_raises_it_and_says_so(caplog):
    with caplog.at_level(logging.INFO, logger="isolab.compute.peak"):
        assert raised_peak(1e11, 5e10, 1.0, "mfu/step") == 1e11  # below: unchanged, silent
        assert caplog.text == ""
        new = raised_peak(1e11, 3e11, 2.0, "mfu/step")
    assert new == 1.5e11 and 3e11 / (2.0 * new) == 1.0  # MFU at most 1
    assert "mfu/step ran at 1.5e+11 FLOP/s, above the peak 1e+11" in caplog.text
    assert raised_peak(1e11, 3e11, 0.0, "mfu/step") == 1e11  # no time measured: no rate
