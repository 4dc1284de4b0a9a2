"""Tidy-table aggregation of a sweep: runs -> per-seed selection -> per-cell mean/std -> phase.

Input is the long table of :meth:`ResultStore.to_dataframe` / :func:`run_sweep`
(one row per run x kind x metric, axis values as columns such as ``init.gamma``).

The NeurIPS rule (§4, Fig. 2): for each seed, the best value of each metric over
learning rates; then the mean (and std) over seeds, per cell of the remaining
axes. "Best" is the maximum, or the minimum for losses and ``ood_other_frac``.
``source="best"`` takes each run's best value over training (what the papers'
code reports on the test sets); ``source="final"`` takes the last evaluation.

Failed and diverged runs (``failed="exclude"``, the default) are dropped before
the selection: a seed whose every learning rate failed contributes nothing and a
cell with no successful run has NaN means and ``n_seeds == 0``. With
``failed="zero"`` they count as accuracy 0 (higher-is-better metrics; NaN for the
others), so a cell's mean is pulled down by its failures. Runs still pending or
running are always ignored. NaN values of a finished run (e.g.
``ood_symmetric_acc`` when no held-out pair has a trained mirror) are skipped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from anchorlab.config import ConfigError
from anchorlab.eval.definitions import metric_definition
from anchorlab.eval.phases import PhaseThresholds, classify_phases
from anchorlab.metric_order import lower_is_better
from anchorlab.run_status import TRAINED

if TYPE_CHECKING:
    import pandas as pd

AXIS_PREFIXES = ("task.", "model.", "init.", "optim.", "train.")
FAILED = ("failed", "diverged")


def _as_tuple(path: str, v: Any) -> tuple[str, ...]:
    if v is None:
        return ()
    if isinstance(v, str):
        return (v,)
    if isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
        return tuple(v)
    raise ConfigError(f"{path}: expected a dotted key or a list of them, got {v!r}")


@dataclass(frozen=True)
class AggregateOptions:
    """How to reduce a sweep to one value per cell.

    ``select_over``: axes to take the best over, per seed (learning rate).
    ``seeds``: axes averaged over after the selection.
    ``metrics``: the named metric definition (anchor task) whose columns the
    phases and figures read as ID / OOD / commutativity
    (:data:`anchorlab.eval.definitions.METRIC_DEFINITIONS`).
    ``select_by``: None picks the best of each metric independently (the NeurIPS
    text: "the highest accuracy for the inferential and symmetric mappings is
    selected"); a metric name picks one run per seed by that metric and reports
    all its metrics.
    """

    source: str = "best"
    select_over: tuple[str, ...] = ("optim.lr", "optim.peak_lr")
    seeds: tuple[str, ...] = ("train.init_seed", "train.data_seed")
    select_by: str | None = None
    failed: str = "exclude"
    thresholds: PhaseThresholds = field(default_factory=PhaseThresholds)
    metrics: str = "anchorlab"

    def __post_init__(self) -> None:
        metric_definition(self.metrics)
        if self.source not in ("best", "final"):
            raise ConfigError(f"aggregate.source: must be 'best' or 'final', got {self.source!r}")
        if self.failed not in ("exclude", "zero"):
            raise ConfigError(f"aggregate.failed: must be 'exclude' or 'zero', got {self.failed!r}")
        both = set(self.select_over) & set(self.seeds)
        if both:
            raise ConfigError(f"aggregate.seeds: {sorted(both)} also in aggregate.select_over")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "AggregateOptions":
        allowed = ("source", "select_over", "seeds", "select_by", "failed", "thresholds", "metrics")
        kw: dict[str, Any] = {}
        for k, v in (data or {}).items():
            if k not in allowed:
                raise ConfigError(f"aggregate.{k}: unknown key; allowed: {', '.join(allowed)}")
            if k in ("select_over", "seeds"):
                v = _as_tuple(f"aggregate.{k}", v)
            elif k == "thresholds":
                v = PhaseThresholds.from_dict(v)
            elif k == "select_by" and v is not None and not isinstance(v, str):
                raise ConfigError(f"aggregate.select_by: expected a metric name, got {v!r}")
            kw[k] = v
        return cls(**kw)

    def to_dict(self) -> dict[str, Any]:
        t = self.thresholds
        return {"source": self.source, "select_over": list(self.select_over), "seeds": list(self.seeds),
                "select_by": self.select_by, "failed": self.failed, "metrics": self.metrics,
                "thresholds": {"id": t.id_threshold, "ood": t.ood_threshold,
                               "commutativity": t.comm_threshold}}


# ------------------------------------------------------------------ tables
def axis_columns(df: pd.DataFrame) -> list[str]:
    """Axis columns: ``df.attrs['axes']`` if set, else the columns named like config keys."""
    axes = df.attrs.get("axes")
    if axes:
        return [a for a in axes if a in df.columns]
    return [c for c in df.columns if isinstance(c, str) and c.startswith(AXIS_PREFIXES)]


def runs_table(df: pd.DataFrame, source: str = "best", axes: Sequence[str] | None = None,
               metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Long store table -> one row per run: run_id, status, axes..., one column per metric.

    Runs without metrics of kind ``source`` (failed, pending) keep a row of NaN.
    """
    import pandas as pd

    for col in ("run_id", "status", "kind", "metric", "value"):
        if col not in df.columns:
            raise ConfigError(f"runs_table: column {col!r} missing; pass the long table of "
                              "ResultStore.to_dataframe()")
    if source not in ("best", "final"):
        raise ConfigError(f"source: must be 'best' or 'final', got {source!r}")
    axes = list(axes) if axes is not None else axis_columns(df)
    runs = df[["run_id", "status", *axes]].drop_duplicates("run_id").set_index("run_id")
    sel = df[(df.kind == source) & df.metric.notna()]
    if metrics is not None:
        sel = sel[sel.metric.isin(metrics)]
    wide = sel.pivot_table(index="run_id", columns="metric", values="value", aggfunc="first", dropna=False)
    wide.columns.name = None
    out = runs.join(wide, how="left").reset_index()
    if metrics is not None:
        missing = [m for m in metrics if m not in out.columns]
        if missing:
            out = pd.concat([out, pd.DataFrame(math.nan, index=out.index, columns=missing)], axis=1)
    out.attrs["axes"] = axes
    return out


def _metric_columns(runs: pd.DataFrame, axes: Sequence[str]) -> list[str]:
    fixed = {"run_id", "status", *axes}
    return [c for c in runs.columns if c not in fixed]


def aggregate(df: pd.DataFrame, options: AggregateOptions = AggregateOptions(),
              axes: Sequence[str] | None = None, metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Per cell of the non-selected, non-seed axes: ``<metric>`` (mean over seeds), ``<metric>_std``
    (sample std, NaN with one seed), ``n_seeds`` (seeds with a successful run), ``n_runs``, ``n_failed``.
    """
    import pandas as pd

    o = options
    runs = runs_table(df, o.source, axes, metrics)
    axes = runs.attrs["axes"]
    mcols = _metric_columns(runs, axes)
    over = [a for a in o.select_over if a in axes]
    seeds = [a for a in o.seeds if a in axes]
    seed_keys = [a for a in axes if a not in over]
    cell_keys = [a for a in seed_keys if a not in seeds]
    if o.select_by is not None and o.select_by not in mcols:
        raise ConfigError(f"aggregate.select_by: metric {o.select_by!r} not in the table")

    runs = runs.copy()
    runs["_all"] = 0  # a constant key so that a grid without axes still groups
    seed_keys, cell_keys = ["_all", *seed_keys], ["_all", *cell_keys]
    counts = (runs.assign(_failed=runs.status.isin(FAILED)).groupby(cell_keys, dropna=False)
              .agg(n_runs=("run_id", "size"), n_failed=("_failed", "sum")))

    if o.failed == "exclude":
        ok = runs[runs.status.isin(TRAINED)]
    else:
        ok = runs[runs.status.isin(TRAINED + FAILED)].copy()
        bad = ok.status.isin(FAILED).to_numpy()
        fill = {m: ok[m].where(~bad, math.nan if lower_is_better(m) else 0.0) for m in mcols}
        ok = ok.assign(**fill) if fill else ok

    if ok.empty:
        per_seed = pd.DataFrame({**{k: pd.Series(dtype=runs[k].dtype) for k in seed_keys},
                                 **{m: pd.Series(dtype=float) for m in mcols}})
    elif o.select_by is None:
        g = ok.groupby(seed_keys, dropna=False)
        low = [m for m in mcols if lower_is_better(m)]
        high = [m for m in mcols if not lower_is_better(m)]
        parts = ([g[low].min()] if low else []) + ([g[high].max()] if high else [])
        per_seed = (pd.concat(parts, axis=1)[mcols] if parts else g.size().to_frame("_n")[[]]).reset_index()
    else:
        asc = lower_is_better(o.select_by)
        ordered = ok.sort_values([*seed_keys, "run_id"], kind="mergesort")
        ordered = ordered.sort_values(o.select_by, ascending=asc, na_position="last", kind="mergesort")
        per_seed = ordered.groupby(seed_keys, dropna=False).head(1)[[*seed_keys, *mcols]]

    g = per_seed.groupby(cell_keys, dropna=False)
    mean = g[mcols].mean()
    std = g[mcols].std(ddof=1).add_suffix("_std")
    n = g.size().rename("n_seeds")
    n = n.reindex(counts.index).fillna(0).astype(int)
    out = pd.concat([counts, n, mean.reindex(counts.index), std.reindex(counts.index)], axis=1)
    out = out.copy().reset_index().drop(columns="_all")
    lead = [k for k in cell_keys if k != "_all"]
    out = out.sort_values(lead, kind="mergesort").reset_index(drop=True) if lead else out
    out.attrs["axes"] = lead
    return out


def phase_diagram(df: pd.DataFrame, options: AggregateOptions = AggregateOptions(),
                  axes: Sequence[str] | None = None, *, id_col: str | None = None, ood_col: str | None = None,
                  comm_col: str | None = None) -> pd.DataFrame:
    """:func:`aggregate` then :func:`~anchorlab.eval.phases.classify_phases` on the cell means.

    The ID / OOD / commutativity columns default to ``options.metrics``' definition.
    """
    d = metric_definition(options.metrics)
    table = aggregate(df, options, axes)
    out = classify_phases(table, options.thresholds, id_col=id_col or d.id, ood_col=ood_col or d.ood,
                          comm_col=comm_col or d.commutativity)
    out.attrs["axes"] = table.attrs.get("axes", [])
    return out


def history_table(df: pd.DataFrame, run_id: str) -> pd.DataFrame:
    """Long table with ``kind == 'history'`` rows -> one row per step of ``run_id``, one column per metric."""
    h = df[(df.run_id == run_id) & (df.kind == "history")]
    if h.empty:
        raise ConfigError(f"history_table: no history rows for run {run_id!r}; "
                          "load them with to_dataframe(kinds=('history',))")
    wide = h.pivot_table(index="step", columns="metric", values="value", aggfunc="first", dropna=False)
    wide.columns.name = None
    return wide.reset_index().sort_values("step").reset_index(drop=True)
