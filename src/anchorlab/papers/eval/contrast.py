"""The contrast case by case: the same case (op set, seed, peak lr) at a large and a small init, each run
on its own (final metrics).

Input: one row per run with ``op_set``, ``seed``, ``setting`` (the name of its init), optionally
``peak_lr``, and the final metrics ``id_acc``, ``ood_inferential_acc``, ``ood_symmetric_acc``. The
contrast holds in a case when the large-init run fits (ID >= ``id_min``) and answers the held-out pair
with the mirror's target (symmetric accuracy >= ``acc_min``), and the small-init run fits and composes
(inferential accuracy >= ``acc_min``). The papers' rule over the same runs is
:func:`anchorlab.papers.eval.judgement.contrast_cells`.
"""

from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

from anchorlab.config import ConfigError

FINAL = ("id_acc", "ood_inferential_acc", "ood_symmetric_acc")


def judge(cases: pd.DataFrame, large: str = "large_init", small: str = "small_init", id_min: float = 0.9,
          acc_min: float = 0.8, by: Sequence[str] = ()) -> pd.DataFrame:
    """One row per case ([by...,] op set, seed[, peak lr]), each run on its own (final metrics): each
    setting's numbers (``<setting>.<metric>``) and ``large_memorizes``, ``small_composes``, ``contrast``."""
    lr = ["peak_lr"] if "peak_lr" in cases.columns else []
    wide = cases.pivot_table(index=[*by, "op_set", "seed", *lr], columns="setting", values=list(FINAL),
                             aggfunc="first")
    wide.columns = [f"{s}.{m}" for m, s in wide.columns]
    w = wide.reset_index()
    for c in (f"{x}.{m}" for x in (large, small) for m in FINAL):
        if c not in w:
            w[c] = math.nan
    w["large_memorizes"] = (w[f"{large}.id_acc"] >= id_min) & (w[f"{large}.ood_symmetric_acc"] >= acc_min)
    w["small_composes"] = (w[f"{small}.id_acc"] >= id_min) & (w[f"{small}.ood_inferential_acc"] >= acc_min)
    w["contrast"] = w["large_memorizes"] & w["small_composes"]
    return w


def case_counts(cases: pd.DataFrame, large: str, small: str, id_min: float = 0.9, acc_min: float = 0.5,
                by: Sequence[str] = ()) -> pd.DataFrame:
    """Per ([by...,] op set): the cases (seed[, peak lr]) run in both settings, judged each on its own
    (:func:`judge`): ``cases`` and how many have ``contrast``, ``large_memorizes``, ``small_composes``."""
    cols = [*by, "op_set", "cases", "contrast", "large_memorizes", "small_composes"]
    if not len(cases):
        return pd.DataFrame(columns=cols)
    j = judge(cases, large, small, id_min, acc_min, by).dropna(subset=[f"{large}.id_acc", f"{small}.id_acc"])
    return (j.groupby([*by, "op_set"], sort=True).agg(
        cases=("contrast", "size"), contrast=("contrast", "sum"), large_memorizes=("large_memorizes", "sum"),
        small_composes=("small_composes", "sum")).reset_index()[cols])


def rates(judged: pd.DataFrame) -> dict[str, float]:
    """Fractions of cases: contrast, large-init memorizes, small-init composes; and the case count."""
    n = len(judged)
    return {"cases": n, "contrast_rate": float(judged.contrast.mean()) if n else math.nan,
            "large_memorizes_rate": float(judged.large_memorizes.mean()) if n else math.nan,
            "small_composes_rate": float(judged.small_composes.mean()) if n else math.nan}


def rate_map(judged: pd.DataFrame, cases: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """One row per grid point (the ``by`` keys' values): :func:`rates` over its cases, and the
    models' mean steps and wall seconds there (the compute one case costs)."""
    if not by:
        raise ConfigError("rate_map: needs the varied keys (by)")
    cost = cases.groupby(list(by), dropna=False).agg(steps=("steps", "mean"), model_wall_s=("wall_seconds", "mean"))
    rows = [{**dict(zip(by, key if isinstance(key, tuple) else (key,))), **rates(g)}
            for key, g in judged.groupby(list(by), dropna=False, sort=True)]
    return pd.DataFrame(rows).merge(cost.reset_index(), on=list(by), how="left")
