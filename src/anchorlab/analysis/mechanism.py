"""Mechanism analyses of a trained run: one entry point per CLI analysis.

``run_analysis(run_dir, name, out_dir, **options)`` loads the run, computes,
writes ``<out_dir>/<name>.png`` and ``<name>.csv`` (the numbers behind the
plot; some analyses add ``<name>_summary.csv`` / ``<name>_accuracy.csv``) and
returns the paths. Names (see ``docs/mechanism.md`` for definitions):

  flow          information flow of one input          NeurIPS Fig. 3a,c
  flow-scores   mean role-to-role attention per layer  NeurIPS Fig. 3a,c (numbers)
  mask-key      key token masked -> 2-D embedding      journal Fig. 4A,C
  mask-anchor2  second anchor masked -> cosine by g    journal Fig. 4B,D
  tsne-ao1      t-SNE of X_ao(1) at the last position  NeurIPS Fig. 3b
  cos-ao2       cosine of X_ao(2), equal-f boxes       NeurIPS Fig. 4a,b
  cos-v2        cosine of V(2) at anchor 1, equal-g    NeurIPS Fig. 4c

Options are frozen dataclasses (one per analysis); option values may be
given as strings (``"30,31,32"``, ``"3,3;2,2"``, ``"none"``) as a CLI passes them.
:func:`compare_runs` puts the headline numbers of several runs side by side.
"""

from __future__ import annotations

import dataclasses
import logging
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from ..config import ConfigError, _check_choice
from ..io import atomic_write
from ..tasks.anchor import SPLITS, AnchorData, AnchorTask, pair_label
from .attention import attention_patterns, flow_graph, flow_scores, flow_summary, sample_inputs
from .masking import default_output_hook, mask_accuracy, standard_masks
from .projection import METHODS, activation_embedding
from .similarity import (ao_similarity, compose_triangles, contrast_of, single_anchor_similarity,
                         square_matrix, v_similarity)

log = logging.getLogger(__name__)

PAPER_EXAMPLE = (35, 63, 99, 4, 3, 38, 42, 36, 62)  # NeurIPS §5.1, key 99 at position 2
PAPER_EXAMPLE_KEY_POS = 2


# ------------------------------------------------------------------ options
def _positive(name: str, v: int | None) -> None:
    if v is not None and v < 1:
        raise ConfigError(f"{name}: must be >= 1, got {v}")


@dataclass(frozen=True)
class FlowOptions:
    """``tokens``: one input (default: the NeurIPS example when it fits the
    task, else a sampled held-out-pair input); ``key_pos`` is required with
    ``tokens``; ``head``: one head (None = mean over heads); lines below
    ``threshold`` are faint."""

    tokens: tuple[int, ...] | None = None
    key_pos: int | None = None
    head: int | None = None
    threshold: float = 0.05
    seed: int = 0

    def __post_init__(self) -> None:
        if self.tokens is not None and self.key_pos is None:
            raise ConfigError("key_pos: required when tokens is given")


@dataclass(frozen=True)
class FlowScoresOptions:
    """``n_inputs`` sampled sequences over all pairs (keys from ``split``);
    ``key_positions`` default 0..T-4 (the last token is a filler);
    ``by_pair`` adds per-pair rows."""

    n_inputs: int = 2000
    split: str = "train"
    key_positions: tuple[int, ...] | None = None
    by_pair: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        _positive("n_inputs", self.n_inputs)
        _check_choice("split", self.split, SPLITS)


@dataclass(frozen=True)
class MaskKeyOptions:
    """Key token masked in ``layers`` (None = every layer); embed the
    last-position activation at ``hook`` (None = last layer's hook_do) of
    ``n_per_pair`` inputs per anchor pair with ``method``. The accuracy table
    uses ``n_accuracy`` inputs per pair."""

    n_per_pair: int = 50
    layers: tuple[int, ...] | None = None
    hook: str | None = None
    method: str = "tsne"
    renormalize: bool = False
    split: str = "test"
    key_positions: tuple[int, ...] | None = None
    n_accuracy: int = 200
    seed: int = 0

    def __post_init__(self) -> None:
        _positive("n_per_pair", self.n_per_pair)
        _positive("n_accuracy", self.n_accuracy)
        _check_choice("method", self.method, METHODS)
        _check_choice("split", self.split, SPLITS)


