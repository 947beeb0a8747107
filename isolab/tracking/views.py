"""How the MLflow UI opens an isolab experiment: a *shared view* of its runs table and charts.

MLflow's experiment page restores a view from an experiment tag `mlflow.sharedViewState.<key>`
when its URL carries `viewStateShareKey=<key>` (the "Share" button of the runs page writes the
same tag; MLflow 3.17's `useSharedExperimentViewState`). The tag holds the page's search facets
(`searchFilter`, `orderByKey`, …) and UI state (`selectedColumns`, `compareRunCharts`,
`globalLineChartConfig`, …) as JSON. isolab's view of a sweep:

- the grid's points, flat: `tags.isolab.kind IS NULL` leaves out the sweep's parent run (which
  would fold every point under one row), leases and analysis runs;
- best final avg@4 first, with n, B_p, M and seed (params) and the final avg@4, ρ, total FLOPs
  and rollouts (metrics: the runs table shows a metric's last value) as columns;
- every run in the charts (MLflow charts its first 10 by default), every line chart against
  compute: x is the metric `compute/rollouts` (MLflow's "Metric" x-axis pairs two metrics
  logged at the same steps, as the ledger logs them), and a first chart section "At equal
  compute" with avg/best/worst@4, ρ and FLOPs against rollouts or FLOPs.

`ensure_view` writes the tag (`isolab ui` as it starts, a finished run, an import) and `runs_url`
gives the link that opens it.

Charts colour runs by n, not one colour per run: MLflow 3.17 keeps a run's colour in its tag
`mlflow.runColor` (what its colour picker writes, read back with every runs search), and
isolab writes it from n (`colour_tags`): one colour per n, viridis over log₂ n, the same in
every sweep. Links open MLflow's model-training mode (`ML_MODE`): MLflow 3.17 picks its mode
from the URL's `workflowType`, else from the browser's last choice (its local storage, GenAI
until a person switches); the experiment's `mlflow.experimentKind` tag only counts where that
switch is off. `isolab ui` stores model training as that choice where a browser has none
(`isolab.tracking.ui_mode`), so that a run opened from the runs table opens in it too.
"""

from __future__ import annotations

import json
import math
from typing import Any

from mlflow.tracking import MlflowClient

from isolab.tracking.tags import EXPERIMENT_KIND, KIND_TAG, mlflow_key
from isolab.vocab import DEFAULT_METRICS, EVAL_PREFIX, FLOPS_TOTAL, RHO, ROLLOUTS, eval_metric

#: MLflow's prefix of a shared view's experiment tag, and the URL parameter naming its key.
SHARED_VIEW_PREFIX = "mlflow.sharedViewState."
SHARE_KEY_PARAM = "viewStateShareKey"
#: isolab's view: one key, its content rewritten as the experiment's runs change, so that a
#: link printed (or bookmarked) before the runs were written opens the view of now.
SHARE_KEY = "isolab"
VIEW_TAG = f"{SHARED_VIEW_PREFIX}{SHARE_KEY}"
KIND_KEY = next(iter(EXPERIMENT_KIND))
#: The experiment page in MLflow 3's model-training mode: without `workflowType` it opens in
#: its GenAI mode (traces), whatever the experiment's kind.
ML_MODE = "workflowType=machine_learning"
#: The training runs of an experiment: not sweep parents, leases nor analysis runs.
POINTS_FILTER = f"tags.`{KIND_TAG}` IS NULL"
#: The grid's coordinates, as the runs table's columns (RunConfig's field names).
GRID_PARAMS = ("n", "B_p", "M", "seed")
SECTION = "At equal compute"


#: MLflow's run tag holding a run's colour in its charts and runs table (a CSS colour).
COLOUR_TAG = "mlflow.runColor"
#: n whose colour ends the scale: larger n share its colour.
N_COLOUR_MAX = 512


