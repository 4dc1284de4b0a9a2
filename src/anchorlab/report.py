"""``anchorlab report SWEEP_DIR``: a sweep's runs, figures and tables as one HTML page.

Reads ``SWEEP_DIR/results.sqlite`` and ``sweep.yaml``, aggregates with the
spec's ``aggregate`` options (the papers' rule by default) and writes
``SWEEP_DIR/report/index.html`` with:

* a run table: status, axis values, the task's headline metrics (``headline``
  in ``tasks/*``, value per the aggregation source), wall time, and links to
  each run's training curve and files;
* captioned figures, each caption saying what it shows and how its values are
  defined (best or final value, selection over learning rates, mean over seeds):
  the headline metrics against each axis, and for the anchor task the paper's
  figures its axes allow:

  - ``init.gamma`` x ``model.n_layers``  -> symmetric / inferential heatmaps
  - ``init.gamma`` x ``optim.weight_decay`` -> OOD heatmap, phases marked, and the first-layer stable rank
    per cell
  - ``init.gamma`` (per value of any other axis) -> ID/OOD vs gamma, phase bands

  Captions name figures by what they vary. A bundled sweep preset may give its figures labels (the spec's
  ``captions``: the papers' presets name the paper figure each stands for); a caption carries them only when
  the sweep's ``sweep.yaml`` is, as written, that preset (no ``--set``, no ``--only``). Accuracies and
  fractions are drawn on a 0-1 axis.

* the cell table (also ``cells.csv``) and the sweep spec as YAML.

``--screenshot PNG`` (:func:`screenshot`) renders the page in headless Chromium.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from anchorlab.config import ConfigError
from anchorlab.eval.definitions import metric_definition
from anchorlab.io import atomic_write, write_text
from anchorlab.report_page import Fig, page, run_table_html, run_table_note
from anchorlab.sweep.results import load_sweep_results, spec_axes, sweep_task

log = logging.getLogger(__name__)

# The sweep presets that are a paper figure's spec (`anchorlab reproduce` runs them); a report names the figure
# only for a sweep whose spec is one of these exactly.


def _plain(spec: Any) -> Any:
    import json

    return json.loads(json.dumps(spec, default=list))


def preset_captions(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The ``captions`` of the bundled sweep preset this sweep's stored spec is, unchanged (no ``--set``, no
    ``--only``); ``{}`` for any other sweep, whose figures are named by what they vary. The library names no
    figure itself: a preset declares the labels its figures stand for."""
    from anchorlab.sweep.grid import load_sweep
    from anchorlab.sweep.presets import sweep_presets

    mine = _plain(dict(spec))
    if not mine.get("captions"):
        return {}
    for path in sweep_presets().values():
        preset = load_sweep(path)
        if preset.captions and _plain(preset.to_dict()) == mine:
            return dict(preset.captions)
    return {}


def is_fraction(metric: str) -> bool:
    """Accuracies, exact-match rates and fractions: values in [0, 1], drawn on a 0-1 axis."""
    return bool({"acc", "exact", "frac"}.intersection(re.split(r"[_/]", metric)))


def fraction_axes(fig: Any) -> Any:
    """Fix the y range of every panel titled by a fraction metric to 0-1 (a figure of :func:`plot_metric_vs_axis`)."""
    for ax in fig.axes:
        if is_fraction(ax.get_title()):
            ax.set_ylim(-0.02, 1.02)
    return fig


def aggregation_text(opts: Any, axes: Sequence[str]) -> str:
    """How a cell's value is computed from its runs, in words (for captions)."""
    if opts.source == "best":
        parts = ["each run's best value over training (the minimum for losses, the maximum otherwise; "
                 "the step-0 evaluation excluded)"]
    else:
        parts = ["each run's value at its last evaluation"]
    over = [a for a in opts.select_over if a in axes]
    seeds = [a for a in opts.seeds if a in axes]
    if over:
        how = f"the run with the best {opts.select_by}" if opts.select_by else "each metric's best run"
        parts.append(f"per seed, {how} over {', '.join(over)}")
    parts.append(f"then the mean over seeds ({', '.join(seeds)}; error bars and _std columns: the std over seeds)"
                 if seeds else "one run per cell (no seed axis)")
    parts.append("failed and diverged runs left out" if opts.failed == "exclude"
                 else "failed and diverged runs counted as accuracy 0")
    return "; ".join(parts) + "."


def _stable_rank_bubbles(d: Path, df: pd.DataFrame, cells: pd.DataFrame, out: Path) -> list[Path]:
    """Stable rank per cell: bubble size = phase of the cell, colour = stable rank of the
    first-layer query weights averaged over the cell's finished runs."""
    from anchorlab.analysis.registry import sweep_stable_ranks
    from anchorlab.plots.complexity import plot_stable_rank_bubbles
    from anchorlab.plots.save import save_figure

    sr = sweep_stable_ranks(d)
    if sr.empty:
        return []
    keys = ["init.gamma", "optim.weight_decay"]
    runs = df.drop_duplicates("run_id")[["run_id", *keys]].merge(sr, on="run_id")
    per_cell = runs.groupby(keys, as_index=False).stable_rank.mean()
    table = cells[[*keys, "phase"]].merge(per_cell, on=keys)
    atomic_write(out / "fig5c.csv", lambda p: table.to_csv(p, index=False))
    return save_figure(plot_stable_rank_bubbles(table), out / "fig5c")[:1]


