"""The curated studies behind the notebooks: their sweeps at each scale, snapshots and analyses.

A *study* is one notebook's question (`STUDIES`): one or more sweeps, each a plain sweep spec
``studies/<study>/<scale>/<sweep>.yaml`` whose MLflow experiment is ``<study>/<scale>/<sweep>``,
and a folder `isolab/study/<study>/` with its analysis, its claims and their calibration worlds
(`Study.package`; `isolab.study.claims` and `isolab.study.calibration` gather the claims and
worlds of every folder). Scales:

- ``smoke``: seconds per run, what CI executes;
- ``cpu``: a laptop, minutes per sweep; its snapshots are committed under ``runs/``;
- ``gpu``: real LLMs on a GPU machine.

`collect` gives each sweep's runs table: from the snapshot ``runs/<study>/<scale>/<sweep>/``
when it exists (a reader re-plots without training), otherwise by running the sweep through the
resumable runner (finished points are skipped) and then writing the snapshot. `run` is
`collect` + `analyse` + `save`: what both the notebooks and ``isolab study run`` do.

Example::

    from isolab import study
    report = study.run("nstar", "cpu")       # re-plots from runs/nstar/cpu/ when present
    print(report.summary_text())
"""

from isolab.study.pipeline import analyse, collect, run, save
from isolab.study.registry import (
    SCALES,
    STUDIES,
    Study,
    describe,
    find_snapshot,
    get,
    has_snapshots,
    load_spec,
    load_specs,
    output_dir,
    plans,
    snapshot_dir,
    spec_path,
)
from isolab.study.report import Report

__all__ = [
    "SCALES",
    "STUDIES",
    "Report",
    "Study",
    "analyse",
    "collect",
    "describe",
    "find_snapshot",
    "get",
    "has_snapshots",
    "load_spec",
    "load_specs",
    "output_dir",
    "plans",
    "run",
    "save",
    "snapshot_dir",
    "spec_path",
]