def colour_of_n(n: float) -> str:
    """The colour of a run with n rollouts per problem: viridis over log₂ n from n = 1 (dark
    purple) to `N_COLOUR_MAX` (yellow-green), so that runs of one n share a line colour and
    larger n read as lighter in every sweep."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    share = math.log2(max(float(n), 1.0)) / math.log2(N_COLOUR_MAX)
    return to_hex(colormaps["viridis"](0.9 * min(share, 1.0)))  # 0.9: no pale yellow on white


def colour_tags(params: dict[str, Any]) -> dict[str, str]:
    """The run tag that colours a run by its n (`COLOUR_TAG`); none when `params` hold no
    numeric n."""
    try:
        return {COLOUR_TAG: colour_of_n(float(params["n"]))}
    except (KeyError, TypeError, ValueError):
        return {}


#: What a sweep's description says of its charts' colours.
COLOURS_NOTE = (
    "Charts colour each run by its n: dark purple for small n, to green and yellow for large n."
)
#: What an experiment's description says of MLflow's mode: a run opened from MLflow's own runs
#: table carries no `workflowType`, and opens in the browser's stored mode: model training under
#: `isolab ui` (`ui_mode`), GenAI under another server until the browser has been switched once
#: (checked in MLflow 3.17.2: the switch is then kept in its local storage).
MODE_NOTE = (
    "Served by `isolab ui`, MLflow opens in its **Model training** mode; under another server, "
    "a run opened from MLflow's runs table shows MLflow's GenAI menus until this browser has "
    "picked **Model training** once (the switch at the top left; MLflow remembers it). "
    "isolab's own links open in it."
)


def _col(kind: str, key: str) -> str:
    """A runs-table column's id as MLflow's UI writes it (`makeCanonicalSortKey`)."""
    return f"{kind}.`{key}`"


def eval_key(stat: str, metric_keys: set[str]) -> str | None:
    """MLflow's key of `eval/<stat>@4`, else of the largest k logged (`eval/avg_at_8`)."""
    preferred = mlflow_key(eval_metric(stat, 4))
    if preferred in metric_keys:
        return preferred
    prefix = mlflow_key(f"{EVAL_PREFIX}{stat}@")
    ks = [
        int(k[len(prefix) :])
        for k in metric_keys
        if k.startswith(prefix) and k[len(prefix) :].isdigit()
    ]
    return f"{prefix}{max(ks)}" if ks else None


def _line(uuid: str, y: str, x: str, title: str) -> dict[str, Any]:
    """A line chart of metric `y` against metric `x` (MLflow's `RunsChartsLineCardConfig`)."""
    return {
        "uuid": uuid,
        "type": "LINE",
        "metricSectionId": SECTION,
        "isGenerated": False,
        "deleted": False,
        "runsCountToCompare": 100,
        "displayName": title,
        "metricKey": y,
        "selectedMetricKeys": [y],
        "xAxisKey": "metric",
        "selectedXAxisMetricKey": x,
        "useGlobalXaxisKey": False,
        "xAxisScaleType": "linear",
        "scaleType": "linear",
        "lineSmoothness": 0,
        "useGlobalLineSmoothing": False,
        "yAxisKey": "metric",
        "yAxisExpressions": [],
        "ignoreOutliers": False,
        "range": {},
    }