def _anchor_figures(d: Path, df: pd.DataFrame, cells: pd.DataFrame, axes: list[str], out: Path,
                    definition: str, opts: Any, captions: Mapping[str, Any] | None = None) -> list[Fig]:
    """The anchor task's phase figures; ``captions`` (:func:`preset_captions`) the labels a preset gives them."""
    captions = captions or {}

    def label(kind: str, plain: str) -> str:
        return f"{captions[kind]}: {plain[0].lower()}{plain[1:]}" if kind in captions else plain

    from anchorlab.plots.phase import plot_mapping_grid, plot_ood_heatmap, plot_phase_vs_gamma
    from anchorlab.plots.save import save_figure

    t = opts.thresholds
    m = metric_definition(opts.metrics)
    rule = (f"phase 1: {m.id} < {t.id_threshold:g}; phase 2: good ID but {m.ood} < {t.ood_threshold:g} "
            f"(2c / 2n: commutativity >= / < {t.comm_threshold:g}); phase 3: good ID and OOD. Metric "
            f"definition '{opts.metrics}': {m.text}")
    figs: list[Fig] = []
    if "phase" not in cells.columns:
        return figs
    if set(axes) == {"init.gamma", "model.n_layers"}:
        figs.append(Fig(save_figure(plot_mapping_grid(cells), out / "fig2")[0],
                        label("depth", "Init rate x depth: accuracy")
                        + " on the held-out anchor pairs under (a) the symmetric mapping "
                        "(ood_symmetric_acc) and (b) the inferential mapping (ood_inferential_acc), per init rate "
                        "(x) and depth (y); hatched cells did not fit the seen pairs (id_acc < 0.9). Values: "
                        + definition))
    if set(axes) == {"init.gamma", "optim.weight_decay"}:
        figs.append(Fig(save_figure(plot_ood_heatmap(cells, ood_col=m.ood, id_col=m.id, comm_col=m.commutativity,
                                                     thresholds=t), out / "fig3b")[0],
                        label("weight_decay", "Init rate x weight decay: OOD")
                        + f" accuracy ({m.ood}) over init rate x weight decay; hatched: {m.id} < "
                        f"{t.id_threshold:g}; green triangles: commutativity < {t.comm_threshold:g}. Metric "
                        f"definition '{opts.metrics}': {m.text}. Values: " + definition))
        for p in _stable_rank_bubbles(d, df, cells, out):
            figs.append(Fig(p, label("stable_rank", "Stable rank")
                            + " of the first-layer query weights W_Q(1) (colour; "
                               "final weights, mean over the cell's finished runs) over init rate x weight decay; "
                               f"bubble size: the cell's phase ({rule})."))
    if "init.gamma" in axes:
        others = [a for a in axes if a != "init.gamma"]
        groups = cells.groupby(others) if others else [((), cells)]
        for key, sub in groups:
            key = key if isinstance(key, tuple) else (key,)
            tag = "_".join(f"{a}={v}" for a, v in zip(others, key))
            where = f" at {', '.join(f'{a} = {v}' for a, v in zip(others, key))}" if others else ""
            at = ", ".join(f"{a}={v}" for a, v in zip(others, key))
            row = (captions.get("rows") or {}).get(at) if others else None
            figs.append(Fig(save_figure(plot_phase_vs_gamma(sub, id_col=m.id, ood_col=m.ood),
                                        out / f"fig3a{('_' + tag) if tag else ''}")[0],
                            (row or "Init rate") + f"{where}: "
                            f"ID accuracy ({m.id}, blue) and OOD accuracy ({m.ood}, red) "
                            f"against the init rate, the background coloured by phase ({rule}). Values: "
                            + definition))
    return figs


def _curves(df: pd.DataFrame, out: Path, headline: Sequence[str], axes: Sequence[str],
            max_curves: int) -> dict[str, Fig]:
    """One training-curve PNG per run with history (the first ``max_curves``), in ``report/curves/``."""
    from anchorlab.plots.phase import plot_run_history
    from anchorlab.plots.save import save_figure
    from anchorlab.sweep.aggregate import history_table
    from anchorlab.tracking import curve_metrics

    runs = df.drop_duplicates("run_id").set_index("run_id")
    figs: dict[str, Fig] = {}
    for rid in list(df[df.kind == "history"].run_id.drop_duplicates())[:max_curves]:
        h = history_table(df, rid)
        accs = curve_metrics(headline, h.columns)
        where = ", ".join(f"{a} = {runs.loc[rid, a]}" for a in axes if a in runs.columns)
        path = save_figure(plot_run_history(h, metrics=accs), out / "curves" / f"curve_{rid}", formats=("png",),
                           dpi=90)[0]
        figs[rid] = Fig(path, f"Training curve of run {rid}{f' ({where})' if where else ''}: train_loss (left, "
                              "log scale: the mean training loss over the steps since the previous evaluation) "
                              f"and {', '.join(accs) or 'the metrics'} (right) at every evaluation; raw values "
                              "of this run, nothing aggregated.")
    return figs


