"""Pre-registration: each claim's test, estimand, unit and gate in a committed file, and whether
the test was fixed before the sweep that tests it ran (issue 46).

One file per study, `studies/<study>/preregistered.yaml` (`load_registrations` reads it): per
claim, its estimand, unit, expected sign, test and gate in words, how its interval is made
(`t`, `seed-bootstrap`, `share`), the splits it sets against each other, the sweeps it reads,
and `test_fixed`: the commit (and its author date, as `git log --date=iso` prints it) that last
changed what the test computes, with the files it changed. The file also records the commit of
the data each decision was judged on.

The decision is made from the runs, not retyped: every runs table carries each run's
`start_time` and `end_time` (MLflow's, ms since the epoch), so for a claim whose sweeps' first
run started at S and first finished at F (`first_runs`):

- `preregistered`: the test was fixed before S (`Registration.source`, else None);
- `revised_after_data`: it was fixed at or after F, when a run's results existed;
- fixed between S and F (while the first runs were in flight, before any finished): neither.

`bind` also writes the claim's caveats: those registered in words (`caveats:` in the file), the
recipe confound where the splits a claim compares ran different recipes (KL and entropy are on
for Easy and the mix only, `recipe_caveat`), and the seed bootstrap's few distinct resamples where
the interval resamples seeds (`bootstrap_caveat`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Literal, get_args

import polars as pl
import yaml

from isolab.table import as_int, with_cell
from isolab.verdicts.verdict import Verdict

Data = dict[str, pl.DataFrame]
Interval = Literal["t", "seed-bootstrap", "share", "none"]
#: How a date is written in a registration: `git log --date=iso`'s author date.
DATE_FORMAT = "%Y-%m-%d %H:%M:%S %z"
#: The recipe's knobs per split: KL coefficient β and entropy coefficient (runs table columns).
RECIPE_COLUMNS = ("beta", "entropy_coef")
_FIELDS = ("estimand", "unit", "expected", "test", "gate", "interval", "sweeps", "test_fixed")
_OPTIONAL = ("compares", "caveats", "note")


@dataclass(frozen=True)
class Registration:
    """One claim as its study's preregistered.yaml fixes it.

    Attributes:
        claim: the claim's id (`isolab.study.claims.CLAIMS`).
        estimand: what the test estimates, in words.
        unit: the effect's unit (the claim's `unit`, word for word).
        expected: the paper's sign (the claim's `expected`).
        test: the test, in words.
        gate: when the test is read (its level, and what must hold before it is).
        interval: how the interval is made: `t` (a t or F reference), `seed-bootstrap` (runs
            resampled within configurations), `share` (no interval), `none` (not tested).
        sweeps: the study's sweeps the test reads (keys of the study's data).
        test_fixed: author date of the commit that last changed what the test computes.
        test_commit: that commit (None: the commit that adds this entry).
        test_files: the files that commit changed for the test.
        compares: the splits the claim sets against each other (or pools).
        caveats: caveats registered in words, each `Label: sentence`.
        path: the registration file.
    """

    claim: str
    estimand: str
    unit: str
    expected: str
    test: str
    gate: str
    interval: Interval
    sweeps: tuple[str, ...]
    test_fixed: datetime
    test_commit: str | None
    test_files: tuple[str, ...]
    compares: tuple[str, ...]
    caveats: tuple[str, ...]
    path: str

    @property
    def source(self) -> str:
        """Where the test was fixed: `<first file>@<commit>`, or the registration file itself
        for a test the entry's own commit fixes."""
        if self.test_commit is None or not self.test_files:
            return self.path
        return f"{self.test_files[0]}@{self.test_commit}"


