"""mixtures' claims: n* on a mix of Easy and Hard lies between theirs, and on problems the base
never solves a larger n expands coverage (best@k) (`isolab.study.mixtures.optimum`)."""

from __future__ import annotations

from isolab.study.mixtures import optimum
from isolab.verdicts import matched
from isolab.verdicts.claim import Claim, Data, matched_readings, on_split
from isolab.verdicts.result import CI_LEVEL, StatResult


def _mix_between(data: Data) -> StatResult:
    return optimum.between(data["main"], on_split(data["mix"], optimum.MIX))


def _never_coverage(data: Data) -> StatResult:
    return optimum.coverage_expansion(on_split(data["never"], "never"))


def _never_readings(data: Data) -> str:
    """The claim the `never` runs support (a larger n keeps coverage at equal compute,
    `optimum.coverage_keeps`), then the matched readings of best@k."""
    df = on_split(data["never"], "never")
    best, avg = optimum.coverage_metric(df, "best"), optimum.coverage_metric(df, "avg")
    if best is None or avg is None:
        return ""
    keeps = optimum.coverage_keeps(df)
    said = (
        f"{keeps.estimate:+.3f} {best} per doubling of n at the budget ({CI_LEVEL} CI "
        f"[{keeps.interval[0]:+.3f}, {keeps.interval[1]:+.3f}], p = {keeps.p_value:.2g}); "
        f"{keeps.note}"
        if keeps.ran and keeps.interval is not None and keeps.p_value is not None
        else keeps.note
    )
    return (
        f"secondary reading, the claim these runs support (a larger n keeps coverage at equal "
        f"compute, not a call): {said}; {matched.readings(df, best, level=avg)[0]}"
    )


CLAIMS = (
    Claim(
        id="mixtures.nstar_between",
        study="mixtures",
        text="on a heterogeneous mixture of Easy and Hard problems, n* lies between "
        "Easy's and Hard's (IsoCompute Playbook)",
        split="mix",
        expected="> 0",
        unit="doublings of n that the mix's n* lies inside the range of Easy's and Hard's "
        "(the nearer end; negative: outside), at the budget",
        run=_mix_between,
        readings=matched_readings("mix", optimum.MIX),
    ),
    Claim(
        id="mixtures.never_coverage",
        study="mixtures",
        text="on problems the base model does not solve, a larger n expands coverage "
        "(best@k): it finds the rare successes (IsoCompute Playbook)",
        split="never",
        expected="> 0",
        unit="each run's highest best@k over its checkpoints (the largest k evaluated: 16 at "
        "cpu scale) per doubling of n",
        run=_never_coverage,
        readings=_never_readings,
    ),
)