def make_report(sweep_dir: str | Path, max_curves: int = 200, inline_curves: int = 4) -> Path:
    """Write ``SWEEP_DIR/report/index.html`` (+ PNG/PDF figures and CSV tables); return its path.

    Every run with a history gets a curve PNG (up to ``max_curves``), linked from
    the run table; the first ``inline_curves`` are also shown on the page.
    """
    from anchorlab.plots.save import save_figure
    from anchorlab.plots.sweep import plot_metric_vs_axis
    from anchorlab.sweep.aggregate import AggregateOptions, runs_table
    from anchorlab.tasks.base import task_class

    d = Path(sweep_dir)
    out = d / "report"
    out.mkdir(parents=True, exist_ok=True)
    df, cells, spec = load_sweep_results(d)
    axes = cells.attrs.get("axes", [])                                # the cells' axes (figures)
    run_axes = [a for a in spec_axes(spec) if a in df.columns]        # every axis, lr and seeds too
    opts = AggregateOptions.from_dict(spec.get("aggregate"))
    definition = aggregation_text(opts, run_axes)
    task_name = sweep_task(d)
    headline = list(task_class(task_name).headline)
    atomic_write(out / "cells.csv", lambda p: cells.to_csv(p, index=False))

    captions = preset_captions(spec)   # the labels of the preset this sweep ran unchanged, if any
    figs: list[Fig] = []
    shown = [m for m in headline if m in cells.columns]
    numeric = [a for a in axes if pd.api.types.is_numeric_dtype(cells[a]) and cells[a].nunique() > 1]
    for x in numeric if shown else ():
        others = [a for a in axes if a != x and cells[a].nunique() > 1]
        if others and len(cells.drop_duplicates(others)) > 6:
            continue  # too many lines to read; the cells table has them
        lines = cells.assign(setting=[", ".join(f"{a}={r[a]}" for a in others) for _, r in cells.iterrows()])
        fig = fraction_axes(plot_metric_vs_axis(lines, x, shown, hue="setting" if others else None,
                                                title=f"{task_name}: headline metrics vs {x}"))
        path = save_figure(fig, out / f"metrics_vs_{x.replace('.', '_')}", formats=("png",))[0]
        figs.append(Fig(path, f"The task's headline metrics ({', '.join(shown)}) against {x}"
                              + (f", one line per setting of {', '.join(others)}" if others else "")
                              + ". Each point is one cell of the sweep: " + definition))
    if task_name == "anchor":
        figs += _anchor_figures(d, df, cells, axes, out, definition, opts, captions)
    curves = _curves(df, out, headline, run_axes, max_curves)
    figs += list(curves.values())[:inline_curves]

    base = df.drop_duplicates("run_id").set_index("run_id")
    runs = runs_table(df, opts.source, axes=run_axes, metrics=headline)   # every run, failed ones too
    runs = runs.sort_values([*run_axes, "run_id"], kind="mergesort")
    for c in ("wall_seconds", "run_dir", "error"):
        runs[c] = runs.run_id.map(base[c])
    table = run_table_html(runs, run_axes, headline, opts.source,
                           {rid: str(f.path.relative_to(out)) for rid, f in curves.items()})
    status = runs.status.value_counts().to_dict()
    wall = float(pd.to_numeric(runs.wall_seconds, errors="coerce").sum())
    meta = [f"task <b>{task_name}</b> · {len(runs)} runs ({', '.join(f'{v} {k}' for k, v in status.items())}) · "
            f"axes: {', '.join(run_axes) or '(none)'} · total training wall time {wall:.0f} s",
            f"Aggregation ({'default' if not spec.get('aggregate') else 'from the spec'}): {definition}"]
    title = "Cells (phase diagram table)" if "phase" in cells.columns else "Cells (mean over seeds)"
    varies = " x ".join(run_axes) or "no axis"
    labels = ", ".join(dict.fromkeys(v for k, v in captions.items() if isinstance(v, str)))
    heading = f"Sweep {spec.get('name', d.name)}: {varies}" + (f" (the spec of {labels})" if labels else "")
    html = page(heading, meta, table, figs, cells, title, definition, spec, out,
                run_table_note(len(runs), opts.source, definition))
    return write_text(out / "index.html", html)


def screenshot(html_path: str | Path, png: str | Path, width: int = 1300, height: int = 2200,
               browser: str | None = None, timeout: float = 120.0) -> Path:
    """Render ``html_path`` in headless Chromium and save a PNG (Debian: ``apt-get install chromium``)."""
    exe = browser or next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if exe is None:
        raise ConfigError("screenshot: no chromium found; install it (Debian: apt-get install chromium) "
                          "or open the HTML in a browser")
    png = Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--screenshot={png}",
           f"--window-size={width},{height}", Path(html_path).resolve().as_uri()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0 or not png.exists():
        raise ConfigError(f"screenshot: {exe} failed ({r.returncode}): {(r.stderr.strip().splitlines() or [''])[-1]}")
    return png
