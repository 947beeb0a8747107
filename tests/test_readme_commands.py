"""Every command the README and the pages under docs/ show runs: one row per command, through the
real `isolab` in a subprocess, on a scratch store, at smoke scale. A command added to the README
or a docs page without a row here fails `test_every_readme_command_has_a_row`.

The cases run in order on one scratch project (`train` makes the experiment `runs export`
exports, whose snapshot `runs import` loads), so they are one test per row in file order.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
#: The README and every page it links under docs/: a command any of them shows is tested here.
DOCS = [README, *sorted((REPO / "docs").glob("*.md"))]
SMOKE_SNAPSHOTS = REPO / "tests" / "fixtures" / "smoke-snapshots"

#: A run config at smoke scale: seconds to train, evaluated at its start and end.
SMOKE_RUN = """\
experiment: readme
model: tiny-m
split: easy
n: 2
B_p: 2
M: 2
eval_every: 2
eval_problems: 8
eval_k_samples: 4
"""
#: Two points of the smoke study, run one after the other in the runner's process.
SMOKE_SWEEP = """\
name: readme-sweep
base: {model: tiny-m, split: easy, lr_base: 5.0e-5, eval_problems: 8, eval_k_samples: 4,
       eval_ks: [1, 4]}
axes: {n: [2, 4], B_p: [2]}
budget_rollouts: 16
seeds: [0]
eval_points: 2
metric: eval/avg@4
"""


@dataclass
class Case:
    """One README command: its words (as the README names it), the argv after `isolab` (or a
    whole command line for `make`), and what its output must say."""

    command: str
    argv: list[str]
    expect: list[str] = field(default_factory=list)
    check: Callable[[Path], None] | None = None
    timeout_s: float = 300


def _store(project: Path) -> str:
    return f"sqlite:///{project / 'runs' / 'mlflow.db'}"


def _finished_runs(project: Path, experiment: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(_store(project))
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"no experiment {experiment!r} in {_store(project)}"
    runs = client.search_runs([exp.experiment_id])
    assert {r.info.status for r in runs} == {"FINISHED"}, [r.info.status for r in runs]
    return runs


def _has(*parts: str) -> Callable[[Path], None]:
    def check(project: Path) -> None:
        for part in parts:
            assert (project / part).exists(), f"{part} missing under {project}"

    return check


CASES = [
    Case("--version", ["--version"], ["isolab 0.1.0"]),
    Case("--help", ["--help"], ["Commands", "sweep", "frontier"]),
    Case(
        "init", ["init", "laid-out"], ["laid out"], _has("laid-out/notebooks", "laid-out/studies")
    ),
    Case("models list", ["models", "list"], ["tiny-m", "tiny-prm"]),
    # a fresh cache (ISOLAB_CACHE is the scratch project's for this row): a policy preset and a
    # reward-model preset, each sha256-checked
    Case("models build", ["models", "build", "tiny-s"], ["installed", "sha256"]),
    Case("models build", ["models", "build", "tiny-orm"], ["installed tiny-orm"]),
    Case("difficulty", ["difficulty", "tiny-m"], ["easy: 316 train", "shipped"]),
    Case("flops", ["flops", "run.yaml"], ["ρ =", "rollouts = 8"]),
    Case(
        "train",
        ["train", "run.yaml", "--set", "seed=1"],
        ["validation: base → final", "tiny-m·easy·n2·bp2"],
        lambda p: _finished_runs(p, "readme"),
    ),
    Case("sweep plan", ["sweep", "plan", "sweep.yaml"], ["2 runs"]),
    Case(
        "sweep run",
        ["sweep", "run", "sweep.yaml", "--backend", "inline"],
        ["2 finished, 0 failed"],
        lambda p: _finished_runs(p, "readme-sweep"),
    ),
    # on the store the row above filled: both runs FINISHED, so it trains nothing and judges
    # their saved checkpoints (two rungs, grace 2: nothing stopped); the live path is
    # tests/test_adaptive_live.py's
    Case(
        "sweep adaptive",
        ["sweep", "adaptive", "sweep.yaml"],
        ["best arm n=", "compute 32 of the full grid's 32 rollouts (100%)"],
        lambda p: _finished_runs(p, "readme-sweep"),
    ),
    Case(
        "runs export",
        ["runs", "export", "readme-sweep", "exported"],
        [],
        _has("exported/runs.parquet", "exported/snapshot.json"),
    ),
    Case(
        "runs import",
        ["runs", "import", "exported", "--tracking-uri", "sqlite:///imported.db"],
        ["imported 2 runs into experiment 'readme-sweep'"],
        _has("imported.db"),
    ),
    Case(
        "frontier", ["frontier", "runs/nstar/smoke/main", "--out", "frontier"], [], _has("frontier")
    ),
    Case(
        "report",
        ["report", "runs/nstar/smoke/main", "--n-boot", "20"],
        ["report of nstar/smoke/main"],
        _has("runs/report/nstar--smoke--main.html"),
    ),
    Case(
        "compare",
        ["compare", "runs/nstar/smoke/main", "runs/nstar/smoke/long"],
        ["nstar/smoke/main vs nstar/smoke/long"],
        _has("runs/report/nstar--smoke--main--vs--nstar--smoke--long.html"),
    ),
    Case("study list", ["study", "list"], ["nstar", "n-vs-bp", "reward-rho"]),
    Case(
        "study run",
        ["study", "run", "nstar", "--scale", "smoke", "--no-log"],
        ["from snapshot", "findings"],
        _has("runs/nstar/smoke/findings.md"),
    ),
    # `make demo` itself (the Makefile's target over the installed .venv), two steps a run and
    # a smaller evaluation
    Case(
        "make demo",
        [
            "make",
            "-C",
            str(REPO),
            "demo",
            f"VENV={sys.prefix}",
            "DEMO_ARGS=--steps 2 --eval-problems 16",
        ],
        ["1 · base model", "validation: base → final", "tiny-m·hard·n8·bp8"],
        lambda p: _finished_runs(p, "demo"),
    ),
]
#: Commands the README shows that are covered elsewhere: `ui` by tests/test_ui_browser.py (it
#: starts `isolab ui` as a subprocess, loads its pages in Chromium and checks SIGTERM stops the
#: whole server: a second start here would cost ~40 s), `demo` by `make demo` above; `make test`
#: is the suite itself; `bundle` and `gpu-check` by tests/test_bundle.py (its bad inputs here,
#: the build, the offline install and `gpu-check --device cpu` from it in the slow suite:
#: 4–7 min, `make test-all`).
COVERED_APART = {"ui", "demo", "make test", "bundle", "gpu-check"}


def readme_commands() -> set[str]:
    """The commands the README and docs/ name, in their text or code blocks: `isolab WORD
    [WORD]` where the second word is a sub-command of a group (a group named alone is not a
    command), and `make TARGET` in the README's Quickstart."""
    text = "\n".join(page.read_text() for page in DOCS)
    blocks = "\n".join(re.findall(r"^```\w*\n(.*?)^```", text, re.M | re.S))
    groups = {"models", "sweep", "study", "runs"}
    word = r"isolab ((?:--)?[a-z][a-z-]*)(?: ([a-z]+))?"
    found = set()
    named = re.findall(f"`{word}", text) + re.findall(f"^\\s*{word}", blocks, re.M)
    for first, second in named:
        if first not in groups:
            found.add(first)
        elif second:
            found.add(f"{first} {second}")
    quickstart = README.read_text().split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    found |= {f"make {t}" for t in re.findall(r"^make (\w+)", quickstart, re.M)}
    return found


