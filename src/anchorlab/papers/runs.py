"""The papers' run table: the library's (:mod:`anchorlab.sweep.runtable`) with the papers' columns, and the
anchor task's per-evaluation tables.

Three columns follow ``source``, computed from each directory run's final.json (a committed row keeps its own):

============================  ==========================================================================
``op_set``                    the anchor op set's label (``{1:+5,...} (4,3) held out, (3,4)->x-6``);
                              empty for other tasks
``paper_gamma``               the paper's gamma the run stands for: ``init.gamma`` read at the paper's
                              width 400 (``init.ref_width: 400``, or a width-400 model); NaN otherwise
``clock``                     planned optimizer steps over the paper's 92,190, rounded to 0.01
============================  ==========================================================================

:func:`curve_table` reads the companion table of trajectories (one row per run and evaluation: ID accuracy and
the held-out pair's accuracy under each mapping); :func:`answer_table` what each run answers on the held-out
pairs, from its final weights (the one reader here that runs a model, through
:func:`anchorlab.analysis.answers.answers_summary`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anchorlab.papers.gammas import PAPER_WIDTH, read_at
from anchorlab.run_status import COMPLETED
from anchorlab.sweep import runtable as rt

if TYPE_CHECKING:
    import pandas as pd

PAPER_STEPS = 92_190   # NeurIPS App. A: 210 epochs of 900k sequences at batch 2048 (439 full batches each)
HEAD = ["run_id", "status", "source", "op_set", "paper_gamma", "peak_lr", "seed", "clock", "steps", "total_steps",
        "wall_seconds", "device", "precision"]
METRICS = ("id_acc", "ood_inferential_acc", "ood_symmetric_acc")
CURVE_COLUMNS = ["run_id", "step", "id_acc", "inferential", "symmetric"]


def paper_gamma(gamma: float, ref_width: Any, d_model: Any) -> float:
    """The paper's gamma a run stands for (:func:`anchorlab.papers.gammas.read_at` width 400); NaN otherwise."""
    return read_at(gamma, ref_width, d_model, PAPER_WIDTH)


def op_set_label(task: Mapping[str, Any]) -> str:
    """The anchor op set of a task config mapping as :class:`~anchorlab.tasks.anchor.opsets.OpSet` labels
    it; on the journal's task (``preset: journal``, no pair rule of its own: the two largest anchors' pairs held
    out, no mirror) ``{steps} (3,4) and (4,3) held out``; ``""`` for a task without anchors."""
    from anchorlab.tasks.anchor.opsets import PAPERS, OpSet, steps_label

    if "anchors" not in task or "pair_rules" not in task:
        return ""
    rules = task["pair_rules"]
    if task.get("preset") == "journal" and not rules:
        steps = {int(k): int(v) for k, v in task["anchors"].items()}
        a, b = sorted(steps)[2:4]
        return f"{steps_label(steps)} ({a},{b}) and ({b},{a}) held out"
    held = next((k for k, v in rules.items() if v == "held_out"), "4,3")
    shift = next((v.split(":")[1] for v in rules.values() if str(v).startswith("shift:")), PAPERS["mirror_shift"])
    return OpSet({int(k): int(v) for k, v in task["anchors"].items()}, tuple(int(x) for x in held.split(",")),
                 int(shift)).label


def paper_columns(final: Mapping[str, Any]) -> dict[str, Any]:
    """The papers' columns of one final.json-shaped dict (the ``derive`` of the library's run table)."""
    c = final.get("config") or {}
    i = c.get("init", {})
    planned = final.get("total_steps") or final.get("steps")
    return {"op_set": op_set_label(c.get("task", {})),
            "paper_gamma": paper_gamma(i.get("gamma", math.nan), i.get("ref_width"), c.get("model", {}).get("d_model")),
            "clock": round(planned / PAPER_STEPS, 2) if planned else math.nan}


def _ordered(df: "pd.DataFrame") -> "pd.DataFrame":
    return rt.head_first(df, HEAD) if len(df.columns) else df


