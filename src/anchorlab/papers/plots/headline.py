"""The Fig. 2 cell at CPU scale beside the paper's values (draw only; the table is
:func:`anchorlab.papers.eval.judgement.cell_table`).

:func:`plot_cell`: one panel per (clock, lr reading, op set, kind of device) at depth 2 (a clock's every-peak
reading only where it differs from its range reading); per paper gamma, bars of the papers'
cell (mean over seeds of the best over lrs and training) for the inferential and the symmetric
mapping, dots of the per-run rates beside them, hatching where the cell's mean best ID < 0.9, and
the paper's values (NeurIPS Fig. 2, depth 2: symmetric >= 0.9 at gamma 0.3, inferential >= 0.9 at
gamma 0.8) as triangles.

:func:`plot_depth`: NeurIPS Fig. 2 at CPU scale, a row per (clock, op set, kind of device, lr reading) whose
cells span two or more depths: the papers' cell under the symmetric and the inferential mapping over paper
gamma x depth, the per-run rate and seed count under each value, hatching where the mean best ID < 0.9, a
dashed outline on a partial cell (a seed lacks some of its row's peak lrs), and the paper's reading of its diagram
in the title.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from anchorlab.config import ConfigError

MAPS = (("inferential", "#4393c3"), ("symmetric", "#d6604d"))
PAPER = {0.3: ("symmetric", 0.9), 0.8: ("inferential", 0.9)}   # NeurIPS Fig. 2, depth 2 (lower bounds)
PAPER_DIAGRAM = ("paper (NeurIPS Fig. 2, width 400, 1x): symmetric near 1 at small gamma, inferential near 1 at "
                 "large gamma,\nseen-pair accuracy < 90% (shadow) where the init is large and the model deep")


def op_title(op: str) -> str:
    """A panel's name for an op set: its held-out pair, then its anchor map
    (``'{1:+5,...} (4,3) held out, (3,4)->x-6'`` -> ``'(4,3) held out, {1:+5,...}'``); any other text as is."""
    head, sep, rest = op.partition(" (")
    held = rest.split(") held out", 1)
    return f"({held[0]}) held out, {head}" if sep and len(held) == 2 else op


def plot_cell(cells: pd.DataFrame, depth: int = 2, id_min: float = 0.9, reading: str = "papers' cell") -> Figure:
    """Panels (rows: clocks, and the lr readings where the table has an ``lrs`` column; columns: op sets)
    of the depth-``depth`` cells; ``reading`` names what the bars show in the legend (e.g. the fitted reading)."""
    need = ["clock", "n_layers", "op_set", "paper_gamma", "id_best", "inferential_best", "symmetric_best",
            "inferential_per_run", "symmetric_per_run", "n_seeds"]
    missing = [c for c in need if c not in cells.columns]
    if missing:
        raise ConfigError(f"cell table lacks column(s) {', '.join(missing)}")
    t = cells[(cells.n_layers == depth) & cells.paper_gamma.notna()]
    if t.empty:
        raise ConfigError(f"cell table has no depth-{depth} rows with a paper gamma")
    t = _keyed(t)
    rows_ = panel_rows(t)
    ops = sorted({(o, d) for o, d in zip(t.op_set, t.devices)})   # a column per op set and kind of device
    rate = "per-run rate" + (f" (OOD >= {t.threshold.iloc[0]:g}, ID >= {id_min:g})" if "threshold" in t else "")
    fig = Figure(figsize=(3.6 * len(ops) + 0.6, 2.9 * len(rows_) + 0.6))
    axes = np.atleast_2d(fig.subplots(len(rows_), len(ops), squeeze=False, sharey=True))
    drew_paper = False
    for i, (clock, lrs) in enumerate(rows_):
        for j, (op, kind) in enumerate(ops):
            ax = axes[i, j]
            c = t[(t.clock == clock) & (t.lrs == lrs) & (t.op_set == op) & (t.devices == kind)].sort_values("paper_gamma")
            x = np.arange(len(c))
            if c.empty:     # a blank, so the grid's filled panels stand out
                ax.set_axis_off()
                ax.text(0.5, 0.5, f"{op_title(op)}\nno runs at clock {clock:g}x", ha="center", va="center",
                        transform=ax.transAxes, color="gray", fontsize=8)
                continue
            for k, (m, color) in enumerate(MAPS):
                off = (k - 0.5) * 0.38
                bars = ax.bar(x + off, c[f"{m}_best"].to_numpy(float), 0.36, color=color)
                for b, fits in zip(bars, c.id_best.to_numpy(float) >= id_min):
                    if not fits:
                        b.set_hatch("//")
                ax.plot(x + off, c[f"{m}_per_run"].to_numpy(float), "o", color="black", ms=3.5)
            for xi, g in zip(x, c.paper_gamma):
                if round(float(g), 3) in PAPER:
                    m, v = PAPER[round(float(g), 3)]
                    ax.plot(xi + (-0.19 if m == MAPS[0][0] else 0.19), v, "v", color="black", mfc="none", ms=7)
                    drew_paper = True
            sol = c.solution if "solution" in c else [""] * len(c)   # the cell read on both mappings
            runs = c.n_runs if "n_runs" in c else [None] * len(c)   # a cell short of its peaks shows it here
            ax.set_xticks(x, [f"{g:g}\n{int(n)} seed{'s' if n != 1 else ''}" + (f", {int(r)} runs" if r else "")
                              + (f"\n{s}" if s else "") for g, n, r, s in zip(c.paper_gamma, c.n_seeds, runs, sol)],
                          fontsize=8)
            ax.set_ylim(0, 1.05)
            ax.axhline(0.5, color="gray", lw=0.6, ls=":")
            which = "every peak lr" if lrs == "all" else f"peak lrs {lrs}"
            where = "" if kind == "cpu" else f" ({kind})"   # a GPU's cells say so
            ax.set_title(f"{op_title(op)}{where}\nclock {clock:g}x, {which}", fontsize=8)
            if j == 0:
                ax.set_ylabel("held-out pair accuracy")
            if i == len(rows_) - 1:
                ax.set_xlabel("paper gamma (std at width 400)")
    handles = [Line2D([], [], ls="", marker="o", color="black", ms=3.5, label=rate)]   # the legend, built once
    if drew_paper:
        handles.append(Line2D([], [], ls="", marker="v", color="black", mfc="none", ms=7, label="paper, depth 2 (>=)"))
    handles += [Patch(color=color, label=f"{m}: {reading}") for m, color in MAPS]
    handles += [Patch(facecolor="white", edgecolor="black", hatch="//", label=f"hatched: mean best ID < {id_min:g}")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.75 / fig.get_figheight(), 1, 1))   # the legend's two rows, whatever the height
    return fig


def drawn_runs(rows: pd.DataFrame, curves: pd.DataFrame, depth: int = 2) -> pd.DataFrame:
    """The runs of ``rows`` that :func:`plot_curves` draws: depth ``depth``, a paper gamma, a trajectory in ``curves``."""
    return rows[(rows.n_layers == depth) & rows.paper_gamma.notna() & rows.run_id.isin(curves.run_id)]


def plot_curves(rows: pd.DataFrame, curves: pd.DataFrame, depth: int = 2) -> Figure:
    """The held-out pair's accuracy over training, per run: one panel per (clock, op set, paper gamma, kind
    of device ``devices``) row and seed column; a colour per peak lr, solid the inferential mapping, dashed the symmetric (the best
    over training, which the papers' cell takes, is the top of these lines)."""
    from matplotlib import colormaps

    need = ["run_id", "clock", "n_layers", "op_set", "paper_gamma", "seed", "peak_lr"]
    missing = [c for c in need if c not in rows.columns]
    if missing:
        raise ConfigError(f"run table lacks column(s) {', '.join(missing)}")
    t = drawn_runs(rows, curves, depth)
    if t.empty:
        raise ConfigError(f"no depth-{depth} run with a paper gamma has a trajectory")
    if "devices" not in t:      # the kind of device, as the cells table keys it
        t = t.assign(devices="cpu")
    panels = sorted({(c, o, g, k) for c, o, g, k in zip(t.clock, t.op_set, t.paper_gamma, t.devices)})
    seeds = sorted(t.seed.unique())
    lrs = sorted(t.peak_lr.unique())
    cmap = colormaps["viridis"]
    color = {lr: cmap(i / max(len(lrs) - 1, 1)) for i, lr in enumerate(lrs)}
    of_run = {rid: c.sort_values("step") for rid, c in curves.groupby("run_id")}
    ncol = 4 if len(seeds) < 3 else 6
    n_leg = -(-(len(lrs) + 2) // ncol)
    height = 2.3 * len(panels) + 0.3 + 0.18 * n_leg
    fig = Figure(figsize=(max(3.3 * len(seeds) + 0.4, 6.0), height))
    axes = np.atleast_2d(fig.subplots(len(panels), len(seeds), squeeze=False, sharey=True))
    for i, (clock, op, g, kind) in enumerate(panels):
        for j, seed in enumerate(seeds):
            ax = axes[i, j]
            sel = t[(t.clock == clock) & (t.op_set == op) & (t.paper_gamma == g) & (t.devices == kind) & (t.seed == seed)]
            for _, r in sel.sort_values("peak_lr").iterrows():
                c = of_run[r.run_id]
                ax.plot(c.step, c.inferential, "-", color=color[r.peak_lr], lw=1.1)
                ax.plot(c.step, c.symmetric, "--", color=color[r.peak_lr], lw=1.1)
            ax.set_ylim(-0.02, 1.02)
            ax.axhline(0.5, color="gray", lw=0.6, ls=":")
            where = "" if kind == "cpu" else f" ({kind})"
            ax.set_title(f"{op_title(op)}, clock {clock:g}x{where}\npaper gamma {g:g}, seed {seed} "
                         f"({len(sel)} lr)", fontsize=7.5)
            if j == 0:
                ax.set_ylabel("held-out pair acc.", fontsize=8)
            if i == len(panels) - 1:
                ax.set_xlabel("step", fontsize=8)
            ax.tick_params(labelsize=7)
    handles = [axes[0, 0].plot([], [], "-", color=color[lr], label=f"peak {lr:.3g}")[0] for lr in lrs]
    handles += [axes[0, 0].plot([], [], "-", color="black", label="inferential")[0],
                axes[0, 0].plot([], [], "--", color="black", label="symmetric")[0]]
    fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, (0.12 + 0.18 * n_leg) / height, 1, 1))
    return fig