@dataclass(frozen=True)
class MaskAnchor2Options:
    """Second anchor masked in ``layers`` (None = all); outputs at ``hook``
    (None = last layer's hook_do) for (x; a1) with x = g - step(a1), g in
    ``g_values`` (None = 12 central values); fillers fixed per draw, key at
    ``key_pos``, cosine averaged over ``n_draws`` filler draws; ``center``
    subtracts the mean output of the probes before the cosine."""

    g_values: tuple[int, ...] | None = None
    layers: tuple[int, ...] | None = None
    hook: str | None = None
    renormalize: bool = False
    key_pos: int = 2
    n_draws: int = 4
    center: bool = False
    split: str = "test"
    key_positions: tuple[int, ...] | None = None
    n_accuracy: int = 200
    seed: int = 0

    def __post_init__(self) -> None:
        _positive("n_draws", self.n_draws)
        _positive("n_accuracy", self.n_accuracy)
        _check_choice("split", self.split, SPLITS)


@dataclass(frozen=True)
class TsneAo1Options:
    """Last-position ``blocks.{layer}.hook_ao`` of ``n_inputs`` sequences over
    all pairs, embedded with ``method`` on at most ``max_points`` of them."""

    n_inputs: int = 10000
    max_points: int = 2000
    method: str = "tsne"
    layer: int = 0
    split: str = "train"
    key_positions: tuple[int, ...] | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        _positive("n_inputs", self.n_inputs)
        _positive("max_points", self.max_points)
        _check_choice("method", self.method, METHODS)
        _check_choice("split", self.split, SPLITS)


def _check_heatmap_options(opts: CosAo2Options | CosV2Options) -> None:
    _positive("n_draws", opts.n_draws)
    if len(opts.keys) < 2:
        raise ConfigError(f"keys: need at least two key values, got {opts.keys}")
    if (opts.lower is None) != (opts.upper is None):
        raise ConfigError("lower/upper: give both or neither")


@dataclass(frozen=True)
class CosAo2Options:
    """``lower``/``upper``: (row pair, column pair); None = the paper's
    ((3,3),(2,2)) and ((1,2),(1,3)). ``layer`` None = 1. ``center`` subtracts
    the mean vector of all probes before the cosine (the paper: raw cosine)."""

    keys: tuple[int, ...] = tuple(range(30, 41))
    lower: tuple[tuple[int, int], tuple[int, int]] | None = None
    upper: tuple[tuple[int, int], tuple[int, int]] | None = None
    layer: int | None = None
    key_pos: int = 2
    n_draws: int = 4
    center: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        _check_heatmap_options(self)


@dataclass(frozen=True)
class CosV2Options:
    """``lower``/``upper``: (row anchor, column anchor); None = (4, 3) and (1, 2).
    ``layer`` None = 1; ``center`` as in :class:`CosAo2Options`."""

    keys: tuple[int, ...] = tuple(range(30, 41))
    lower: tuple[int, int] | None = None
    upper: tuple[int, int] | None = None
    layer: int | None = None
    key_pos: int = 2
    n_draws: int = 4
    center: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        _check_heatmap_options(self)


