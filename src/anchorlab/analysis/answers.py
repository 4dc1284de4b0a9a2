"""What a model answers on a held-out pair, each answer named: the composition, the mirror, or a trained pair's target.

The run's metrics say how often the answer is the composition (inferential) or the mirror's target (symmetric);
the rest is "other". This analysis opens "other": on each held-out pair it counts every answer, as a shift of the
key (``x-1``), and names what that shift is in the task:

* ``composition``: the two steps composed (the inferential target);
* ``mirror``: the mirror pair's trained target;
* ``trained target``: the trained target of some other pair (``matches`` lists them), a third solution in which
  the held-out pair borrows a seen pair's answer;
* ``other``: none of these.

A shift that is several of these takes the first name in that order. Keys come from the evaluation groups of the
run's data seed (both key splits: a held-out pair is unseen under either), as in the run's own metrics.

    answers          (main) pair, split, shift, answer, share, count, kind, matches; one row per answer given
    summary          per held-out pair and split: n, top answer, its share and kind, and the share of each kind
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from anchorlab.config import ConfigError

if TYPE_CHECKING:
    from anchorlab.train import RunResult

KINDS = ("composition", "mirror", "trained target", "other")
SPLITS = ("train", "test", "all")


@dataclass(frozen=True)
class AnswersOptions:
    """``pairs``: the pairs to read (None = every held-out pair); ``split``: the key split of the evaluation
    groups, ``train``, ``test`` or ``all`` (both pooled)."""

    pairs: tuple[tuple[int, int], ...] | None = None
    split: str = "all"

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ConfigError(f"split: must be one of {', '.join(SPLITS)}, got {self.split!r}")
        if self.pairs is not None:
            object.__setattr__(self, "pairs", tuple(tuple(int(a) for a in p) for p in self.pairs))


def answer_kinds(task, pair: tuple[int, int]) -> dict[int, tuple[str, str]]:
    """Shift -> (kind, matches) for every shift that has a name on ``pair`` (see the module docstring)."""
    names: dict[int, tuple[str, str]] = {}
    mirror = (pair[1], pair[0])
    hyp = task.hypotheses(pair)          # inferential; symmetric: the mirror's trained target (None if none)
    others: dict[int, list[str]] = {}
    for p in task.trained_pairs:
        if p != mirror:
            others.setdefault(task.designated_shift(p), []).append(f"({p[0]},{p[1]})")
    for s, ps in others.items():
        names[s] = ("trained target", " ".join(ps))
    if hyp["symmetric"] is not None:
        names[hyp["symmetric"]] = ("mirror", f"({mirror[0]},{mirror[1]})")
    names[hyp["inferential"]] = ("composition", "")
    return names


def _shift_label(s: int) -> str:
    return f"x{s:+d}" if s else "x"


def compute_answers(run: RunResult, opts: AnswersOptions) -> dict[str, pd.DataFrame]:
    """Tables ``answers`` (main) and ``summary`` of the module docstring."""
    import torch

    from anchorlab.tasks.anchor.metrics import predict

    task = run.task
    if not hasattr(task, "held_out_pairs"):
        raise ConfigError(f"answers: needs an anchor-task run, got task {getattr(task, 'name', '?')!r}")
    pairs = list(opts.pairs) if opts.pairs is not None else list(task.held_out_pairs)
    bad = [p for p in pairs if p not in task.pairs]
    if bad:
        raise ConfigError(f"pairs: {bad} are not pairs of this task; allowed: {task.pairs}")
    if not pairs:
        raise ConfigError("pairs: this run holds out no pair; give pairs=[[a,b],...]")
    splits = ("train", "test") if opts.split == "all" else (opts.split,)
    sets = task.eval_sets(run.cfg.train.data_seed)
    rows = []
    for pair in pairs:
        kinds = answer_kinds(task, pair)
        shifts = torch.cat([predict(run.model, sets[(pair, sp)].tokens) - sets[(pair, sp)].key for sp in splits])
        vals, counts = torch.unique(shifts, return_counts=True)
        for v, c in zip(vals.tolist(), counts.tolist()):
            kind, matches = kinds.get(int(v), ("other", ""))
            rows.append({"pair": f"({pair[0]},{pair[1]})", "split": opts.split, "shift": int(v),
                         "answer": _shift_label(int(v)), "share": c / len(shifts), "count": int(c), "kind": kind,
                         "matches": matches})
    answers = pd.DataFrame(rows, columns=["pair", "split", "shift", "answer", "share", "count", "kind", "matches"])
    answers = answers.sort_values(["pair", "share"], ascending=[True, False], kind="stable").reset_index(drop=True)
    return {"answers": answers, "summary": summarize_answers(answers)}


def summarize_answers(answers: pd.DataFrame) -> pd.DataFrame:
    """``answers`` -> per pair and split: n, the top answer (its share, kind, matches) and the share of each kind."""
    out = []
    for (pair, split), t in answers.groupby(["pair", "split"], sort=False):
        top = t.sort_values("share", ascending=False, kind="stable").iloc[0]
        row = {"pair": pair, "split": split, "n": int(t["count"].sum()), "top_answer": top.answer,
               "top_share": float(top.share), "top_kind": top.kind, "top_matches": top.matches}
        for k in KINDS:
            row[f"{k.replace(' ', '_')}_share"] = float(t.share[t.kind == k].sum())
        out.append(row)
    return pd.DataFrame(out)


def answers_summary(runs: Sequence[str | Path | RunResult], split: str = "all") -> pd.DataFrame:
    """One row per run and held-out pair: the run, its op set and gamma, and :func:`summarize_answers`' columns."""
    from anchorlab.train import load_run

    opts = AnswersOptions(split=split)
    rows = []
    for r in runs:
        run = load_run(r) if isinstance(r, (str, Path)) else r
        s = compute_answers(run, opts)["summary"]
        for row in s.to_dict("records"):
            rows.append({"run": str(run.run_dir), "run_id": Path(run.run_dir).name, "gamma": run.cfg.init.gamma,
                         "anchors": str(dict(run.task.cfg.anchors)), **row})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class AnswersSummaryOptions:
    """The keyword arguments of :func:`answers_summary`."""

    split: str = "all"

    def __post_init__(self) -> None:
        AnswersOptions(split=self.split)


__all__ = ["AnswersOptions", "AnswersSummaryOptions", "answer_kinds", "compute_answers", "summarize_answers",
           "answers_summary", "KINDS"]