def _keyed(cells: pd.DataFrame) -> pd.DataFrame:
    """``cells`` with the lr reading and device kind of tables written before those columns (``all``, ``cpu``)."""
    return cells.assign(**{k: v for k, v in (("lrs", "all"), ("devices", "cpu")) if k not in cells})


def panel_rows(cells: pd.DataFrame) -> list[tuple]:
    """The (clock, lr reading) rows of :func:`plot_cell`, every-peak (``all``) first; a clock's ``all`` row is
    left out where it holds the same runs as that clock's range reading (every peak inside the range), since
    it would draw the same bars twice."""
    t = _keyed(cells)
    key = ["op_set", "devices", "paper_gamma", "n_runs"]
    rows_ = sorted({(c, r) for c, r in zip(t.clock, t.lrs)}, key=lambda cr: (cr[0], cr[1] != "all", cr[1]))

    def same(clock: float, lrs: str) -> bool:
        a, b = (t[(t.clock == clock) & (t.lrs == r)][key].sort_values(key[:3]).reset_index(drop=True)
                for r in ("all", lrs))
        return a.equals(b)

    return [(c, r) for c, r in rows_
            if r != "all" or not any(c2 == c and r2 != "all" and same(c, r2) for c2, r2 in rows_)]


def depth_groups(cells: pd.DataFrame) -> list[tuple]:
    """The (clock, op set, devices, lrs) groups of ``cells`` with a paper gamma and two or more depths; per
    (clock, op set, devices) the lr-range reading where there is one, else every peak (``all``)."""
    t = _keyed(cells[cells.paper_gamma.notna()])
    out = []
    for (clock, op, dev), g in t.groupby(["clock", "op_set", "devices"], sort=True):
        lrs = next((r for r in sorted(set(g.lrs)) if r != "all"), "all")
        if g[g.lrs == lrs].n_layers.nunique() >= 2:
            out.append((clock, op, dev, lrs))
    return out


