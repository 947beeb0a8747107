"""A verdict: one claim of a paper, tested on these runs, called only when the data resolve it.

Every verdict is a record (`Verdict`): the claim, the split it was tested on, the test, the
estimated effect with its interval and p-value, the smallest effect the design could have
detected (80% power at α = `ALPHA`), and the call — `agrees` or `disagrees` when the test rejects
"no effect" at α (after Holm's correction where the test takes several looks), `inconclusive`
otherwise (`decide`). The level, and why it is 4%, is in `isolab.verdicts.result`, with the
tests' own result type (`StatResult`). The sentences of a report are rendered from verdicts.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
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
        call: `agrees`, `disagrees` or `inconclusive`.
        test: the test, in words (model, statistic, degrees of freedom or replicates).
        statistic: the estimated effect, in `unit`, signed so that the paper predicts `expected`.
        p_value: two-sided p-value of "no effect" (after Holm where several looks), or None.
        interval: confidence interval of the effect at 1 − α (96%; None when the test gives
            none): it excludes 0 exactly when the test calls.
        min_detectable_effect: the effect (in `unit`) this design detects with 80% power.
        unit: what the statistic measures.
        expected: the paper's sign (`> 0`, `< 0`, `≠ 0`).
        n_runs: runs the test used.
        note: why a claim is inconclusive or what the design could not see.
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

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["interval"] = list(self.interval) if self.interval is not None else None
        return out

    def sentence(self) -> str:
        """`<claim> — here on <split>: <effect> [CI], p = …; <call>.` (what a report prints)."""
        where = f" on {self.split}" if self.split else ""
        note = f" {self.note[0].upper()}{self.note[1:]}" if self.note else ""
        if not math.isfinite(self.statistic):
            return f"{self.text} — here{where}: not tested → {self.call}.{note}"
        ci = (
            f" ({CI_LEVEL} CI [{_num(self.interval[0])}, {_num(self.interval[1])}])"
            if self.interval is not None
            else ""
        )
        p = f", p = {self.p_value:.2g}" if self.p_value is not None else ""
        mde = (
            f"; the design detects ±{_num(self.min_detectable_effect)} with 80% power"
            if math.isfinite(self.min_detectable_effect)
            else ""
        )
        return (
            f"{self.text} — here{where}: {_num(self.statistic)} {self.unit}{ci}{p} (expected "
            f"{self.expected}; {self.test}){mde} → {self.call}.{note}"
        )


def _num(value: float) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:.3g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.2e}"


def decide(estimate: float, p_value: float | None, expected: str, alpha: float = ALPHA) -> Call:
    """`agrees` when "no effect" is rejected at `alpha` and the effect has the paper's sign
    (`expected` is `> 0` or `< 0`; `≠ 0` claims agree on any significant effect), `disagrees`
    when rejected with the other sign, else `inconclusive`."""
    if p_value is None or not math.isfinite(p_value) or not math.isfinite(estimate):
        return "inconclusive"
    if p_value >= alpha:
        return "inconclusive"
    if expected == "≠ 0":
        return "agrees"
    sign = 1 if expected == "> 0" else -1
    return "agrees" if sign * estimate > 0 else "disagrees"
