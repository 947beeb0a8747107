"""The offline bundle for a GPU node (issue 50), as a cluster user meets it: `isolab bundle`
built from this tree, installed with no index (`install.sh`) into a fresh venv that holds only
the GPU image's packages (`IMAGE_PACKAGES`, CPU torch here), then run from that venv: the
demo and `isolab gpu-check --device cpu`, whose snapshots this checkout's isolab imports.

The build and install tests are slow (several minutes on 2 busy cores: the install's self-check, the demo, the GPU check's
CPU fallback with its sweep). The image's packages come from uv's cache and torch from this
machine's wheel folder; the bundle's wheels from runs/cache/wheels once downloaded.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from isolab.cli.bundle import BUDGET_MB, size_mb
from isolab.cli.bundle_packages import IMAGE_PACKAGES, node_packages, platform_tags

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
UV = Path(sys.executable).with_name("uv")


def test_the_bundle_pins_what_the_node_lacks_at_the_tested_versions():
    pins = node_packages()
    assert pins["trl"] == md.version("trl") and pins["mlflow-skinny"] == md.version("mlflow-skinny")
    assert pins["polars"] == "1.20.0"  # one 33 MB wheel, not polars 2's 54 MB runtime
    # the SQL store's packages, and the Databricks namespace mlflow probes at import
    assert {"sqlalchemy", "alembic", "sqlparse", "cryptography", "databricks-sdk"} <= set(pins)
    left_out = {
        "torch",
        "transformers",
        "numpy",
        "pandas",
        "statsmodels",
        "mlflow",
        "google-auth",
        "polars-runtime-32",
        "isolab",
    }
    assert left_out.isdisjoint(pins)
    with_ols = node_packages(("statsmodels",))
    assert {"statsmodels", "patsy"} <= set(with_ols) and "numpy" not in with_ols


def test_a_platform_tag_takes_every_older_glibc():
    tags = platform_tags("manylinux_2_28_x86_64")
    assert tags[0] == "manylinux_2_28_x86_64" and "manylinux_2_17_x86_64" in tags
    assert "manylinux2014_x86_64" in tags and "manylinux_2_29_x86_64" not in tags
    assert platform_tags("macosx_14_0_arm64") == ["macosx_14_0_arm64"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--python", "3"], "--python '3': give MAJOR.MINOR"),
        (["--data-dir", "."], "lacks gsm8k/train.jsonl"),
        (["--with", "no-such-package-here"], "'no-such-package-here' is not installed here"),
    ],
)
def test_bad_bundle_input_exits_2_naming_the_option(tmp_path, args, message):
    from typer.testing import CliRunner

    from isolab.cli import app

    data = [] if "--data-dir" in args else ["--data-dir", str(tmp_path / "data")]
    if data:
        for file in (
            "gsm8k/train.jsonl",
            "gsm8k/test.jsonl",
            "gsm8k/LICENSE",
            "math500/test.jsonl",
        ):
            (tmp_path / "data" / file).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / "data" / file).write_text("{}\n")
    res = CliRunner().invoke(app, ["bundle", str(tmp_path / "b"), *data, *args])
    assert res.exit_code == 2 and message in res.output, res.output
    assert not (tmp_path / "b" / "wheels").exists()  # refused before anything was written


def test_a_bundle_goes_into_a_new_or_empty_folder(tmp_path):
    from typer.testing import CliRunner

    from isolab.cli import app

    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "keep.txt").write_text("mine")
    res = CliRunner().invoke(app, ["bundle", str(tmp_path / "b")])
    assert res.exit_code == 2 and "not empty" in res.output
    assert (tmp_path / "b" / "keep.txt").read_text() == "mine"


def _run(cmd: list, cwd: Path, env: dict | None = None, timeout: float = 1200) -> str:
    out = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert out.returncode == 0, (
        f"{cmd} → {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    )
    return out.stdout


def _node_env(root: Path) -> dict:
    """No isolab or MLflow settings of this session: the node's isolab finds its own runs/."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ISOLAB_", "MLFLOW_"))}
    env["ISOLAB_RUNS"] = str(root / "runs")
    env["PATH"] = f"{UV.parent}{os.pathsep}{env.get('PATH', '')}"  # uv: the venv has no pip
    return env


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    if not (DATA / "gsm8k" / "train.jsonl").is_file():
        pytest.skip(f"no GSM8K copy at {DATA}")
    dest = tmp_path_factory.mktemp("bundle") / "isolab-bundle"
    _run([sys.executable, "-m", "isolab.cli", "bundle", dest, "--data-dir", DATA], REPO)
    return dest


