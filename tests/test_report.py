"""`isolab report` and `isolab compare` write one self-contained HTML page each, from the
committed nstar snapshots (no training): figures that decode as PNGs, the runs table, the
study's verdicts, nothing that points outside the file; `--log` puts the page on the sweep's
parent run; bad input exits 2 naming the field. The `cli` fixture (conftest.py) runs the real
command line in-process, in the test's own folder."""

from __future__ import annotations

import base64
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest

REPO = Path(__file__).resolve().parents[1]
MAIN = str(REPO / "runs" / "nstar" / "cpu" / "main")
LONG = str(REPO / "runs" / "nstar" / "cpu" / "long")
SMOKE = REPO / "tests" / "fixtures" / "smoke-snapshots" / "nstar" / "main"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class _Tables(HTMLParser):
    """Every <table> of a page as (id of its section, header cells, body rows of cell text)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[str, list[str], list[list[str]]]] = []
        self._section = ""
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "section":
            self._section = dict(attrs).get("id") or ""
        elif tag == "table":
            self.tables.append((self._section, [], []))
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            _, head, body = self.tables[-1]
            if head:
                body.append(self._row)
            else:  # the first row holds the headers
                head.extend(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def tables_of(page: str, section: str) -> list[tuple[list[str], list[list[str]]]]:
    parser = _Tables()
    parser.feed(page)
    return [(head, body) for where, head, body in parser.tables if where == section]


def check_self_contained(page: str) -> int:
    """Every image an embedded PNG that decodes, every link an anchor in the page, no web or
    file address anywhere; returns the number of images."""
    assert not re.search(r"(https?|file)://", page, re.I), "the page points outside itself"
    sources = re.findall(r'\ssrc="([^"]*)"', page)
    for src in sources:
        assert src.startswith("data:image/png;base64,"), src[:60]
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG_MAGIC)
    assert all(href.startswith("#") for href in re.findall(r'\shref="([^"]*)"', page))
    assert "<link" not in page and "<script" not in page
    return len(sources)


def test_report_of_a_snapshot_is_one_self_contained_page(cli):
    res = cli("report", MAIN, "--out", "main.html", "--n-boot", "20")
    assert res.exit_code == 0, res.output
    assert "main.html" in res.output and len(res.output.splitlines()) <= 2  # quiet
    page = Path("main.html").read_text(encoding="utf-8")
    assert check_self_contained(page) >= 10  # frontier, n*, FLOP split, curves, per split
    for heading in ("Frontier and n*(C)", "FLOP split", "avg/best/worst@4 curves"):
        assert f">{heading}</h2>" in page
    assert "recommendation (easy)" in page or "no recommendation (easy)" in page
    captions = re.findall(r"<figcaption>([^<]*)</figcaption>", page)
    for caption in ("the frontier f(C)", "n*(C): the compute-optimal n", "FLOPs against compute"):
        assert sum(caption in c for c in captions) == 2, (caption, captions)  # easy and hard

    ((head, rows),) = tables_of(page, "runs")
    for column in ("n", "B_p", "M", "seed", "final avg@4", "ρ", "FLOPs"):
        assert column in head, head
    snapshot = pl.read_parquet(Path(MAIN) / "runs.parquet")
    assert len(rows) == snapshot["run_key"].n_unique() == 72
    # each row is its run's last evaluation: the seeds and finals are the snapshot's
    last = snapshot.filter(pl.col("step") == pl.col("step").max().over("run_key"))
    by_name = {(r["run_name"], r["seed"]): r for r in last.iter_rows(named=True)}
    for row in rows:
        cells = dict(zip(head, row, strict=True))
        run = by_name[cells["run"], int(cells["seed"])]
        assert (int(cells["n"]), int(cells["B_p"]), int(cells["M"])) == (
            run["n"],
            run["B_p"],
            run["M"],
        )
        assert float(cells["final avg@4"]) == pytest.approx(run["eval/avg@4"], abs=1e-3)  # 3 digits

    # the verdicts the nstar study saved, claim by claim, with the effect each design detects
    findings = json.loads((REPO / "runs" / "nstar" / "cpu" / "findings.json").read_text())
    claims = [v["claim"] for v in findings["verdicts"]]
    verdicts = tables_of(page, "verdicts")
    shown = {row[0]: row for head, body in verdicts for row in body}
    assert set(claims) <= set(shown), (claims, list(shown))
    assert all("detectable at 80% power" in head for head, _ in verdicts)
    assert "runs/nstar/cpu/findings.json" in page


def test_compare_puts_two_sweeps_side_by_side_at_equal_compute(cli):
    res = cli("compare", MAIN, LONG)
    assert res.exit_code == 0, res.output
    page = Path("runs/report/nstar--cpu--main--vs--nstar--cpu--long.html").read_text()
    assert check_self_contained(page) == 4  # per split: the two frontiers, each one's own
    assert "nstar/cpu/main" in page and "nstar/cpu/long" in page
    tables = tables_of(page, "equal-compute")
    assert len(tables) == 2  # easy and hard, both in both sweeps
    for head, rows in tables:
        assert head == ["compute/rollouts", "A best", "A avg@4", "B best", "B avg@4", "B − A"]
        assert len(rows) >= 5
        for row in rows:
            assert float(row[5]) == pytest.approx(float(row[4]) - float(row[2]), abs=1.5e-3)
        computes = [float(r[0]) for r in rows]
        assert computes == sorted(computes) and computes[-1] == 65536  # main's budget
    ((head, rows),) = tables_of(page, "differs")
    assert ["seed", "0, 1, 2", "0, 1, 2, 3, 4, 5, 6, 7"] in rows


def test_equal_compute_reads_each_frontier_at_common_points():
    from isolab.study.pages.tables import equal_compute

    def runs(points: list[tuple[int, int, float, float]]) -> pl.DataFrame:
        cols = ["n", "step", "compute/rollouts", "eval/avg@4"]
        df = pl.DataFrame(points, schema=cols, orient="row")
        return df.with_columns(run_key=pl.format("r{}", "n"), seed=pl.lit(0))

    # A: n = 2 leads early, n = 8 late; B: one configuration, better by 0.1 from C = 400
    a = runs([(2, 1, 100, 0.2), (2, 2, 200, 0.3), (2, 4, 400, 0.35), (8, 1, 400, 0.4)])
    b = runs([(4, 1, 100, 0.1), (4, 2, 200, 0.25), (4, 4, 400, 0.5), (4, 8, 800, 0.9)])
    t = equal_compute(a, b, "compute/rollouts", "eval/avg@4")
    assert t["compute/rollouts"].to_list() == [100, 200, 400]  # B's 800 is past A's range
    assert t["A best"].to_list() == ["n=2 @ step 1", "n=2 @ step 2", "n=8 @ step 1"]
    assert t["B − A"].to_list() == pytest.approx([-0.1, -0.05, 0.1])


def test_report_log_puts_the_page_on_the_sweeps_parent_run(cli, tmp_path, tracking_uri):
    from mlflow.tracking import MlflowClient

    from isolab.tracking.importing import import_runs
    from isolab.tracking.snapshot import export_runs

    runs = pl.read_parquet(SMOKE / "runs.parquet").filter(pl.col("split") == "easy")
    keys = runs["run_key"].unique().sort()[:2].to_list()
    snap = export_runs(runs.filter(pl.col("run_key").is_in(keys)), tmp_path / "snap")
    experiment, imported, _ = import_runs(snap, tracking_uri=tracking_uri)
    assert (experiment, imported) == ("nstar/smoke/main", 2)

    args = ["--tracking-uri", tracking_uri, "--n-boot", "0"]
    res = cli("report", experiment, "--log", "--out", "smoke.html", *args)
    assert res.exit_code == 0, res.output
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    (parent,) = client.search_runs([exp.experiment_id], "tags.`isolab.kind` = 'sweep'")
    assert parent.info.run_id in res.output
    logged = [a.path for a in client.list_artifacts(parent.info.run_id, "report")]
    assert logged == ["report/smoke.html"]
    copy = client.download_artifacts(parent.info.run_id, "report/smoke.html", str(tmp_path))
    assert Path(copy).read_bytes() == Path("smoke.html").read_bytes()
    check_self_contained(Path(copy).read_text())

    res = cli("report", "nstar/smoke/nope", *args)  # an experiment the store lacks
    assert res.exit_code == 2 and "no MLflow experiment named 'nstar/smoke/nope'" in res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["report", "empty"], "empty: this folder holds no runs.parquet"),
        (["report", "nstar/cpu/main"], "no MLflow store at"),
        (["report", MAIN, "--metric", "eval/pass@8"], "--metric 'eval/pass@8' is not a column"),
        (["report", MAIN, "--metric", "eval_counts"], "evaluation metrics there: ['eval/avg@1'"),
        (["report", MAIN, "--x", "flops/nope"], "--x 'flops/nope' is not a column"),
        (["report", MAIN, "--n-boot", "-1"], "--n-boot -1"),
        (["report", MAIN, "--out", "empty"], "--out empty: is a folder"),
        (["compare", MAIN, "empty"], "empty: this folder holds no runs.parquet"),
        (["compare", MAIN, LONG, "--metric", "eval/nope"], "--metric 'eval/nope'"),
    ],
    ids=lambda v: " ".join(Path(a).name for a in v) if isinstance(v, list) else None,
)
def test_bad_input_exits_2_naming_the_field(cli, args, message):
    Path("empty").mkdir()
    res = cli(*args)
    assert res.exit_code == 2, res.output
    assert message in " ".join(res.output.split()), res.output
    assert not Path("runs", "report").exists()  # nothing written


def test_help_says_what_each_page_holds(cli):
    for command, words in (("report", "runs table"), ("compare", "equal compute")):
        res = cli(command, "--help")
        assert res.exit_code == 0 and words in " ".join(res.output.split()), res.output