def parse_date(value: Any, where: str) -> datetime:
    """A registration's date (`2026-12-03 15:18:31 +0000`, or a YAML timestamp) as an aware
    datetime; a ValueError names the field and the format."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    try:
        return datetime.strptime(str(value), DATE_FORMAT)
    except ValueError:
        raise ValueError(
            f"{where} = {value!r}: write it as git log --date=iso prints it, e.g. "
            "'2026-12-03 15:18:31 +0000' (quoted)."
        ) from None


def load_registrations(path: Path, shown_as: str | None = None) -> dict[str, Registration]:
    """The registrations of one study's file, by claim id. A ValueError names the file, the
    claim and the field to fix."""
    shown_as = shown_as or str(path)
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ValueError(
            f"{shown_as} is not valid YAML ({exc}); quote a value that holds ': '."
        ) from None
    for key in ("study", "date", "claims"):
        if key not in doc:
            raise ValueError(
                f"{shown_as}: no {key!r} at the top (study, date: YYYY-MM-DD, claims); see "
                "studies/nstar/preregistered.yaml."
            )
    if not isinstance(doc["date"], date):
        raise ValueError(
            f"{shown_as}: date = {doc['date']!r}: write the day it was written, YYYY-MM-DD."
        )
    return {c: _registration(c, entry or {}, shown_as) for c, entry in doc["claims"].items()}


def _registration(claim: str, entry: dict, shown_as: str) -> Registration:
    where = f"{shown_as}: claims.{claim}"
    unknown = sorted(set(entry) - {*_FIELDS, *_OPTIONAL})
    if unknown:
        raise ValueError(
            f"{where}: unknown field(s) {', '.join(unknown)}; fields: {', '.join((*_FIELDS, *_OPTIONAL))}."
        )
    missing = [f for f in _FIELDS if f not in entry]
    if missing:
        raise ValueError(
            f"{where} lacks {', '.join(missing)}: every claim registers {', '.join(_FIELDS)}."
        )
    if entry["interval"] not in get_args(Interval):
        raise ValueError(
            f"{where}.interval = {entry['interval']!r}: choose one of {', '.join(get_args(Interval))}."
        )
    fixed = entry["test_fixed"]
    if not isinstance(fixed, dict) or "date" not in fixed:
        raise ValueError(
            f"{where}.test_fixed needs a date (and the commit and files: git log --date=iso -- FILE)."
        )
    return Registration(
        claim=claim,
        estimand=str(entry["estimand"]),
        unit=str(entry["unit"]),
        expected=str(entry["expected"]),
        test=str(entry["test"]),
        gate=str(entry["gate"]),
        interval=entry["interval"],
        sweeps=tuple(entry["sweeps"]),
        test_fixed=parse_date(fixed["date"], f"{where}.test_fixed.date"),
        test_commit=fixed.get("commit"),
        test_files=tuple(fixed.get("files") or ()),
        compares=tuple(entry.get("compares") or ()),
        caveats=tuple(entry.get("caveats") or ()),
        path=shown_as,
    )


def first_runs(data: Data, sweeps: tuple[str, ...]) -> tuple[datetime | None, datetime | None]:
    """When the first run of `sweeps` started, and when the first one finished (None where the
    runs tables carry no times)."""
    frames = [data[s] for s in sweeps if s in data]
    started = [f["start_time"].min() for f in frames if "start_time" in f.columns]
    ended = [f["end_time"].min() for f in frames if "end_time" in f.columns]
    return _earliest(started), _earliest(ended)


def _earliest(ms: list[Any]) -> datetime | None:
    ms = [m for m in ms if m is not None]
    return datetime.fromtimestamp(min(ms) / 1000, timezone.utc) if ms else None


def recipe_caveat(data: Data, registration: Registration) -> str | None:
    """`Recipe confound: …` where the splits the claim compares ran different recipes (KL
    coefficient β, entropy coefficient), else None."""
    cols = ["split", *RECIPE_COLUMNS]
    frames = [
        data[s].select(cols)
        for s in registration.sweeps
        if s in data and set(cols) <= set(data[s].columns)
    ]
    if not frames or len(registration.compares) < 2:
        return None
    knobs = pl.concat(frames).unique().filter(pl.col("split").is_in(registration.compares))
    if knobs.select(RECIPE_COLUMNS).unique().height < 2:
        return None
    on = knobs.filter((pl.col("beta") > 0) | (pl.col("entropy_coef") > 0))
    groups = on.group_by(RECIPE_COLUMNS).agg(pl.col("split").unique().sort()).sort(RECIPE_COLUMNS)
    where_on = "; ".join(
        f"{' and '.join(r['split'])} (β = {r['beta']:g}, entropy {r['entropy_coef']:g})"
        for r in groups.iter_rows(named=True)
    )
    off = " and ".join(sorted(set(knobs["split"]) - set(on["split"]))) or "no split"
    return (
        f"Recipe confound: KL and entropy losses are on for {where_on} and off for {off} (the "
        "testbed's recipe), so a comparison of these splits carries the recipe with it"
    )


def bootstrap_caveat(data: Data, registration: Registration) -> str | None:
    """`Seeds: …` where the claim's interval resamples seeds within configurations and a
    configuration has few of them (S seeds give C(2S − 1, S) distinct resamples: 10 for 3)."""
    if registration.interval != "seed-bootstrap":
        return None
    frames = [data[s] for s in registration.sweeps if s in data and "seed" in data[s].columns]
    if not frames:
        return None
    seeds = min(
        as_int(with_cell(f).group_by("cell").agg(pl.col("seed").n_unique())["seed"].min())
        for f in frames
    )
    return (
        f"Seeds: the interval resamples runs within configurations, {seeds} seed(s) each, so a "
        f"configuration has at most {math.comb(2 * seeds - 1, seeds)} distinct resamples: too "
        "few for a bootstrap's tails; a test that does not resample seeds is needed (issue 46)"
    )


def bind(verdict: Verdict, registration: Registration | None, data: Data) -> Verdict:
    """The verdict with its registration read against the runs: `preregistered`,
    `revised_after_data` and the caveats (registered, recipe, seeds). A claim without a
    registration says so in a caveat."""
    if registration is None:
        return replace(
            verdict,
            caveats=(
                f"Not registered: no entry for {verdict.claim} in its study's preregistered.yaml",
            ),
        )
    started, finished = first_runs(data, registration.sweeps)
    fixed = registration.test_fixed
    derived = (recipe_caveat(data, registration), bootstrap_caveat(data, registration))
    return replace(
        verdict,
        preregistered=registration.source if started is not None and fixed < started else None,
        revised_after_data=finished is not None and fixed >= finished,
        caveats=registration.caveats + tuple(c for c in derived if c),
    )
