"""The verdicts that curated studies reached on an experiment's runs, read from their saved
findings (`runs/<study>/<scale>/findings.json`, written by `isolab study run`; the `cpu`
scale's are committed), so that a report shows them without re-running the tests."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from isolab.paths import bundle_dir, shown
from isolab.study.registry import SCALES, STUDIES, Study, output_dir
from isolab.verdicts.result import CI_LEVEL


@dataclass(frozen=True)
class StudyVerdicts:
    """One study's saved verdicts.

    Attributes:
        study: the study (its name, title and sweeps).
        scale: the scale of the experiment (`smoke`, `cpu`, `gpu`).
        path: the findings.json read, or None when the study has none saved at this scale.
        verdicts: the verdicts as saved (`isolab.verdicts.Verdict.to_dict`).
    """

    study: Study
    scale: str
    path: Path | None
    verdicts: list[dict]


def studies_of(experiment: str) -> list[tuple[Study, str]]:
    """The curated studies that analyse `experiment` (`<study>/<scale>/<sweep>`, as
    `isolab study run` names its sweeps) with its scale: nstar/cpu/main is read by nstar,
    n-vs-bp and bestk-worstk. Empty for an experiment of one's own."""
    parts = experiment.split("/")
    if len(parts) != 3 or parts[1] not in SCALES:
        return []
    data, scale, sweep = parts
    return [(s, scale) for s in STUDIES.values() if s.data_study == data and sweep in s.sweeps]


def findings_path(study: Study, scale: str) -> Path | None:
    """The study's findings.json: the project's (`runs/<study>/<scale>/`), else the one the
    checkout or installed package ships; None when neither exists."""
    for folder in (output_dir(study, scale), bundle_dir() / "runs" / study.name / scale):
        if (folder / "findings.json").is_file():
            return folder / "findings.json"
    return None


def saved_verdicts(experiment: str) -> list[StudyVerdicts]:
    """Per study that analyses `experiment`, its saved verdicts (an unreadable findings file
    counts as none saved)."""
    out = []
    for study, scale in studies_of(experiment):
        path = findings_path(study, scale)
        verdicts: list[dict] = []
        if path is not None:
            try:
                found = json.loads(path.read_text())
            except (OSError, ValueError):
                path, found = None, {}
            verdicts = [v for v in found.get("verdicts") or [] if isinstance(v, dict)]
        out.append(StudyVerdicts(study, scale, path, verdicts))
    return out


def verdict_table(saved: StudyVerdicts) -> pl.DataFrame:
    """One row per verdict: the claim (id and words), split, call (`per-claim only (…)` where
    it does not survive Holm over the findings table, issue 46), the effect with its interval,
    p and Holm's p, the effect the design detects with 80% power, how the test was fixed, the
    caveats and the note."""
    rows = []
    for v in saved.verdicts:
        unit = v.get("unit") or ""
        stat = _number(v.get("statistic"))
        interval = v.get("interval") or None
        ci = f" [{_sig(interval[0])}, {_sig(interval[1])}]" if interval else ""
        effect = f"{_sig(stat)}{ci} {unit}".strip() if math.isfinite(stat) else "not tested"
        p = _number(v.get("p_value"))
        mde = _number(v.get("min_detectable_effect"))
        holm = _number(v.get("holm_p"))
        rows.append(
            {
                "claim": str(v.get("claim", "")),
                "paper's claim": str(v.get("text", "")),
                "split": str(v.get("split") or "—"),
                "call": f"per-claim only ({v.get('per_claim_call')})"
                if v.get("per_claim_only")
                else str(v.get("call", "")),
                f"effect ({CI_LEVEL} CI)": effect,
                "p": f"{p:.2g}" if math.isfinite(p) else "—",
                "Holm p": f"{holm:.2g}" if math.isfinite(holm) else "—",
                "detectable at 80% power": f"{_sig(mde)} {unit}".strip()
                if math.isfinite(mde)
                else "n/a",
                "test fixed": _test_fixed(v),
                "caveats": "; ".join(v.get("caveats") or ()),
                "note": str(v.get("note") or ""),
            }
        )
    return pl.DataFrame(rows)


def describe(saved: StudyVerdicts) -> str:
    """Where the verdicts come from, in a sentence."""
    sweeps = ", ".join(saved.study.sweeps)
    if saved.path is None:
        return (
            f"Study {saved.study.name} ({saved.study.title}) has no saved findings at the "
            f"{saved.scale} scale: `isolab study run {saved.study.name} --scale {saved.scale}` "
            "writes them."
        )
    return (
        f"Study {saved.study.name} ({saved.study.title}): {len(saved.verdicts)} verdicts "
        f"tested on its sweeps {sweeps} at the {saved.scale} scale, from {shown(saved.path)}."
    )


def _test_fixed(v: dict) -> str:
    """How the test was fixed (`isolab.verdicts.preregistration`; as
    `analyses.report.registration_label` words it), `—` where the findings predate it."""
    if "revised_after_data" not in v:
        return "—"
    if v.get("revised_after_data"):
        return "revised after the data"
    return (
        f"pre-registered ({v['preregistered']})" if v.get("preregistered") else "not pre-registered"
    )


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else math.nan


def _sig(value: float) -> str:
    return f"{value:.3g}" if math.isfinite(value) else "n/a"
