"""``anchorlab report SWEEP_DIR``: figures and tables of a sweep as one HTML page.

Reads ``SWEEP_DIR/results.sqlite`` and ``sweep.yaml``, aggregates with the
spec's ``aggregate`` options (NeurIPS rule by default) and draws every figure
the sweep's task and axes allow. For every task: the task's headline metrics
against each axis (other axes as lines) and each run's training curve (first
``max_curves`` runs). For the anchor task, phases are classified and:

* ``init.gamma`` x ``model.n_layers``  -> NeurIPS Fig. 2 (symmetric / inferential heatmaps)
* ``init.gamma`` x ``optim.weight_decay`` -> journal Fig. 3B (OOD heatmap, phases marked) and Fig. 5C
* ``init.gamma`` (per value of any other axis) -> journal Fig. 3A (ID/OOD vs gamma, phase bands)
"""

from __future__ import annotations

import html
import logging
from pathlib import Path

import pandas as pd
import yaml

from .config import ConfigError
from .io import atomic_write, write_text

log = logging.getLogger(__name__)


def sweep_task(sweep_dir: str | Path) -> str:
    """The task name of a sweep's runs (from the stored configs)."""
    import json
    import sqlite3

    con = sqlite3.connect(f"file:{Path(sweep_dir) / 'results.sqlite'}?mode=ro", uri=True)
    try:
        row = con.execute("SELECT config FROM runs LIMIT 1").fetchone()
    finally:
        con.close()
    return (json.loads(row[0]).get("task") or {}).get("name", "anchor") if row else "anchor"


def load_sweep_results(sweep_dir: str | Path) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """(long metric table incl. history, cell table, spec dict); anchor sweeps' cells carry phases."""
    from .sweep.aggregate import AggregateOptions, aggregate, phase_diagram
    from .sweep.store import ResultStore

    d = Path(sweep_dir)
    if not (d / "results.sqlite").exists():
        raise ConfigError(f"sweep dir {d}: no results.sqlite; run `anchorlab sweep SPEC --out {d}` first")
    spec = yaml.safe_load((d / "sweep.yaml").read_text()) if (d / "sweep.yaml").exists() else {}
    axes = []
    for k in (spec.get("axes") or {}):
        axes.append(k)
    for z in spec.get("zip") or []:
        axes += list(z)
    with ResultStore(d / "results.sqlite", axes=axes) as store:
        df = store.to_dataframe(kinds=("final", "best", "history"))
    opts = AggregateOptions.from_dict(spec.get("aggregate"))
    fb = df[df.kind.isin(["final", "best"])]
    present = [a for a in axes if a in df.columns]
    if sweep_task(d) == "anchor":
        cells = phase_diagram(fb, opts, axes=present)
    else:
        cells = aggregate(fb, opts, axes=present)
    return df, cells, spec


def _stable_rank_bubbles(d: Path, df: pd.DataFrame, cells: pd.DataFrame, out: Path) -> list[Path]:
    """Journal Fig. 5C: bubble size = phase of the cell, colour = stable rank of the
    first-layer query weights averaged over the cell's finished runs."""
    from .analysis.registry import sweep_stable_ranks
    from .plots.complexity import plot_stable_rank_bubbles
    from .plots.phase import save

    sr = sweep_stable_ranks(d)
    if sr.empty:
        return []
    keys = ["init.gamma", "optim.weight_decay"]
    runs = df.drop_duplicates("run_id")[["run_id", *keys]].merge(sr, on="run_id")
    per_cell = runs.groupby(keys, as_index=False).stable_rank.mean()
    table = cells[[*keys, "phase"]].merge(per_cell, on=keys)
    atomic_write(out / "fig5c.csv", lambda p: table.to_csv(p, index=False))
    return save(plot_stable_rank_bubbles(table), out / "fig5c")[:1]


def _img(path: Path, root: Path) -> str:
    return f'<figure><img src="{html.escape(str(path.relative_to(root)))}" style="max-width:100%"></figure>'