def _parse(name: str, value: Any, tp: Any) -> Any:
    """Convert ``value`` (possibly a CLI string) to annotation ``tp``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "null", "")):
            return None
        return _parse(name, value, next(a for a in args if a is not type(None)))
    try:
        if tp is bool:
            if isinstance(value, str):
                if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError
                return value.lower() in ("true", "1", "yes")
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError
            return bool(value)
        if tp is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if tp is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if tp is str:
            if not isinstance(value, str):
                raise ValueError
            return value
        if origin is tuple:
            inner_tuple = typing.get_origin(args[0]) is tuple
            if isinstance(value, str):
                sep = ";" if inner_tuple else ","
                parts = [p for p in value.replace(" ", "").split(sep) if p]
                if not inner_tuple and len(parts) == 1 and ".." in parts[0]:
                    lo, hi = parts[0].split("..")
                    parts = [str(v) for v in range(int(lo), int(hi) + 1)]
                value = parts
            items = list(value)
            if len(args) == 2 and args[1] is Ellipsis:
                return tuple(_parse(name, v, args[0]) for v in items)
            if len(items) != len(args):
                raise ValueError
            return tuple(_parse(name, v, a) for v, a in zip(items, args))
    except (ValueError, TypeError, StopIteration):
        pass
    raise ConfigError(f"{name}: expected {_describe(tp)}, got {value!r}")


def _describe(tp: Any) -> str:
    return str(tp).replace("typing.", "").replace("<class '", "").replace("'>", "")


def make_options(cls: type, options: dict[str, Any]) -> Any:
    """Build option dataclass ``cls`` from keyword options (strings allowed);
    unknown names fail listing the allowed ones."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kw = {}
    for k, v in options.items():
        key = k.replace("-", "_")
        if key not in names:
            raise ConfigError(f"{k}: unknown option for this analysis; allowed: {', '.join(names)}")
        kw[key] = _parse(key, v, hints[key])
    return cls(**kw)


# ------------------------------------------------------------------ helpers
def _write_csv(df: pd.DataFrame, path: Path) -> Path:
    return atomic_write(path, lambda p: df.to_csv(p, index=False))


def _save_png(fig, path: Path) -> Path:
    from ..plots.training import save_figure

    return save_figure(fig, path.with_suffix(""), formats=("png",))[0]


def _key_positions(task: AnchorTask, given: tuple[int, ...] | None) -> list[int]:
    T = task.cfg.seq_len
    return list(given) if given is not None else (list(range(T - 3)) or [0])


def _per_pair(task: AnchorTask, n: int, split: str, rng: np.random.Generator,
              key_positions: list[int]) -> AnchorData:
    parts = [sample_inputs(task, n, [p], split, rng, key_positions) for p in task.pairs]
    return AnchorData(*(torch.cat([getattr(d, f) for d in parts])
                        for f in ("tokens", "targets", "pair", "key", "key_pos")))


def _run_label(run_dir: Path) -> str:
    from ..train.loop import config_of

    return f"{Path(run_dir).name} (gamma={config_of(run_dir).init.gamma})"


# ------------------------------------------------------------------ analyses
def _flow(run, opts: FlowOptions, out: Path, name: str, label: str) -> dict[str, Path]:
    from ..plots.mechanism import plot_information_flow

    model, task = run.model, run.task
    T = task.cfg.seq_len
    if opts.tokens is not None:
        tokens, kp = torch.tensor(opts.tokens, dtype=torch.long), int(opts.key_pos)
        if len(tokens) != T:
            raise ConfigError(f"tokens: expected {T} tokens, got {len(tokens)}")
        if not 0 <= kp <= T - 3:
            raise ConfigError(f"key_pos: must be in 0..{T - 3}, got {kp}")
    elif (T == len(PAPER_EXAMPLE) and {4, 3} <= set(task.cfg.anchors)
          and all(task.cfg.value_min <= v <= task.cfg.value_max for i, v in enumerate(PAPER_EXAMPLE)
                  if i not in (3, 4))):
        tokens, kp = torch.tensor(PAPER_EXAMPLE), PAPER_EXAMPLE_KEY_POS
    else:
        pairs = task.held_out_pairs or task.pairs
        d = sample_inputs(task, 1, pairs, "test", np.random.default_rng(opts.seed), _key_positions(task, None))
        tokens, kp = d.tokens[0], int(d.key_pos[0])
    pat = attention_patterns(model, tokens[None])[:, 0]  # (L, H, T, T)
    H = pat.shape[1]
    if opts.head is not None and not 0 <= opts.head < H:
        raise ConfigError(f"head: must be in 0..{H - 1}, got {opts.head}")
    P = pat.mean(1) if opts.head is None else pat[:, opts.head]  # (L, T, T)
    with torch.no_grad():
        pred = model(tokens[None].to(next(model.parameters()).device))[0].argmax(-1).cpu()  # (T,)
    edges = flow_graph(P, kp)
    tok_np = tokens.numpy()
    edges["query_token"] = tok_np[edges["query"].to_numpy()]
    edges["source_token"] = tok_np[edges["source"].to_numpy()]
    edges["head"] = "mean" if opts.head is None else str(opts.head)
    pair = (int(tokens[kp + 1]), int(tokens[kp + 2]))
    x = int(tokens[kp])
    desc = f"key {x}, anchors {pair}, output {int(pred[-1])}"
    if set(pair) <= set(task.cfg.anchors):
        desc += f" (inferential target {x + task.inferential_shift(pair)})"
    fig = plot_information_flow(P.numpy(), tokens.tolist(), pred.tolist(), kp, opts.threshold,
                                title=f"{label}: {desc}")
    return {"png": _save_png(fig, out / f"{name}.png"), "csv": _write_csv(edges, out / f"{name}.csv")}


