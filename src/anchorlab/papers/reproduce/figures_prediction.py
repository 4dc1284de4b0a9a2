"""Fitting speed vs inferential complexity: NeurIPS Fig. 6 and journal Fig. 8 (A: speed, B: per-pair speed).

Tables (pure functions of the runs' run table and history table, :mod:`anchorlab.analysis.speed`):
``speed`` (one row per run: epochs to train loss <= 5e-2, censored if never),
``speed_summary`` (mean over seeds per gamma x depth x k), ``slowdown``
(epochs(k_max) / epochs(k_min) per gamma x depth), ``pair_speed`` (epochs to
60% training-key accuracy per run and pair) and ``suspects`` (flagging the
rule-violating pairs by slow fitting: precision / recall / AUC).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from anchorlab.sweep.runtable import history_table
from anchorlab.papers.runs import run_table
from anchorlab.papers.reproduce.registry import Figure, Made, Reading, register

if TYPE_CHECKING:
    import pandas as pd

LOSS_THRESHOLD = 5e-2
PAIR_THRESHOLD = 0.6


def speed_tables(rows: pd.DataFrame, history: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The tables of the module docstring from a prediction sweep's run table and history table
    (:func:`anchorlab.sweep.runtable.run_table`, :func:`~anchorlab.sweep.runtable.history_table`)."""
    import pandas as pd

    from anchorlab.analysis.speed import (complexity_slowdown, pair_fit_speed, rule_violating_pairs, speed_table,
                                  suspect_report, summarize_speed)
    from anchorlab.config import from_dict
    from anchorlab.sweep.runtable import row_section, run_history
    from anchorlab.tasks.anchor import AnchorTaskConfig

    speed = speed_table(rows, history, threshold=LOSS_THRESHOLD)
    summ = summarize_speed(speed)
    ks = sorted(speed.k.unique())
    tables = {"speed": speed, "speed_summary": summ}
    if len(ks) >= 2:
        tables["slowdown"] = complexity_slowdown(summ, k_hi=ks[-1], k_lo=ks[0])
    prows, srows = [], []
    for _, r in rows.iterrows():
        tcfg = from_dict(AnchorTaskConfig, row_section(r, "task"))
        bad = rule_violating_pairs(tcfg)
        ps = pair_fit_speed(run_history(history, r.run_id), threshold=PAIR_THRESHOLD)
        meta = dict(run_id=r.run_id, k=tcfg.complexity_k, depth=int(r["model.n_layers"]),
                    gamma=r["init.gamma"], seed=int(r["train.init_seed"]))
        prows.append(ps.assign(**meta, violating=ps.pair.isin(bad)))
        for rule, top in (("mad", None), ("top_n_bad", len(bad))) if bad else ():
            rep = suspect_report(ps, known_bad=bad, top=top)
            srows.append(dict(meta, rule=rule, rule_text=rep.rule, n_bad=len(bad), flagged=" ".join(rep.flagged),
                              precision=rep.precision, recall=rep.recall, auc=rep.auc))
    tables["pair_speed"] = pd.concat(prows, ignore_index=True) if prows else pd.DataFrame()
    tables["suspects"] = pd.DataFrame(srows)
    return tables


def gamma_convention(rows: pd.DataFrame) -> str:
    """How a run table's gammas read: paper gamma when every run sets its std at width 400
    (``init.ref_width``), plain when none sets a reference width, else just gamma."""
    import pandas as pd

    from anchorlab.papers.gammas import PAPER_WIDTH

    ref = rows["init.ref_width"] if "init.ref_width" in rows else pd.Series(float("nan"), index=rows.index)
    if len(ref) and (ref == PAPER_WIDTH).all():
        return "paper gamma"
    return "plain gamma" if ref.isna().all() else "gamma"


def make_prediction(sweep_dir: Path, out: Path, scale: str) -> Made:
    from anchorlab.analysis.speed import summarize_pair_speed
    from anchorlab.plots.save import save_figure
    from anchorlab.papers.plots.speed import plot_complexity_speed, plot_pair_speed

    rows = run_table([sweep_dir])
    tables = speed_tables(rows, history_table([sweep_dir]))
    files = {"fig_complexity_speed.png": save_figure(plot_complexity_speed(
        tables["speed_summary"], threshold_label=f"train loss <= {LOSS_THRESHOLD:g}",
        gamma_label=gamma_convention(rows)), out / "fig_complexity_speed")[0]}
    pairs = tables["pair_speed"]
    if not pairs.empty:
        small = pairs.gamma.max()
        k1 = pairs[(pairs.k == 1) & (pairs.gamma == small)]
        if not k1.empty:
            depth = k1.depth.max()
            k1 = k1[k1.depth == depth]
            ps = summarize_pair_speed(k1)
            tables["pair_speed_k1"] = ps
            bad = sorted(set(k1.pair[k1.violating]))
            files["fig_pair_speed_k1.png"] = save_figure(plot_pair_speed(
                ps, highlight=bad, threshold_label=f"{PAIR_THRESHOLD:.0%} train accuracy",
                title=f"k=1, gamma={small:g}, depth {depth}"), out / "fig_pair_speed_k1")[0]
    return tables, files


def _ratio(t: dict[str, pd.DataFrame], which: str) -> float:
    s = t.get("slowdown")
    if s is None or s.empty:
        return math.nan
    g = s.gamma.max() if which == "small_init" else s.gamma.min()
    rows = s[s.gamma == g]
    rows = rows[rows.depth == rows.depth.max()]
    col = "ratio" if "ratio" in rows else [c for c in rows.columns if "ratio" in c][0]
    return float(rows[col].iloc[0]) if len(rows) else math.nan


def _violating_slowdown(t: dict[str, pd.DataFrame]) -> float:
    p = t.get("pair_speed")
    if p is None or p.empty:
        return math.nan
    p = p[(p.k == 1) & (p.gamma == p.gamma.max())]
    if p.empty or not p.violating.any():
        return math.nan
    return float(p[p.violating].epochs.mean() / p[~p.violating].epochs.mean())


CLAIMS = (
    Reading("small init: epochs to fit grow with inferential complexity (epochs(k_max)/epochs(k_min), deepest)",
          "> 1 (increasing)", lambda t: _ratio(t, "small_init")),
    Reading("large init: about the same epochs for every k (same ratio)", "~1 (flat)",
          lambda t: _ratio(t, "large_init")),
)
SWEEPS = {"cpu": "prediction_cpu", "paper": "prediction_paper"}
NOTE = ("CPU scale: 20k sequences, width 64, one seed, early stop at the thresholds with a 40-epoch cap "
        "(the paper: 100k, width 400, 9 seeds). docs/prediction.md has the measured grids.")

register(Figure(
    id="neurips-fig6", cids=("C8",), paper="NeurIPS 2024", number="Fig. 6",
    shows="epochs to reach train loss 5e-2 vs depth, per inferential complexity k, small vs large init",
    sweeps=SWEEPS, make=make_prediction, readings=CLAIMS, notes=NOTE))

register(Figure(
    id="journal-fig8", cids=("C8",), paper="journal", number="Fig. 8",
    shows="(A) epochs to fit vs reasoning complexity; (B) per-pair epochs to 60% at k=1 (rule-violating pairs slow)",
    sweeps=SWEEPS, make=make_prediction,
    readings=CLAIMS + (Reading("small init, k=1: the rule-violating pairs fit slower (mean epochs violating / others)",
                           "> 1", _violating_slowdown),),
    notes=NOTE))
