"""`isolab frontier` and `isolab report` compare allocators (issue 51): per allocator its own
frontier and recommendation, the allocators read at equal FLOPs (never rollouts), the
discarded share per allocator; and the runs table reads old and legacy runs as the allocator
they used.

The runs table is synthetic, in the documented layout (`isolab.synthetic.isocompute`'s planted
law, with FLOP columns), and goes through a snapshot and `load_runs` as a sweep's would: real
short runs of four allocators cost minutes, not the 30 s a fast test may take. early_stop is
planted to reach a higher avg@4 per rollout but to pay 1.6× the FLOPs per rollout, so that it
leads at equal rollouts and trails at equal FLOPs: a reading on the wrong axis fails.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from isolab.frontier import allocation
from isolab.synthetic.isocompute import FixedOptimumLaw, make_isocompute_runs
from isolab.table import with_added_defaults
from isolab.tracking.runs import load_runs
from isolab.tracking.snapshot import export_runs
from isolab.vocab import (
    DISCARDED_SHARE,
    EVAL_AVG,
    FLOPS_SEARCH,
    FLOPS_SEARCH_DISCARDED,
    FLOPS_TOTAL,
    ROLLOUTS,
    ROLLOUTS_DISCARDED,
    RUN_ID,
    RUN_KEY,
)

#: early_stop's planted cost per rollout against uniform's (its discarded pilots), its planted
#: lift in avg@4 at equal rollouts once trained, and the share of its FLOPs no update used. At
#: 8,192 rollouts the law gains 0.045 from 1/1.6 of them to all of them: more than the lift.
COST, LIFT, SHARE = 1.6, 0.02, 0.3


def _runs(name: str, *, seed: int, cost: float = 1.0, lift: float = 0.0) -> pl.DataFrame:
    """One allocator's (n, B_p) grid: n ∈ {2, 4, 8}, B_p = 4, two seeds, ten evaluations of
    a law whose best n is 8 at every compute (`FixedOptimumLaw`)."""
    df = make_isocompute_runs(
        {EVAL_AVG: FixedOptimumLaw()},
        n_grid=(2, 4, 8),
        B_p_grid=(4,),
        budget_rollouts=2**13,
        seeds=2,
        eval_points=10,
        noise=0.003,
        seed=seed,
    )
    key = pl.concat_str(pl.lit(f"{name}-"), pl.col(RUN_KEY))
    return df.with_columns(
        key.alias(RUN_KEY),
        key.alias(RUN_ID),
        pl.col(FLOPS_TOTAL) * cost,
        pl.col(FLOPS_SEARCH) + pl.col(FLOPS_TOTAL) * (cost - 1),
        pl.when(pl.col("step") > 0).then(pl.col(EVAL_AVG) + lift).otherwise(pl.col(EVAL_AVG)),
        status=pl.lit("FINISHED"),
    )


def _table() -> pl.DataFrame:
    """uniform runs logged before `allocation` existed (no column at all), early_stop runs
    with the discard metrics, and legacy dynamic runs (k = 2, `allocation` not logged)."""
    uniform = _runs("uniform", seed=0)
    early = _runs("early", seed=1, cost=COST, lift=LIFT).with_columns(
        allocation=pl.lit("early_stop"),
        search_oversample=pl.lit(2),
        **{
            DISCARDED_SHARE: pl.lit(SHARE),
            FLOPS_SEARCH_DISCARDED: pl.col(FLOPS_TOTAL) * SHARE,
            ROLLOUTS_DISCARDED: pl.col(ROLLOUTS) * 0.5,
        },
    )
    dynamic = _runs("dynamic", seed=2).filter(pl.col("n") == 4)
    dynamic = dynamic.with_columns(search_oversample=pl.lit(2))
    return pl.concat([uniform, early, dynamic], how="diagonal_relaxed")


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    return export_runs(_table(), tmp_path / "alloc", experiment="alloc/cpu/main")


def test_runs_table_reads_old_runs_as_uniform_and_legacy_k_as_dynamic(snapshot):
    df = load_runs(snapshot)
    by_key = dict(
        df.group_by(RUN_KEY).agg(pl.col("allocation").unique()).iter_rows()
    )  # one allocator per run
    assert all(len(v) == 1 for v in by_key.values())
    seen = {k.split("-")[0]: v[0] for k, v in by_key.items()}
    assert seen == {"uniform": "uniform", "early": "early_stop", "dynamic": "dynamic"}
    assert allocation.allocators(df) == ["uniform", "dynamic", "early_stop"]
    # a table that logged `allocation: dynamic` at k = 2 reads the same: one configuration
    dynamic = pl.col(RUN_KEY).str.starts_with("dynamic")
    spelled = _table().with_columns(
        allocation=pl.when(dynamic).then(pl.lit("dynamic")).otherwise(pl.col("allocation"))
    )
    read = with_added_defaults(spelled)["allocation"]
    assert read.to_list() == with_added_defaults(_table())["allocation"].to_list()


def test_allocators_compare_at_equal_flops_not_rollouts(snapshot):
    df = load_runs(snapshot)
    x, note = allocation.comparison_axis(df, ROLLOUTS)
    assert x == FLOPS_TOTAL and "not compute/rollouts" in note
    with pytest.raises(ValueError, match="--x flops/total"):
        allocation.comparison_axis(df, ROLLOUTS, budget=4096)
    one = df.filter(pl.col("allocation") == "uniform")
    assert allocation.comparison_axis(one, ROLLOUTS) == (ROLLOUTS, "")

    fronts = allocation.allocator_frontiers(df, EVAL_AVG, FLOPS_TOTAL)
    assert set(fronts["allocation"]) == {"uniform", "dynamic", "early_stop"}
    for name, front in fronts.group_by("allocation"):
        # each allocator's own envelope: running max of its own seed means, held by its runs
        own = df.filter(pl.col("allocation") == name[0])
        assert front["frontier"].is_sorted()
        assert front["frontier"].max() == pytest.approx(
            own.group_by("n", "step").agg(pl.col(EVAL_AVG).mean())[EVAL_AVG].max()
        )
        assert set(front["n"].drop_nulls()) <= set(own["n"])

    equal = allocation.at_equal_flops(df, EVAL_AVG, FLOPS_TOTAL)
    top = equal.filter(pl.col(FLOPS_TOTAL) == pl.col(FLOPS_TOTAL).max())
    # the largest FLOPs every allocator reaches: uniform's budget (early_stop spends 1.6×)
    uniform_max = df.filter(pl.col("allocation") == "uniform")[FLOPS_TOTAL].max()
    assert top[FLOPS_TOTAL][0] == pytest.approx(uniform_max)
    assert top["allocation"][0] == "uniform"  # at equal FLOPs early_stop's lift does not pay
    assert top.filter(pl.col("allocation") == "early_stop")["behind"][0] > 0
    # at equal rollouts the same runs rank the other way: the axis decides
    at_rollouts = allocation.at_equal_flops(df, EVAL_AVG, ROLLOUTS)
    last = at_rollouts.filter(pl.col(ROLLOUTS) == pl.col(ROLLOUTS).max())
    assert last["allocation"][0] == "early_stop"

    said = allocation.equal_flops_sentence(df, equal, EVAL_AVG, FLOPS_TOTAL)
    assert said.startswith("allocators at equal FLOPs (flops/total = 2.61e+11,"), said
    assert re.search(r": uniform with n = 8, B_p = 4 \(avg@4 0\.6\d\d\); early_stop", said)
    assert re.search(
        r"early_stop with n = 8, B_p = 4 \(avg@4 0\.\d{3}, 0\.0\d\d behind, beyond noise", said
    )
    assert "noise: seed spread, SD" in said  # named with its noise, never without


def test_discarded_share_per_allocator(snapshot):
    runs = allocation.allocator_runs(load_runs(snapshot), EVAL_AVG)
    assert runs["allocation"].to_list()[:3] == ["uniform"] * 3  # uniform first, by n
    share = dict(runs.group_by("allocation").agg(pl.col("discarded share").mean()).iter_rows())
    assert share["uniform"] == 0.0  # discards nothing, though it never logged the metric
    assert share["early_stop"] == pytest.approx(SHARE)
    assert share["dynamic"] is None  # a legacy run that never logged it: unknown, not 0
    early = runs.filter(pl.col("allocation") == "early_stop")
    assert early["rollouts discarded"].to_list() == pytest.approx([0.5] * 3)
    assert early["seeds"].to_list() == [2, 2, 2]


def test_frontier_command_answers_per_allocator_at_equal_flops(cli, snapshot):
    res = cli("frontier", str(snapshot), "--n-boot", "0", "--out", "out")
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "allocations differ (uniform, dynamic, early_stop)" in text
    assert "equal FLOPs (flops/total), not compute/rollouts" in text
    for name in ("uniform", "early_stop"):  # each with its own n*(C) and recommendation
        said = rf"recommendation \(allocation {name}\): at C = [\d.e+]+ use n ≈ 8 [^;]*B_p ≈ 4"
        # M: the steps its FLOPs buy (all 256 of its runs' steps), not FLOPs / (B_p·n)
        assert re.search(said + r", M ≈ 256 ", text), text
    assert "n*(C) (allocation dynamic): skipped, the runs vary no n" in text
    assert re.search(
        r"allocators at equal FLOPs \(flops/total = [\d.e+]+, .*: uniform with n = 8", text
    )
    out = Path("out")
    for name in ("frontier-uniform", "frontier-early_stop", "allocators"):
        assert (out / "figures" / f"{name}.png").exists(), sorted(out.rglob("*"))
    equal = pl.read_csv(next(out.rglob("allocators_at_equal_flops.csv")))
    assert equal["allocation"].n_unique() == 3


def test_report_page_has_a_table_per_allocator_with_its_discarded_share(cli, snapshot):
    res = cli("report", str(snapshot), "--n-boot", "0", "--out", "page.html")
    assert res.exit_code == 0, res.output
    page = Path("page.html").read_text(encoding="utf-8")
    assert ">Allocators at equal FLOPs</h2>" in page
    for name in ("uniform", "dynamic", "early_stop"):
        assert f"<h4>allocation {name}: discarded share</h4>" in page
    assert "recommendation (allocation early_stop)" in page
    res = cli("report", str(snapshot), "--budget", "4096", "--out", "bad.html")
    assert res.exit_code == 2 and "--x flops/total" in " ".join(res.output.split())
    assert not Path("bad.html").exists()


def test_a_real_store_reads_each_run_as_the_allocator_it_used(tracking_uri):
    """Runs logged as `isolab train` logs them (`RunLogger`, params = `RunConfig.resolved()`)
    in a real SQLite store, and runs logged before `allocation` existed (its param absent, and
    `search_oversample` too at 1): the runs table reads each back as the allocator it ran."""
    from isolab.config import RunConfig
    from isolab.tracking.logger import RunLogger

    def log(experiment: str, cfg: RunConfig, drop: tuple[str, ...] = ()) -> None:
        run = RunLogger(experiment, cfg.run_name, cfg.run_key, tracking_uri)
        run.log_params({k: v for k, v in cfg.resolved().items() if k not in drop})
        run.log_metrics({EVAL_AVG: 0.5, FLOPS_TOTAL: 1e9, ROLLOUTS: 64.0}, step=1)
        run.flush()
        run.end()

    now = {
        "uniform": RunConfig(n=4),
        "dynamic": RunConfig(n=4, allocation="dynamic", search_oversample=2),
        "early_stop": RunConfig(n=8, allocation="early_stop", search_oversample=2),
        "variance": RunConfig(n=4, allocation="variance"),
    }
    for cfg in now.values():
        log("alloc", cfg)
    df = load_runs("alloc", tracking_uri=tracking_uri)
    assert dict(df.select("run_name", "allocation").iter_rows()) == {
        cfg.run_name: name for name, cfg in now.items()
    }
    before = {"uniform": RunConfig(n=2), "dynamic": RunConfig(n=2, search_oversample=4)}
    log("before", before["uniform"], drop=("allocation", "search_oversample"))
    log("before", before["dynamic"], drop=("allocation",))
    old = load_runs("before", tracking_uri=tracking_uri)
    assert dict(old.select("run_key", "allocation").iter_rows()) == {
        cfg.run_key: name for name, cfg in before.items()
    }
    # the legacy spelling of dynamic and today's are one configuration (one run key)
    assert before["dynamic"].run_key == before["dynamic"].replace(allocation="dynamic").run_key