def _flow_scores(run, opts: FlowScoresOptions, out: Path, name: str, label: str) -> dict[str, Path]:
    from ..plots.mechanism import plot_flow_scores

    task = run.task
    data = sample_inputs(task, opts.n_inputs, task.pairs, opts.split, np.random.default_rng(opts.seed),
                         _key_positions(task, opts.key_positions))
    pats = attention_patterns(run.model, data.tokens)
    groups = [pair_label(tuple(p)) for p in data.pair.tolist()] if opts.by_pair else None
    df = flow_scores(pats, data.key_pos, group=groups)
    summ = flow_summary(df)
    edges = ["last->key", "last->anchor1", "last->anchor2", "last->anchors", "anchor1->key", "anchor2->key",
             "anchors->key", "anchor2->anchor1"]
    fig = plot_flow_scores(summ, edges, title=f"{label}: mean attention between roles")
    return {"png": _save_png(fig, out / f"{name}.png"), "csv": _write_csv(df, out / f"{name}.csv"),
            "summary": _write_csv(summ, out / f"{name}_summary.csv")}


def _mask_accuracy_table(run, opts, out: Path, name: str) -> Path:
    L = len(run.model.blocks)
    data = _per_pair(run.task, opts.n_accuracy, opts.split, np.random.default_rng([opts.seed, 1]),
                     _key_positions(run.task, opts.key_positions))
    masks = {k: standard_masks(k, L, opts.layers, opts.renormalize) for k in ("none", "key", "anchor2")}
    return _write_csv(mask_accuracy(run.model, run.task, data, masks), out / f"{name}_accuracy.csv")


def _mask_key(run, opts: MaskKeyOptions, out: Path, name: str, label: str) -> dict[str, Path]:
    from ..plots.mechanism import plot_embedding

    model, task = run.model, run.task
    data = _per_pair(task, opts.n_per_pair, opts.split, np.random.default_rng(opts.seed),
                     _key_positions(task, opts.key_positions))
    masks = standard_masks("key", len(model.blocks), opts.layers, opts.renormalize)
    hook = opts.hook or default_output_hook(model)
    df = activation_embedding(model, data, hook, masks, opts.method, max_points=None, seed=opts.seed)
    fig = plot_embedding(df, title=f"{label}: {opts.method} of {hook} (last position), key masked")
    return {"png": _save_png(fig, out / f"{name}.png"), "csv": _write_csv(df, out / f"{name}.csv"),
            "accuracy": _mask_accuracy_table(run, opts, out, name)}


def _mask_anchor2(run, opts: MaskAnchor2Options, out: Path, name: str, label: str) -> dict[str, Path]:
    from ..plots.mechanism import plot_cosine_heatmap

    model, task = run.model, run.task
    masks = standard_masks("anchor2", len(model.blocks), opts.layers, opts.renormalize)
    hook = opts.hook or default_output_hook(model)
    df = single_anchor_similarity(model, task, masks, hook, opts.g_values, opts.key_pos, opts.n_draws, opts.seed,
                                  opts.center)
    c = contrast_of(df)
    C, labels, groups = square_matrix(df)
    fig = plot_cosine_heatmap(C, labels, labels, groups=groups, xlabel="(g, a1, x)", ylabel="(g, a1, x)",
                              title=f"{label}: {hook}, second anchor masked; equal-g contrast {c:.3f}")
    summ = pd.DataFrame([dict(metric="equal_g_contrast", value=c)])
    return {"png": _save_png(fig, out / f"{name}.png"), "csv": _write_csv(df, out / f"{name}.csv"),
            "summary": _write_csv(summ, out / f"{name}_summary.csv"),
            "accuracy": _mask_accuracy_table(run, opts, out, name)}


