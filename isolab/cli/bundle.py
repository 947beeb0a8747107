"""`isolab bundle DIR`: everything a GPU node without network needs to run isolab, in one folder.

Clusters' GPU nodes often carry an image with CUDA PyTorch and the HF stack but no internet
(issue 50). The bundle holds what such an image lacks, for a stated Python and platform:

- ``wheels/``: the packages isolab needs on the node and the image does not hold, each pinned
  to the version installed here (the tested one), plus isolab itself as a wheel;
- ``data.tar.xz``: GSM8K and MATH-500 as the JSONL files isolab reads, unpacked by install.sh
  into ``data/`` (`--data-dir`; 5.4 MB of JSONL in 1.3);
- ``install.sh``: installs the wheels with no network (``--no-index``) into a venv or the
  current environment, then runs ``isolab gpu-check --self-check``;
- ``README.txt``: the same in words, and the list of what was left out and why.

Which packages (chosen and fetched in `isolab.cli.bundle_packages`): the closure of isolab's
own requirements (read from its installed metadata, not retyped) minus the closure of
`IMAGE_PACKAGES`, plus `--with` packages, with five changes that keep it within `BUDGET_MB`
(vLLM excluded: it must already be on the node):

- `LAPTOP_ONLY`: requirements the node never imports (read on the laptop, after
  ``isolab runs import``);
- `SLIM`: mlflow's server and UI are replaced by its `mlflow-skinny` client and the SQL store
  packages its own documentation names for a SQLite store;
- `NOT_FOLLOWED`: databricks-sdk without its requirements (mlflow probes its namespace only);
- `PIN_OVERRIDES`: polars 1.20, one 33 MB wheel, for polars 2's 54 MB runtime;
- `NODE_WHEEL_LEAVES_OUT`: isolab's wheel without the CPU studies' presets, the notebooks and
  the committed snapshots (`--full-isolab` keeps them).

Because of these the wheels install with ``--no-deps``; the self-check imports every module a
run needs, so a missing one is an error on the node, not in the middle of a study.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from isolab.cli.bundle_packages import (
    IMAGE_PACKAGES,
    LAPTOP_ONLY,
    NOT_FOLLOWED,
    download,
    node_packages,
)
from isolab.cli.common import check_out, console, fail, safe

#: Most the bundle may weigh, vLLM excluded (issue 50).
BUDGET_MB = 60.0
#: The data sets a GPU study reads, as `isolab.tasks` finds them under `--data-dir`.
DATA_FILES = ("gsm8k/train.jsonl", "gsm8k/test.jsonl", "gsm8k/LICENSE", "math500/test.jsonl")
#: What of the tree the wheel's build never reads (setup.py picks its folders — studies,
#: notebooks, examples — and the snapshots under runs/, copied apart: the rest of runs/ is GBs).
WHEEL_SKIPS = (".git", ".venv", "runs", "build", "dist", "*.egg-info", "__pycache__", "*.pyc",
               ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints")  # fmt: skip
#: Parts of the tree the node's wheel leaves out (16 MB), with the reason; `--full-isolab`
#: keeps them. A preset left out has no shipped weights there: `isolab models build` would
#: train it from scratch.
NODE_WHEEL_LEAVES_OUT = {
    "isolab/presets/tiny-l": "a CPU study's preset (8 MB); the GPU specs use SmolLM2",
    "isolab/presets/tiny-s": "a CPU study's preset (tiny-m, the demo's, is kept)",
    "isolab/presets/tiny-chat": "a CPU study's preset",
    "isolab/presets/tiny-orm": "a CPU study's reward model",
    "isolab/presets/tiny-prm": "a CPU study's reward model",
    "notebooks": "run on the laptop, against the snapshots carried back",
    "runs": "the committed CPU-scale snapshots, which the notebooks re-plot on the laptop",
}


def checkout() -> Path:
    """The checkout isolab runs from (its wheel is built from the working tree).

    Raises:
        ValueError: isolab runs from an installed wheel, with no source tree to build from.
    """
    import isolab

    root = Path(isolab.__file__).resolve().parents[1]
    if not (root / "pyproject.toml").is_file() or not (root / "setup.py").is_file():
        raise ValueError(
            f"isolab runs from {root}, not a checkout: build the bundle from a clone of isolab "
            "(`git clone …; cd isolab; make install; .venv/bin/isolab bundle DIR`)."
        )
    return root


def build_isolab_wheel(dest: Path, leave_out: tuple[str, ...] = ()) -> Path:
    """isolab's wheel built from the working tree (a copy of it but `WHEEL_SKIPS`, and the
    committed snapshots, so that no build folder lands in the checkout) into `dest`, without
    the tree's paths in `leave_out`."""
    root = checkout()
    skip = {root / p for p in leave_out}

    def ignore(folder: str, names: list[str]) -> set[str]:
        junk = shutil.ignore_patterns(*WHEEL_SKIPS)(folder, names)
        return set(junk) | {n for n in names if Path(folder) / n in skip}

    with tempfile.TemporaryDirectory(prefix="isolab-wheel-") as tmp:
        tree = Path(tmp) / "tree"
        tree.mkdir()
        for src in root.iterdir():
            if src in skip or ignore(str(root), [src.name]):
                continue
            name = src.name
            if src.is_dir():
                shutil.copytree(src, tree / name, ignore=ignore)
            elif src.is_file():
                shutil.copy2(src, tree / name)
        # setup.py ships runs/<study>/<scale>/<sweep>/{runs.parquet,snapshot.json} only
        snapshots = [*root.glob("runs/*/*/*/runs.parquet"), *root.glob("runs/*/*/*/snapshot.json")]
        for snap in [] if root / "runs" in skip else snapshots:
            out = tree / snap.relative_to(root)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(snap, out)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", str(tree), "--no-deps",
             "--no-build-isolation", "--no-index", "-w", str(dest)],
            capture_output=True, text=True,
        )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"building isolab's wheel failed: {done.stderr.strip()[-500:]}")
    return next(dest.glob("isolab-*.whl"))


