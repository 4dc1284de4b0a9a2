"""Mechanism figures (draw only): information flow, 2-D embeddings, cosine heatmaps.

Data come from :mod:`anchorlab.analysis.attention`, ``.projection`` and
``.similarity``; nothing here computes results. The ``*_figure(tables, opts,
label)`` functions draw the tables of one analysis of
:mod:`anchorlab.analysis.mechanism` (the registry calls them); the
``plot_*`` functions are the building blocks they use.
"""

from __future__ import annotations

import colorsys
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

Tables = Mapping[str, pd.DataFrame]

ROLE_COLOURS = {"key": "tab:red", "anchor1": "tab:blue", "anchor2": "tab:green"}


def pair_colours(pairs: Sequence[str]) -> dict[str, tuple[float, float, float]]:
    """Colour per pair label ("34"): mirror pairs {ab, ba} share a hue (the
    one with the smaller first anchor darker, the other lighter); pairs "aa"
    get their own hue. Labels are two characters, as ``pair_label`` writes
    single-digit anchors."""
    groups: dict[frozenset, list[str]] = {}
    for p in dict.fromkeys(pairs):
        groups.setdefault(frozenset(p), []).append(p)
    cmap = matplotlib.colormaps["tab10" if len(groups) <= 10 else "tab20"]
    out = {}
    for gi, members in enumerate(groups.values()):
        r, g, b = cmap(gi % cmap.N)[:3]
        h, l, s = colorsys.rgb_to_hls(r, g, b)
        for k, p in enumerate(sorted(members)):
            light = max(0.2, l - 0.12) if k == 0 and len(members) > 1 else (min(0.8, l + 0.18) if k else l)
            out[p] = colorsys.hls_to_rgb(h, light, s)
    return out


def plot_information_flow(pattern_per_layer: np.ndarray, tokens: Sequence[int], prediction: Sequence[int] | int,
                          key_pos: int, threshold: float = 0.05, title: str | None = None) -> Figure:
    """Tokens as nodes, one row per layer; a line from token j (row l) to
    token k (row l+1) with width ~ ``pattern_per_layer[l, k, j]``.

    pattern_per_layer: (L, T, T), heads already reduced. Lines below
    ``threshold`` are faint. Lines leaving the key and the two anchors (and
    later the positions that hold them) are coloured; the top row shows the
    model's output (argmax per position if a sequence, else the last one).
    """
    P = np.asarray(pattern_per_layer, dtype=float)
    L, T, _ = P.shape
    role = {key_pos: "key", key_pos + 1: "anchor1", key_pos + 2: "anchor2"}
    fig = Figure(figsize=(1.0 * T + 1.5, 1.3 * (L + 1) + 1))
    ax = fig.subplots()
    for l in range(L):
        for k in range(T):
            for j in range(k + 1):
                w = P[l, k, j]
                strong = w >= threshold
                col = ROLE_COLOURS.get(role.get(j, ""), "0.35") if strong else "0.6"
                ax.plot([j, k], [l, l + 1], color=col, lw=0.3 + 6.0 * w, alpha=0.85 if strong else 0.12,
                        solid_capstyle="round", zorder=1)
    for l in range(L + 1):
        for t in range(T):
            c = ROLE_COLOURS.get(role.get(t, ""), "white")
            ax.scatter([t], [l], s=120, color=c, edgecolor="k", zorder=3)
    for t, v in enumerate(tokens):
        ax.text(t, -0.35, str(int(v)), ha="center", va="top", fontsize=10,
                color=ROLE_COLOURS.get(role.get(t, ""), "k"), weight="bold" if t in role else "normal")
    preds = [int(prediction)] if np.ndim(prediction) == 0 else [int(p) for p in prediction]
    for i, v in enumerate(preds):
        t = T - len(preds) + i
        last = t == T - 1
        ax.text(t, L + 0.35, str(v), ha="center", va="bottom", fontsize=10 if last else 8,
                weight="bold" if last else "normal", color="k" if last else "0.5",
                bbox=dict(boxstyle="round", fc="lightyellow", ec="k") if last else None)
    ax.set_yticks(range(L + 1), ["input"] + [f"layer {l + 1}" for l in range(L)])
    ax.set_xticks(range(T), [str(t) for t in range(T)])
    ax.set_xlabel("position")
    ax.set_xlim(-0.6, T - 0.4)
    ax.set_ylim(-0.9, L + 0.9)
    for s in ("top", "right"):
        ax.spines[s].set_visible(False)
    handles = [Line2D([], [], color=c, lw=3, label=r) for r, c in ROLE_COLOURS.items()]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax.set_title(title or "information flow (line width = attention weight)")
    fig.tight_layout()
    return fig