def run_table(sources: Sequence[str | Path], statuses: Sequence[str] = COMPLETED) -> "pd.DataFrame":
    """:func:`anchorlab.sweep.runtable.run_table` with the papers' columns (:data:`HEAD` first)."""
    import pandas as pd

    df = rt.run_table(sources, statuses, derive=paper_columns)
    return _ordered(df) if len(df) else pd.DataFrame(columns=[*HEAD, "run_dir"])


def rows_of(finals: Sequence[Mapping[str, Any]], source: str = "") -> "pd.DataFrame":
    """final.json-shaped dicts -> run-table rows with the papers' columns, in their order."""
    import pandas as pd

    df = rt.rows_of(finals, source, derive=paper_columns)
    return _ordered(df) if len(df) else pd.DataFrame(columns=[*HEAD, "run_dir"])


def in_progress_table(sweep_dirs: Sequence[str | Path]) -> "pd.DataFrame":
    """:func:`anchorlab.sweep.runtable.in_progress_table` with the papers' columns."""
    return _ordered(rt.in_progress_table(sweep_dirs, derive=paper_columns))


def at_step_table(sweep_dirs: Sequence[str | Path], steps: Sequence[int]) -> "pd.DataFrame":
    """:func:`anchorlab.sweep.runtable.at_step_table` with the papers' columns."""
    return _ordered(rt.at_step_table(sweep_dirs, steps, derive=paper_columns))


def curves_of(finals: Sequence[Mapping[str, Any]]) -> "pd.DataFrame":
    """final.json-shaped dicts -> one row per (run, evaluation) (:data:`CURVE_COLUMNS`) from each run's
    ``history``; rows without the held-out metrics are left out."""
    import pandas as pd

    return pd.DataFrame([(f["run_id"], h["step"], h.get("id_acc"), h["ood_inferential_acc"], h.get("ood_symmetric_acc"))
                         for f in finals for h in f.get("history") or [] if h.get("ood_inferential_acc") is not None],
                        columns=CURVE_COLUMNS)


def curve_table(sources: Sequence[str | Path]) -> "pd.DataFrame":
    """One row per (run, evaluation) of ``sources`` (:data:`CURVE_COLUMNS`: ID accuracy and the held-out
    pair's accuracy under each mapping, from each completed run's ``history``, rows without the held-out
    metrics left out); for a committed ``X.csv``, its ``X_curves.csv`` beside it where there is one. A run
    read from a directory wins over a committed trajectory."""
    return rt.per_evaluation(sources, "_curves.csv", curves_of, strict=False)


def _answers_of(finals: Sequence[Mapping[str, Any]]) -> "pd.DataFrame":
    from anchorlab.analysis.answers import answers_summary

    dirs = [f["run_dir"] for f in finals if (f.get("config") or {}).get("task", {}).get("name", "anchor") == "anchor"]
    t = answers_summary(dirs)
    return t.drop(columns=["run"]) if len(t) else t


def answer_table(sources: Sequence[str | Path]) -> "pd.DataFrame":
    """One row per (run, held-out pair) of ``sources``: what each completed anchor-task run answers there
    (:func:`anchorlab.analysis.answers.answers_summary`, from its final weights); for a committed ``X.csv``, its
    ``X_answers.csv`` beside it where there is one. A run read from a directory wins over a committed row."""
    return rt.per_evaluation(sources, "_answers.csv", _answers_of, strict=False)


def rows_answers(rows: "pd.DataFrame") -> "pd.DataFrame":
    """:func:`answer_table` over the sources a run table's rows were read from, kept to those runs."""
    t = answer_table(sorted({s for s in rows.source if s}))
    return t[t.run_id.isin(set(rows.run_id))].reset_index(drop=True) if len(t) else t


def rows_curves(rows: "pd.DataFrame") -> "pd.DataFrame":
    """The trajectories of a run table's runs: :func:`curve_table` over the sources its rows were read from,
    kept to those runs, in (run, step) order."""
    curves = curve_table(sorted({s for s in rows.source if s}))
    return curves[curves.run_id.isin(set(rows.run_id))].sort_values(["run_id", "step"]).reset_index(drop=True)
