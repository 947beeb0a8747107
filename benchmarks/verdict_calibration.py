"""Calibration of every verdict: false-call rates in worlds with no effect and in structured
nulls, power in planted ones.

    .venv/bin/python benchmarks/verdict_calibration.py [--null 400] [--planted 200]
        [--claims ID ...] [--design auto|planned|committed] [--gate 200]

Each claim's test runs, unchanged, on simulated sweeps that keep a design and its noise. The
design is the study's committed runs tables under runs/<study>/cpu/ (configurations, seeds,
checkpoints; noise measured per split by `isolab.verdicts.noise`), or, for the studies that
read nstar's runs (nstar, n-vs-bp, bestk-worstk), the planned design of issue 27 before it runs
(`isolab.verdicts.planned`: split × B_p ∈ {16, 64} × n ∈ {2 … 128}, B ≤ 2,048, 3 seeds, 9
checkpoints to 65,536 rollouts, and the n = 4 `long` runs to 131,072; evaluation SD 0.008,
seed SD 0.03 Easy / 0.015 Hard). `--design auto` (the default) takes the planned design for
those three studies, the committed one for the others. The reward-rho claims (ρ* per class of
reward systems) draw their own design whatever `--design` says: the pre-registered (k, μ) grid
of `isolab.study.reward_rho.worlds` (6 systems × 6 (k, μ) × 4 seeds), which the committed μ-only
runs do not have. healthy.lr_sqrt draws the pre-registered (B, lr) grid of
studies/healthy-recipe/cpu/lr-grid.yaml (`isolab.study.healthy_recipe.lr_exponent`: the committed lr-scaling
runs are on the old testbed and refused by the claim's gate, which the worlds do not pass
through), its null the exponent at either margin of the equivalence (0.25, 0.75). The allocation claims draw
the pre-registered design of studies/allocation/cpu/main.yaml (`isolab.study.allocation.worlds`:
3 splits × 6 arms × 3 seeds, each split's curve and noise from nstar's committed n = 8 runs):
their null has every arm equal, where a `disagrees` is the best-uniform pick's bias (printed
apart from the false `agrees`), and each is also run with the allocator reaching every avg@4 at
0.7× and 0.5× the FLOPs, with the effect its design detects at 80% power.

Per claim: the pure-noise null (every configuration on its group's mean curve; for an
equivalence claim, the effect at its margin) and each structured null that applies to it
(`isolab.verdicts.calibration.STRUCTURED_NULLS`), where a call is a false call (for an
equivalence claim, only an `agrees`); and the planted effect, where an `agrees` is a detection.
Target: false calls ≤ 5%; the bound printed is the one-sided 95% Clopper–Pearson upper bound
of the rate. The test of nstar.grows_* (the crossing test, issue 45) is also run without its
saturation gate (`ungated`: how it behaves where the gate lets it run); its own calibration on
`IsoComputeLaw` worlds, and the gate's on planted breaks, is `benchmarks/nstar_calibration.py`. `--gate N` adds the saturation gate's
pass rate at a plateau and when n = 4 still gains 0.02 per doubling, with `long` run under 3 and
under 8 seeds.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import polars as pl

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from isolab import study  # noqa: E402
from isolab.metrics import clopper_pearson_upper  # noqa: E402
from isolab.study.allocation import worlds as allocation_worlds  # noqa: E402
from isolab.study.calibration import (  # noqa: E402
    PLANNED_SWEEPS,
    PLANTS,
    STRUCTURED_NULLS,
    calibrate,
    nulls_for,
    planned_setting,
)
from isolab.study.claims import CLAIMS  # noqa: E402
from isolab.study.nstar.worlds import calibrate_shift, gate_passes  # noqa: E402
from isolab.verdicts.calibration import Setting, setting_of  # noqa: E402


def design(study_name: str, scale: str = "cpu") -> dict[str, pl.DataFrame]:
    """The study's committed runs tables (its design), by sweep."""
    s = study.get(study_name)
    return {
        sweep: pl.read_parquet(study.snapshot_dir(s, scale, sweep) / "runs.parquet")
        for sweep in s.sweeps
    }


def upper_bound(calls: int, sims: int) -> float:
    """One-sided 95% Clopper–Pearson upper bound of a rate seen `calls` times in `sims`."""
    return clopper_pearson_upper(calls, sims)


def false_calls(claim_id: str, calls: Counter) -> int:
    """Calls that are false in a world that must not be called (an equivalence claim's null is
    its margin: only `agrees` is false there)."""
    if CLAIMS[claim_id].expected.startswith("≈"):
        return calls["agrees"]
    return calls["agrees"] + calls["disagrees"]


