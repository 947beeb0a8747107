"""Calibration of nstar's saturation gate and of the crossing test of "n* grows" (issue 45).

    python benchmarks/nstar_calibration.py [--gate 200] [--crossing 300] [--vertex 100]

Gate: rising-then-flat curves (`isolab.synthetic.PlateauLaw`, a broken stick in log2 C) with a
planted break at 2^10 … 2^15 (or half a doubling later where checkpoints fall every half
doubling), rising 0.02, 0.03 or 0.05 avg@4 per doubling, read to 2^17 rollouts as runs/nstar/
cpu/long is; evaluation SD 0.005, seed SD 0.01 or 0.02, 3 or 8 seeds, checkpoints every
doubling or every half doubling; plus curves still rising at the end (break beyond 2^17).
Rates: the gate passes; C_sat within one doubling after the break; C_sat before the break
(strictly; and by more than the margin's worth of rise); on rising curves, a pass.

Crossing: worlds of `isolab.synthetic.make_isocompute_runs` on aligned checkpoints 2^8 … 2^16:
n grids of 5–8 doublings from 2 or 4, B_p ∈ {16, 64} or {8, 32, 128} under B ≤ 2,048, 3 seeds,
evaluation noise U(0.01, 0.02) and a run offset of SD 0.01. Planted growth: `IsoComputeLaw`
with random curvature, speed and n_sat, kept where the true n* moves by ≥ 1 doubling across
the checkpoints (power reported by the size of the move). Nulls: one curve for every n (pure
noise), and `FixedOptimumLaw` worlds where n* never moves: interior, interior with crossing
non-optimal arms, at the lower edge, at the upper edge, and one plateau for all with larger n
slower (late ties). Every rate is printed with its Clopper–Pearson 95% bounds.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from isolab.metrics import clopper_pearson_upper
from isolab.synthetic import (
    FixedOptimumLaw,
    IsoComputeLaw,
    PlateauLaw,
    make_isocompute_runs,
    make_plateau_runs,
)
from isolab.verdicts.crossing import crossing_test
from isolab.verdicts.result import ALPHA
from isolab.verdicts.saturation import PLATEAU_MARGIN, plateau_gate
from isolab.verdicts.vertex import vertex_shift
from isolab.vocab import EVAL_AVG

CHECKPOINTS = [2.0**k for k in range(8, 17)]


def _bounds(k: int, n: int) -> str:
    if not n:
        return "0/0"
    lo = 1 - clopper_pearson_upper(n - k, n, two_sided=True) if k else 0.0
    hi = clopper_pearson_upper(k, n, two_sided=True)
    return f"{k}/{n} = {k / n:.1%} [{lo:.1%}, {hi:.1%}]"


# ---- the gate ---------------------------------------------------------------------------------
def gate_world(k: int, seeds: int, per_doubling: int, seed_sd: float, rising: bool, rule: str):
    rng = np.random.default_rng(10_000 + k)
    gain = float(rng.choice([0.02, 0.03, 0.05]))
    if rising:
        brk = 17.0 + float(rng.choice([0.5, 1.0, 3.0]))  # still rising at 2^17
    else:
        brk = float(rng.integers(10, 16)) + (
            float(rng.choice([0.0, 0.5])) if per_doubling == 2 else 0.0
        )
    df = make_plateau_runs(
        PlateauLaw(brk, gain), per_doubling=per_doubling, seeds=seeds, seed_sd=seed_sd, seed=k
    )
    gate = plateau_gate(
        df.filter(pl.col("n") == 4), df.filter(pl.col("n") != 4), EVAL_AVG, rule=rule
    )
    return brk, gain, gate


def calibrate_gate(worlds: int, rule: str) -> None:
    print(f"\n## Saturation gate (C_sat rule `{rule}`), {worlds} worlds per row")
    print(
        "| seeds | checkpoints | seed SD | passes | C_sat placed | C_sat within 1 doubling "
        "after the break | C_sat before the break | … by more than the margin | rising: "
        "passes |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for seeds in (3, 8):
        for per in (1, 2):
            for sd in (0.01, 0.02):
                c = Counter()
                for k in range(worlds):
                    brk, gain, gate = gate_world(k, seeds, per, sd, False, rule)
                    c["passes"] += gate.passed
                    c["placed"] += gate.C_sat is not None
                    if gate.C_sat is not None:
                        at = math.log2(gate.C_sat)
                        c["within"] += 0 <= at - brk <= 1 + 1e-9
                        c["before"] += at < brk - 1e-9
                        c["material"] += gain * (brk - at) > PLATEAU_MARGIN + 1e-9
                    _, _, up = gate_world(k, seeds, per, sd, True, rule)
                    c["rising"] += up.passed
                every = "doubling" if per == 1 else "half doubling"
                print(
                    f"| {seeds} | every {every} | {sd} | {_bounds(c['passes'], worlds)} | "
                    f"{_bounds(c['placed'], worlds)} | "
                    f"{_bounds(c['within'], worlds)} | {_bounds(c['before'], worlds)} | "
                    f"{_bounds(c['material'], worlds)} | {_bounds(c['rising'], worlds)} |",
                    flush=True,
                )


# ---- the crossing test ------------------------------------------------------------------------
def _design(rng: np.random.Generator) -> dict:
    length = int(rng.integers(5, 9))
    first = int(rng.choice([2, 4]))
    grid = tuple(first * 2**i for i in range(length))
    bps = (16, 64) if rng.random() < 0.5 else (8, 32, 128)
    return {
        "n_grid": grid,
        "B_p_grid": bps,
        "B_max": max(2048, grid[0] * max(bps)),
        "noise": float(rng.uniform(0.01, 0.02)),
    }


def _runs(law, design: dict, k: int) -> pl.DataFrame:
    return make_isocompute_runs(
        {EVAL_AVG: law},
        n_grid=design["n_grid"],
        B_p_grid=design["B_p_grid"],
        B_max=design["B_max"],
        budget_rollouts=2**16,
        seeds=3,
        noise=design["noise"],
        checkpoints=CHECKPOINTS,
        seed_sd=0.01,
        seed=k,
    )


def _true_move(law, grid: tuple[int, ...]) -> float:
    """Doublings the true argmax over the grid moves from the first checkpoint to the last
    (where every n is measured: n·min(B_p) ≤ C)."""
    ns = law.n_star(np.array([CHECKPOINTS[0], CHECKPOINTS[-1]]), grid)
    return float(math.log2(ns[-1] / ns[0]))


def growth_law(rng: np.random.Generator, grid: tuple[int, ...]) -> IsoComputeLaw:
    x_sat = math.log2(grid[0]) + rng.uniform(1.0, len(grid) + 1.0)
    return IsoComputeLaw(
        R0=0.2,
        A_max=float(rng.uniform(0.6, 0.8)),
        n_sat=int(round(2**x_sat)),
        curvature=float(rng.uniform(0.004, 0.02)),
        C_mid_ref=float(2 ** rng.uniform(9.0, 11.5)),
        n_ref=grid[0],
        gamma=float(rng.uniform(0.3, 1.0)),
    )


NULLS = {
    "pure noise (one curve for every n)": lambda rng, g: IsoComputeLaw(
        curvature=0.0, gamma=0.0, C_mid_ref=float(2 ** rng.uniform(9.0, 12.0))
    ),
    "n* fixed inside the grid (A peaks and C_mid is least there)": lambda rng, g: FixedOptimumLaw(
        n_o=float(g[int(rng.integers(1, len(g) - 1))]), c_lo=(c := float(rng.uniform(0.005, 0.02))),
        c_hi=c, g_lo=(s := float(rng.uniform(0.3, 1.0))), g_hi=s,
        C_mid_ref=float(2 ** rng.uniform(9.0, 11.5))),
    "n* fixed inside, non-optimal arms cross (slow-high above, fast-low below)": lambda rng, g: FixedOptimumLaw(
        n_o=float(g[int(rng.integers(1, len(g) - 1))]), c_lo=float(rng.uniform(0.02, 0.04)),
        c_hi=float(rng.uniform(0.0, 0.004)), g_lo=0.0, g_hi=float(rng.uniform(0.6, 1.2)),
        C_mid_ref=float(2 ** rng.uniform(9.0, 11.0))),
    "n* fixed at the grid's smallest n": lambda rng, g: FixedOptimumLaw(
        n_o=float(g[0]), c_hi=float(rng.uniform(0.003, 0.02)), g_hi=float(rng.uniform(0.3, 1.0)),
        C_mid_ref=float(2 ** rng.uniform(9.0, 11.5))),
    "n* fixed at the grid's largest n": lambda rng, g: FixedOptimumLaw(
        n_o=float(g[-1]), c_lo=float(rng.uniform(0.003, 0.02)), g_lo=float(rng.uniform(0.3, 1.0)),
        C_mid_ref=float(2 ** rng.uniform(9.0, 11.5))),
    "one plateau for every n, larger n slower (late ties)": lambda rng, g: FixedOptimumLaw(
        n_o=float(g[0]), c_lo=0.0, c_hi=0.0, g_hi=float(rng.uniform(0.3, 1.0)),
        C_mid_ref=float(2 ** rng.uniform(9.0, 11.5))),
}  # fmt: skip


def _call(r) -> str:
    if r.p_value is None or not math.isfinite(r.estimate) or r.p_value >= ALPHA:
        return "inconclusive"
    return "grows" if r.estimate > 0 else "falls"


def calibrate_crossing(worlds: int, vertex_worlds: int) -> None:
    print(f"\n## Crossing test of n* grows: {worlds} worlds per row")
    print("| world | grows called | falls called |")
    print("|---|---|---|")
    for j, (name, make) in enumerate(NULLS.items()):
        c = Counter()
        for k in range(worlds):
            rng = np.random.default_rng(20_000 * (j + 1) + k)
            design = _design(rng)
            r, _ = crossing_test(_runs(make(rng, design["n_grid"]), design, k), EVAL_AVG, 2000, k)
            c[_call(r)] += 1
        print(
            f"| null: {name} | {_bounds(c['grows'], worlds)} | {_bounds(c['falls'], worlds)} |",
            flush=True,
        )
    by_move: dict[str, Counter] = defaultdict(Counter)
    vertex = Counter()
    k = 0
    done = 0
    while done < worlds:
        k += 1
        rng = np.random.default_rng(900_000 + k)
        design = _design(rng)
        law = growth_law(rng, design["n_grid"])
        move = _true_move(law, design["n_grid"])
        if move < 1:
            continue
        done += 1
        df = _runs(law, design, k)
        r, _ = crossing_test(df, EVAL_AVG, 2000, k)
        label = f"{int(min(move, 4))}{'+' if move >= 4 else ''} doubling(s)"
        by_move[label][_call(r)] += 1
        by_move["≥ 2 doublings (all)" if move >= 2 else "1 doubling (all)"][_call(r)] += 1
        if move >= 2 and vertex["worlds"] < vertex_worlds:
            v, _ = vertex_shift(df, EVAL_AVG)
            vertex["worlds"] += 1
            vertex["grows"] += _call(v) == "grows"
            vertex["crossing"] += _call(r) == "grows"
    for label in sorted(by_move):
        c = by_move[label]
        n = sum(c.values())
        print(
            f"| planted growth, n* moves {label} | {_bounds(c['grows'], n)} | "
            f"{_bounds(c['falls'], n)} |"
        )
    if vertex["worlds"]:
        print(
            f"\nOn the first {vertex['worlds']} growth worlds with a move of ≥ 2 doublings: the "
            f"vertex test (top half of log2 C) finds growth in "
            f"{_bounds(vertex['grows'], vertex['worlds'])}, the crossing test in "
            f"{_bounds(vertex['crossing'], vertex['worlds'])}."
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gate", type=int, default=200, help="worlds per gate row (0: skip)")
    ap.add_argument("--rule", default="first", help="C_sat rule: first, every or tail")
    ap.add_argument("--crossing", type=int, default=300, help="worlds per crossing row (0: skip)")
    ap.add_argument("--vertex", type=int, default=100, help="growth worlds for the vertex test")
    args = ap.parse_args()
    t0 = time.time()
    if args.gate:
        for rule in args.rule.split(","):
            calibrate_gate(args.gate, rule)
    if args.crossing:
        calibrate_crossing(args.crossing, args.vertex)
    print(f"\n({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
