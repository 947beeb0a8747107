"""The regret of the advice at 2× and 4× extrapolation beside its two baselines, on the
committed studies and on planted worlds where n* moves (issues 32 and 47).

    .venv/bin/python scripts/recommend_regret.py             # committed studies (≈ 15 s)
    .venv/bin/python scripts/recommend_regret.py --planted   # and planted worlds (≈ 2 min)

ScaleRL's protocol (`isolab.frontier.validate`): on the runs of one setting, C is the largest
compute every run reaches; the allocation is predicted at C from the evaluations at ≤ C/2 (2×)
and ≤ C/4 (4×) alone and scored by its regret, the seed-mean avg@4 at C of the measured best
minus that of the predicted allocation, against the noise of that difference (the standard
error from the seed spread, else the evaluation's binomial noise): within noise when the regret
is at most 2 of those standard errors. Beside it, two baselines: the best seed mean at ≤ C/f
(the optimum held fixed) and a random arm (its expected regret, the mean over arms). A check
where even the random arm is within noise *cannot fail* and is counted apart, not as a pass.
Regrets are also given in units of their standard error (``/SE``).

Committed rows, one per study, setting and factor:

- nstar/cpu/main, per split: `recommend` on the whole grid (allocation (n, B_p)), and on each
  B_p alone (allocation n);
- n-vs-bp/cpu (the same runs, nstar/cpu/main), per split and fixed batch B = B_p·n: `recommend`
  on that batch's splits alone, so the allocation is the split (n, B_p) the study compares;
- nstar/cpu/{mix, targets, seen, lr-half} and model-size/cpu/main (per model): `recommend` on
  the grid of n (nstar/cpu/judge holds the runs of targets; never has no avg@4; adaptive's
  stopped arms never reach a common C; runs/chunks/ holds the same runs as these snapshots);
- nstar/cpu/long, per split: one allocation (n = 4, B_p = 16), nothing to choose, so no regret;
  the row checks the law instead, the per-n sigmoid fitted on ≤ C/f and read at C
  (`law error` = measured − predicted);
- reward-rho/cpu/full, per reward system, compute = flops/total: the (k, μ) configuration
  nearest the ρ* of the ρ frontier at ≤ C/f (`isolab.frontier.rho_allocation`). No law moves ρ*
  with compute, so this checks that ρ* found at a fraction of the budget holds at the budget.

A committed check's world is ``static`` when the best seed mean at ≤ C/f is still the measured
best at C, else ``moved`` (by how many doublings of n, where n is the choice).

`--planted` adds `isolab.frontier.planted`: worlds of the IsoComputeLaw family by kind (static;
settled; n* moving 1, 2, 3 doublings and still moving over the last 4×), noise measured on
nstar/cpu/main (Easy and Hard, `planted.sweep_noise`), each pick scored by its true regret at C in standard errors of
a difference; and says whether `recommend.BEATS_FIXED_ON_MOVING`, the claim the advice prints,
still holds.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import polars as pl
from scipy.stats import binomtest

from isolab import frontier as fr
from isolab.frontier import planted
from isolab.frontier.recommend import BEATS_FIXED_ON_MOVING
from isolab.frontier.validate import RHO_ALLOCATION, WITHIN_SE
from isolab.table import as_float, seed_average
from isolab.tracking.runs import load_runs
from isolab.vocab import EVAL_AVG, FLOPS_TOTAL, ROLLOUTS

RUNS = Path(__file__).resolve().parents[1] / "runs"
FACTORS = (2.0, 4.0)
#: Studies with a grid of n and nothing else to choose, besides nstar/cpu/main: snapshot,
#: and the column whose values are settings of their own (None: one setting).
N_GRIDS = {
    ("nstar", "cpu", "mix"): None,
    ("nstar", "cpu", "targets"): None,
    ("nstar", "cpu", "seen"): None,
    ("nstar", "cpu", "lr-half"): "split",
    ("model-size", "cpu", "main"): "model",
}


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


def world(v: fr.Validation) -> str:
    """``static`` or ``moved`` (by k doublings of n, where n is chosen) for one check."""
    if not v.optimum_moved:
        return "static"
    before, after = (v.baseline.allocation if v.baseline else {}), v.best
    if "n" in before and "n" in after and before["n"] != after["n"]:
        return f"moved {abs(round(math.log2(after['n'] / before['n'])))}"
    return "moved"


def rows(study: str, setting: str, checks: tuple[fr.Validation, ...], note: str = "") -> list[dict]:
    return [
        {
            "study": study,
            "setting": setting,
            **v.to_dict(),
            "world": world(v),
            "note": note or v.reason,
        }
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


def n_grids(load) -> list[dict]:
    """`recommend` on each of `N_GRIDS`, per setting."""
    out = []
    for parts, by in N_GRIDS.items():
        df = load(*parts)
        groups = df.group_by([by], maintain_order=True) if by else [(("all",), df)]
        for (value,), sub in groups:
            out += rows("/".join(parts), str(value), fr.validate_recommend(sub))
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


def load(*parts: str) -> pl.DataFrame:
    return load_runs(RUNS.joinpath(*parts), statuses=["FINISHED"])


def table() -> pl.DataFrame:
    main = load("nstar", "cpu", "main")
    out = [
        *nstar_main(main),
        *n_vs_bp(main),
        *n_grids(load),
        *nstar_long(load("nstar", "cpu", "long")),
        *reward_rho(load("reward-rho", "cpu", "full")),
    ]
    return pl.DataFrame(out, infer_schema_length=None)


def _per_se(value: float, se: float) -> str:
    return f"{value / se:.1f}" if se > 0 and math.isfinite(value / se) else "—"


def markdown(t: pl.DataFrame) -> str:
    head = (
        "| study | setting | fit on | predicted | best at C | regret | noise | verdict "
        "| /SE | best seed mean at ≤ C/f | its regret /SE | random arm /SE | world "
        "| one run's SD | law error |"
    )
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in t.iter_rows(named=True):
        one = r["note"].startswith("one allocation")
        regret = "—" if one else f"{r['regret']:.3f}"
        verdict = "one allocation" if one else r["verdict"]
        error = r["predicted_reward"] - r["expected"]
        base = "—" if one else f"{r['baseline']}: {r['baseline_regret']:.3f}"
        lines.append(
            f"| {r['study']} | {r['setting']} | ≤ C/{r['factor']:g} | {r['predicted']} | "
            f"{r['best']} | {regret} | {r['se']:.3f} | {verdict} | "
            f"{'—' if one else _per_se(r['regret'], r['se'])} | {base} | "
            f"{'—' if one else _per_se(r['baseline_regret'], r['baseline_se'])} | "
            f"{'—' if one else _per_se(r['random_regret'], r['random_se'])} | "
            f"{'—' if one else r['world']} | {r['noise_sd']:.3f} ({r['noise_source']}) | "
            f"{'—' if error != error else f'{error:+.3f}'} |"
        )
    return "\n".join(lines)


def by_world(t: pl.DataFrame) -> pl.DataFrame:
    """The committed checks with a choice, per world (static, moved) × factor: counts of
    verdicts, the mean regret /SE of the advice and of its baselines, and the advice's wins,
    ties and losses against the best seed mean (measured regret lower, equal, higher)."""
    checked = t.filter(
        ~pl.col("note").str.starts_with("one allocation") & (pl.col("verdict") != "not checked")
    )
    vs = pl.col("regret") - pl.col("baseline_regret")
    return (
        checked.with_columns(kind=pl.col("world").str.replace(r" \d+$", ""))
        .group_by("kind", "factor")
        .agg(
            pl.len().alias("checks"),
            (pl.col("verdict") == "within noise").sum().alias("within"),
            (pl.col("verdict") == "cannot fail").sum().alias("cannot_fail"),
            (pl.col("verdict") == "beyond noise").sum().alias("beyond"),
            (pl.col("regret") / pl.col("se")).mean().alias("advice_se"),
            (pl.col("baseline_regret") / pl.col("baseline_se")).mean().alias("baseline_se"),
            (pl.col("random_regret") / pl.col("random_se")).mean().alias("random_se"),
            (vs < -1e-12).sum().alias("wins"),
            (vs.abs() <= 1e-12).sum().alias("ties"),
            (vs > 1e-12).sum().alias("losses"),
        )
        .sort("kind", "factor", descending=[True, False])
    )


def _cell(v: object) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.2g}" if 0 < abs(v) < 0.01 else f"{v:.2f}"
    return str(v)


def frame_markdown(df: pl.DataFrame) -> str:
    """Any frame as a markdown table, floats to 2 decimals (2 significant digits below 0.01),
    nulls as dashes."""
    cells = [[_cell(v) for v in row] for row in df.iter_rows()]
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * df.width]
    return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in cells])


def committed_noises() -> list[tuple[float, float]]:
    """(eval_sd, seed_sd) of nstar/cpu/main, per split (`planted.sweep_noise`)."""
    main = load("nstar", "cpu", "main")
    return [planted.sweep_noise(df) for _, df in main.group_by(["split"], maintain_order=True)]


def pooled(scores: pl.DataFrame, *, moved_only: bool) -> pl.DataFrame:
    """The moving worlds (moving 1–3) of `calibrate`'s scores, per factor, or only those whose
    true n* moved between C / factor and C (`moved_only`): the mean true regret /SE of the
    advice and of the best seed mean, their paired difference with its standard error, the
    advice's wins, ties and losses, and the two-sided sign test of wins against losses."""
    moving = scores.filter(pl.col("kind").str.starts_with("moving"))
    if moved_only:
        moving = moving.filter(pl.col("moved_after_fit") != 0)
    wide = moving.pivot(on="rule", index=["world", "factor"], values="regret_se")
    out = []
    for (factor,), g in wide.sort("factor").group_by(["factor"], maintain_order=True):
        d = (g["recommend"] - g["best seed mean"]).to_numpy()
        wins, losses = int((d < -1e-12).sum()), int((d > 1e-12).sum())
        out.append(
            {
                "factor": factor,
                "worlds": g.height,
                "recommend": as_float(g["recommend"].mean()),
                "best seed mean": as_float(g["best seed mean"].mean()),
                "difference": float(d.mean()),
                "its SE": float(d.std(ddof=1) / math.sqrt(len(d))),
                "wins": wins,
                "ties": g.height - wins - losses,
                "losses": losses,
                "sign test p": binomtest(wins, wins + losses).pvalue if wins + losses else 1.0,
            }
        )
    return pl.DataFrame(out)


