"""Evaluation of an anchor-task model: per-group accuracy under each hypothesis.

:func:`evaluate` returns tidy rows (one per pair x key split x hypothesis),
the deviation histogram, and a flat dict of metrics whose names are stable
across the project:

  train_acc            trained pairs, training keys, designated target
  id_acc               trained pairs, ID-test keys, designated target
  ood_acc              held-out pairs, all keys, inferential target
  ood_inferential_acc  = ood_acc
  ood_symmetric_acc    held-out pairs whose mirror is trained, mirror's target
  ood_other_frac       held-out pairs: prediction matches no hypothesis
  commutativity        held-out pairs (a != b): pred(a,b) == pred(b,a), key and
                       fillers fixed
  min_pair_train_acc   the lowest designated accuracy of a trained pair on training keys
                       (early stopping "every pair fitted", journal Fig. 8B)
  train_seen_acc       trained pairs, on sequences of the training set itself (split "seen")
  acc/<ab>/<split>                 designated (inferential if held out); split train | test | seen
  hyp/<ab>/<split>/<hypothesis>    inferential | symmetric | other

Which of these columns a figure calls "ID", "OOD", "train" and "commutativity"
is said by the named metric definitions of :mod:`anchorlab.eval.definitions`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from anchorlab.tasks.anchor.data import SPLITS, AnchorData, pair_label
from anchorlab.tasks.anchor.pairs import PairRules

Predict = Callable[[torch.Tensor], torch.Tensor]


@torch.no_grad()
def predict(model: torch.nn.Module, tokens: torch.Tensor, batch_size: int = 8192) -> torch.Tensor:
    """argmax of the last-position logits; tokens (N, T) -> (N,)."""
    was_training = model.training
    model.eval()
    dev = next(model.parameters()).device
    out = [model(tokens[i:i + batch_size].to(dev), last_only=True).argmax(-1).cpu()
           for i in range(0, tokens.shape[0], batch_size)]
    model.train(was_training)
    return torch.cat(out) if out else torch.empty(0, dtype=torch.long)


def evaluate(model: torch.nn.Module, task: PairRules,
             sets: dict[tuple[tuple[int, int], str], AnchorData],
             batch_size: int = 8192) -> tuple[dict[str, float], pd.DataFrame, pd.DataFrame]:
    """Evaluate ``model`` on every group; returns (metrics, rows, deviations).

    rows: DataFrame(pair, split, role, hypothesis, acc, n)
    deviations: DataFrame(pair, split, deviation, count) for held-out and
    non-inferential pairs, deviation = prediction - inferential target.
    """
    keys = list(sets)
    preds = {}
    for part in ([k for k in keys if k[1] != "seen"], [k for k in keys if k[1] == "seen"]):
        if part:  # seen groups are predicted in their own batches: the others' batches do not change
            out = predict(model, torch.cat([sets[k].tokens for k in part]), batch_size)
            preds.update(zip(part, torch.split(out, [len(sets[k]) for k in part])))
    # Commutativity: the same held-out sequences with anchors swapped.
    comm_keys = [k for k in keys if k[0] in task.held_out_pairs and k[0][0] != k[0][1]]
    swapped = {}
    if comm_keys:
        sw_tokens = torch.cat([sets[k].swapped().tokens for k in comm_keys])
        swapped = dict(zip(comm_keys, torch.split(predict(model, sw_tokens, batch_size),
                                                  [len(sets[k]) for k in comm_keys])))

    rows, devs = [], []
    for (pair, split) in keys:
        d, pr = sets[(pair, split)], preds[(pair, split)]
        held = pair in task.held_out_pairs
        role = "held_out" if held else ("non_inferential" if pair in task.non_inferential_pairs
                                        else "inferential")
        hyps = task.hypotheses(pair)
        matched = torch.zeros_like(pr, dtype=torch.bool)
        for h in ("designated", "inferential", "symmetric"):
            s = hyps[h]
            if s is None:
                continue
            hit = pr == d.key + s
            matched |= hit
            rows.append(dict(pair=pair_label(pair), split=split, role=role, hypothesis=h,
                             acc=float(hit.float().mean()), n=len(d)))
        rows.append(dict(pair=pair_label(pair), split=split, role=role, hypothesis="other",
                         acc=float((~matched).float().mean()), n=len(d)))
        if (pair, split) in swapped:
            rows.append(dict(pair=pair_label(pair), split=split, role=role,
                             hypothesis="commutativity",
                             acc=float((pr == swapped[(pair, split)]).float().mean()), n=len(d)))
        if role != "inferential":
            dev = (pr - (d.key + hyps["inferential"])).numpy()
            vals, counts = np.unique(dev, return_counts=True)
            devs += [dict(pair=pair_label(pair), split=split, deviation=int(v), count=int(c))
                     for v, c in zip(vals, counts)]
    table = pd.DataFrame(rows)
    return summarize(table, task), table, pd.DataFrame(devs, columns=["pair", "split", "deviation", "count"])


def _mean(df: pd.DataFrame) -> float:
    if df.empty:
        return math.nan
    return float((df.acc * df.n).sum() / df.n.sum())


def summarize(table: pd.DataFrame, task: PairRules) -> dict[str, float]:
    """Flat metric dict from the tidy rows (weighted by group size)."""
    m: dict[str, float] = {}
    trained = {pair_label(p) for p in task.trained_pairs}
    held = {pair_label(p) for p in task.held_out_pairs}
    sym_ok = {pair_label(p) for p in task.held_out_pairs if task.hypotheses(p)["symmetric"] is not None}
    t = table
    des = t[t.hypothesis == "designated"]
    m["train_acc"] = _mean(des[des.pair.isin(trained) & (des.split == "train")])
    m["id_acc"] = _mean(des[des.pair.isin(trained) & (des.split == "test")])
    inf = t[(t.hypothesis == "inferential") & t.pair.isin(held)]
    m["ood_acc"] = m["ood_inferential_acc"] = _mean(inf)
    sym = t[(t.hypothesis == "symmetric") & t.pair.isin(sym_ok)]
    m["ood_symmetric_acc"] = _mean(sym)
    m["ood_other_frac"] = _mean(t[(t.hypothesis == "other") & t.pair.isin(held)])
    m["commutativity"] = _mean(t[t.hypothesis == "commutativity"])
    m["train_seen_acc"] = _mean(des[des.pair.isin(trained) & (des.split == "seen")])
    per_pair = des[des.pair.isin(trained) & (des.split == "train")].acc
    m["min_pair_train_acc"] = float(per_pair.min()) if len(per_pair) else math.nan
    for r in t.itertuples():
        if r.hypothesis == "designated" or (r.hypothesis == "inferential" and r.pair in held):
            m[f"acc/{r.pair}/{r.split}"] = r.acc
        if r.pair in held or r.role == "non_inferential":
            m[f"hyp/{r.pair}/{r.split}/{r.hypothesis}"] = r.acc
    return m


def top_deviations(devs: pd.DataFrame, pair: str, k: int = 3) -> list[tuple[int, float]]:
    """The k most frequent (prediction - inferential target) for a pair, as fractions."""
    d = devs[devs.pair == pair].groupby("deviation")["count"].sum()
    if d.empty:
        return []
    d = (d / d.sum()).sort_values(ascending=False).head(k)
    return [(int(i), float(v)) for i, v in d.items()]


__all__ = ["evaluate", "predict", "summarize", "top_deviations", "SPLITS"]
