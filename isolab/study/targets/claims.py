"""targets' claims: different evaluation targets select different allocations (Wilhelm & Kao),
as n* on validation against a shifted set and against a judge of process quality
(`isolab.study.targets.optimum`)."""

from __future__ import annotations

from isolab.study.targets import optimum
from isolab.verdicts.claim import Claim, Data, matched_readings, on_split
from isolab.verdicts.result import StatResult
from isolab.vocab import EVAL_AVG, EVAL_JUDGE


def _targets(data: Data) -> StatResult:
    return optimum.optimum_difference(on_split(data["targets"], "hard"))


def _judge(data: Data) -> StatResult:
    return optimum.optimum_difference(on_split(data["judge"], "hard"), EVAL_AVG, EVAL_JUDGE)


CLAIMS = (
    Claim(
        id="targets.different_nstar",
        study="targets",
        text="different evaluation targets select different allocations (Wilhelm & Kao): "
        "here n* on the training distribution's validation set against a shifted one",
        split="hard",
        expected="≠ 0",
        unit="log2 n*, validation − shifted (up to three operands), at the budget",
        run=_targets,
        readings=matched_readings("targets", "hard", optimum.SHIFTED),
    ),
    Claim(
        id="targets.judge_nstar",
        study="targets",
        text="different evaluation targets select different allocations (Wilhelm & Kao): "
        "here n* on validation pass rates against a judge of process quality (the tiny PRM's "
        "mean score of every completion)",
        split="hard",
        expected="≠ 0",
        unit="log2 n*, validation avg@4 − the judge's score, at the budget",
        run=_judge,
        readings=matched_readings("judge", "hard", EVAL_JUDGE),
    ),
)
