"""Which packages `isolab bundle` carries for a GPU node, pinned to which versions, and
their wheels downloaded for the node's Python and platform.

The closure of isolab's requirements minus the image's (`IMAGE_PACKAGES`), with the changes
that keep the bundle within its budget (`LAPTOP_ONLY`, `SLIM`, `NOT_FOLLOWED`,
`PIN_OVERRIDES`; the reasons in `bundle`'s docstring), read from this environment's installed
metadata, not retyped. Apart from writing the bundle (`bundle`: isolab's wheel, the data,
install.sh) because choosing and fetching the third-party wheels is its own subject, tested
without writing a bundle (tests/test_bundle.py).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

#: What the GPU image already holds (issue 50: an H200 image with CUDA torch): not bundled,
#: nor anything they require as installed here. pydantic is among the latter (transformers →
#: typer → pydantic), and vLLM, which the node must hold, requires it too; a node without it
#: fails install.sh's self-check, which names the fix (`isolab bundle --with pydantic`).
IMAGE_PACKAGES = (
    "torch",
    "transformers",
    "accelerate",
    "peft",
    "numpy",
    "pandas",
    "pyarrow",
    "scipy",
    "matplotlib",
)
#: isolab requirements a GPU node does not import, with the reason (`--with NAME` adds one).
LAPTOP_ONLY = {
    "statsmodels": "the verdicts' OLS (isolab.verdicts.ols): read results on the laptop",
    "mlflow": "replaced by mlflow-skinny and the SQL store packages (`SLIM`)",
}
#: What stands in for a `LAPTOP_ONLY` package: mlflow-skinny is mlflow's client, whose own
#: README says "to use SQL-based metadata storage, install sqlalchemy, alembic, and sqlparse";
#: its SQL store also imports cryptography (mlflow/store/model_registry/dbmodels/models.py).
#: `isolab ui` (mlflow's server) runs on the laptop.
SLIM = ("mlflow-skinny", "sqlalchemy", "alembic", "sqlparse", "cryptography")
#: Packages bundled but not followed into their requirements, with what is left out: mlflow
#: probes the `databricks` namespace at import (`find_spec("databricks.agents")` fails without
#: it), yet a SQLite store never calls Databricks' client.
NOT_FOLLOWED = {
    "databricks-sdk": "its google-auth and cryptography (5 MB): a SQLite store never calls them"
}
#: Versions other than the one installed here, with the reason. polars ≥ 1.34 ships its engine
#: as polars-runtime-32 (54 MB for polars 2.1, alone near the budget); polars 1.20 is one 33 MB
#: wheel with no required dependencies and runs isolab (tests/test_bundle.py).
PIN_OVERRIDES = {"polars": "1.20.0"}


def _name(text: str) -> str:
    """A distribution's normalised name (PEP 503), as pip and the metadata compare them."""
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(text))


def requirements(name: str) -> list[str]:
    """Names `name` requires as installed here (extras and markers that do not hold dropped)."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    try:
        reqs = md.requires(name) or []
    except md.PackageNotFoundError:
        return []
    out = []
    for text in reqs:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            out.append(_name(req.name))
    return out


def closure(
    roots: list[str] | tuple[str, ...],
    stop: set[str] | frozenset[str] = frozenset(),
    skip: set[str] | frozenset[str] = frozenset(),
) -> set[str]:
    """`roots` and everything they require, as installed here; `stop` names are kept but not
    followed (`PIN_OVERRIDES`: their bundled version requires nothing of what this one does),
    `skip` names are neither kept nor followed."""
    seen: set[str] = set()
    todo = [_name(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in seen or name in skip:
            continue
        seen.add(name)
        if name not in stop:
            todo.extend(requirements(name))
    return seen


def node_packages(extra: tuple[str, ...] = ()) -> dict[str, str]:
    """name → pinned version of every package the bundle carries (isolab's own wheel apart).

    Raises:
        ValueError: a package needed is not installed here (no tested version to pin), naming it.
    """
    import importlib.metadata as md

    left_out = {_name(k) for k in LAPTOP_ONLY}
    roots = [r for r in requirements("isolab") if r not in left_out]
    roots += [*SLIM, *extra]
    # what the image holds, not counting a `--with` package and what only it requires
    image = closure(IMAGE_PACKAGES, skip={_name(e) for e in extra})
    stop = {_name(k) for k in (*PIN_OVERRIDES, *NOT_FOLLOWED)}
    wanted = closure(roots, stop) - image - {"isolab"}
    pins: dict[str, str] = {}
    for name in sorted(wanted):
        if name in PIN_OVERRIDES:
            pins[name] = PIN_OVERRIDES[name]
            continue
        try:
            pins[name] = md.version(name)
        except md.PackageNotFoundError:
            raise ValueError(
                f"--with / requirement {name!r} is not installed here, so there is no tested "
                f"version to pin: install it into this environment first, or drop it."
            ) from None
    return pins


def platform_tags(platform_tag: str) -> list[str]:
    """pip's `--platform` values for `platform_tag`: a manylinux_2_N tag and every older glibc
    it also runs (wheels are published under the oldest one they need)."""
    found = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", platform_tag)
    if found is None:
        return [platform_tag]
    glibc, arch = int(found.group(1)), found.group(2)
    tags = [f"manylinux_2_{m}_{arch}" for m in range(glibc, 4, -1)]
    legacy = (
        ["manylinux2014", "manylinux2010", "manylinux1"] if arch == "x86_64" else ["manylinux2014"]
    )
    return [*tags, *(f"{name}_{arch}" for name in legacy)]


def download(pins: dict[str, str], dest: Path, python: str, platform_tag: str, cache: Path) -> None:
    """The wheels of `pins` for `python` on `platform_tag` into `dest`: from the cache's folder
    for that target when it holds them all (no network), else from the index (PyPI) into it,
    then copied.

    Raises:
        RuntimeError: pip could not find a wheel (the message names pip's complaint).
    """
    cache = cache / f"cp{python.replace('.', '')}-{platform_tag}"  # one target's wheels only
    cache.mkdir(parents=True, exist_ok=True)
    specs = [f"{name}=={version}" for name, version in pins.items()]
    target = ["--python-version", python, "--implementation", "cp", "--only-binary=:all:"]
    for tag in platform_tags(platform_tag):
        target += ["--platform", tag]
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", *target, "-d", str(cache)]
    offline = subprocess.run(
        [*pip, "--no-index", "--find-links", str(cache), *specs], capture_output=True, text=True
    )
    if offline.returncode != 0:  # not all cached: ask the index
        online = subprocess.run([*pip, *specs], capture_output=True, text=True)
        if online.returncode != 0:
            lines = [x for x in online.stderr.splitlines() if "is ignored" not in x]
            raise RuntimeError("pip download failed: " + " ".join(lines[-3:]))
    wanted = {(_name(n), v) for n, v in pins.items()}
    for wheel in cache.glob("*.whl"):
        name, version = wheel.name.split("-")[:2]
        if (_name(name), version) in wanted:
            shutil.copy2(wheel, dest / wheel.name)
