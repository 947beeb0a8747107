"""The regret of the advice at 2× and 4× extrapolation, per committed study (issue 32, part 3).

    .venv/bin/python scripts/recommend_regret.py

ScaleRL's protocol (`isolab.frontier.validate`): on the runs of one setting, C is the largest
compute every run reaches; the allocation is predicted at C from the evaluations at ≤ C/2 (2×)
and ≤ C/4 (4×) alone and scored by its regret, the seed-mean avg@4 at C of the measured best
minus that of the predicted allocation, against the noise of that difference (the standard
error from the seed spread, else the evaluation's binomial noise): within noise when the regret
is at most 2 of those standard errors. Prints one markdown table; a row per study, setting and
factor:

- nstar/cpu/main, per split: `recommend` on the whole grid (allocation (n, B_p)), and on each
  B_p alone (allocation n);
- n-vs-bp/cpu (the same runs, nstar/cpu/main), per split and fixed batch B = B_p·n: `recommend`
  on that batch's splits alone, so the allocation is the split (n, B_p) the study compares;
- nstar/cpu/long, per split: one allocation (n = 4, B_p = 16), nothing to choose, so no regret;
  the row checks the law instead, the per-n sigmoid fitted on ≤ C/f and read at C
  (`law error` = measured − predicted);
- reward-rho/cpu/full, per reward system, compute = flops/total: the (k, μ) configuration
  nearest the ρ* of the ρ frontier at ≤ C/f (`isolab.frontier.rho_allocation`). No law moves ρ*
  with compute, so this checks that ρ* found at a fraction of the budget holds at the budget.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from isolab import frontier as fr
from isolab.frontier.validate import RHO_ALLOCATION
from isolab.table import as_float, seed_average
from isolab.tracking.runs import load_runs
from isolab.vocab import EVAL_AVG, FLOPS_TOTAL, ROLLOUTS

RUNS = Path(__file__).resolve().parents[1] / "runs"
FACTORS = (2.0, 4.0)


def one_law(seen: pl.DataFrame, C: float) -> fr.Prediction:
    """The one configuration of a sweep, with its sigmoid fitted on the seed means seen and read
    at C (R0 fixed at the untrained model's score, as `optimal_n` fixes it)."""
    avg = seed_average(seen, ROLLOUTS, EVAL_AVG)
    base = avg.filter(pl.col(ROLLOUTS) == 0)[EVAL_AVG]
    fit = fr.fit_sigmoid(
        avg[ROLLOUTS], avg[EVAL_AVG], R0=as_float(base.mean()) if len(base) else None, n_boot=0
    )
    expected = float(fit.predict([C])[0])
    return fr.Prediction({c: seen[c][0] for c in ("n", "B_p")}, expected, f"sigmoid ({fit.status})")


def rows(study: str, setting: str, checks: tuple[fr.Validation, ...], note: str = "") -> list[dict]:
    return [
        {"study": study, "setting": setting, **v.to_dict(), "note": note or v.reason}
        for v in checks
    ]


def nstar_main(main: pl.DataFrame) -> list[dict]:
    """Per split: `recommend` on the whole grid, then on each B_p alone."""
    out = []
    for (split,), df in main.group_by(["split"], maintain_order=True):
        out += rows("nstar/cpu/main", f"{split}, n × B_p", fr.validate_recommend(df))
        for (bp,), sub in df.group_by(["B_p"], maintain_order=True):
            out += rows("nstar/cpu/main", f"{split}, B_p = {bp}", fr.validate_recommend(sub))
    return out


def n_vs_bp(main: pl.DataFrame) -> list[dict]:
    """Per split and fixed batch B = B_p·n with two splits or more: `recommend` on that batch."""
    out = []
    batch = pl.col("n") * pl.col("B_p")
    for (split,), df in main.group_by(["split"], maintain_order=True):
        for B in sorted(df.select(batch.unique()).to_series().to_list()):
            sub = df.filter(batch == B)
            if sub.select("n", "B_p").n_unique() > 1:  # a batch with one split has no choice
                out += rows("n-vs-bp/cpu", f"{split}, B = {B}", fr.validate_recommend(sub))
    return out


def nstar_long(long: pl.DataFrame) -> list[dict]:
    """Per split: one allocation, so the law's error at C alone."""
    out = []
    for (split,), df in long.group_by(["split"], maintain_order=True):
        checks = tuple(fr.validate(df, one_law, factor=f) for f in FACTORS)
        out += rows("nstar/cpu/long", split, checks, "one allocation: no regret; law error only")
    return out


def reward_rho(full: pl.DataFrame) -> list[dict]:
    """Per reward system: the (k, μ) configuration nearest ρ*, in FLOPs."""
    out = []
    for (reward,), df in full.group_by(["reward"], maintain_order=True):
        checks = tuple(
            fr.validate(df, fr.rho_allocation, factor=f, x=FLOPS_TOTAL, config=RHO_ALLOCATION)
            for f in FACTORS
        )
        out += rows("reward-rho/cpu/full", reward, checks)
    return out


def table() -> pl.DataFrame:
    def load(*parts: str) -> pl.DataFrame:
        return load_runs(RUNS.joinpath(*parts), statuses=["FINISHED"])

    main = load("nstar", "cpu", "main")
    out = [
        *nstar_main(main),
        *n_vs_bp(main),
        *nstar_long(load("nstar", "cpu", "long")),
        *reward_rho(load("reward-rho", "cpu", "full")),
    ]
    return pl.DataFrame(out, infer_schema_length=None)


def markdown(t: pl.DataFrame) -> str:
    head = (
        "| study | setting | fit on | predicted | best at C | regret | noise | verdict "
        "| one run's SD | law error |"
    )
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in t.iter_rows(named=True):
        one = r["note"].startswith("one allocation")
        regret = "—" if one else f"{r['regret']:.3f}"
        verdict = "one allocation" if one else r["verdict"]
        error = r["predicted_reward"] - r["expected"]
        lines.append(
            f"| {r['study']} | {r['setting']} | ≤ C/{r['factor']:g} | {r['predicted']} | "
            f"{r['best']} | {regret} | {r['se']:.3f} | {verdict} | "
            f"{r['noise_sd']:.3f} ({r['noise_source']}) | "
            f"{'—' if error != error else f'{error:+.3f}'} |"
        )
    return "\n".join(lines)


def main() -> None:
    t = table()
    print(markdown(t))
    checked = t.filter(~pl.col("note").str.starts_with("one allocation"))
    for factor in FACTORS:
        at = checked.filter(pl.col("factor") == factor)
        within = at.filter(pl.col("verdict") == "within noise").height
        print(f"\n{factor:g}× extrapolation: {within} of {at.height} checks within noise", end="")
    print()


if __name__ == "__main__":
    main()
