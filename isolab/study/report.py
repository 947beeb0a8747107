"""What a study's analysis returns (`Report`: figures, tables, findings, verdicts) and the
small formatting helpers every analysis shares."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import polars as pl
from matplotlib.figure import Figure

from isolab.verdicts import Verdict
from isolab.verdicts.result import CI_LEVEL
from isolab.vocab import EVAL_AVG, ROLLOUTS

Y = EVAL_AVG
X = ROLLOUTS


@dataclass
class Report:
    """What a study found.

    Attributes:
        study, scale: which study, at which scale.
        figures: name → figure (saved as `runs/<study>/<scale>/figures/<name>.png`).
        tables: name → table (saved as CSV beside the figures' folder).
        findings: the numbers behind the sentences (saved as findings.json).
        summary: sentences stating the result, built from `findings`.
        versus_paper: one sentence per claim of the papers, rendered from `verdicts`.
        verdicts: the claims tested (`isolab.verdicts.Verdict`): machine-readable, saved in
            findings.json under `verdicts`. An analysis adds them with their per-claim calls;
            `isolab.study.analyse` binds them (`set_verdicts`): registration, caveats, and the
            call read in the family of every claim (Holm is the call).
        sensitivity: per sensitivity sweep (`Study.sensitivity`), the same claims tested on its
            runs alone (`analyses.sensitivity`), per claim: outside the Holm family.
    """

    study: str
    scale: str
    figures: dict[str, Figure] = field(default_factory=dict)
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    findings: dict[str, Any] = field(default_factory=dict)
    summary: list[str] = field(default_factory=list)
    versus_paper: list[str] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    sensitivity: dict[str, list[Verdict]] = field(default_factory=dict)

    def add_verdicts(self, verdicts: list[Verdict]) -> None:
        """Record the claims' verdicts: in `verdicts`, in the findings, as sentences."""
        self.set_verdicts(self.verdicts + verdicts)

    def set_verdicts(self, verdicts: list[Verdict]) -> None:
        """Replace the claims' verdicts (by their bound versions) everywhere the report states
        them: `verdicts`, the findings and the sentences."""
        self.verdicts = list(verdicts)
        self.findings["verdicts"] = [v.to_dict() for v in self.verdicts]
        self.versus_paper = [v.sentence() for v in self.verdicts]

    def figure(self, name: str) -> Figure:
        """The figure `name` (a KeyError lists the names)."""
        if name not in self.figures:
            raise KeyError(f"no figure {name!r}; figures: {', '.join(self.figures)}")
        return self.figures[name]

    def summary_text(self) -> str:
        lines = [f"- {s}" for s in self.summary]
        lines += [f"- Paper vs here: {s}" for s in self.versus_paper]
        return "\n".join(lines)

    def markdown(self) -> str:
        """Findings as Markdown (runs/<study>/<scale>/findings.md)."""
        title = f"# {self.study} ({self.scale} scale)" if self.scale else f"# {self.study}"
        out = [title, "", "## Findings", ""]
        out += [f"- {s}" for s in self.summary]
        if self.verdicts:
            out += verdict_section(self.verdicts, self.findings.get("holm_family"))
        elif self.versus_paper:
            out += ["", AGAINST, ""]
            out += [f"- {s}" for s in self.versus_paper]
        for sweep, verdicts in self.sensitivity.items():
            out += ["", f"## Sensitivity arm `{sweep}` (per-claim calls)", "", VERDICT_HEAD]
            out += [verdict_row(v) for v in verdicts]
        out += ["", "## Figures", ""]
        out += [f"![{n}](figures/{n}.png)" for n in self.figures]
        return "\n".join(out) + "\n"


AGAINST = "## Against the papers"
VERDICT_HEAD = (
    f"| claim | split | call | effect ({CI_LEVEL} CI) | p | p, Holm | detectable at 80% power "
    "| test fixed |\n|---|---|---|---|---|---|---|---|"
)


def verdict_section(verdicts: list[Verdict], family: dict | None = None) -> list[str]:
    """The `## Against the papers` section of findings.md: the verdicts' table (bold only a
    call that survives Holm over `family`, the findings table's claims), the family's size, and
    one sentence per verdict."""
    out = ["", AGAINST, "", VERDICT_HEAD, *[verdict_row(v) for v in verdicts], ""]
    if family:
        out += [
            f"Holm is the call: p-values adjusted over the {family['tested']} claims with a "
            f"p-value among the {family['claims']} of {len(family['studies'])} studies' saved "
            "findings at this scale; a claim significant on its own but not after Holm is "
            "per-claim only, not bold.",
            "",
        ]
    return out + [f"- {v.sentence()}" for v in verdicts]


def restate_markdown(text: str, verdicts: list[Verdict], family: dict | None) -> str:
    """findings.md with its `## Against the papers` section rendered again from `verdicts`
    (the rest, which the analysis wrote, unchanged); unchanged where it has no such section."""
    start = text.find(f"\n{AGAINST}\n")
    if start < 0:
        return text
    end = text.find("\n## ", start + len(AGAINST) + 2)
    rest = "\n" + text[end:] if end >= 0 else "\n"
    return text[:start] + "\n".join(verdict_section(verdicts, family)) + rest


def verdict_row(v: Verdict) -> str:
    """One verdict as a row of `VERDICT_HEAD`: the call bold only where it survives Holm."""
    ci = f" [{fmt_sig(v.interval[0])}, {fmt_sig(v.interval[1])}]" if v.interval else ""
    p = f"{v.p_value:.2g}" if v.p_value is not None else "—"
    holm = f"{v.holm_p:.2g}" if v.holm_p is not None else "—"
    effect = f"{fmt_sig(v.statistic)}{ci} {v.unit}" if math.isfinite(v.statistic) else "not tested"
    call = f"**{v.call}**" if v.call in ("agrees", "disagrees") else v.call_label()
    return (
        f"| {v.text} | {v.split or '—'} | {call} | {effect} | {p} | {holm} | "
        f"{fmt_sig(v.min_detectable_effect)} | {registration_label(v)} |"
    )


def registration_label(v: Verdict) -> str:
    """How the claim's test was fixed (`isolab.verdicts.preregistration`), in a table cell:
    `revised after the data`, `pre-registered (<where>)`, or `not pre-registered` (fixed after
    the first run of its sweep started, before any finished; or not registered at all); `—`
    for a verdict never bound (a sensitivity arm's, read per claim)."""
    if v.per_claim_call is None:
        return "—"
    if v.revised_after_data:
        return "revised after the data"
    if v.preregistered:
        return f"pre-registered ({v.preregistered})"
    return "not pre-registered"


def figure_row(ncols: int = 1, width: float = 6.0, height: float = 4.2) -> tuple[Figure, list]:
    fig = Figure(figsize=(width * ncols, height), layout="constrained")
    return fig, list(fig.subplots(1, ncols, squeeze=False)[0])


def fmt(value: float, digits: int = 3) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def fmt_sig(value: float) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.3g}"