def size_mb(folder: Path) -> float:
    """Bytes of every file under `folder`, in MB (10⁶ bytes, as the budget)."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


INSTALL_SH = """#!/usr/bin/env bash
# isolab offline install (written by `isolab bundle`): no network is used.
#   bash install.sh            # into the current Python's environment ($PYTHON, else python3)
#   bash install.sh VENV       # into VENV, created (seeing the image's packages) if missing
# Then: isolab gpu-check --data-dir {here_var}/data   (about 5 minutes on one H200)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="${{PYTHON:-python3}}"
if [ $# -ge 1 ]; then
  [ -x "$1/bin/python" ] || "$PY" -m venv --system-site-packages "$1"
  PY="$1/bin/python"
fi
"$PY" -c 'import sys; v = sys.version_info[:2]; sys.exit(0 if v == ({major}, {minor}) else \
"this bundle is for Python {python}, not %d.%d: rebuild it with isolab bundle --python" % v)'
# every wheel, no dependency resolution: the bundle is the resolution (README.txt)
if "$PY" -m pip --version >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --find-links "$HERE/wheels" --no-deps "$HERE"/wheels/*.whl
elif command -v uv >/dev/null 2>&1; then
  uv pip install -q --python "$PY" --offline --no-index --find-links "$HERE/wheels" --no-deps \\
    "$HERE"/wheels/*.whl
else
  echo "install.sh: $PY has no pip and uv is not on PATH: install pip into it first" >&2
  exit 2
fi
[ -d "$HERE/data" ] || "$PY" -m tarfile -e "$HERE/data.tar.xz" "$HERE"
"$(dirname "$PY")/isolab" gpu-check --self-check
echo "installed. Next: $(dirname "$PY")/isolab gpu-check --data-dir $HERE/data"
"""

README = """isolab offline bundle — for Python {python} on {platform}, built {built} from isolab {version}

On a GPU node without network, whose image already holds {image}:

    bash install.sh [VENV]                           # no network; ends with a self-check
    isolab gpu-check --data-dir THIS_FOLDER/data     # about 5 minutes on one H200

vLLM is not in this bundle: it must already be on the node (the GPU check then measures it
too). gpu-check writes gpu-check.json and snapshots/ under runs/gpu-check/: carry that folder
back and read it with `isolab runs import runs/gpu-check/<stamp>/snapshots/<experiment>`.

wheels/ ({count} wheels, {wheels_mb:.1f} MB), pinned to the versions tested where it was built:
{pins}

Left out (the node does not import them; `isolab bundle --with NAME` adds one):
{left_out}

Left out of isolab's wheel (`isolab bundle --full-isolab` keeps them):
{wheel_left_out}

data.tar.xz → data/ (install.sh unpacks it): GSM8K (MIT, gsm8k/LICENSE) and MATH-500, as
isolab reads them (--data-dir).
"""


def bundle(
    dest: Annotated[Path, typer.Argument(help="Folder to write the bundle into (new or empty).")],
    python: Annotated[
        str, typer.Option(help="The node's Python, MAJOR.MINOR.")
    ] = f"{sys.version_info.major}.{sys.version_info.minor}",
    platform_tag: Annotated[
        str,
        typer.Option(
            "--platform",
            help="The node's wheel platform tag (pip's --platform), e.g. manylinux_2_28_x86_64.",
        ),
    ] = f"manylinux_2_{platform.libc_ver()[1].split('.')[-1] or '28'}_{platform.machine()}",
    with_: Annotated[
        list[str] | None,
        typer.Option("--with", help="Also bundle this installed package (repeat for more)."),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(help="Folder holding gsm8k/ and math500/ JSONL (as --data-dir of a run)."),
    ] = None,
    full_isolab: Annotated[
        bool,
        typer.Option(help="isolab's wheel whole: every tiny preset and the notebooks (+15 MB)."),
    ] = False,
    budget_mb: Annotated[
        float, typer.Option(help="Refuse a bundle heavier than this, in MB.")
    ] = BUDGET_MB,
    wheel_cache: Annotated[
        Path | None,
        typer.Option(help="Where downloaded wheels are kept; default: runs/cache/wheels."),
    ] = None,
) -> None:
    """Write an offline bundle for a GPU node: wheels the image lacks, isolab's wheel, the data,
    install.sh. Then on the node: `bash install.sh && isolab gpu-check`."""
    import datetime

    from isolab import __version__
    from isolab.paths import cache_root

    if dest.exists() and any(dest.iterdir()):
        fail(f"DIR {dest}: not empty; name a new or empty folder (the bundle is written whole).")
    check_out(dest, folder=True, option="DIR")
    if not (python.count(".") == 1 and all(p.isdigit() for p in python.split("."))):
        fail(f"--python {python!r}: give MAJOR.MINOR, e.g. 3.11")
    data_dir = data_dir or _default_data_dir()
    missing = [f for f in DATA_FILES if not (data_dir / f).is_file()]
    if missing:
        fail(
            f"--data-dir {data_dir}: lacks {', '.join(missing)}; give the folder holding "
            "gsm8k/ and math500/ as JSONL (see docs/gpu.md)."
        )
    try:
        pins = node_packages(tuple(with_ or ()))
        root = checkout()
    except ValueError as exc:
        fail(str(exc))
    del root
    wheels = dest / "wheels"
    wheels.mkdir(parents=True)
    with console.status(f"downloading {len(pins)} wheels for Python {python} on {platform_tag} …"):
        try:
            download(pins, wheels, python, platform_tag, wheel_cache or cache_root() / "wheels")
        except RuntimeError as exc:
            shutil.rmtree(dest)
            fail(f"{exc} (check --python and --platform; nothing was written)", 1)
    leave_out = () if full_isolab else tuple(NODE_WHEEL_LEAVES_OUT)
    with console.status("building isolab's wheel …"):
        build_isolab_wheel(wheels, leave_out)
    with tarfile.open(dest / "data.tar.xz", "w:xz") as tar:
        for file in DATA_FILES:
            tar.add(data_dir / file, arcname=f"data/{file}")
    major, minor = python.split(".")
    (dest / "install.sh").write_text(
        INSTALL_SH.format(python=python, major=major, minor=minor, here_var="$HERE")
    )
    (dest / "install.sh").chmod(0o755)
    left_out = {**LAPTOP_ONLY, **{f"requirements of {k}": v for k, v in NOT_FOLLOWED.items()}}
    (dest / "README.txt").write_text(
        README.format(
            python=python,
            platform=platform_tag,
            built=datetime.date.today().isoformat(),
            version=__version__,
            image=", ".join(IMAGE_PACKAGES),
            count=len(list(wheels.glob("*.whl"))),
            wheels_mb=size_mb(wheels),
            pins="\n".join(f"  {n}=={v}" for n, v in pins.items()),
            left_out="\n".join(f"  {n}: {why}" for n, why in left_out.items()),
            wheel_left_out="\n".join(f"  {n}: {NODE_WHEEL_LEAVES_OUT[n]}" for n in leave_out)
            or "  nothing",
        )
    )
    total = size_mb(dest)
    if total > budget_mb:
        fail(
            f"the bundle weighs {total:.1f} MB, over --budget-mb {budget_mb:g} (left in "
            f"{safe(dest)} to inspect): drop a --with package, or raise --budget-mb.",
            1,
        )
    console.print(
        f"bundle {safe(dest)}: {total:.1f} MB ({len(pins) + 1} wheels, data, install.sh) "
        f"for Python {python} on {platform_tag}. On the node: bash install.sh && isolab gpu-check"
    )


def _default_data_dir() -> Path:
    """`$ISOLAB_DATA_DIR`, else the checkout's sibling `shared/data` (this project's layout)."""
    import os

    if os.environ.get("ISOLAB_DATA_DIR"):
        return Path(os.environ["ISOLAB_DATA_DIR"])
    return Path(__file__).resolve().parents[3] / "shared" / "data"


def register(app: typer.Typer) -> None:
    app.command()(bundle)
