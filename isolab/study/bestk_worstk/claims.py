"""bestk-worstk's claims: a larger n sharpens on Easy (worst@k) and widens coverage on Hard
(best@k), each read at equal avg@4 (`isolab.study.bestk_worstk.mechanism`)."""

from __future__ import annotations

from collections.abc import Callable

from isolab.study.bestk_worstk import mechanism
from isolab.verdicts import matched
from isolab.verdicts.claim import Claim, Data, Reading, on_split
from isolab.verdicts.result import CI_LEVEL, StatResult
from isolab.vocab import EVAL_BEST, EVAL_PREFIX, EVAL_WORST


def _mechanism(split: str, metric: str) -> Callable[[Data], StatResult]:
    def run(data: Data) -> StatResult:
        return mechanism.matched_mechanism(on_split(data["main"], split), metric)

    return run


def _bestk_readings(split: str, metric: str) -> Reading:
    """κ (`mechanism.mechanism_ratio`, the test before issue 46, whose sign follows n's effect
    on avg@4), then the matched readings of `metric` on `split`."""

    def read(data: Data) -> str:
        df = on_split(data["main"], split)
        k = mechanism.mechanism_ratio(df, metric)
        kappa = (
            f"{k.estimate:+.2f} ({CI_LEVEL} CI [{k.interval[0]:+.2f}, {k.interval[1]:+.2f}]); "
            f"{k.note}"
            if k.ran and k.interval is not None
            else k.note
        )
        return (
            f"secondary reading, κ ({metric.removeprefix(EVAL_PREFIX)} per unit of avg@4 along n "
            f"beyond the compute mapping; its sign flips where a larger n lowers avg@4): {kappa}; "
            + matched.readings(df, metric)[0]
        )

    return read


CLAIMS = (
    Claim(
        id="bestk.worst_easy",
        study="bestk-worstk",
        text="on Easy sets a larger n lifts worst@k more than best@k (sharpening)",
        split="easy",
        expected="> 0",
        unit="worst@4 per doubling of n at equal avg@4",
        run=_mechanism("easy", EVAL_WORST),
        readings=_bestk_readings("easy", EVAL_WORST),
    ),
    Claim(
        id="bestk.best_hard",
        study="bestk-worstk",
        text="on Hard sets a larger n lifts best@k more than worst@k (coverage)",
        split="hard",
        expected="> 0",
        unit="best@4 per doubling of n at equal avg@4",
        run=_mechanism("hard", EVAL_BEST),
        readings=_bestk_readings("hard", EVAL_BEST),
    ),
)