def fmt_compute(value: float) -> str:
    """A compute in rollouts: 8,192 (plain below a million)."""
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:,.0f}" if value < 1e6 else f"{value:.3g}"


def splits_of(df: pl.DataFrame) -> list[str]:
    order = {"easy": 0, "hard": 1}
    return sorted(df["split"].unique().to_list(), key=lambda s: (order.get(s, 2), s))


def n_boot(scale: str) -> int:
    return 50 if scale == "smoke" else 200


def add_noise(rep: Report, df: pl.DataFrame, metric: str = EVAL_AVG) -> None:
    """The noise of one run's final `metric` per split (evaluation sampling, seed to seed) into
    the findings and a summary sentence: the scale every comparison of the report is read on."""
    from isolab.verdicts.noise import noise_model

    parts = []
    for split in splits_of(df) if "split" in df.columns else [None]:
        sdf = df if split is None else df.filter(pl.col("split") == split)
        n = noise_model(sdf).get(metric)
        if n is None:
            continue
        rep.findings.setdefault("noise", {})[split or "all"] = {
            "metric": metric,
            "eval_sd": n.eval_sd,
            "total_sd": n.total_sd,
            "train_sd": n.train_sd,
            "dof": n.dof,
            "source": n.source,
        }
        seeds = f"between seeds {fmt(n.total_sd)} ({n.dof} df)" if n.dof else "no seed replicates"
        parts.append(f"{split or 'all runs'}: evaluation {fmt(n.eval_sd)}, {seeds}")
    if parts:
        rep.summary.append(
            f"Noise of one run's final {metric.split('/')[-1]}: " + "; ".join(parts) + "."
        )