@pytest.fixture(scope="module")
def node(bundle, tmp_path_factory) -> Path:
    """A venv with the image's packages only, at this environment's versions, and the bundle
    installed into it by its own install.sh (no index)."""
    root = tmp_path_factory.mktemp("node")
    venv = root / "venv"
    _run([UV, "venv", "-q", venv, "--python", sys.executable], root)
    image = [f"{name}=={md.version(name)}" for name in IMAGE_PACKAGES]
    links = [x for d in os.environ.get("PIP_FIND_LINKS", "").split() for x in ("--find-links", d)]
    _run(
        [
            UV,
            "pip",
            "install",
            "-q",
            "--python",
            venv / "bin" / "python",
            "--offline",
            *links,
            *image,
        ],
        root,
    )
    env = {**_node_env(root), "PYTHON": str(venv / "bin" / "python")}
    out = _run(["bash", bundle / "install.sh"], root, env)
    assert "self-check passed" in out and "polars 1.20.0" in out
    return venv


@pytest.mark.slow
def test_the_bundle_fits_the_budget_and_holds_what_the_image_lacks(bundle):
    assert size_mb(bundle) <= BUDGET_MB
    wheels = {w.name.split("-")[0].lower() for w in (bundle / "wheels").glob("*.whl")}
    assert {"isolab", "trl", "mlflow_skinny", "sqlalchemy", "polars", "datasets"} <= wheels
    assert wheels.isdisjoint({"torch", "transformers", "numpy", "statsmodels", "mlflow"})
    (polars,) = (bundle / "wheels").glob("polars-*.whl")
    assert polars.name.startswith("polars-1.20.0-")
    readme = (bundle / "README.txt").read_text()
    assert "vLLM is not in this bundle" in readme and "trl==1.16.0" in readme
    # the node's wheel keeps the demo's preset and the GPU specs, not the CPU studies' weights
    (isolab,) = (bundle / "wheels").glob("isolab-*.whl")
    names = zipfile.ZipFile(isolab).namelist()
    assert "isolab/presets/tiny-m/model.safetensors" in names
    assert "isolab/bundle/studies/nstar/gpu/main.yaml" in names
    assert not any(n.startswith("isolab/presets/tiny-l/") for n in names)


@pytest.mark.slow
def test_a_bundle_over_budget_is_refused_and_says_so(tmp_path):
    if not (DATA / "gsm8k" / "train.jsonl").is_file():
        pytest.skip(f"no GSM8K copy at {DATA}")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "isolab.cli",
            "bundle",
            str(tmp_path / "b"),
            "--data-dir",
            str(DATA),
            "--budget-mb",
            "10",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 1
    assert "over --budget-mb 10" in out.stderr + out.stdout


@pytest.mark.slow
def test_installed_offline_the_demo_and_the_gpu_check_run_and_come_back(node, bundle, tmp_path):
    env = _node_env(tmp_path)
    isolab = node / "bin" / "isolab"
    # the node's venv holds no statsmodels nor mlflow's server: the image and the bundle only
    probe = "import importlib.util as u; print(u.find_spec('statsmodels'), u.find_spec('flask'))"
    assert _run([node / "bin" / "python", "-c", probe], tmp_path, env).split() == ["None", "None"]
    demo = _run([isolab, "demo", "--steps", "2", "--eval-problems", "4"], tmp_path, env)
    assert "4 · results" in demo and "easy" in demo and "hard" in demo
    out = tmp_path / "check"
    _run(
        [isolab, "gpu-check", "--device", "cpu", "--data-dir", bundle / "data", "--out", out],
        tmp_path,
        env,
    )
    record = json.loads((out / "gpu-check.json").read_text())
    assert record["device"] == "cpu" and record["random_weights"] is True
    assert [(m["model"], m["engine"]) for m in record["models"]] == [
        ("smollm2-135m", "hf"),
        ("qwen2.5-0.5b", "hf"),
    ]
    for row in record["models"]:
        assert row["completion_tokens_per_s"] > 0 and row["flops_total"] > 0
        assert 0 < row["mfu_run"] < 1
    assert record["study"]["finished"] == 4 and record["study"]["failed"] == 0
    # carried back: this checkout's isolab reads the snapshots into its own store
    for name, folder in record["snapshots"].items():
        uri = f"sqlite:///{tmp_path / 'laptop.db'}"
        shown = _run(
            [
                sys.executable,
                "-m",
                "isolab.cli",
                "runs",
                "import",
                out / folder,
                "--tracking-uri",
                uri,
            ],
            tmp_path,
            _node_env(tmp_path),
        )
        assert f"into experiment '{name}'" in shown
