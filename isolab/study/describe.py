"""The notebooks' prose about their data, written from the runs they were given (issue 48).

A notebook run on a researcher's own sweep (`papermill … -p runs my-sweep`) must not describe
the curated sweeps. `describe_runs(study, data)` states what was run — per sweep its runs,
model and task, splits, n and B_p, seeds per configuration, the compute each run reached (in
rollouts and FLOPs) and its evaluations — which of the study's sweeps are absent, and, per
claim of the study (`isolab/study/<study>/claims.py`), what these runs lack for its test: a
sweep it reads, its split, a second seed, or what its gate refuses. The notebooks show it as
Markdown; their fixed markdown explains the method only.

Which sweeps a claim reads, and why its test would not run, are not retyped here: the claim's
own gate and test are called on the data (as `isolab.verdicts.claim.evaluate_claims` calls
them, seconds per study), recording each sweep they ask for (`_Reads`); a missing sweep stops
the test at its first read (a `KeyError`, as `evaluate_claims` treats it)."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from isolab.study.claims import claims_of
from isolab.study.registry import Study
from isolab.table import with_cell
from isolab.verdicts.claim import Claim, Data
from isolab.vocab import FLOPS_TOTAL, ROLLOUTS, RUN_KEY, STEP


class _Reads(dict[str, pl.DataFrame]):
    """A study's data that records every sweep asked for (`[]`, `in`; no claim calls `get`):
    which sweeps a claim's test reads, found by calling it."""

    def __init__(self, data: Data) -> None:
        super().__init__(data)
        self.asked: list[str] = []

    def __getitem__(self, key: str) -> pl.DataFrame:
        self.asked.append(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.asked.append(str(key))
        return super().__contains__(key)


def _values(df: pl.DataFrame, column: str) -> list:
    return sorted(df[column].drop_nulls().unique().to_list()) if column in df.columns else []


def _listed(values: list) -> str:
    """`{2, 4, 8}`, or the one value alone."""
    shown = [f"{v:,}" if isinstance(v, int) else str(v) for v in values]
    return shown[0] if len(shown) == 1 else "{" + ", ".join(shown) + "}"


def _span(values: list[float], fmt: str) -> str:
    """One value, or `lo to hi`, each formatted with `fmt` (`3.9e12`, not `3.9e+12`)."""
    lo, hi = (re.sub(r"e\+0*", "e", format(v, fmt)) for v in (min(values), max(values)))
    return lo if lo == hi else f"{lo} to {hi}"


def seeds_per_configuration(df: pl.DataFrame) -> list[int]:
    """The number of seeds of each configuration (`isolab.table.with_cell`), sorted."""
    if "seed" not in df.columns or not df.height:
        return []
    per = with_cell(df).group_by("cell").agg(pl.col("seed").n_unique().alias("k"))
    return sorted(set(per["k"].to_list()))


def sweep_sentence(name: str, df: pl.DataFrame, study: Study) -> str:
    """One sweep's runs in a sentence: how many, of what, over which grid, to what compute."""
    if not df.height:
        return f"`{name}`: no runs."
    runs = df[RUN_KEY].n_unique()
    experiments = _values(df, "experiment")
    ours = all(e.startswith(f"{study.data_study}/") for e in experiments)
    named = ", ".join(f"`{e}`" for e in experiments)
    head = f"`{name}` (experiment {named})" if ours else f"Your sweep {named} (read as `{name}`)"
    if not experiments:
        head = f"`{name}`"
    if name in study.sensitivity:
        head += " — a sensitivity sweep (one setting changed), analysed on its own"
    parts = [f"{runs:,} run{'s' * (runs != 1)}"]
    # a task card's path: its file name (the folder is the researcher's, and long)
    tasks = [Path(t).name if "/" in str(t) else t for t in _values(df, "task")]
    setting = [_listed(v) for v in (_values(df, "model"), tasks) if v]
    if setting:
        parts[0] += " of " + " on ".join(setting)
    splits = _values(df, "split")
    if splits:
        parts.append(f"split{'s' * (len(splits) > 1)} {', '.join(map(str, splits))}")
    grid = [f"{c} = {_listed(_values(df, c))}" for c in ("n", "B_p") if _values(df, c)]
    parts += grid
    seeds = seeds_per_configuration(df)
    if seeds:
        k = _span([float(s) for s in seeds], ".0f")
        parts.append(f"{k} seed{'s' * (max(seeds) > 1)} per configuration")
    aggs = [pl.col(c).max() for c in (ROLLOUTS, FLOPS_TOTAL) if c in df.columns]
    if STEP in df.columns:
        aggs.append(pl.col(STEP).n_unique().alias("evals"))
    last = df.group_by(RUN_KEY).agg(aggs)
    if ROLLOUTS in last.columns:
        reached = f"{_span(last[ROLLOUTS].cast(pl.Float64).to_list(), ',.0f')} rollouts"
        if FLOPS_TOTAL in last.columns:
            reached += f" ({_span(last[FLOPS_TOTAL].cast(pl.Float64).to_list(), '.2g')} FLOPs)"
        parts.append(f"compute per run {reached}")
    if "evals" in last.columns:
        parts.append(
            f"{_span(last['evals'].cast(pl.Float64).to_list(), '.0f')} evaluations per run"
        )
    return f"{head}: " + "; ".join(parts) + "."


def first_clause(note: str) -> str:
    """A test's note up to its first `; ` outside brackets: the reason it did not run, without
    the secondary readings that follow."""
    depth = 0
    for i, ch in enumerate(note):
        depth += (ch in "([") - (ch in ")]")
        if depth == 0 and note.startswith("; ", i):
            return note[:i]
    return note


def claim_lacks(claim: Claim, data: Data) -> list[str]:
    """What `data` lacks for `claim`'s test: a sweep it reads, its split, its gate's refusal,
    a second seed, and the reason its test gives for not running (the gate and the test are
    called on `data`, recording which sweeps they read)."""
    reads = _Reads(data)
    lacks: list[str] = []
    why, result = None, None
    try:
        why = claim.gate(reads) if claim.gate is not None else None
        if why is None:
            result = claim.run(reads)
    except KeyError:  # a missing sweep, as evaluate_claims reads it: recorded in reads.asked
        pass
    read = list(dict.fromkeys(reads.asked))
    missing = [k for k in read if k not in data]
    lacks += [f"no `{k}` runs: its test reads that sweep" for k in missing]
    present = [data[k] for k in read if k in data] or list(data.values())
    if claim.split is not None:
        splits = sorted({s for df in present for s in _values(df, "split")})
        if splits and claim.split not in splits:
            lacks.append(f"no {claim.split} runs (only split {', '.join(map(str, splits))})")
    if why:
        lacks.append(f"its gate refuses these runs: {why}")
    if all(seeds_per_configuration(df) == [1] for df in present):
        lacks.append("one seed per configuration: no spread between seeds to set an interval by")
    if result is not None and not result.ran and result.note:
        lacks.append(f"its test: {first_clause(result.note)}")  # the reason, not the readings
    return lacks


def describe_runs(study: Study, data: Data) -> str:
    """Markdown: what `data` (a study's runs tables by sweep, `isolab.study.collect`) holds, the
    study's sweeps it lacks, and per claim what its test lacks (`claim_lacks`). Nothing in it
    is pre-written about the curated sweeps: it is the same for a researcher's own."""
    if not data:
        raise ValueError(
            f"no runs to describe for study {study.name!r}: pass the runs tables that "
            "isolab.study.collect returns (one per sweep)."
        )
    lines = ["**The runs analysed here** (written from the runs tables, not pre-written):", ""]
    lines += [f"- {sweep_sentence(k, df, study)}" for k, df in data.items()]
    absent = [s for s in study.sweeps if s not in data]
    if absent:
        names = ", ".join(f"`{s}`" for s in absent)
        lines.append(f"- Not in these runs: {names} (of the study's {len(study.sweeps)} sweeps).")
    lines += ["", "**What each claim's test lacks in these runs:**", ""]
    for claim in claims_of(study.name):
        lacks = claim_lacks(claim, data)
        where = f" ({claim.split})" if claim.split else ""
        said = "; ".join(lacks) if lacks else "nothing: its sweeps, split and seeds are here"
        lines.append(f"- {claim.text}{where}: {said}.")
    return "\n".join(lines)