def _tsne_ao1(run, opts: TsneAo1Options, out: Path, name: str, label: str) -> dict[str, Path]:
    from ..plots.mechanism import plot_embedding

    model, task = run.model, run.task
    if not 0 <= opts.layer < len(model.blocks):
        raise ConfigError(f"layer: must be in 0..{len(model.blocks) - 1}, got {opts.layer}")
    data = sample_inputs(task, opts.n_inputs, task.pairs, opts.split, np.random.default_rng(opts.seed),
                         _key_positions(task, opts.key_positions))
    hook = f"blocks.{opts.layer}.hook_ao"
    df = activation_embedding(model, data, hook, (), opts.method, opts.max_points, opts.seed)
    fig = plot_embedding(df, title=f"{label}: {opts.method} of {hook} (last position, {len(df)} inputs)")
    return {"png": _save_png(fig, out / f"{name}.png"), "csv": _write_csv(df, out / f"{name}.csv")}


def _triangle_outputs(df: pd.DataFrame, out: Path, name: str, title: str, axis: str) -> dict[str, Path]:
    from ..plots.mechanism import plot_cosine_heatmap

    H, box, keys = compose_triangles(df)
    summ = pd.DataFrame([dict(metric="equal_target_contrast", block="all", value=contrast_of(df))]
                        + [dict(metric="equal_target_contrast", block=b, value=contrast_of(df[df.block == b]))
                           for b in dict.fromkeys(df.block)])
    blocks = {b: g.iloc[0] for b, g in df.groupby("block", sort=False)}
    row_col = [c for c in df.columns if c.startswith("row_") and c not in ("row_key", "row_target")][0]
    col_col = row_col.replace("row_", "col_")
    note = "; ".join(f"{b}: rows {axis} {r[row_col]} vs cols {axis} {r[col_col]}" for b, r in blocks.items())
    fig = plot_cosine_heatmap(H, keys, keys, box_mask=box, xlabel="key x (columns)", ylabel="key y (rows)",
                              title=f"{title}\n{note}; contrast {summ.value.iloc[0]:.3f}")
    return {"png": _save_png(fig, out / f"{name}.png"), "csv": _write_csv(df, out / f"{name}.csv"),
            "summary": _write_csv(summ, out / f"{name}_summary.csv")}


def _cos_ao2(run, opts: CosAo2Options, out: Path, name: str, label: str) -> dict[str, Path]:
    blocks = None if opts.lower is None else {"lower": opts.lower, "upper": opts.upper}
    df = ao_similarity(run.model, run.task, opts.keys, blocks, opts.layer, opts.key_pos, opts.n_draws, opts.seed,
                       opts.center)
    return _triangle_outputs(df, out, name, f"{label}: X_ao(2) at the last position", "pair")


def _cos_v2(run, opts: CosV2Options, out: Path, name: str, label: str) -> dict[str, Path]:
    blocks = None if opts.lower is None else {"lower": opts.lower, "upper": opts.upper}
    df = v_similarity(run.model, run.task, opts.keys, blocks, opts.layer, opts.key_pos, opts.n_draws, opts.seed,
                      opts.center)
    return _triangle_outputs(df, out, name, f"{label}: V(2) at the first anchor", "anchor")


ANALYSES: dict[str, tuple[type, Callable[..., dict[str, Path]]]] = {
    "flow": (FlowOptions, _flow),
    "flow-scores": (FlowScoresOptions, _flow_scores),
    "mask-key": (MaskKeyOptions, _mask_key),
    "mask-anchor2": (MaskAnchor2Options, _mask_anchor2),
    "tsne-ao1": (TsneAo1Options, _tsne_ao1),
    "cos-ao2": (CosAo2Options, _cos_ao2),
    "cos-v2": (CosV2Options, _cos_v2),
}