def plot_flow_scores(summary: pd.DataFrame, edges: Sequence[str] | None = None, title: str | None = None
                     ) -> Figure:
    """Grouped bars of head-averaged flow scores: DataFrame(layer, edge, score)."""
    edges = list(edges or dict.fromkeys(summary.edge))
    layers = sorted(set(summary.layer))
    fig = Figure(figsize=(1.2 + 0.9 * len(edges), 3.4))
    ax = fig.subplots()
    width = 0.8 / max(len(layers), 1)
    for i, l in enumerate(layers):
        s = summary[summary.layer == l].set_index("edge").score.reindex(edges)
        ax.bar(np.arange(len(edges)) + (i - (len(layers) - 1) / 2) * width, s.to_numpy(), width,
               label=f"layer {l + 1}")
    ax.set_xticks(range(len(edges)), edges, rotation=30, ha="right")
    ax.set_ylabel("mean attention")
    ax.set_ylim(0, 1.02)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title or "attention between roles")
    fig.tight_layout()
    return fig


def plot_embedding(df: pd.DataFrame, title: str | None = None, point_size: float = 6.0) -> Figure:
    """Scatter of DataFrame(pair, x, y) coloured by pair (mirror pairs in shades of one hue)."""
    pairs = sorted(set(df.pair))
    cols = pair_colours(pairs)
    fig = Figure(figsize=(6.2, 5))
    ax = fig.subplots()
    for p in pairs:
        d = df[df.pair == p]
        ax.scatter(d.x, d.y, s=point_size, color=cols[p], label=f"({p[0]},{p[1:]})" if len(p) == 2 else p,
                   alpha=0.8, linewidths=0)
    ax.legend(markerscale=2.5, fontsize=7, ncol=1 + len(pairs) // 9, loc="upper left", bbox_to_anchor=(1.0, 1.0),
              frameon=False)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title or "2-D embedding")
    fig.tight_layout()
    return fig


def plot_cosine_heatmap(C: np.ndarray, row_labels: Sequence, col_labels: Sequence,
                        box_mask: np.ndarray | None = None, groups: Sequence[tuple[int, int]] | None = None,
                        title: str | None = None, xlabel: str = "", ylabel: str = "",
                        annotations: Sequence[tuple[float, float, str]] = ()) -> Figure:
    """Heatmap of a cosine matrix (NaN cells blank) with red boxes on
    ``box_mask`` cells and around the diagonal blocks ``groups`` ([start, stop))."""
    C = np.asarray(C, dtype=float)
    n, m = C.shape
    size = min(max(4.0, 0.32 * max(n, m) + 2), 14)
    fig = Figure(figsize=(size + 1.2, size))
    ax = fig.subplots()
    im = ax.imshow(np.ma.masked_invalid(C), cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="cosine similarity")
    if box_mask is not None:
        for i, j in zip(*np.nonzero(np.asarray(box_mask))):
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="red", lw=1.8))
    for a, b in groups or ():
        ax.add_patch(Rectangle((a - 0.5, a - 0.5), b - a, b - a, fill=False, ec="red", lw=1.2))
    fs = 8 if max(n, m) <= 16 else 5
    ax.set_xticks(range(m), [str(c) for c in col_labels], rotation=90, fontsize=fs)
    ax.set_yticks(range(n), [str(r) for r in row_labels], fontsize=fs)
    for x, y, text in annotations:
        ax.text(x, y, text, transform=ax.transAxes, fontsize=8, ha="left", va="top")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title or "cosine similarity")
    fig.tight_layout()
    return fig


# ------------------------------------------------------------ one figure per analysis
FLOW_SCORE_EDGES = ("last->key", "last->anchor1", "last->anchor2", "last->anchors", "anchor1->key", "anchor2->key",
                    "anchors->key", "anchor2->anchor1")


def flow_figure(tables: Tables, opts: Any, label: str) -> Figure:
    """``flow``: the ``edges`` table as an (L, T, T) pattern, the ``input`` table as tokens and outputs."""
    edges, inp = tables["edges"], tables["input"].sort_values("position")
    L, T = int(edges.layer.max()) + 1, len(inp)
    P = np.zeros((L, T, T))
    P[edges.layer.to_numpy(), edges["query"].to_numpy(), edges.source.to_numpy()] = edges.weight.to_numpy()
    role = dict(zip(inp.role, inp.token))
    kp = int(inp.position[inp.role == "key"].iloc[0])
    last = inp.iloc[-1]
    desc = f"key {role['key']}, anchors ({role['anchor1']}, {role['anchor2']}), output {last.prediction}"
    if not pd.isna(last.target):
        desc += f" (inferential target {last.target})"
    return plot_information_flow(P, inp.token.tolist(), inp.prediction.tolist(), kp, opts.threshold,
                                 title=f"{label}: {desc}; line width = {opts.weight}")


def flow_scores_figure(tables: Tables, opts: Any, label: str) -> Figure:
    """``flow-scores``: bars of the head-averaged ``summary`` table."""
    return plot_flow_scores(tables["summary"], FLOW_SCORE_EDGES, title=f"{label}: mean {opts.weight} between roles")


