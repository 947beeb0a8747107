"""The command line starts fast: parsing arguments, `--help`, `--version` and argument errors
import none of the heavy libraries (torch alone costs seconds). `benchmarks/startup.py` times it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: What a command imports when it runs, never to parse its arguments.
HEAVY = ("torch", "transformers", "trl", "vllm", "mlflow", "datasets", "polars", "ray", "scipy")

SCRIPT = f"""
import json, sys
from isolab.cli import main
sys.argv = ["isolab", *json.loads(sys.argv[1])]
try:
    main()
    code = 0
except SystemExit as exc:
    code = exc.code
heavy = [m for m in {HEAVY!r} if m in sys.modules]
print(json.dumps({{"code": code, "heavy": heavy}}))
"""


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["--help"], 0),
        (["--version"], 0),
        ([], 2),  # no command: the help, exit 2 (typer's no_args_is_help)
        (["sweep", "run", "--help"], 0),
        (["study", "run", "--help"], 0),
        (["train", "--no-such-flag"], 2),
        (["sweep", "run"], 2),  # missing SPEC
        (["frontier", "--help"], 0),
        (["report", "--help"], 0),
        (["compare", "--help"], 0),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else str(v),
)
def test_parsing_arguments_imports_no_heavy_library(argv, code):
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(argv)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["code"] == code, out.stdout + out.stderr
    assert result["heavy"] == [], f"isolab {' '.join(argv)} imported {result['heavy']}"


def test_the_size_guard_is_named_where_the_config_defines_it():
    from isolab import config
    from isolab.cli import sweep

    assert sweep.SIZE_GUARD_ENV == config.SIZE_GUARD_ENV


def test_a_process_that_trains_does_not_import_scikit_learn(isolab_cache):
    """transformers imports scikit-learn with its generation code when it is installed (MLflow
    installs it), 5 s of CPU per process here; isolab's model loading and trainer import skip it
    (`isolab.logs.without_sklearn`)."""
    code = (
        "import sys\n"
        "from isolab import models\n"
        "from isolab.rl import engines\n"
        "models.load('tiny-m')\n"
        "engines.grpo_trainer_class(with_vllm=False)\n"
        "assert 'transformers.generation.utils' in sys.modules\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sklearn')[:3])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
