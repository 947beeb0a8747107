"""Robustness of issue 46's lr-exponent call (read after the data; the call itself is the
pre-registered `best_lr_exponent`): the exponent from a quadratic on each B's best lr and its
neighbours only (seed bootstrap), and the pre-registered test on worlds with the grid's own
asymmetric shape (a cliff above the best lr), translated as lr* ∝ B^e for known e.

    .venv/bin/python scripts/lr_grid_robustness.py     # ≈ 1 min; prints four lines
"""

from pathlib import Path

import numpy as np
import polars as pl

from isolab.study.healthy_recipe.lr_exponent import best_lr_exponent
from isolab.tracking.runs import load_runs
from isolab.vocab import EVAL_AVG, RUN_KEY, STEP

df = load_runs(Path("runs/healthy-recipe/cpu/lr-grid"))
last = df.filter(pl.col(STEP) == pl.col(STEP).max().over(RUN_KEY)).select(
    "B", "lr", "lr_base", "seed", EVAL_AVG
)
tab = last.group_by("B", "lr").agg(pl.col(EVAL_AVG).mean().alias("m")).sort("B", "lr")
Bs = sorted(set(tab["B"]))


def local_vertex(rows, width=1):
    # quadratic in log2 lr on the argmax of the seed mean and `width` grid points either side
    m = rows.group_by("lr").agg(pl.col(EVAL_AVG).mean()).sort("lr")
    lrs = m["lr"].to_list()
    i = int(np.argmax(m[EVAL_AVG].to_numpy()))
    i = min(max(i, width), len(lrs) - 1 - width)
    keep = lrs[i - width : i + width + 1]
    r = rows.filter(pl.col("lr").is_in(keep))
    x = np.log2(r["lr"].to_numpy())
    y = r[EVAL_AVG].to_numpy()
    c = np.polyfit(x, y, 2)
    return -c[1] / (2 * c[0]) if c[0] < 0 else np.nan


def exponent(frame, width):
    v = [local_vertex(frame.filter(pl.col("B") == b), width) for b in Bs]
    return np.polyfit(np.log2(Bs), v, 1)[0], v


e, v = exponent(last, 1)
rng = np.random.default_rng(0)
boots = []
for _ in range(400):
    parts = []
    for b in Bs:
        g = last.filter(pl.col("B") == b)
        seeds = g["seed"].unique().to_list()
        pick = rng.choice(seeds, len(seeds))
        parts += [g.filter(pl.col("seed") == s) for s in pick]
    boots.append(exponent(pl.concat(parts), 1)[0])
print(
    "local (argmax ±1 point) exponent",
    round(e, 3),
    "boot 95%",
    np.nanpercentile(boots, [2.5, 97.5]).round(3),
    "vertices",
    np.round(v, 2),
)
e2, v2 = exponent(last, 2)
print("local ±2 points", round(e2, 3), np.round(v2, 2))
# calibration on asymmetric worlds: the B=128 curve's shape, translated as lr* ∝ B^e_true, on the sqrt-moving grid
ref = tab.filter(pl.col("B") == 128)
rx = np.log2(ref["lr"].to_numpy())
ry = ref["m"].to_numpy()
peak = rx[np.argmax(ry)]
design = last.select("B", "lr", "seed")
for e_true in (0.25, 0.33, 0.5):
    ests = []
    for w in range(100):
        r = np.random.default_rng(w)
        shift = np.log2(design["B"].to_numpy() / 128) * e_true
        x = np.log2(design["lr"].to_numpy()) - shift
        y = np.interp(x, rx, ry, left=ry[0], right=ry[-1]) + r.normal(0, 0.03, design.height)
        world = design.with_columns(
            pl.Series(EVAL_AVG, y),
            pl.lit(0).alias(STEP),
            pl.Series(RUN_KEY, [f"k{i}" for i in range(design.height)]),
            pl.lit("easy").alias("split"),
        )
        ests.append(best_lr_exponent(world, EVAL_AVG).estimate)
    print(
        f"asymmetric world e_true={e_true}: preregistered test mean {np.mean(ests):.3f} sd {np.std(ests):.3f}"
    )