def beats_on_moving(scores: pl.DataFrame) -> bool:
    """Whether the advice beat the best seed mean on the moving worlds whose n* moved after the
    fit, at every factor: a mean true regret lower by more than `WITHIN_SE` standard errors of
    the paired difference."""
    p = pooled(scores, moved_only=True)
    return bool((p["difference"] + WITHIN_SE * p["its SE"] < 0).all())


def planted_report(per_kind: int, seed: int) -> None:
    noises = committed_noises()
    print(
        "\nnoise (eval_sd, seed_sd at C) from nstar/cpu/main, per split: "
        + ", ".join(f"({e:.4f}, {s:.4f})" for e, s in noises)
    )
    worlds = planted.draw_worlds(per_kind, noises, seed=seed)
    scores = planted.calibrate(worlds, seed=seed, n_boot=0)
    summary = planted.summarize(scores)
    print(f"\nplanted worlds: {per_kind} per kind, {len(worlds)} in all (seed {seed})\n")
    print(frame_markdown(summary))
    for moved_only in (False, True):
        which = "whose n* moved between C/f and C" if moved_only else "all"
        print(f"\nmoving worlds pooled ({which}):\n")
        print(frame_markdown(pooled(scores, moved_only=moved_only)))
    found = beats_on_moving(scores)
    print(
        f"\nrecommend beats the best seed mean on moving worlds: {found}; "
        f"recommend.BEATS_FIXED_ON_MOVING = {BEATS_FIXED_ON_MOVING}: "
        + ("the printed claim holds" if found == BEATS_FIXED_ON_MOVING else "UPDATE the claim")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--planted", action="store_true", help="also score planted worlds")
    parser.add_argument("--per-kind", type=int, default=60, help="planted worlds per kind")
    parser.add_argument("--seed", type=int, default=0, help="seed of the planted worlds")
    args = parser.parse_args()
    t = table()
    print(markdown(t))
    checked = t.filter(~pl.col("note").str.starts_with("one allocation"))
    for factor in FACTORS:
        at = checked.filter(pl.col("factor") == factor)
        count = {
            v: at.filter(pl.col("verdict") == v).height for v in ("within noise", "cannot fail")
        }
        print(
            f"\n{factor:g}× extrapolation: {count['within noise']} of {at.height} checks within "
            f"noise, {count['cannot fail']} more that cannot fail (a random arm within "
            f"{WITHIN_SE:g} SE)",
            end="",
        )
    print("\n\ncommitted checks by world:\n")
    print(frame_markdown(by_world(t)))
    if args.planted:
        planted_report(args.per_kind, args.seed)


if __name__ == "__main__":
    main()
