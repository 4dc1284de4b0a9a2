"""``anchorlab report SWEEP_DIR``: figures and tables of a sweep as one HTML page.

Reads ``SWEEP_DIR/results.sqlite`` and ``sweep.yaml``, aggregates with the
spec's ``aggregate`` options (NeurIPS rule by default), classifies phases, and
draws every figure the sweep's axes allow:

* ``init.gamma`` x ``model.n_layers``  -> NeurIPS Fig. 2 (symmetric / inferential heatmaps)
* ``init.gamma`` x ``optim.weight_decay`` -> journal Fig. 3B (OOD heatmap, phases marked)
* ``init.gamma`` (per value of any other axis) -> journal Fig. 3A (ID/OOD vs gamma, phase bands)
* each run's training curve (first ``max_curves`` runs)
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


def load_sweep_results(sweep_dir: str | Path) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """(long metric table incl. history, phase-diagram cell table, spec dict)."""
    from .sweep.aggregate import AggregateOptions, phase_diagram
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
    cells = phase_diagram(fb, opts, axes=[a for a in axes if a in df.columns])
    return df, cells, spec


def _stable_rank_bubbles(d: Path, df: pd.DataFrame, cells: pd.DataFrame, out: Path) -> list[Path]:
    """Journal Fig. 5C: bubble size = phase of the cell, colour = stable rank of the
    first-layer query weights averaged over the cell's finished runs."""
    from .analysis.complexity_report import sweep_stable_ranks
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
    from .plots.phase import plot_neurips_fig2, plot_ood_heatmap, plot_phase_vs_gamma, plot_run_history, save
    from .sweep.aggregate import history_table

    d = Path(sweep_dir)
    out = d / "report"
    out.mkdir(parents=True, exist_ok=True)
    df, cells, spec = load_sweep_results(d)
    axes = cells.attrs.get("axes", [])
    parts = [f"<h1>Sweep {html.escape(str(spec.get('name', d.name)))}</h1>",
             f"<p>{df.run_id.nunique()} runs; axes: {html.escape(', '.join(axes) or '(none)')}; "
             f"aggregation: {html.escape(str(spec.get('aggregate') or 'default (best over training, best lr per seed, mean over seeds)'))}</p>"]
    status = df.drop_duplicates("run_id").status.value_counts().to_dict() if "status" in df else {}
    parts.append(f"<p>status: {html.escape(str(status))}</p>")
    atomic_write(out / "cells.csv", lambda p: cells.to_csv(p, index=False))

    figs: list[Path] = []
    if "init.gamma" in axes and "model.n_layers" in axes and len(axes) == 2:
        figs += save(plot_neurips_fig2(cells), out / "fig2")[:1]
    if "init.gamma" in axes and "optim.weight_decay" in axes and len(axes) == 2:
        figs += save(plot_ood_heatmap(cells), out / "fig3b")[:1]
        figs += _stable_rank_bubbles(d, df, cells, out)
    if "init.gamma" in axes:
        others = [a for a in axes if a != "init.gamma"]
        groups = cells.groupby(others) if others else [((), cells)]
        for key, sub in groups:
            tag = "_".join(f"{a}={v}" for a, v in zip(others, key if isinstance(key, tuple) else (key,)))
            figs += save(plot_phase_vs_gamma(sub), out / f"fig3a{('_' + tag) if tag else ''}")[:1]
    for rid in list(df.run_id.drop_duplicates())[:max_curves]:
        h = history_table(df, rid)
        if len(h):
            figs += save(plot_run_history(h), out / f"curve_{rid}", formats=("png",))[:1]
    parts += [_img(f, out) for f in figs]
    cols = [c for c in cells.columns if "/" not in c]
    parts.append("<h2>Cells (phase diagram table)</h2>" + cells[cols].to_html(index=False, float_format="%.3f"))
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>anchorlab report</title>"
            "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse;"
            "font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px}</style></head><body>"
            + "\n".join(parts) + "</body></html>")
    return write_text(out / "index.html", page)
