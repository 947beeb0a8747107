"""Print the README's table of verdicts from the committed `runs/<study>/cpu/findings.json`.

    .venv/bin/python scripts/findings_table.py [--scale cpu]

One row per claim: the notebook, the study and its runs, the claim, the call, the effect with
its interval, the smallest effect the design detects (80% power), the unit they share, the
p-value after Holm's correction over every claim of every study (`holm_p`: Holm is the call,
issue 46 — a call is bold only where it survives; one significant on its own test alone reads
"per-claim only"), how the test was fixed (pre-registered, revised after the data, or neither;
`isolab.verdicts.preregistration`), the caveats' labels, the call on the study's sensitivity
arm where it has one, named by the setting it changes (nstar's `lr-half`, lr_base/2, one seed;
allocation's `n4`, the allocators at n = 4), per claim ("—" where the arm
cannot test the claim on its own), and each n-claim's readings at equal Σlr (equal optimizer
progress) and at equal avg@4 (issue 45; `isolab.verdicts.matched`, written into the claim's
note by `isolab.study.claims.evaluate`). Below the table: the Holm family's size and each
caveat in full.
"""

from __future__ import annotations

import argparse
import json
import math
import re

from isolab import study
from isolab.study.report import registration_label
from isolab.tracking.runs import load_runs
from isolab.tracking.snapshot import is_snapshot
from isolab.verdicts import Verdict


def _fmt(x: float | None) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{x:+.2g}".replace("-", "−") if abs(x) < 1 else f"{x:+.3g}".replace("-", "−")


#: One reading in a note: "at equal Σlr: …" up to the next reading, the next split's, or the end.
_READING = re.compile(r"at equal (Σlr|avg@\d+): (.*?)(?=; at equal |; (?:Easy|Hard), |$)")
_SPLIT = re.compile(r"(Easy|Hard), at equal C:")


def _readings(note: str | None) -> dict[str, str]:
    """{"Σlr": …, "avg": …} of a note's secondary readings, shortened for a table cell (per
    split where the note gives Easy's and Hard's)."""
    if not note or "secondary readings" not in note:
        return {}
    text = note.split("secondary readings", 1)[1]
    starts = [(m.start(), m.group(1)) for m in _SPLIT.finditer(text)] or [(0, "")]
    out: dict[str, list[str]] = {"Σlr": [], "avg": []}
    for i, (start, split) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(text)
        for kind, value in _READING.findall(text[start:end]):
            value = re.sub(r" \(96% CI (\[[^\]]*\])\)", r" \1", value)
            value = re.sub(r" per doubling of .*$| \(Σlr alone.*$", "", value).strip(" ;")
            if value.startswith("the test itself"):  # interference: its own test is matched
                value = "the claim's own test (equal gain and level)"
            value = value.replace("-", "−")
            key = "Σlr" if kind == "Σlr" else "avg"
            out[key].append(f"{split}: {value}" if split else value)
    return {k: "; ".join(v)[:120] for k, v in out.items() if v}


#: How the table names each sensitivity arm (`Study.sensitivity`): the one setting it changes.
ARMS = {"lr-half": "lr_base/2", "n4": "allocators at n = 4"}


def _runs(s: study.Study, scale: str) -> str:
    counts = []
    for sweep in s.sweeps:
        snap = study.find_snapshot(s, scale, sweep)
        counts.append(str(load_runs(snap)["run_key"].n_unique()) if is_snapshot(snap) else "0")
    return " + ".join(counts) if not s.source else f"{s.source}'s runs"


def rows(scale: str) -> list[str]:
    """The table's lines, then the Holm family's size and the caveats in full."""
    out = [
        "| notebook | study (runs) | claim tested | call | effect [96% CI] | detectable | unit "
        "| p, Holm | test fixed | caveats | sensitivity arm | at equal Σlr | at equal avg@4 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    found, arms, family, caveats = {}, {}, None, {}
    for s in study.STUDIES.values():
        path = study.output_dir(s, scale) / "findings.json"
        if path.exists():
            findings = json.loads(path.read_text())
            found[s.name] = [Verdict.from_dict(v) for v in findings["verdicts"]]
            family = findings.get("holm_family") or family
            for sweep, arm in findings.get("sensitivity", {}).items():
                for v in arm["verdicts"]:
                    arms[(s.name, v["claim"], v["split"])] = {**v, "arm": sweep}
    for s in study.STUDIES.values():
        for i, v in enumerate(found.get(s.name, [])):
            lead = (
                f"[{s.notebook}](notebooks/{s.notebook}.ipynb) | `{s.name}` ({_runs(s, scale)})"
                if i == 0
                else " | "
            )
            out.append(f"| {lead} | {_cells(v, arms.get((s.name, v.claim, v.split)))} |")
            caveats.update(dict.fromkeys(v.caveats))  # each once, in the table's order
    return out + _legend(family, list(caveats))


def _cells(v: Verdict, arm: dict | None) -> str:
    """One verdict's cells after the study's: claim … at equal avg@4."""
    call = f"**{v.call}**" if v.call in ("agrees", "disagrees") else v.call_label()
    lo, hi = v.interval or (None, None)
    effect = (
        f"{_fmt(v.statistic)} [{_fmt(lo)}, {_fmt(hi)}]"
        if math.isfinite(v.statistic)
        else (v.note or "not run")[:80]
    )
    split = f" ({v.split})" if v.split else ""
    mde = v.min_detectable_effect
    detectable = f"{mde:.2g}" if math.isfinite(mde) else "—"
    p_text = f"{v.holm_p:.2g}" if v.holm_p is not None else "—"
    fixed = registration_label(v).split(" (")[0]
    labels = ", ".join(c.split(":", 1)[0] for c in v.caveats) or "—"
    arm_call = (
        f"{arm['call']} ({ARMS.get(arm['arm'], arm['arm'])})"
        if arm and arm["p_value"] is not None
        else "—"
    )
    read = _readings(v.note)
    return (
        f"{v.text}{split} | {call} | {effect} | {detectable} | {v.unit} | {p_text} | {fixed} "
        f"| {labels} | {arm_call} | {read.get('Σlr', '—')} | {read.get('avg', '—')}"
    )


def _legend(family: dict | None, caveats: list[str]) -> list[str]:
    """The lines below the table: the Holm family, and every caveat in full."""
    out = [""]
    if family:
        out.append(
            f"Holm is the call: p-values adjusted over the {family['tested']} claims with a "
            f"p-value among the {family['claims']} in the table ({len(family['studies'])} "
            'studies); a claim significant on its own test but not after Holm is "per-claim '
            'only", not bold.'
        )
    return out + [f"- {c}." for c in caveats]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="cpu", choices=["smoke", "cpu", "gpu"])
    print("\n".join(rows(parser.parse_args().scale)))


if __name__ == "__main__":
    main()
