"""A verdict: one claim of a paper, tested on these runs, called only when the data resolve it.

Every verdict is a record (`Verdict`): the claim, the split it was tested on, the test, the
estimated effect with its interval and p-value, the smallest effect the design could have
detected (80% power at α = `ALPHA`), and the call.

The call is made in two steps. `decide` reads the claim's own test: `agrees` or `disagrees` when
it rejects "no effect" at α (after Holm's correction where the test takes several looks),
`inconclusive` otherwise — the *per-claim* call. Then the claims are read as one family, every
claim of the findings table together (`isolab.verdicts.family.familywise`, issue 46: "Holm is
the call"): a per-claim call stands only where Holm's adjusted p-value is below α too; one that
does not survive is *per-claim only* and the call is `inconclusive`. A verdict also says whether
its test was fixed before the sweep that tests it ran (`preregistered`, `revised_after_data`,
`isolab.verdicts.preregistration`) and what the reader must know beside it (`caveats`). The
level, and why it is 4%, is in `isolab.verdicts.result`, with the tests' own result type
(`StatResult`). The sentences of a report are rendered from verdicts.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

from isolab.verdicts.result import ALPHA, CI_LEVEL

Call = Literal["agrees", "disagrees", "inconclusive"]
CALLS: tuple[Call, ...] = ("agrees", "disagrees", "inconclusive")


@dataclass(frozen=True)
class Verdict:
    """One claim of a paper against these runs.

    Attributes:
        claim: stable id, e.g. `nstar.grows`.
        text: the paper's claim in words.
        split: the difficulty split tested, or None.
        call: `agrees`, `disagrees` or `inconclusive`: the family-wise call once the verdict
            was read in its family (`per_claim_call` set), the per-claim call before.
        test: the test, in words (model, statistic, degrees of freedom or replicates).
        statistic: the estimated effect, in `unit`, signed so that the paper predicts `expected`.
        p_value: two-sided p-value of "no effect" (after Holm where several looks), or None.
        interval: confidence interval of the effect at 1 − α (96%; None when the test gives
            none): it excludes 0 exactly when the per-claim test calls.
        min_detectable_effect: the effect (in `unit`) this design detects with 80% power.
        unit: what the statistic measures.
        expected: the paper's sign (`> 0`, `< 0`, `≠ 0`).
        n_runs: runs the test used.
        note: why a claim is inconclusive or what the design could not see.
        per_claim_call: the call at α on the claim's own test (`decide`); None until the verdict
            is read in its family.
        holm_p: the p-value after Holm's correction over every claim of the family (None: no
            p-value, or not yet read in a family).
        preregistered: where the test was fixed before the sweep that tests it ran
            (`path@commit`), or None.
        revised_after_data: the test was written or changed after a run of that sweep finished.
        caveats: what a reader must know beside the call, each `Label: sentence`.
    """

    claim: str
    text: str
    split: str | None
    call: Call
    test: str
    statistic: float
    p_value: float | None
    interval: tuple[float, float] | None
    min_detectable_effect: float
    unit: str
    expected: str
    n_runs: int
    note: str = ""
    per_claim_call: Call | None = None
    holm_p: float | None = None
    preregistered: str | None = None
    revised_after_data: bool = False
    caveats: tuple[str, ...] = ()

    @property
    def per_claim_only(self) -> bool:
        """Significant on its own test, not after Holm over the family: shown, never bold."""
        return self.per_claim_call in ("agrees", "disagrees") and self.call == "inconclusive"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["interval"] = list(self.interval) if self.interval is not None else None
        out["caveats"] = list(self.caveats)
        out["per_claim_only"] = self.per_claim_only
        return out

    @classmethod
    def from_dict(cls, saved: dict[str, Any]) -> Verdict:
        """The verdict `to_dict` saved (findings.json); derived keys (`per_claim_only`) are
        recomputed. A KeyError names a missing field."""
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in saved.items() if k in names}
        for required in ("claim", "text", "split", "call", "test", "statistic", "p_value"):
            if required not in values:
                raise KeyError(f"saved verdict {saved.get('claim')!r} has no {required!r}")
        values["statistic"] = math.nan if values["statistic"] is None else values["statistic"]
        mde = values.get("min_detectable_effect")
        values["min_detectable_effect"] = math.nan if mde is None else mde
        interval = values.get("interval")
        values["interval"] = tuple(interval) if interval is not None else None
        values["caveats"] = tuple(values.get("caveats") or ())
        values.setdefault("unit", "")
        values.setdefault("expected", "")
        values.setdefault("n_runs", 0)
        return cls(**values)

    def call_label(self) -> str:
        """The call as a table shows it: `agrees`, `disagrees`, `inconclusive`, or `per-claim
        only (agrees)` for a call that does not survive Holm."""
        return f"per-claim only ({self.per_claim_call})" if self.per_claim_only else self.call

    def sentence(self) -> str:
        """`<claim> — here on <split>: <effect> [CI], p = …; <call>.` (what a report prints),
        followed by how the test was registered and the caveats."""
        where = f" on {self.split}" if self.split else ""
        tail = "".join(f" {s.rstrip('.')}." for s in self._after())
        if not math.isfinite(self.statistic):
            return f"{self.text} — here{where}: not tested → {self.call}.{tail}"
        ci = (
            f" ({CI_LEVEL} CI [{_num(self.interval[0])}, {_num(self.interval[1])}])"
            if self.interval is not None
            else ""
        )
        p = f", p = {self.p_value:.2g}" if self.p_value is not None else ""
        p += f", Holm p = {self.holm_p:.2g}" if self.holm_p is not None else ""
        mde = (
            f"; the design detects ±{_num(self.min_detectable_effect)} with 80% power"
            if math.isfinite(self.min_detectable_effect)
            else ""
        )
        return (
            f"{self.text} — here{where}: {_num(self.statistic)} {self.unit}{ci}{p} (expected "
            f"{self.expected}; {self.test}){mde} → {self._call_words()}.{tail}"
        )

    def _after(self) -> list[str]:
        """What a sentence says after the call: the note, how the test was fixed, caveats."""
        out = [self.note[0].upper() + self.note[1:]] if self.note else []
        if self.revised_after_data:
            out.append("Test revised after the data")
        if self.preregistered:
            out.append(f"Test fixed before its sweep ran ({self.preregistered})")
        return out + list(self.caveats)

    def _call_words(self) -> str:
        if not self.per_claim_only:
            return self.call
        return (
            f"inconclusive: per-claim only ({self.per_claim_call} at α = {ALPHA:g} on its own "
            f"test, Holm p = {self.holm_p:.2g} over the findings table)"
        )


def _num(value: float) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:.3g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.2e}"


def decide(estimate: float, p_value: float | None, expected: str, alpha: float = ALPHA) -> Call:
    """The per-claim call: `agrees` when "no effect" is rejected at `alpha` and the effect has
    the paper's sign (`expected` is `> 0` or `< 0`; `≠ 0` claims agree on any significant
    effect), `disagrees` when rejected with the other sign, else `inconclusive`. The call a
    report makes is this one read in its family (`isolab.verdicts.family.familywise`)."""
    if p_value is None or not math.isfinite(p_value) or not math.isfinite(estimate):
        return "inconclusive"
    if p_value >= alpha:
        return "inconclusive"
    if expected == "≠ 0":
        return "agrees"
    sign = 1 if expected == "> 0" else -1
    return "agrees" if sign * estimate > 0 else "disagrees"