def partial_cells(cells: pd.DataFrame) -> list[bool]:
    """Per cell (row) of one Fig. 2 group: True where a seed of the cell lacks some of the peak lrs, i.e. it holds
    fewer runs than its seeds times the group's most lrs per seed (a cell whose runs are still under way reads
    like a full one otherwise). The seed count is printed in each cell."""
    per_seed = (cells.n_runs / cells.n_seeds).max()
    short = cells.n_runs < cells.n_seeds * per_seed
    if {"lrs_min", "lrs_max"} <= set(cells.columns):   # also a cell whose seeds ran different numbers of lrs
        short |= cells.lrs_min.fillna(0) < cells.lrs_max.fillna(0)
    return short.tolist()


def plot_depth(cells: pd.DataFrame, id_min: float = 0.9, reading: str = "papers' cell") -> Figure:
    """A row of two heatmaps (symmetric, inferential) over paper gamma x depth per :func:`depth_groups` group;
    ``reading`` names the bests drawn (the papers' cell, or e.g. the best only where ID had fitted)."""
    from anchorlab.plots.phase import draw_mapping_pair

    groups = depth_groups(cells)
    if not groups:
        raise ConfigError("cell table has no (clock, op set) with a paper gamma at two or more depths")
    t = _keyed(cells)
    fig = Figure(figsize=(11, 3.8 * len(groups) + 0.6))
    axes = np.atleast_2d(fig.subplots(len(groups), 2, squeeze=False))
    for row, (clock, op, dev, lrs) in zip(axes, groups):
        c = t[(t.clock == clock) & (t.op_set == op) & (t.devices == dev) & (t.lrs == lrs)]
        c = c.assign(paper_gamma=c.paper_gamma.astype(float), n_layers=c.n_layers.astype(int))
        which = "every peak lr" if lrs == "all" else f"peak lrs {lrs}"
        where = "" if dev == "cpu" else f", {dev}"
        draw_mapping_pair(fig, row, c, "paper_gamma", "n_layers", "symmetric_best", "inferential_best", "id_best",
                          id_min, titles=[f"{m} mapping: {reading}\n{op_title(op)}, clock {clock:g}x, "
                                          f"{which}{where}" for m in ("symmetric", "inferential")],
                          xlabel="paper gamma (std at width 400)", ylabel="depth (layers)", title_size=8)
        gammas, depths = sorted(set(c.paper_gamma)), sorted(set(c.n_layers))   # the heatmap's column / row order
        for ax, m in zip(row, ("symmetric", "inferential")):
            for r, part in zip(c.itertuples(), partial_cells(c)):
                rate, n, x, y = getattr(r, f"{m}_per_run"), r.n_runs, gammas.index(r.paper_gamma), depths.index(r.n_layers)
                seeds = f", {int(r.n_seeds)} seed{'s' * (r.n_seeds != 1)}"
                ax.text(x, y - 0.3, f"per run {rate:.0%} of {int(n)}{seeds}" + ("\npartial" * part), ha="center",
                        va="center", fontsize=6, color="white" if getattr(r, f"{m}_best") < 0.5 else "black")
                if part:
                    ax.add_patch(Rectangle((x - 0.47, y - 0.47), 0.94, 0.94, fill=False, ls="--", lw=1.2, ec="0.5"))
    t_ood = f"OOD >= {t.threshold.iloc[0]:g}, " if "threshold" in t else ""
    fig.suptitle(f"hatched: the cell's mean best ID < {id_min:g}; dashed: partial, a seed lacks some of its row's "
                 f"peak lrs; per run: final metrics ({t_ood}ID >= {id_min:g})\n"
                 + PAPER_DIAGRAM, fontsize=8)
    fig.tight_layout()   # it makes room for the suptitle itself; a reduced rect on top doubled the gap
    return fig
