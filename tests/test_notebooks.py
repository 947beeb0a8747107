"""The ten notebooks: paired with jupytext, parameterised for papermill, executed end to end at
smoke scale in a real Jupyter kernel (figures drawn, findings printed): one runs its sweep, the
others read their committed smoke snapshots (`test_study` re-derives every study from them and
runs the smoke sweeps themselves)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import jupytext
import nbformat
import pytest

from isolab import study

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
NAMES = sorted(s.notebook for s in study.STUDIES.values())
#: The study whose notebook runs its sweeps in the test (≈ 25 s of training); the others replay
#: smoke snapshots shipped as fixtures (smoke results are not committed under runs/).
TRAINS = "healthy-recipe"
TRAINED = next(s.notebook for s in study.STUDIES.values() if s.name == TRAINS)
SNAPSHOTS = REPO / "tests" / "fixtures" / "smoke-snapshots"


def test_every_study_has_a_paired_notebook():
    assert len(NAMES) == len(study.STUDIES) == 10
    for name in NAMES:
        py, ipynb = NOTEBOOKS / f"{name}.py", NOTEBOOKS / f"{name}.ipynb"
        assert py.exists() and ipynb.exists(), f"{name}: run `jupytext --sync {py}`"
        code = [c.source for c in jupytext.read(py).cells]
        saved = [c.source for c in nbformat.read(ipynb, as_version=4).cells]
        assert code == saved, f"{name}.py and .ipynb differ: run `jupytext --sync {py}`"
        assert "py:percent" in jupytext.read(ipynb).metadata["jupytext"]["formats"]
        # the .py diffs as code: no execution timings (jupytext.toml filters them out)
        assert "papermill={" not in py.read_text() and "execution_count" not in py.read_text()


def test_each_notebook_has_one_papermill_parameters_cell():
    for name in NAMES:
        nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1, name
        params = tagged[0].source
        assert 'scale = "cpu"' in params and "workers" in params and "rerun" in params
        # orchestration only (STYLE.md): no code cell over ~10 lines
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert len(cell.source.splitlines()) <= 10, f"{name}: {cell.source[:60]}"


@pytest.fixture(scope="session")
def notebook_models(isolab_cache):
    """The models the smoke studies use beyond tiny-m (tiny-s, the tiny PRM), built once into
    the shared cache before the notebooks' clock starts, as `isolab_cache` does for tiny-m."""
    from isolab import models
    from isolab.models import reward as reward_models

    models.build("tiny-s")
    reward_models.build("tiny-prm")
    return isolab_cache


@pytest.fixture
def sandbox(tmp_path, monkeypatch, notebook_models):
    """Results and the MLflow store in tmp_path, holding the committed smoke snapshots of every
    study but `TRAINS`; the shared model cache (the kernel inherits this environment)."""
    for s in study.STUDIES.values():
        if s.name != TRAINS and (SNAPSHOTS / s.name).is_dir():
            shutil.copytree(SNAPSHOTS / s.name, tmp_path / "runs" / s.name / "smoke")
    monkeypatch.setenv("ISOLAB_RESULTS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    return tmp_path


def _outputs(nb) -> tuple[str, int]:
    text, images = [], 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                text.append(out.text)
            elif "data" in out:
                images += "image/png" in out["data"]
            assert out.output_type != "error", "".join(out.get("traceback", []))
    return "".join(text), images


def _execute(name: str, sandbox: Path) -> float:
    import papermill

    t0 = time.perf_counter()
    papermill.execute_notebook(
        str(NOTEBOOKS / f"{name}.ipynb"),
        str(sandbox / f"{name}.ipynb"),
        parameters={"scale": "smoke", "workers": 1, "rerun": name == TRAINED},
        cwd=str(NOTEBOOKS),
        progress_bar=False,
        kernel_name="python3",
    )
    return time.perf_counter() - t0


def test_all_notebooks_run_at_smoke_scale(sandbox, capsys, monkeypatch):
    """Each notebook reads its snapshots or runs its sweep (inline, one worker) into a throwaway
    store, analyses the runs, shows its figures and states its findings; two kernels at a time,
    one thread each (tiny models run faster on one thread than on two)."""
    from concurrent.futures import ThreadPoolExecutor

    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "1")  # the kernels inherit it
    t0 = time.perf_counter()
    # a study that re-analyses another's runs (04 reads nstar's) starts once their owner is done,
    # so the two never run the same sweep at once
    later = {s.notebook: s.source for s in study.STUDIES.values() if s.source}
    owner = {s.name: s.notebook for s in study.STUDIES.values()}
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {n: pool.submit(_execute, n, sandbox) for n in NAMES if n not in later}
        for name, source in later.items():
            futures[owner[source]].result()
            futures[name] = pool.submit(_execute, name, sandbox)
        times = {n: futures[n].result() for n in NAMES}
    total = time.perf_counter() - t0
    for name in NAMES:
        text, images = _outputs(nbformat.read(sandbox / f"{name}.ipynb", as_version=4))
        s = next(s for s in study.STUDIES.values() if s.notebook == name)
        assert images >= 1, f"{name}: no figure displayed"
        assert "Paper vs here" in text, f"{name}: no findings printed"
        saved = study.output_dir(s, "smoke")
        assert saved.is_relative_to(sandbox)
        assert (saved / "findings.md").exists() and any((saved / "figures").glob("*.png"))
    with capsys.disabled():
        print(
            "\nnotebooks at smoke scale: " + ", ".join(f"{k} {v:.0f} s" for k, v in times.items())
        )
        print(f"total {total:.0f} s wall, two at a time ({TRAINS} trained, the others replayed)")
    for sweep in study.get(TRAINS).sweeps:
        assert (sandbox / "runs" / TRAINS / "smoke" / sweep / "runs.parquet").exists()
    assert sorted(p.name for p in SNAPSHOTS.iterdir()) == sorted(
        s.name for s in study.STUDIES.values() if s.name != TRAINS and not s.source
    )
