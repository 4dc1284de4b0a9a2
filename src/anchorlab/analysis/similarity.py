"""Representation similarity (NeurIPS Figs. 3b/4, journal Fig. 4D).

Three experiments, each a cosine-similarity matrix between hidden vectors of
hand-built inputs, with the cells where the task says the vectors *should*
agree marked ("equal target"):

* X_ao(2) (NeurIPS Fig. 4a,b): last-position ``blocks.1.hook_ao`` of
  ``(x; a1, a2)``. Lower triangle: rows ``(y; 3,3)`` vs columns ``(x; 2,2)``;
  upper triangle: rows ``(y; 1,2)`` vs columns ``(x; 1,3)``; keys 30..40;
  equal target = equal inferential targets ``f``.
* V(2) (NeurIPS Fig. 4c): ``blocks.1.attn.hook_v`` (heads concatenated) at
  the first anchor's position for ``(x; a)``. Lower: rows anchor 4 vs
  columns anchor 3; upper: rows anchor 1 vs columns anchor 2; equal target =
  equal single-anchor value ``g(x; a) = x + step(a)``.
* Second-anchor masking (journal Fig. 4D): the last-position output with the
  second anchor masked, for inputs ``(x; a1)`` sorted by ``g(x; a1)``;
  equal target = equal ``g``.

Inputs compared in one matrix share the filler tokens and the key position
(default ``key_pos = 2``, the position of the key in the NeurIPS example
sequence); only the key and the anchors change. The papers assume fillers and
position matter little; to not depend on one draw the matrix is the mean over
``n_draws`` random filler rows (seeded).

The summary number is :func:`equal_target_contrast`: mean cosine of
equal-target cells minus mean cosine of the other cells. It is near 0 when
the representation ignores the target structure and approaches
``1 - mean(other cosines)`` when equal-target vectors are parallel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from anchorlab.config import ConfigError
from anchorlab.model.hooks import run_with_cache
from anchorlab.tasks.anchor import AnchorTask, pair_label
from anchorlab.analysis.masking import EdgeMask, masked_run

VecFn = Callable[[torch.Tensor, int], torch.Tensor]  # (tokens (N, T), key_pos) -> (N, d)


def cosine_heatmap(A: torch.Tensor | np.ndarray, B: torch.Tensor | np.ndarray) -> torch.Tensor:
    """Cosine similarity of every row of A (N, d) with every row of B (M, d): (N, M), float64.

    A zero vector has cosine 0 with everything.
    """
    A = torch.as_tensor(A).double()
    B = torch.as_tensor(B).double()
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[1]:
        raise ConfigError(f"A, B: expected (N, d) and (M, d) matrices, got {tuple(A.shape)} and {tuple(B.shape)}")
    An = A / A.norm(dim=1, keepdim=True).clamp_min(1e-300)
    Bn = B / B.norm(dim=1, keepdim=True).clamp_min(1e-300)
    return An @ Bn.T


def equal_target_contrast(C: torch.Tensor | np.ndarray, equal_mask: torch.Tensor | np.ndarray,
                          include: torch.Tensor | np.ndarray | None = None) -> float:
    """mean(C[equal]) - mean(C[~equal]) over the cells in ``include`` (all by default).

    Pass ``include = ~eye`` for a self-similarity matrix so that the trivial
    diagonal does not count. NaN when either set is empty.
    """
    C = np.asarray(C, dtype=np.float64)
    eq = np.asarray(equal_mask, dtype=bool)
    inc = np.ones_like(eq) if include is None else np.asarray(include, dtype=bool)
    if C.shape != eq.shape or inc.shape != eq.shape:
        raise ConfigError(f"equal_mask: shape {eq.shape} must match C {C.shape} (and include)")
    a, b = C[eq & inc], C[~eq & inc]
    if a.size == 0 or b.size == 0:
        return float("nan")
    return float(a.mean() - b.mean())


# ---------------------------------------------------------------- probe inputs
def filler_rows(task: AnchorTask, n_draws: int, seed: int = 0) -> torch.Tensor:
    """``n_draws`` random rows of filler values, (n_draws, T) int64."""
    if n_draws < 1:
        raise ConfigError(f"n_draws: must be >= 1, got {n_draws}")
    c = task.cfg
    rng = np.random.default_rng(seed)
    return torch.from_numpy(rng.integers(c.value_min, c.value_max + 1, size=(n_draws, c.seq_len)))


def probe_tokens(fillers: torch.Tensor, keys: Sequence[int], pairs: Sequence[tuple[int, int]],
                 key_pos: int) -> torch.Tensor:
    """One sequence per (key, pair) on the same filler row: (K, T) int64."""
    T = fillers.shape[-1]
    if not 0 <= key_pos <= T - 3:
        raise ConfigError(f"key_pos: must be in 0..{T - 3}, got {key_pos}")
    if len(keys) != len(pairs):
        raise ConfigError(f"keys, pairs: must have the same length, got {len(keys)} and {len(pairs)}")
    tok = fillers.reshape(1, T).repeat(len(keys), 1).long()
    tok[:, key_pos] = torch.as_tensor(list(keys), dtype=torch.long)
    tok[:, key_pos + 1:key_pos + 3] = torch.as_tensor([list(p) for p in pairs], dtype=torch.long).reshape(-1, 2)
    return tok


def _check_values(task: AnchorTask, keys: Sequence[int], arg: str) -> None:
    c = task.cfg
    bad = [k for k in keys if not c.value_min <= k <= c.value_max]
    if bad:
        raise ConfigError(f"{arg}: key values must be in {c.value_min}..{c.value_max}, got {bad[:5]}")


def _check_anchors(task: AnchorTask, anchors: Sequence[int], arg: str) -> None:
    bad = [a for a in anchors if a not in task.cfg.anchors]
    if bad:
        raise ConfigError(f"{arg}: anchors must be in {sorted(task.cfg.anchors)}, got {bad}")


def draw_cosines(vec_fn: VecFn, batches: dict[str, tuple[torch.Tensor, torch.Tensor]], key_pos: int,
                 center: bool = False) -> dict[str, torch.Tensor]:
    """Cosine matrices of one filler draw.

    batches: name -> (row tokens (N, T), column tokens (M, T)). With
    ``center`` the mean vector of *all* probes of the draw (rows and columns
    of every block) is subtracted first, which removes a component shared by
    every input (a bias, or the position of the fixed key position) that
    otherwise pushes all cosines towards 1. Returns name -> (N, M).
    """
    vecs = {n: (vec_fn(r, key_pos).double(), vec_fn(c, key_pos).double()) for n, (r, c) in batches.items()}
    if center:
        mu = torch.cat([torch.cat(rc) for rc in vecs.values()]).mean(0, keepdim=True)
        vecs = {n: (r - mu, c - mu) for n, (r, c) in vecs.items()}
    return {n: cosine_heatmap(r, c) for n, (r, c) in vecs.items()}


def _mean_sd(mats: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    m = torch.stack(mats)
    return m.mean(0), (m.std(0) if len(m) > 1 else torch.zeros_like(m[0]))


# ---------------------------------------------------------------- vector readers
def last_position(model: torch.nn.Module, hook: str) -> VecFn:
    """Reader of the last-position activation at ``hook``."""
    @torch.no_grad()
    def fn(tokens: torch.Tensor, key_pos: int) -> torch.Tensor:
        _, c = run_with_cache(model.eval(), tokens.to(next(model.parameters()).device),
                              names_filter=lambda n: n == hook)
        return c[hook][:, -1].cpu()
    return fn


def value_at_first_anchor(model: torch.nn.Module, layer: int) -> VecFn:
    """Reader of ``blocks.{layer}.attn.hook_v`` at position key_pos+1, heads concatenated."""
    hook = f"blocks.{layer}.attn.hook_v"

    @torch.no_grad()
    def fn(tokens: torch.Tensor, key_pos: int) -> torch.Tensor:
        _, c = run_with_cache(model.eval(), tokens.to(next(model.parameters()).device),
                              names_filter=lambda n: n == hook)
        v = c[hook][:, :, key_pos + 1]  # (N, H, d_head)
        return v.reshape(v.shape[0], -1).cpu()
    return fn


# ------------------------------------------------------------ triangle experiments
def triangle_similarity(vec_fn: VecFn, task: AnchorTask, blocks: dict[str, tuple[tuple[int, int], tuple[int, int]]],
                        keys: Sequence[int], target: Callable[[int, tuple[int, int]], int],
                        key_pos: int = 2, n_draws: int = 4, seed: int = 0, center: bool = False
                        ) -> pd.DataFrame:
    """Cross-similarity of ``(y; row_pair)`` vs ``(x; col_pair)`` for every block.

    blocks: name ("lower"/"upper") -> (row_pair, col_pair); keys: the key
    values on both axes; target(key, pair) -> the value that defines "equal".
    Returns DataFrame(block, row_key, col_key, row_pair, col_pair, row_target,
    col_target, equal, cosine, cosine_sd) over the full K x K matrix of each
    block; ``shown`` marks the cells drawn in the composite triangle plot
    (lower: row >= col, upper: row < col). ``center``: see :func:`draw_cosines`.
    """
    keys = [int(k) for k in keys]
    _check_values(task, keys, "keys")
    fill = filler_rows(task, n_draws, seed)
    for name, (rp, cp) in blocks.items():
        _check_anchors(task, list(rp) + list(cp), f"{name} pairs")
    per_draw = [draw_cosines(vec_fn, {name: (probe_tokens(f, keys, [rp] * len(keys), key_pos),
                                             probe_tokens(f, keys, [cp] * len(keys), key_pos))
                                      for name, (rp, cp) in blocks.items()}, key_pos, center) for f in fill]
    out = []
    for name, (rp, cp) in blocks.items():
        mean, sd = _mean_sd([d[name] for d in per_draw])
        for i, y in enumerate(keys):
            for j, x in enumerate(keys):
                ty, tx = target(y, rp), target(x, cp)
                out.append(dict(block=name, row_key=y, col_key=x, row_pair=pair_label(rp),
                                col_pair=pair_label(cp), row_target=ty, col_target=tx, equal=ty == tx,
                                cosine=float(mean[i, j]), cosine_sd=float(sd[i, j]),
                                shown=(i >= j) if name == "lower" else (i < j)))
    return pd.DataFrame(out)


def contrast_of(df: pd.DataFrame) -> float:
    """:func:`equal_target_contrast` over all cells of a similarity table
    (cells with ``include == False`` left out when that column exists)."""
    inc = df["include"].to_numpy(bool) if "include" in df else None
    return equal_target_contrast(df.cosine.to_numpy(), df.equal.to_numpy(bool), inc)


def cosine_levels(df: pd.DataFrame) -> dict[str, float]:
    """The raw levels behind :func:`contrast_of`: ``equal_mean`` / ``unequal_mean``, the mean cosine over the
    equal-target cells and over the others, and ``equal_abs`` / ``unequal_abs``, the same of |cosine| (cells
    with ``include == False`` left out when that column exists; NaN for a side with no cell). NeurIPS §5.2
    states levels: equal-target vectors "nearly parallel" in the inferential solution, every pair's
    similarity "always low" in the symmetric one."""
    d = df[df["include"].astype(bool)] if "include" in df else df
    eq = d.equal.astype(bool).to_numpy()
    cos = d.cosine.to_numpy(dtype=float)

    def mean(x: np.ndarray) -> float:
        return float(x.mean()) if len(x) else float("nan")

    return {"equal_mean": mean(cos[eq]), "unequal_mean": mean(cos[~eq]), "equal_abs": mean(np.abs(cos[eq])),
            "unequal_abs": mean(np.abs(cos[~eq]))}


def default_ao_blocks(task: AnchorTask) -> dict[str, tuple[tuple[int, int], tuple[int, int]]]:
    """NeurIPS Fig. 4a,b: lower (3,3) vs (2,2), upper (1,2) vs (1,3) with the
    anchors a1 < a2 < a3 < a4 of the task standing for 1..4."""
    an = sorted(task.cfg.anchors)
    if len(an) < 3:
        raise ConfigError("lower/upper: the default X_ao(2) pairs need >= 3 anchors; pass them explicitly")
    return {"lower": ((an[2], an[2]), (an[1], an[1])), "upper": ((an[0], an[1]), (an[0], an[2]))}


def default_v_blocks(task: AnchorTask) -> dict[str, tuple[int, int]]:
    """V(2): lower anchor 4 (rows) vs 3 (columns), upper 1 vs 2 (as ranks of the task's anchors)."""
    an = sorted(task.cfg.anchors)
    if len(an) < 4:
        raise ConfigError("lower/upper: the default V(2) anchors need >= 4 anchors; pass them explicitly")
    return {"lower": (an[3], an[2]), "upper": (an[0], an[1])}


def _check_layer(model: torch.nn.Module, layer: int | None) -> int:
    L = len(model.blocks)
    layer = min(1, L - 1) if layer is None else layer
    if not 0 <= layer < L:
        raise ConfigError(f"layer: must be in 0..{L - 1}, got {layer}")
    return layer


def ao_similarity(model: torch.nn.Module, task: AnchorTask, keys: Sequence[int] = range(30, 41),
                  blocks: dict[str, tuple[tuple[int, int], tuple[int, int]]] | None = None,
                  layer: int | None = None, key_pos: int = 2, n_draws: int = 4, seed: int = 0,
                  center: bool = False) -> pd.DataFrame:
    """The X_ao(2) experiment (see module doc); ``layer`` defaults to 1 (the
    papers' second layer; 0 for a one-layer model). Equal = equal inferential target."""
    layer = _check_layer(model, layer)
    blocks = blocks or default_ao_blocks(task)
    return triangle_similarity(last_position(model, f"blocks.{layer}.hook_ao"), task, blocks, keys,
                               lambda k, p: k + task.inferential_shift(tuple(p)), key_pos, n_draws, seed, center)


def v_similarity(model: torch.nn.Module, task: AnchorTask, keys: Sequence[int] = range(30, 41),
                 blocks: dict[str, tuple[int, int]] | None = None, layer: int | None = None,
                 key_pos: int = 2, n_draws: int = 4, seed: int = 0, center: bool = False) -> pd.DataFrame:
    """The V(2) experiment: blocks map name -> (row anchor, column anchor).

    The second anchor of every probe is the first anchor repeated; it cannot
    matter, since V at the first anchor's position sees only earlier positions.
    Equal = equal g(x; a) = x + step(a).
    """
    layer = _check_layer(model, layer)
    blocks = blocks or default_v_blocks(task)
    pair_blocks = {n: ((r, r), (c, c)) for n, (r, c) in blocks.items()}
    df = triangle_similarity(value_at_first_anchor(model, layer), task, pair_blocks, keys,
                             lambda k, p: k + task.step(p[0]), key_pos, n_draws, seed, center)
    df["row_pair"] = df.block.map({n: r for n, (r, _) in blocks.items()})
    df["col_pair"] = df.block.map({n: c for n, (_, c) in blocks.items()})
    return df.rename(columns={"row_pair": "row_anchor", "col_pair": "col_anchor"})


# ------------------------------------------------------- second-anchor masking (4D)
def default_g_values(task: AnchorTask, n: int = 12) -> list[int]:
    """``n`` consecutive g values for which every anchor has a valid key."""
    c, steps = task.cfg, list(task.cfg.anchors.values())
    lo, hi = c.value_min + max(steps), c.value_max + min(steps)
    if hi < lo:
        raise ConfigError("g_values: no g value has a valid key for every anchor; pass g_values explicitly")
    start = max(lo, (lo + hi) // 2 - n // 2)
    return list(range(start, min(start + n, hi + 1)))


def single_anchor_similarity(model: torch.nn.Module, task: AnchorTask, masks: Sequence[EdgeMask], hook: str,
                             g_values: Sequence[int] | None = None, key_pos: int = 2, n_draws: int = 4,
                             seed: int = 0, center: bool = False) -> pd.DataFrame:
    """Journal Fig. 4D: outputs for ``(x; a1)`` with the second anchor masked.

    For every g in ``g_values`` and every anchor a1 the key is
    ``x = g - step(a1)``; the second anchor token is the smallest anchor (it is
    masked). Rows are ordered by (g, a1). Returns DataFrame(i, j, row_g,
    row_anchor, row_key, col_g, col_anchor, col_key, equal, include, cosine,
    cosine_sd) over the full N x N self-similarity; ``include`` is False on
    the diagonal (left out of the contrast). ``center``: see :func:`draw_cosines`.
    """
    g_values = list(default_g_values(task) if g_values is None else g_values)
    an = sorted(task.cfg.anchors)
    items = [(g, a, g - task.step(a)) for g in g_values for a in an]
    _check_values(task, [x for _, _, x in items], "g_values (keys x = g - step(a))")
    T = task.cfg.seq_len
    if key_pos + 2 >= T - 1:
        raise ConfigError(f"key_pos: must be <= {T - 4} so the masked second anchor is not the last position")
    keys = [x for _, _, x in items]
    pairs = [(a, an[0]) for _, a, _ in items]
    fill = filler_rows(task, n_draws, seed)

    def vec(tokens: torch.Tensor, kp: int) -> torch.Tensor:
        kpos = torch.full((tokens.shape[0],), kp, dtype=torch.long)
        _, c = masked_run(model, tokens, masks, key_pos=kpos, names_filter=lambda n: n == hook)
        return c[hook][:, -1].cpu()

    mats = []
    for f in fill:
        tok = probe_tokens(f, keys, pairs, key_pos)
        mats.append(draw_cosines(vec, {"all": (tok, tok)}, key_pos, center)["all"])
    mean, sd = _mean_sd(mats)
    rows = []
    for i, (gi, ai, xi) in enumerate(items):
        for j, (gj, aj, xj) in enumerate(items):
            rows.append(dict(i=i, j=j, row_g=gi, row_anchor=ai, row_key=xi, col_g=gj, col_anchor=aj, col_key=xj,
                             equal=gi == gj, include=i != j, cosine=float(mean[i, j]), cosine_sd=float(sd[i, j])))
    return pd.DataFrame(rows)


__all__ = ["cosine_heatmap", "cosine_levels", "equal_target_contrast", "filler_rows", "probe_tokens", "draw_cosines",
           "last_position", "value_at_first_anchor", "triangle_similarity", "contrast_of",
           "ao_similarity", "v_similarity", "default_ao_blocks", "default_v_blocks", "default_g_values",
           "single_anchor_similarity"]