def _embedding_title(df: pd.DataFrame, method: str, what: str) -> str:
    return f"{method} of {df.hook.iloc[0]} (last position{what})"


def mask_key_figure(tables: Tables, opts: Any, label: str) -> Figure:
    """``mask-key``: the ``embedding`` table coloured by pair."""
    df = tables["embedding"]
    return plot_embedding(df, title=f"{label}: {_embedding_title(df, opts.method, '')}, key masked")


def tsne_ao1_figure(tables: Tables, opts: Any, label: str) -> Figure:
    """``tsne-ao1``: the ``embedding`` table coloured by pair."""
    df = tables["embedding"]
    return plot_embedding(df, title=f"{label}: {_embedding_title(df, opts.method, f', {len(df)} inputs')}")


def square_matrix(df: pd.DataFrame) -> tuple[np.ndarray, list[str], list[tuple[int, int]]]:
    """(N, N) cosine matrix of :func:`anchorlab.analysis.similarity.single_anchor_similarity`, tick labels
    "g=.. a=.. x=..", and the [start, stop) index ranges of equal-g groups."""
    n = int(df.i.max()) + 1
    C = np.zeros((n, n))
    C[df.i.to_numpy(), df.j.to_numpy()] = df.cosine.to_numpy()
    first = df[df.j == 0].sort_values("i")
    labels = [f"g={r.row_g} a={r.row_anchor} x={r.row_key}" for r in first.itertuples()]
    groups, start = [], 0
    gs = first.row_g.tolist()
    for k in range(1, n + 1):
        if k == n or gs[k] != gs[start]:
            groups.append((start, k))
            start = k
    return C, labels, groups


def compose_triangles(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Composite (K, K) matrix from the ``shown`` cells of
    :func:`anchorlab.analysis.similarity.triangle_similarity`: (cosine, equal-target mask, keys).
    Row i is key ``keys[i]`` on the y axis."""
    keys = sorted(set(df.row_key))
    pos = {k: i for i, k in enumerate(keys)}
    H = np.full((len(keys), len(keys)), np.nan)
    box = np.zeros_like(H, dtype=bool)
    for r in df[df.shown].itertuples():
        H[pos[r.row_key], pos[r.col_key]] = r.cosine
        box[pos[r.row_key], pos[r.col_key]] = r.equal
    return H, box, keys


def mask_anchor2_figure(tables: Tables, opts: Any, label: str) -> Figure:
    """``mask-anchor2``: the ``cosine`` table as an (N, N) matrix, equal-g blocks boxed."""
    df, summary = tables["cosine"], tables["summary"]
    C, labels, groups = square_matrix(df)
    c = float(summary.set_index("metric").value["equal_g_contrast"])
    return plot_cosine_heatmap(C, labels, labels, groups=groups, xlabel="(g, a1, x)", ylabel="(g, a1, x)",
                               title=f"{label}: {df.hook.iloc[0]}, second anchor masked; equal-g contrast {c:.3f}")


def _probe_figure(tables: Tables, title: str, axis: str) -> Figure:
    """Composite triangles of a probe-similarity table (lower block below the diagonal, upper above)."""
    df, summary = tables["cosine"], tables["summary"]
    H, box, keys = compose_triangles(df)
    row_col = next(c for c in df.columns if c.startswith("row_") and c not in ("row_key", "row_target"))
    col_col = row_col.replace("row_", "col_")
    first = df.drop_duplicates("block")
    note = "; ".join(f"{r.block}: rows {axis} {getattr(r, row_col)} vs cols {axis} {getattr(r, col_col)}"
                     for r in first.itertuples())
    c = float(summary[summary.block == "all"].value.iloc[0])
    return plot_cosine_heatmap(H, keys, keys, box_mask=box, xlabel="key x (columns)", ylabel="key y (rows)",
                               title=f"{title}\n{note}; contrast {c:.3f}")


def cos_ao2_figure(tables: Tables, opts: Any, label: str) -> Figure:
    """``cos-ao2``: X_ao(2) cosines, equal inferential targets boxed."""
    return _probe_figure(tables, f"{label}: X_ao(2) at the last position", "pair")


def cos_v2_figure(tables: Tables, opts: Any, label: str) -> Figure:
    """``cos-v2``: V(2) cosines, equal single-anchor values boxed."""
    return _probe_figure(tables, f"{label}: V(2) at the first anchor", "anchor")


__all__ = ["pair_colours", "plot_information_flow", "plot_flow_scores", "plot_embedding", "plot_cosine_heatmap",
           "ROLE_COLOURS", "FLOW_SCORE_EDGES", "flow_figure", "flow_scores_figure", "mask_key_figure",
           "tsne_ao1_figure", "mask_anchor2_figure", "cos_ao2_figure", "cos_v2_figure", "square_matrix",
           "compose_triangles"]
