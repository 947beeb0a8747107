"""Self-contained HTML pages of results: one per sweep (`report_page`, `isolab report`) and
one per pair of sweeps at equal compute (`compare_page`, `isolab compare`).

A page embeds its figures (matplotlib, as base64 PNGs) and its style, and links nowhere, so
that it reads offline and as an MLflow artifact (`log_page` puts it on the sweep's parent
run). Modules: `html` (the page's pieces), `tables` (runs tables in, polars frames out),
`figures` (the figures `isolab.plots` lacks, each on a given `ax`), `verdicts` (the curated
studies' saved verdicts on an experiment), `report` and `compare` (the two pages).
"""

from isolab.study.pages.artifact import ARTIFACT_DIR, log_page
from isolab.study.pages.compare import compare_page
from isolab.study.pages.report import Page, report_page

__all__ = ["ARTIFACT_DIR", "Page", "compare_page", "log_page", "report_page"]
