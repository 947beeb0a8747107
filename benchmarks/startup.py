"""Start-up of the command line, side by side with a bare interpreter, and what a process that
trains pays before its first step.

Each round runs every command once, in turn (so that the machine's noise hits all of them), and
the table gives the median over the rounds. Targets: `isolab --help` ≤ 1.5 s (median); the
import of an HF run's trainer pays no vLLM import.

    python benchmarks/startup.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_HELP_S = 1.5


def isolab_command() -> list[str]:
    script = Path(sys.executable).with_name("isolab")
    return [str(script)] if script.exists() else [sys.executable, "-m", "isolab.cli"]


def commands() -> dict[str, list[str]]:
    py = sys.executable
    return {
        "python -c pass": [py, "-c", "pass"],
        "isolab --help": [*isolab_command(), "--help"],
        "isolab --version": [*isolab_command(), "--version"],
        "isolab train --bad-flag (error)": [*isolab_command(), "train", "--bad-flag"],
        # what `isolab train` / a sweep worker imports before its first step, HF generation
        "trainer imports, HF run": [
            py,
            "-c",
            "from isolab.rl import engines, train; engines.grpo_trainer_class(False)",
        ],
        # the same, had TRL imported vLLM as it does by default (vllm installed)
        "trainer imports, with vLLM": [
            py,
            "-c",
            "from isolab.rl import engines, train; engines.grpo_trainer_class(True)",
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    cmds = commands()
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(args.rounds):
        for name, argv in cmds.items():
            t0 = time.perf_counter()
            subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - t0)
    base = statistics.median(times["python -c pass"])
    print(f"{'command':<34} {'median s':>9} {'min':>6} {'max':>6} {'- python':>9}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<34} {med:9.2f} {min(ts):6.2f} {max(ts):6.2f} {med - base:9.2f}")
    help_s = statistics.median(times["isolab --help"])
    saved = statistics.median(times["trainer imports, with vLLM"]) - statistics.median(
        times["trainer imports, HF run"]
    )
    verdict = "met" if help_s <= TARGET_HELP_S else "NOT met"
    print(
        f"\nisolab --help: {help_s:.2f} s median of {args.rounds} (target ≤ {TARGET_HELP_S} s: {verdict})"
    )
    print(f"an HF run's start-up without TRL's vLLM import: {saved:.1f} s less per process")


if __name__ == "__main__":
    main()