def view_state(metric_keys: set[str], param_keys: set[str]) -> dict[str, Any]:
    """The shared view of a sweep whose runs log `metric_keys` (MLflow's names) and
    `param_keys`: columns, order, filter and charts, as MLflow's UI reads them."""
    avg, best, worst = (eval_key(s, metric_keys) for s in ("avg", "best", "worst"))
    metrics = [k for k in (avg, RHO, FLOPS_TOTAL, ROLLOUTS) if k and k in metric_keys]
    params = [p for p in GRID_PARAMS if p in param_keys]
    columns = [_col("params", p) for p in params] + [_col("metrics", m) for m in metrics]
    charts = [
        (avg, ROLLOUTS, "avg@k against rollouts"),
        (avg, FLOPS_TOTAL, "avg@k against FLOPs"),
        (best, ROLLOUTS, "best@k against rollouts"),
        (worst, ROLLOUTS, "worst@k against rollouts"),
        (RHO, FLOPS_TOTAL, "ρ against FLOPs"),
        (FLOPS_TOTAL, ROLLOUTS, "FLOPs against rollouts"),
    ]
    cards = [
        _line(f"isolab-{i}", y, x, title)
        for i, (y, x, title) in enumerate(charts)
        if y in metric_keys and x in metric_keys
    ]
    state: dict[str, Any] = {
        "searchFilter": POINTS_FILTER,
        "orderByKey": _col("metrics", avg) if avg else "attributes.start_time",
        "orderByAsc": False,
        "selectedColumns": columns,
        "columnOrder": columns,
        # wide enough for a run name with its seed and for a metric's digits
        "columnWidths": {
            _col("attributes", "Run Name"): 220,
            **{_col("params", p): 80 for p in params},
            **{_col("metrics", m): 150 for m in metrics},
        },
        "runsHiddenMode": "SHOW_ALL",
        "hideEmptyCharts": True,
    }
    if ROLLOUTS in metric_keys:
        state["globalLineChartConfig"] = {
            "xAxisKey": "metric",
            "selectedXAxisMetricKey": ROLLOUTS,
            "lineSmoothness": 0,
        }
    if cards:
        state["compareRunCharts"] = cards
        state["compareRunSections"] = [
            {"uuid": SECTION, "name": SECTION, "display": True, "isReordered": False}
        ]
    return state


def ensure_view(c: MlflowClient, experiment_id: str) -> str | None:
    """The key of isolab's view of the experiment (`SHARE_KEY`), its tag written or brought up
    to date with the metrics and params a training run of it logged (isolab's defaults while
    it has none). None for an experiment that is not isolab's (no training run, no isolab
    kind tag): nothing is written there."""
    exp = c.get_experiment(experiment_id)
    # a finished run has logged every metric it will (a running one may lack ρ, evaluations)
    found = c.search_runs(
        [experiment_id], f"{POINTS_FILTER} and attributes.status = 'FINISHED'", max_results=1
    ) or c.search_runs([experiment_id], filter_string=POINTS_FILTER, max_results=1)
    if found:
        metrics, params = set(found[0].data.metrics), set(found[0].data.params)
    elif exp.tags.get(KIND_KEY) == EXPERIMENT_KIND[KIND_KEY]:
        metrics = {mlflow_key(k) for k in (*DEFAULT_METRICS, RHO, FLOPS_TOTAL, ROLLOUTS)}
        params = set(GRID_PARAMS)
    else:
        return None
    value = json.dumps(view_state(metrics, params), sort_keys=True)
    if exp.tags.get(VIEW_TAG) != value:
        c.set_experiment_tag(experiment_id, VIEW_TAG, value)
    return SHARE_KEY


def _page(base: str, route: str) -> str:
    """The UI's page `route` on server `base`; with base "", a link relative to the page it
    is on (`#/…`: what a description's Markdown links to, whatever the server's address)."""
    return f"{base}/#/{route}" if base else f"#/{route}"


def runs_url(base: str, experiment_id: str, key: str | None = None, charts: bool = False) -> str:
    """The experiment's runs page in model-training mode, opening view `key` (`ensure_view`);
    with `charts`, on its chart view."""
    url = _page(base, f"experiments/{experiment_id}/runs?{ML_MODE}")
    if key:
        url += f"&{SHARE_KEY_PARAM}={key}"
    if charts:
        url += "&compareRunsMode=CHART"
    return url


def run_url(base: str, experiment_id: str, run_id: str, artifact: str | None = None) -> str:
    """A run's page in model-training mode; with `artifact`, its Artifacts tab on that file."""
    tail = f"/artifacts/{artifact}" if artifact else ""
    return _page(base, f"experiments/{experiment_id}/runs/{run_id}{tail}?{ML_MODE}")