def test_every_readme_command_has_a_row():
    covered = {case.command for case in CASES} | COVERED_APART
    missing = readme_commands() - covered
    assert not missing, f"README commands without a row in {Path(__file__).name}: {missing}"
    stale = {c.command for c in CASES} - readme_commands()
    assert not stale, f"rows for commands the README no longer shows: {stale}"


def test_the_your_setting_commands_are_the_ones_its_test_runs():
    """The "Your own setting" section's code block is run line by line, on the example with a
    local model folder, by tests/test_your_setting.py (its README_COMMANDS)."""
    from test_your_setting import README_COMMANDS

    section = README.read_text().split("## Your own setting", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```\w*\n(.*?)^```", section, re.M | re.S)
    lines = tuple(line.strip() for b in blocks for line in b.splitlines() if line.strip())
    assert lines == README_COMMANDS


@pytest.fixture(scope="module")
def project(tmp_path_factory, isolab_cache) -> Path:
    """A scratch project: its own runs/ (store, artifacts, results), the shared model cache,
    a smoke run config and sweep spec, and the nstar smoke snapshot to re-plot."""
    root = tmp_path_factory.mktemp("readme")
    (root / "run.yaml").write_text(SMOKE_RUN)
    (root / "sweep.yaml").write_text(SMOKE_SWEEP)
    for sweep in ("main", "long"):
        shutil.copytree(
            SMOKE_SNAPSHOTS / "nstar" / sweep, root / "runs" / "nstar" / "smoke" / sweep
        )
    return root


def _env(project: Path, case: Case) -> dict[str, str]:
    env = {**os.environ, "ISOLAB_RUNS": str(project / "runs"), "COLUMNS": "200"}
    env.pop("MLFLOW_TRACKING_URI", None)
    if case.command == "models build":  # a fresh cache: the install really runs
        env["ISOLAB_CACHE"] = str(project / "fresh-cache")
    return env


@pytest.mark.parametrize("case", CASES, ids=lambda c: " ".join(c.argv[:3]))
def test_readme_command_runs(case: Case, project: Path):
    argv = case.argv if case.argv[0] == "make" else [sys.executable, "-m", "isolab.cli", *case.argv]
    t0 = time.monotonic()
    proc = subprocess.run(
        argv,
        cwd=project,
        env=_env(project, case),
        capture_output=True,
        text=True,
        timeout=case.timeout_s,
        stdin=subprocess.DEVNULL,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(argv)} exited {proc.returncode}:\n{out[-4000:]}"
    flat = " ".join(out.split())
    for words in case.expect:
        assert words in flat, f"{words!r} not in the output of {' '.join(argv)}:\n{out[-3000:]}"
    if case.check:
        case.check(project)
    print(f"{' '.join(case.argv)}: {time.monotonic() - t0:.1f} s")
