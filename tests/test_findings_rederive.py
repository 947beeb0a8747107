"""The rules that bind every finding (issue 46), and every committed call re-derived.

Holm is the call: a claim is bold only where it survives Holm over every claim of the findings
table; a test's registration (`studies/<study>/preregistered.yaml`) is read against the runs'
own start and end times; caveats come from the registration and from the runs (recipe
confound, seed bootstrap). The last tests load the committed snapshots, run every claim again
with its registration and the cross-study family, and compare with each committed
findings.json: a call, an effect or a Holm p-value that differs fails.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from isolab import study
from isolab.study import claims
from isolab.study.pipeline import family_verdicts, registered_verdicts, restate_family
from isolab.tracking.runs import load_runs
from isolab.verdicts import Verdict
from isolab.verdicts.family import familywise
from isolab.verdicts.preregistration import (
    DATE_FORMAT,
    Registration,
    bind,
    first_runs,
    load_registrations,
    parse_date,
)

REPO = Path(__file__).resolve().parents[1]
SCALE = "cpu"
#: The numbers a re-derivation must reach again (float tolerance: BLAS kernels differ between
#: CPUs in the last digits), and the fields it must reach exactly.
NUMBERS = ("statistic", "p_value", "holm_p", "interval", "min_detectable_effect")
EXACT = (
    "claim",
    "split",
    "call",
    "per_claim_call",
    "per_claim_only",
    "preregistered",
    "revised_after_data",
    "caveats",
)


def _verdict(claim: str, call: str, p: float | None, **kw) -> Verdict:
    return Verdict(claim, "", None, call, "", 0.1, p, None, 0.02, "", "> 0", 10, **kw)  # type: ignore[arg-type]


def _ms(text: str) -> int:
    return int(datetime.strptime(text, DATE_FORMAT).timestamp() * 1000)


def _registration(fixed: str, **kw) -> Registration:
    fields = {
        "claim": "x.y",
        "estimand": "",
        "unit": "",
        "expected": "> 0",
        "test": "",
        "gate": "",
        "interval": "t",
        "sweeps": ("main",),
        "test_commit": "abc1234",
        "test_files": ("isolab/verdicts/x.py",),
        "compares": (),
        "caveats": (),
        "path": "studies/x/preregistered.yaml",
    } | kw
    return Registration(test_fixed=parse_date(fixed, "test"), **fields)


def _runs(split_recipe: dict[str, tuple[float, float]], seeds: int = 3) -> pl.DataFrame:
    """Two configurations per split, `seeds` runs each, started 10:00 and finished 10:30."""
    rows = [
        {
            "run_key": f"{s}-{n}-{k}",
            "split": s,
            "n": n,
            "seed": k,
            "beta": b,
            "entropy_coef": e,
            "start_time": _ms("2026-12-03 10:00:00 +0000"),
            "end_time": _ms("2026-12-03 10:30:00 +0000"),
        }
        for s, (b, e) in split_recipe.items()
        for n in (2, 8)
        for k in range(seeds)
    ]
    return pl.DataFrame(rows)


# ---- Holm is the call --------------------------------------------------------------------------
def test_a_call_stands_only_where_it_survives_holm_over_the_family():
    family = [
        _verdict("a", "agrees", 0.01),
        _verdict("b", "disagrees", 0.03),
        _verdict("c", "inconclusive", 0.5),
        _verdict("d", "agrees", None),
    ]
    a, b, c, d = familywise(family)
    assert (a.call, a.holm_p, a.per_claim_only) == ("agrees", pytest.approx(0.03), False)
    assert (b.call, b.per_claim_call, b.per_claim_only) == ("inconclusive", "disagrees", True)
    assert b.holm_p == pytest.approx(0.06) and b.call_label() == "per-claim only (disagrees)"
    assert (c.call, c.per_claim_only) == ("inconclusive", False)
    assert (d.call, d.holm_p) == ("agrees", None)  # a share without a p-value keeps its call
    assert familywise([a, b, c, d]) == [a, b, c, d]  # reading a family twice changes nothing
    assert (
        "per-claim only (disagrees at α = 0.04" in b.sentence() and "Holm p = 0.06" in b.sentence()
    )


def test_a_saved_verdict_reads_back_as_it_was_written():
    (v,) = familywise([_verdict("a", "agrees", 0.01, caveats=("Seeds: few",), preregistered="f@c")])
    saved = json.loads(json.dumps(v.to_dict()))
    assert saved["per_claim_only"] is False and saved["holm_p"] == pytest.approx(0.01)
    assert Verdict.from_dict(saved) == v
    with pytest.raises(KeyError, match="'call'"):
        Verdict.from_dict({k: x for k, x in saved.items() if k != "call"})


# ---- pre-registration -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fixed", "preregistered", "revised"),
    [
        ("2026-12-03 09:59:59 +0000", "isolab/verdicts/x.py@abc1234", False),  # before the start
        ("2026-12-03 10:10:00 +0000", None, False),  # while the first runs were in flight
        ("2026-12-03 10:30:00 +0000", None, True),  # once a run had finished
    ],
)
def test_a_registration_is_read_against_the_runs_own_times(fixed, preregistered, revised):
    data = {"main": _runs({"easy": (0.0, 0.0)})}
    started, finished = first_runs(data, ("main",))
    assert started == datetime(2026, 12, 3, 10, tzinfo=timezone.utc)
    assert finished == datetime(2026, 12, 3, 10, 30, tzinfo=timezone.utc)
    v = bind(_verdict("x.y", "agrees", 0.01), _registration(fixed), data)
    assert (v.preregistered, v.revised_after_data) == (preregistered, revised)


def test_caveats_name_the_recipe_confound_and_a_bootstrap_of_three_seeds():
    mixed = {"main": _runs({"easy": (0.02, 0.005), "hard": (0.0, 0.0)})}
    reg = _registration(
        "2026-12-01 00:00:00 +0000",
        compares=("easy", "hard"),
        interval="seed-bootstrap",
        caveats=("Old testbed: pool 4,000",),
    )
    old, recipe, seeds = bind(_verdict("x.y", "agrees", 0.01), reg, mixed).caveats
    assert old == "Old testbed: pool 4,000"
    assert recipe.startswith("Recipe confound: KL and entropy losses are on for easy (β = 0.02")
    assert "off for hard" in recipe
    assert "3 seed(s) each" in seeds and "at most 10 distinct resamples" in seeds
    same = {"main": _runs({"easy": (0.0, 0.0), "hard": (0.0, 0.0)}, seeds=4)}
    (seeds4,) = bind(_verdict("x.y", "agrees", 0.01), replace(reg, caveats=()), same).caveats
    assert "at most 35 distinct resamples" in seeds4  # no recipe caveat: the splits ran alike
    unregistered = bind(_verdict("x.y", "agrees", 0.01), None, same)
    assert unregistered.caveats[0].startswith("Not registered: no entry for x.y")


def test_a_bad_registration_names_the_field_to_fix(tmp_path):
    path = tmp_path / "preregistered.yaml"
    path.write_text("study: x\ndate: 2026-12-05\nclaims:\n  x.y: {estimand: e, unit: u}\n")
    with pytest.raises(ValueError, match=r"claims.x.y lacks expected, test, gate, interval"):
        load_registrations(path)
    path.write_text("study: x\nclaims: {}\n")
    with pytest.raises(ValueError, match=r"no 'date' at the top"):
        load_registrations(path)
    with pytest.raises(ValueError, match=r"write it as git log --date=iso prints it"):
        parse_date("3 Dec 2026", "test_fixed.date")


# ---- the family across studies: analyse reads it, save restates it ------------------------------
def test_saving_one_study_restates_every_saved_findings_in_one_family(tmp_path, monkeypatch):
    monkeypatch.setenv("ISOLAB_RESULTS_DIR", str(tmp_path))
    # alone each study's calls stand; together (Holm over 3) mixtures.b's 0.03 becomes 0.06
    saved = {
        "nstar": [_verdict("nstar.a", "agrees", 0.001), _verdict("nstar.c", "inconclusive", 0.5)],
        "mixtures": [_verdict("mixtures.b", "agrees", 0.03)],
    }
    folder = {name: study.output_dir(study.get(name), "smoke") for name in saved}
    for name, verdicts in saved.items():
        folder[name].mkdir(parents=True)
        findings = {"verdicts": [v.to_dict() for v in verdicts]}
        (folder[name] / "findings.json").write_text(json.dumps(findings))
        md = "# x\n\n## Against the papers\n\nSTALE ROWS\n\n## Figures\n\nfig\n"
        (folder[name] / "findings.md").write_text(md)
    assert sorted(family_verdicts("smoke")) == ["mixtures", "nstar"]
    restate_family("smoke")
    mix = json.loads((folder["mixtures"] / "findings.json").read_text())
    (b,) = mix["verdicts"]
    assert (b["call"], b["per_claim_call"]) == ("inconclusive", "agrees")
    assert b["holm_p"] == pytest.approx(0.06) and b["per_claim_only"] is True
    assert mix["holm_family"] == {"claims": 3, "tested": 3, "studies": ["mixtures", "nstar"]}
    md = (folder["mixtures"] / "findings.md").read_text()
    assert "STALE ROWS" not in md and "| per-claim only (agrees) |" in md
    assert md.endswith("## Figures\n\nfig\n")  # the rest of the file is the analysis's
    nstar = json.loads((folder["nstar"] / "findings.json").read_text())
    assert nstar["verdicts"][0]["call"] == "agrees"
    assert "| **agrees** |" in (folder["nstar"] / "findings.md").read_text()


# ---- every committed call, re-derived ----------------------------------------------------------
@pytest.fixture(scope="module")
def rederived() -> tuple[dict[str, list[Verdict]], dict[str, dict[str, list[Verdict]]], float]:
    """Every study's claims run again on its committed cpu snapshots (as `isolab study run`
    reads them), bound to their registrations and read as one family; each sensitivity arm's
    claims on the arm alone. Returns (main verdicts, arm verdicts, seconds taken)."""
    t0 = time.perf_counter()
    family, arms = {}, {}
    for s in study.STUDIES.values():
        data = {w: load_runs(REPO / "runs" / s.data_study / SCALE / w) for w in s.sweeps}
        family[s.name] = registered_verdicts(s, claims.evaluate(s.name, data), data)
        for sweep in s.sensitivity:
            arm = load_runs(REPO / "runs" / s.data_study / SCALE / sweep)
            arms.setdefault(s.name, {})[sweep] = claims.evaluate(s.name, {"main": arm})
    bound = iter(familywise([v for verdicts in family.values() for v in verdicts]))
    family = {name: [next(bound) for _ in verdicts] for name, verdicts in family.items()}
    return family, arms, time.perf_counter() - t0


def differences(fresh: list[Verdict], committed: list[dict], fields=EXACT) -> list[str]:
    """Where re-derived verdicts differ from committed ones: `claim: field new != old`."""
    if [v.claim for v in fresh] != [c["claim"] for c in committed]:
        return [f"claims {[v.claim for v in fresh]} != {[c['claim'] for c in committed]}"]
    out = []
    for v, old in zip(fresh, committed, strict=True):
        new = v.to_dict()
        out += [
            f"{v.claim}: {k} {new[k]!r} != {old.get(k)!r}" for k in fields if new[k] != old.get(k)
        ]
        for k in (k for k in NUMBERS if k in new):
            a, b = _numbers(new[k]), _numbers(old.get(k))
            if a != pytest.approx(b, rel=1e-6, nan_ok=True):
                out.append(f"{v.claim}: {k} {a} != {b}")
    return out


def _numbers(value) -> list[float]:
    values = value if isinstance(value, list) else [value]
    return [math.nan if v is None else float(v) for v in values]


def _committed(name: str) -> dict:
    return json.loads((REPO / "runs" / name / SCALE / "findings.json").read_text())


def test_every_committed_call_is_rederived_from_the_snapshots(rederived, capsys):
    family, arms, seconds = rederived
    diffs = []
    for name, verdicts in family.items():
        committed = _committed(name)
        diffs += [f"{name}: {d}" for d in differences(verdicts, committed["verdicts"])]
        for sweep, arm in arms.get(name, {}).items():
            saved = committed["sensitivity"][sweep]["verdicts"]
            diffs += [
                f"{name}/{sweep}: {d}" for d in differences(arm, saved, ("claim", "split", "call"))
            ]
    assert not diffs, (
        "re-derived calls differ from the committed findings (re-run `isolab study run NAME`):\n"
        + "\n".join(diffs)
    )
    with capsys.disabled():
        print(
            f"\nre-derived {sum(map(len, family.values()))} claims from the snapshots in {seconds:.1f} s"
        )


def test_the_committed_family_is_every_claim_of_every_study(rederived):
    family, _, _ = rederived
    assert sorted(v.claim for verdicts in family.values() for v in verdicts) == sorted(
        claims.CLAIMS
    )
    tested = sum(v.p_value is not None for verdicts in family.values() for v in verdicts)
    for name in family:
        assert _committed(name)["holm_family"] == {
            "claims": len(claims.CLAIMS),
            "tested": tested,
            "studies": sorted(study.STUDIES),
        }
    md = (REPO / "runs" / "n-vs-bp" / SCALE / "findings.md").read_text()
    for v in family["n-vs-bp"]:  # findings.md bolds exactly the calls that survive Holm
        bold = f"| **{v.call}** |" in md.split(v.text, 1)[1].split("\n", 1)[0]
        assert bold == (v.call in ("agrees", "disagrees")), v.claim


def test_a_changed_call_or_effect_is_caught(rederived):
    family, _, _ = rederived
    committed = _committed("n-vs-bp")["verdicts"]
    assert not differences(family["n-vs-bp"], committed)
    flipped = [dict(committed[0], call="agrees")] + committed[1:]
    moved = [dict(committed[0], statistic=committed[0]["statistic"] * 1.01)] + committed[1:]
    assert differences(family["n-vs-bp"], flipped) == [
        f"{committed[0]['claim']}: call {committed[0]['call']!r} != 'agrees'"
    ]
    assert "statistic" in differences(family["n-vs-bp"], moved)[0]


def test_every_claim_is_registered_with_its_unit_sign_and_the_data_it_was_judged_on():
    """Each claim has one registration, with the claim's own unit and sign (a changed estimand
    must be registered again); each file's record of the data names the runs' real times."""
    registered = {}
    for s in study.STUDIES.values():
        path = study.registry.preregistration_path(s)
        record = _data_record(path)
        for claim, reg in load_registrations(path).items():
            c = claims.CLAIMS[claim]
            assert (c.study, c.unit, c.expected) == (s.name, reg.unit, reg.expected), claim
            assert set(reg.sweeps) <= set(record) <= set(s.sweeps), (claim, reg.sweeps)
            registered[claim] = reg
        for sweep, times in record.items():
            started, finished = first_runs({sweep: load_runs(REPO / times["snapshot"])}, (sweep,))
            assert _second(started) == parse_date(times["first_run_started"], sweep), (path, sweep)
            assert _second(finished) == parse_date(times["first_run_finished"], sweep), (
                path,
                sweep,
            )
    assert sorted(registered) == sorted(claims.CLAIMS)


def _second(when: datetime | None) -> datetime | None:
    """To the second, as a registration records it."""
    return when.replace(microsecond=0) if when is not None else None


def _data_record(path: Path) -> dict:
    import yaml

    return yaml.safe_load(path.read_text())["data"]
