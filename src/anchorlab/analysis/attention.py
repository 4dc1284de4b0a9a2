"""Information flow through attention (NeurIPS Fig. 3a,c).

Positions are named by their *role* in an anchor-task sequence, resolved per
sample from the key position ``p``: ``key`` = p, ``anchor1`` = p+1,
``anchor2`` = p+2, ``last`` = T-1 (the position whose output is read). Any
other position may be given as an integer. So every score here works for any
key position; when ``p = T-3`` the second anchor *is* the last position and
the roles collide, which is why :func:`sample_inputs` can restrict key
positions (the analyses default to ``0..T-4``, so the last token is a filler).

``attention_patterns`` collects the post-softmax pattern of every layer;
``flow_scores`` reduces it to a tidy table of role-to-role attention weights;
``flow_graph`` lists every edge of one input for the information-flow plot.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from anchorlab.config import ConfigError
from anchorlab.model.hooks import run_with_cache
from anchorlab.tasks.anchor import AnchorData, AnchorTask

ROLES = ("key", "anchor1", "anchor2", "last")
_OFFSET = {"key": 0, "anchor1": 1, "anchor2": 2}

#: (query role, source role): the attention of ``query`` to ``source``.
FLOW_EDGES: tuple[tuple[str, str], ...] = (
    ("last", "key"), ("last", "anchor1"), ("last", "anchor2"),
    ("anchor1", "key"), ("anchor2", "key"), ("anchor2", "anchor1"),
)


def edge_label(query: str | int, source: str | int) -> str:
    return f"{query}->{source}"


def role_positions(role: str | int, key_pos: torch.Tensor, seq_len: int, arg: str = "role") -> torch.Tensor:
    """Per-sample position of ``role``; key_pos (B,) -> (B,) int64.

    ``role`` is one of :data:`ROLES` or an integer position (negative counts
    from the end, like Python indexing).
    """
    key_pos = torch.as_tensor(key_pos, dtype=torch.long).reshape(-1)
    if isinstance(role, (int, np.integer)) and not isinstance(role, bool):
        pos = int(role) + seq_len if role < 0 else int(role)
        if not 0 <= pos < seq_len:
            raise ConfigError(f"{arg}: position {role} is outside 0..{seq_len - 1}")
        return torch.full_like(key_pos, pos)
    if role == "last":
        return torch.full_like(key_pos, seq_len - 1)
    if role not in _OFFSET:
        raise ConfigError(f"{arg}: must be one of {', '.join(ROLES)} or an integer position, got {role!r}")
    pos = key_pos + _OFFSET[role]
    if len(pos) and (int(pos.max()) >= seq_len or int(key_pos.min()) < 0):
        raise ConfigError(f"{arg}: {role!r} falls outside the sequence (length {seq_len}) for some key_pos")
    return pos


def sample_inputs(task: AnchorTask, n: int, pairs: Sequence[tuple[int, int]], split: str,
                  rng: np.random.Generator, key_positions: Sequence[int] | None = None) -> AnchorData:
    """``n`` task sequences whose key position lies in ``key_positions``.

    Draws from :meth:`AnchorTask.sample` and keeps the rows with an allowed key
    position (rejection), so keys, fillers and pairs follow the task's own
    distribution. ``None`` allows every key position.
    """
    T = task.cfg.seq_len
    allowed = list(range(T - 2)) if key_positions is None else sorted({int(p) for p in key_positions})
    if not allowed or min(allowed) < 0 or max(allowed) > T - 3:
        raise ConfigError(f"key_positions: must be a non-empty subset of 0..{T - 3}, got {key_positions!r}")
    if not pairs:
        raise ConfigError("pairs: at least one anchor pair is needed")
    parts, have = [], 0
    while have < n:
        want = max(int(math.ceil((n - have) * (T - 2) / len(allowed) * 1.2)), 16)
        d = task.sample(want, list(pairs), split, rng)
        keep = torch.isin(d.key_pos, torch.tensor(allowed))
        parts.append(AnchorData(*(t[keep] for t in (d.tokens, d.targets, d.pair, d.key, d.key_pos))))
        have += int(keep.sum())
    fields = [torch.cat([getattr(p, f) for p in parts])[:n] for f in ("tokens", "targets", "pair", "key", "key_pos")]
    return AnchorData(*fields)


@torch.no_grad()
def attention_patterns(model: torch.nn.Module, tokens: torch.Tensor, batch_size: int = 4096) -> torch.Tensor:
    """Post-softmax attention of every layer: tokens (B, T) -> (L, B, H, T, T).

    ``[l, b, h, q, k]`` is how much query position ``q`` attends to position
    ``k`` in layer ``l`` (0-based; the papers' layer 1 is ``l = 0``).
    """
    was_training = model.training
    model.eval()
    dev = next(model.parameters()).device
    n_layers = len(model.blocks)
    names = [f"blocks.{l}.attn.hook_pattern" for l in range(n_layers)]
    chunks = []
    for i in range(0, tokens.shape[0], batch_size):
        _, cache = run_with_cache(model, tokens[i:i + batch_size].to(dev), names_filter=lambda n: n in names)
        chunks.append(torch.stack([cache[n].cpu() for n in names]))
    model.train(was_training)
    return torch.cat(chunks, dim=1)


def flow_scores(patterns: torch.Tensor, key_pos: torch.Tensor,
                edges: Sequence[tuple[str | int, str | int]] = FLOW_EDGES,
                group: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean role-to-role attention per layer and head.

    patterns: (L, B, H, T, T) from :func:`attention_patterns`; key_pos: (B,).
    Returns DataFrame(layer, head, edge, query, source, group, score, n) where
    ``score`` is the mean over inputs of ``patterns[l, b, h, q_b, s_b]``, with
    ``q_b``/``s_b`` the query/source positions of sample b. ``group`` (B labels,
    e.g. anchor pairs) adds per-group rows next to the ``"all"`` rows.
    """
    if patterns.ndim != 5 or patterns.shape[-1] != patterns.shape[-2]:
        raise ConfigError(f"patterns: expected shape (L, B, H, T, T), got {tuple(patterns.shape)}")
    L, B, H, T, _ = patterns.shape
    key_pos = torch.as_tensor(key_pos, dtype=torch.long).reshape(-1)
    if len(key_pos) != B:
        raise ConfigError(f"key_pos: expected {B} positions (one per input), got {len(key_pos)}")
    labels = np.asarray(["all"] * B if group is None else list(group), dtype=object)
    if len(labels) != B:
        raise ConfigError(f"group: expected {B} labels, got {len(labels)}")
    groups = {"all": np.arange(B)}
    if group is not None:
        for g in dict.fromkeys(labels.tolist()):
            groups[str(g)] = np.flatnonzero(labels == g)
    rows = torch.arange(B)
    by_sample = patterns.permute(1, 3, 4, 0, 2)  # (B, T, T, L, H)
    out = []
    for q_role, s_role in edges:
        q = role_positions(q_role, key_pos, T, "edges.query")
        s = role_positions(s_role, key_pos, T, "edges.source")
        vals = by_sample[rows, q, s].double()  # (B, L, H)
        for gname, idx in groups.items():
            m = vals[torch.as_tensor(idx, dtype=torch.long)].mean(0)  # (L, H)
            for l in range(L):
                for h in range(H):
                    out.append(dict(layer=l, head=h, edge=edge_label(q_role, s_role), query=str(q_role),
                                    source=str(s_role), group=gname, score=float(m[l, h]), n=len(idx)))
    return pd.DataFrame(out, columns=["layer", "head", "edge", "query", "source", "group", "score", "n"])


def output_contributions(patterns: torch.Tensor, residual: float = 0.5, position: int = -1) -> torch.Tensor:
    """Each attention edge weighted by how much of it reaches one output position: (L, B, H, T, T) -> same.

    NeurIPS Fig. 3 draws every edge by its attention weight and highlights "the attention connections that
    significantly contribute to the final output". This reads that contribution as attention rollout with
    the residual stream (Abnar and Zuidema, 2020): with ``R_l = residual * I + (1 - residual) * mean_h A_l``
    (each row sums to 1), the share of position q's stream after layer l that reaches ``position`` after the
    last layer is ``r_l[q] = (R_{L-1} ... R_{l+1})[position, q]`` (``r_{L-1} = e_position``), and edge (q <- s)
    of layer l, head h, contributes ``r_l[q] * A_l[h, q, s]``. In the last layer only ``position``'s own
    edges count; an edge into a position that the later layers never read counts 0. ``residual = 0``
    follows attention alone (no skip path). Feed the result to :func:`flow_scores` for role-to-role sums.
    """
    if patterns.ndim != 5 or patterns.shape[-1] != patterns.shape[-2]:
        raise ConfigError(f"patterns: expected shape (L, B, H, T, T), got {tuple(patterns.shape)}")
    if not 0.0 <= residual <= 1.0:
        raise ConfigError(f"residual: must be in [0, 1], got {residual!r}")
    L, B, H, T, _ = patterns.shape
    A = patterns.double()
    r = torch.zeros(B, T, dtype=A.dtype)
    r[:, position] = 1.0
    eye = torch.eye(T, dtype=A.dtype)
    out = torch.empty_like(A)
    for l in reversed(range(L)):
        out[l] = A[l] * r[:, None, :, None]                        # (B, H, T, T) * (B, 1, T, 1)
        r = torch.einsum("bq,bqs->bs", r, residual * eye + (1.0 - residual) * A[l].mean(1))
    return out


def flow_summary(scores: pd.DataFrame, group: str = "all") -> pd.DataFrame:
    """Head-averaged flow scores per layer with two combined edges.

    ``last->anchors`` = last->anchor1 + last->anchor2 (attention mass the last
    position puts on the two anchors); ``anchors->key`` = mean of
    anchor1->key and anchor2->key. Returns DataFrame(layer, edge, score).
    """
    s = scores[scores.group == group].groupby(["layer", "edge"], sort=False)["score"].mean().unstack("edge")
    if {"last->anchor1", "last->anchor2"} <= set(s.columns):
        s["last->anchors"] = s["last->anchor1"] + s["last->anchor2"]
    if {"anchor1->key", "anchor2->key"} <= set(s.columns):
        s["anchors->key"] = (s["anchor1->key"] + s["anchor2->key"]) / 2
    return s.stack().rename("score").reset_index()


def position_roles(key_pos: int, seq_len: int) -> list[str]:
    """Role name of each position of one sequence ('filler' where none; the
    last position is 'last' unless it is also an anchor)."""
    names = ["filler"] * seq_len
    names[-1] = "last"
    for r, off in _OFFSET.items():
        if key_pos + off < seq_len:
            names[key_pos + off] = r
    return names


def flow_graph(pattern_per_layer: torch.Tensor, key_pos: int) -> pd.DataFrame:
    """Every causal edge of one input: (L, T, T) -> DataFrame(layer, query,
    source, weight, query_role, source_role); ``weight = pattern[l, query, source]``."""
    if pattern_per_layer.ndim != 3:
        raise ConfigError(f"pattern_per_layer: expected (L, T, T), got {tuple(pattern_per_layer.shape)}")
    L, T, _ = pattern_per_layer.shape
    roles = position_roles(int(key_pos), T)
    p = pattern_per_layer.detach().cpu().double().numpy()
    rows = [dict(layer=l, query=q, source=s, weight=float(p[l, q, s]), query_role=roles[q], source_role=roles[s])
            for l in range(L) for q in range(T) for s in range(q + 1)]
    return pd.DataFrame(rows)


__all__ = ["ROLES", "FLOW_EDGES", "role_positions", "sample_inputs", "attention_patterns", "flow_scores",
           "flow_summary", "flow_graph", "output_contributions", "position_roles", "edge_label"]