def _line(label: str, k: int, sims: int, what: str) -> str:
    return (
        f"  {label:<32} {k:>4}/{sims:<4} = {k / sims:6.1%}  (95% bound {upper_bound(k, sims):5.1%})"
        f"  {what}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--null", type=int, default=400, help="worlds per null")
    ap.add_argument("--planted", type=int, default=200, help="planted worlds per claim")
    ap.add_argument("--claims", nargs="*", default=list(CLAIMS), help="claim ids (default: all)")
    ap.add_argument("--design", choices=("auto", "planned", "committed"), default="auto")
    ap.add_argument("--gate", type=int, default=0, help="worlds for the saturation gate's rates")
    args = ap.parse_args()
    worst = 0.0
    settings: dict[str, Setting] = {}
    for cid in args.claims:
        claim = CLAIMS[cid]
        planned = args.design == "planned" or (
            args.design == "auto" and claim.study in PLANNED_SWEEPS
        )
        own = PLANTS[cid].world is not None  # rho: their own (k, μ) design; interference: counts;
        # targets and mixtures: worlds on their committed runs' design
        key = "own" if own else f"{claim.study}|{planned}"
        if key not in settings:
            settings[key] = (
                Setting({}, {}, {})
                if own
                else planned_setting(claim.study)
                if planned
                else setting_of(design(claim.study))
            )
        setting = settings[key]
        t0 = time.perf_counter()
        label = (
            {
                "interference": "simulated per-problem counts on nstar's",
                "reward-rho": "simulated (k, μ)",
                "healthy-recipe": "simulated, on the pre-registered lr-grid",
                "allocation": "simulated, on the pre-registered allocation/cpu/main",
            }.get(claim.study, "simulated, on the committed")
            if own
            else "planned"
            if planned
            else "committed"
        )
        print(f"{cid} ({label} design)", flush=True)
        null = calibrate(cid, setting, args.null, planted=False, seed=1)
        k = false_calls(cid, null)
        worst = max(worst, k / args.null)
        what = "effect at the margin" if claim.expected.startswith("≈") else "no effect"
        print(_line("null", k, args.null, what), flush=True)
        if claim.study == "allocation":  # every arm equal: the best-uniform pick's bias shows
            print(_line("null, agrees (false)", null["agrees"], args.null, ""), flush=True)
            print(_line("null, disagrees", null["disagrees"], args.null, "(pick's bias)"))
        shift = cid.startswith("nstar.grows") and claim.split is not None
        if shift:
            calls = calibrate_shift(claim.split, setting, args.null, None, seed=1)
            print(_line("null, ungated", false_calls(cid, calls), args.null, ""), flush=True)
        for name in nulls_for(cid):
            calls = calibrate(cid, setting, args.null, planted=False, seed=3, null=name)
            k = false_calls(cid, calls)
            worst = max(worst, k / args.null)
            print(_line(name, k, args.null, STRUCTURED_NULLS[name].describe), flush=True)
            if shift:
                add = STRUCTURED_NULLS[name].add
                calls = calibrate_shift(claim.split, setting, args.null, add, seed=3)
                k = false_calls(cid, calls)
                worst = max(worst, k / args.null)
                print(_line(f"{name}, ungated", k, args.null, ""), flush=True)
        hit = calibrate(cid, setting, args.planted, planted=True, seed=100_000)
        found, wrong = hit["agrees"], hit["disagrees"]
        print(
            f"  {'power':<32} {found:>4}/{args.planted:<4} = {found / args.planted:6.1%}  "
            f"(wrong sign {wrong})  {PLANTS[cid].describe} ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
        if claim.study == "allocation":  # power by FLOPs ratio, and the detectable effect
            for ratio in allocation_worlds.RATIOS:
                calls, mde = allocation_worlds.power(cid, ratio, args.planted, seed=200_000)
                size = allocation_worlds.planted_effect(cid.removeprefix("allocation."), ratio)
                what = f"planted +{size:.3f} avg@4; detectable at 80% power {mde:.3f}"
                print(_line(f"power at {ratio}x the FLOPs", calls["agrees"], args.planted, what))
        if shift:
            calls = calibrate_shift(claim.split, setting, args.planted, PLANTS[cid].add, 100_000)
            print(_line("power, ungated", calls["agrees"], args.planted, ""), flush=True)
    for seeds in (3, 8) if args.gate else ():
        setting = planned_setting("nstar", long_seeds=seeds)
        for split in ("easy", "hard"):
            for gain in (0.0, 0.02):
                k = gate_passes(setting, split, args.gate, gain, seed=7)
                what = (
                    "planned curve (gains < 0.004 per doubling)"
                    if gain == 0
                    else (f"n = 4 gains {gain} per doubling more")
                )
                label = f"gate passes, {split}, {seeds} seeds"
                print(_line(label, k, args.gate, what), flush=True)
    print(f"largest false-call rate: {worst:.1%} (target ≤ 5%)")
    return 0 if worst <= 0.05 else 1


if __name__ == "__main__":
    raise SystemExit(main())