def analysis_options(name: str) -> type:
    """The option dataclass of analysis ``name``."""
    if name not in ANALYSES:
        raise ConfigError(f"analysis: must be one of {', '.join(ANALYSES)}, got {name!r}")
    return ANALYSES[name][0]


def run_analysis(run_dir: str | Path, name: str, out_dir: str | Path, **options: Any) -> dict[str, Path]:
    """Run analysis ``name`` on the run in ``run_dir``; write PNG + CSV into
    ``out_dir``; return {"png": ..., "csv": ..., maybe "summary"/"accuracy"}.

    The run is only read (final weights, else the latest checkpoint).
    """
    from ..train.loop import load_run

    cls = analysis_options(name)
    opts = make_options(cls, options)
    run = load_run(run_dir)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    log.info("analysis %s of %s -> %s (%s)", name, run_dir, out, opts)
    return ANALYSES[name][1](run, opts, out, name, _run_label(Path(run_dir)))


# ------------------------------------------------------------------ comparison
def run_summary(run, n_inputs: int = 1000, n_draws: int = 4, seed: int = 0) -> dict[str, Any]:
    """Headline mechanism numbers of one loaded run (see :func:`compare_runs`)."""
    model, task = run.model, run.task
    row: dict[str, Any] = {}
    fin = (run.final or {}).get("final", {})
    for k in ("id_acc", "ood_inferential_acc", "ood_symmetric_acc", "commutativity"):
        row[k] = fin.get(k, np.nan)
    data = sample_inputs(task, n_inputs, task.pairs, "train", np.random.default_rng(seed),
                         _key_positions(task, None))
    summ = flow_summary(flow_scores(attention_patterns(model, data.tokens), data.key_pos))
    for l in sorted(set(summ.layer))[:2]:
        s = summ[summ.layer == l].set_index("edge").score
        for e in ("last->key", "last->anchors", "anchors->key"):
            row[f"L{l} {e}"] = float(s.get(e, np.nan))
    masks = standard_masks("anchor2", len(model.blocks))
    for center in (False, True):
        tag = " centered" if center else ""
        row[f"contrast X_ao(2){tag}"] = contrast_of(ao_similarity(model, task, n_draws=n_draws, seed=seed,
                                                                  center=center))
        row[f"contrast V(2){tag}"] = contrast_of(v_similarity(model, task, n_draws=n_draws, seed=seed,
                                                              center=center))
        row[f"contrast anchor2-masked{tag}"] = contrast_of(single_anchor_similarity(
            model, task, masks, default_output_hook(model), n_draws=n_draws, seed=seed, center=center))
    return row


def compare_runs(run_dirs: list[str | Path], n_inputs: int = 1000, n_draws: int = 4, seed: int = 0) -> pd.DataFrame:
    """One row per run: gamma, final accuracies (NaN without final.json), flow scores of layers 0 and 1
    (``L0 last->key``, ``L0 last->anchors``, ``L0 anchors->key``, ``L1 ...``;
    layers 0-based, head-averaged) and the equal-target cosine contrasts of the
    X_ao(2), V(2) and second-anchor-masking experiments (defaults of each),
    raw (the papers' cosine) and centered (probe mean subtracted).
    """
    from ..train.loop import config_of, load_run

    rows = []
    for d in run_dirs:
        run = load_run(d)
        rows.append({"run": str(d), "gamma": config_of(d).init.gamma, **run_summary(run, n_inputs, n_draws, seed)})
    return pd.DataFrame(rows)


__all__ = ["run_analysis", "compare_runs", "run_summary", "ANALYSES", "analysis_options", "make_options",
           "FlowOptions", "FlowScoresOptions", "MaskKeyOptions", "MaskAnchor2Options", "TsneAo1Options",
           "CosAo2Options", "CosV2Options", "PAPER_EXAMPLE"]