def make_report(sweep_dir: str | Path, max_curves: int = 8) -> Path:
    """Write ``SWEEP_DIR/report/index.html`` (+ PNG/PDF figures and CSV tables); return its path."""
    from .plots.phase import plot_neurips_fig2, plot_ood_heatmap, plot_phase_vs_gamma, save
    from .plots.sweep import plot_metric_vs_axis
    from .tasks.base import task_class

    d = Path(sweep_dir)
    out = d / "report"
    out.mkdir(parents=True, exist_ok=True)
    df, cells, spec = load_sweep_results(d)
    axes = cells.attrs.get("axes", [])
    task_name = sweep_task(d)
    headline = [m for m in task_class(task_name).headline if m in cells.columns]
    parts = [f"<h1>Sweep {html.escape(str(spec.get('name', d.name)))}</h1>",
             f"<p>task: {html.escape(task_name)}; {df.run_id.nunique()} runs; axes: "
             f"{html.escape(', '.join(axes) or '(none)')}; "
             f"aggregation: {html.escape(str(spec.get('aggregate') or 'default (best over training, best lr per seed, mean over seeds)'))}</p>"]
    status = df.drop_duplicates("run_id").status.value_counts().to_dict() if "status" in df else {}
    parts.append(f"<p>status: {html.escape(str(status))}</p>")
    atomic_write(out / "cells.csv", lambda p: cells.to_csv(p, index=False))

    figs: list[Path] = []
    numeric = [a for a in axes if pd.api.types.is_numeric_dtype(cells[a]) and cells[a].nunique() > 1]
    for x in numeric if headline else ():
        others = [a for a in axes if a != x and cells[a].nunique() > 1]
        if len(cells.drop_duplicates(others)) > 6:
            continue  # too many lines to read; the cells table has them
        lines = cells.assign(setting=[", ".join(f"{a}={r[a]}" for a in others) for _, r in cells.iterrows()])
        fig = plot_metric_vs_axis(lines, x, headline, hue="setting" if others else None,
                                  title=f"{task_name}: headline metrics vs {x}")
        figs += save(fig, out / f"metrics_vs_{x.replace('.', '_')}", formats=("png",))[:1]
    if task_name != "anchor":
        figs += _curves(df, out, max_curves)
        return _page(out, parts, figs, cells)
    if "init.gamma" in axes and "model.n_layers" in axes and len(axes) == 2:
        figs += save(plot_neurips_fig2(cells), out / "fig2")[:1]
    from .sweep.aggregate import AggregateOptions
    from .tasks.anchor.metrics import metric_definition

    mdef = metric_definition(AggregateOptions.from_dict(spec.get("aggregate")).metrics)
    parts.append(f"<p>metric definition: {html.escape(mdef.text)}</p>")
    if "init.gamma" in axes and "optim.weight_decay" in axes and len(axes) == 2:
        figs += save(plot_ood_heatmap(cells, ood_col=mdef.ood, id_col=mdef.id, comm_col=mdef.commutativity),
                     out / "fig3b")[:1]
        figs += _stable_rank_bubbles(d, df, cells, out)
    if "init.gamma" in axes:
        others = [a for a in axes if a != "init.gamma"]
        groups = cells.groupby(others) if others else [((), cells)]
        for key, sub in groups:
            tag = "_".join(f"{a}={v}" for a, v in zip(others, key if isinstance(key, tuple) else (key,)))
            figs += save(plot_phase_vs_gamma(sub, id_col=mdef.id, ood_col=mdef.ood),
                         out / f"fig3a{('_' + tag) if tag else ''}")[:1]
    figs += _curves(df, out, max_curves)
    return _page(out, parts, figs, cells)


def _curves(df: pd.DataFrame, out: Path, max_curves: int) -> list[Path]:
    from .plots.phase import plot_run_history, save
    from .sweep.aggregate import history_table

    figs: list[Path] = []
    for rid in list(df[df.kind == "history"].run_id.drop_duplicates())[:max_curves]:
        h = history_table(df, rid)
        if len(h):
            figs += save(plot_run_history(h), out / f"curve_{rid}", formats=("png",))[:1]
    return figs


def _page(out: Path, parts: list[str], figs: list[Path], cells: pd.DataFrame) -> Path:
    parts = list(parts) + [_img(f, out) for f in figs]
    cols = [c for c in cells.columns if "/" not in c]
    title = "Cells (phase diagram table)" if "phase" in cells.columns else "Cells (mean over seeds)"
    parts.append(f"<h2>{title}</h2>" + cells[cols].to_html(index=False, float_format="%.3f"))
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>anchorlab report</title>"
            "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse;"
            "font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px}</style></head><body>"
            + "\n".join(parts) + "</body></html>")
    return write_text(out / "index.html", page)
