"""The op-set crossing: when each run fits the seen pairs, and which hypothesis the runs support.

Pure functions over two tidy tables: per-evaluation curves (``run_id``, ``step``, ``id_acc``, ``inferential``,
``symmetric``: the held-out pair's accuracy under each mapping) and a run table, read by its own names (``run_id``,
``op_set``, ``paper_gamma``, ``final.id_acc``, ``final.ood_inferential_acc``, ``final.ood_symmetric_acc``,
``best.ood_inferential_acc``, ``best.ood_symmetric_acc``: the vocabulary of :mod:`anchorlab.papers.eval.judgement`).

:func:`fit_timing` reads, per run, the first evaluation where ID reaches ``id_min`` (NaN: never), the held-out
pair's accuracy there under both mappings, and the first evaluation from then on where the mirror's answer takes
over (symmetric >= ``threshold`` and above inferential; NaN: never). A run that never fits is reported as unfit,
never silently as "not composing".

:func:`crossing_verdict` applies the rule written down before the runs (sweeps/opset_cross_cpu.yaml). Each
hypothesis predicts which op set the small init memorizes:

==========================  ==============================================================
H1 (step gap)               O1 (gap 3) memorizes, O2 (gap 8) composes
H2 / H4 (offset / clock)    O2 (offset 1.65 sd) memorizes, O1 (0.84 sd, fits slowly) composes
H3 (mirror farther)         both memorize (the mirror's answer is farther from the key in both)
idiosyncratic               both compose: the two original op sets were exceptions
==========================  ==============================================================

An op set *memorizes* when >= ``need`` (5) of its small-init runs end fitted (ID >= 0.9) on the mirror's answer
(final symmetric >= 0.5); it *composes* when <= ``allow`` (1) of them do and >= ``need`` reach inferential >= 0.5
at some evaluation (``best.ood_inferential_acc``). A hypothesis is supported when both op sets read as it predicts. The
verdict waits for ``n_runs`` (9: 3 peaks x 3 seeds) small-init runs per op set.
"""

from __future__ import annotations

import math
from typing import Mapping

import pandas as pd

from anchorlab.config import ConfigError
from anchorlab.papers.eval.judgement import BEST, MAPPINGS
from anchorlab.tasks.anchor.opsets import OpSet, op_set_properties
from anchorlab.eval.solution import outcome as solution_outcome

ID, INF, INF_BEST = MAPPINGS["id"], MAPPINGS["inferential"], BEST["inferential"]
SYM, SYM_BEST = MAPPINGS["symmetric"], BEST["symmetric"]
RUN_COLUMNS = ["op_set", "held_out", "paper_gamma", "peak_lr", "seed", ID, INF, INF_BEST, SYM, SYM_BEST,
               "steps_to_id_fit", "inferential_at_fit", "symmetric_at_fit", "mirror_takeover_step",
               "takeover_after_fit", "outcome", "step_gap", "offset", "offset_over_sd", "mirror_farther", "clock",
               "precision", "device", "wall_seconds", "run_id"]


HYPOTHESES: dict[str, tuple[str, str]] = {    # name -> (what O1 does, what O2 does)
    "H1 (step gap)": ("memorizes", "composes"),
    "H2/H4 (offset over spread, clock)": ("composes", "memorizes"),
    "H3 (mirror farther)": ("memorizes", "memorizes"),
    "idiosyncratic (both compose)": ("composes", "composes"),
}


def fit_timing(curves: pd.DataFrame, id_min: float = 0.9, threshold: float = 0.5) -> pd.DataFrame:
    """One row per run: ``steps_to_id_fit``, ``inferential_at_fit``, ``symmetric_at_fit``, ``mirror_takeover_step``
    and ``takeover_after_fit`` (steps from the fit to the takeover; 0 when the mirror already leads at the fit)."""
    need = {"run_id", "step", "id_acc", "inferential", "symmetric"}
    if need - set(curves.columns):
        raise ConfigError(f"curves: needs columns {sorted(need)}, missing {sorted(need - set(curves.columns))}")
    rows = []
    for run, c in curves.sort_values(["run_id", "step"]).groupby("run_id", sort=True):
        fit = c[c.id_acc >= id_min]
        row = {"run_id": run, "steps_to_id_fit": math.nan, "inferential_at_fit": math.nan,
               "symmetric_at_fit": math.nan, "mirror_takeover_step": math.nan, "takeover_after_fit": math.nan}
        if len(fit):
            first = fit.iloc[0]
            row.update(steps_to_id_fit=float(first.step), inferential_at_fit=float(first.inferential),
                       symmetric_at_fit=float(first.symmetric))
            later = c[(c.step >= first.step) & (c.symmetric >= threshold) & (c.symmetric > c.inferential)]
            if len(later):
                row.update(mirror_takeover_step=float(later.step.iloc[0]),
                           takeover_after_fit=float(later.step.iloc[0] - first.step))
        rows.append(row)
    return pd.DataFrame(rows, columns=["run_id", "steps_to_id_fit", "inferential_at_fit", "symmetric_at_fit",
                                       "mirror_takeover_step", "takeover_after_fit"])


def outcome(id_acc: float, inferential_final: float, symmetric_final: float, inferential_best: float,
            id_min: float = 0.9, threshold: float = 0.5) -> str:
    """A run on its own: :func:`anchorlab.eval.solution.outcome` on its final metrics, its ``neither`` told apart
    into ``composed on the way`` (inferential >= threshold at some evaluation) and ``neither``."""
    label = solution_outcome(id_acc, inferential_final, symmetric_final, threshold, id_min)
    return "composed on the way" if label == "neither" and inferential_best >= threshold else label


def crossing_rows(rows: pd.DataFrame, curves: pd.DataFrame, id_min: float = 0.9, threshold: float = 0.5) -> pd.DataFrame:
    """The run table (:func:`anchorlab.sweep.runtable.run_table`) and its curves -> :data:`RUN_COLUMNS`, one row per
    run, in the order (op set, paper gamma, peak lr, seed). The fit timing comes from the curves where the run has
    one, else from the row (a committed table carries it)."""
    t = rows
    timing = fit_timing(curves[curves.run_id.isin(set(t.run_id))], id_min, threshold) if len(curves) else None
    if timing is not None and len(timing):
        keep = [c for c in timing.columns if c != "run_id"]
        t = t.merge(timing, on="run_id", how="left", suffixes=("_row", ""))
        for c in keep:                      # a run without curves keeps the timing its committed row carries
            if f"{c}_row" in t.columns:
                t[c] = t[c].fillna(t.pop(f"{c}_row"))
    ops = {label: OpSet.from_label(label) for label in t.op_set.unique()}
    props = pd.DataFrame([{"op_set": label, "held_out": "({},{})".format(*o.held_out), **op_set_properties(o)}
                          for label, o in ops.items()])
    t = t.drop(columns=[c for c in props.columns if c != "op_set" and c in t.columns]).merge(props, on="op_set")
    t["outcome"] = [outcome(*v, id_min=id_min, threshold=threshold) for v in
                    zip(t[ID], t[INF], t[SYM], t[INF_BEST])]
    for c in RUN_COLUMNS:
        if c not in t.columns:
            t[c] = float("nan")
    return t[RUN_COLUMNS].sort_values(["op_set", "paper_gamma", "peak_lr", "seed"]).reset_index(drop=True)


def op_set_counts(runs: pd.DataFrame, id_min: float = 0.9, threshold: float = 0.5) -> pd.DataFrame:
    """Per (op set, paper gamma): ``n_runs``, ``n_unfit``, ``n_memorize`` (fitted, final symmetric >= threshold),
    ``n_compose_final`` (fitted, final inferential >= threshold), ``n_compose_on_way`` (best inferential >= threshold,
    fitted or not: reported beside ``n_unfit``)."""
    fits = runs[ID] >= id_min
    r = runs.assign(_unfit=~fits, _mem=fits & (runs[SYM] >= threshold), _comp=fits & (runs[INF] >= threshold),
                    _way=runs[INF_BEST] >= threshold)
    g = r.groupby(["op_set", "paper_gamma"], sort=True)
    return pd.DataFrame({"n_runs": g.size(), "n_unfit": g._unfit.sum(), "n_memorize": g._mem.sum(),
                         "n_compose_final": g._comp.sum(), "n_compose_on_way": g._way.sum()}).reset_index()


def _reading(n_memorize: int, n_on_way: int, need: int, allow: int) -> str:
    if n_memorize >= need:
        return "memorizes"
    if n_memorize <= allow and n_on_way >= need:
        return "composes"
    return "mixed"


def reachable_readings(n_memorize: int, n_on_way: int, remaining: int, need: int = 5, allow: int = 1) -> set[str]:
    """The readings an op set can still end with when ``remaining`` of its runs are to come: each may add to the
    memorizing count, to the composed-on-the-way count, to both or to neither."""
    return {_reading(n_memorize + m, n_on_way + w, need, allow)
            for m in range(remaining + 1) for w in range(remaining + 1)}


def crossing_verdict(runs: pd.DataFrame, o1: str, o2: str, small_gamma: float = 0.8, n_runs: int = 9,
                     need: int = 5, allow: int = 1, id_min: float = 0.9, threshold: float = 0.5) -> Mapping[str, str]:
    """The rule of the module docstring on the small-init runs of op sets ``o1`` and ``o2`` (their ``op_set``
    labels): each op set's reading (``memorizes`` / ``composes`` / ``mixed`` / ``pending (k of n)``), the
    ``verdict`` (the supported hypothesis, ``none of the hypotheses`` or ``pending``) and ``still_possible``: the
    verdicts the runs still to come can give (the verdict itself once decided), so that a pending crossing says
    which hypotheses its runs so far already exclude."""
    small = runs[runs.paper_gamma.round(6) == round(small_gamma, 6)]
    counts = op_set_counts(small, id_min, threshold).set_index("op_set")
    read, reach = {}, {}
    for name, label in (("O1", o1), ("O2", o2)):
        k = 0 if label not in counts.index else int(counts.loc[label, "n_runs"])
        mem = 0 if k == 0 else int(counts.loc[label, "n_memorize"])
        way = 0 if k == 0 else int(counts.loc[label, "n_compose_on_way"])
        reach[name] = reachable_readings(mem, way, max(n_runs - k, 0), need, allow)
        read[name] = f"pending ({k} of {n_runs})" if k < n_runs else _reading(mem, way, need, allow)

    def verdict_of(a: str, b: str) -> str:
        hit = [h for h, pair in HYPOTHESES.items() if (a, b) == pair]
        return hit[0] if hit else "none of the hypotheses"

    possible = {verdict_of(a, b) for a in reach["O1"] for b in reach["O2"]}
    order = [*HYPOTHESES, "none of the hypotheses"]
    pending = any(v.startswith("pending") for v in read.values())
    verdict = "pending" if pending else verdict_of(read["O1"], read["O2"])
    return {"O1": read["O1"], "O2": read["O2"], "verdict": verdict,
            "still_possible": "; ".join(v for v in order if v in possible)}


PROPERTIES = ("step_gap", "offset_over_sd", "mirror_farther", "abs_offset", "small_fit_steps")
# What each property says, as a phrase for "larger values"; ``small_fit_steps`` is read from training, the rest are
# known before it.
PROPERTY_WORDS = {"step_gap": ("a larger step gap", "a smaller step gap"),
                  "offset_over_sd": ("a larger mirror offset over the steps' spread",
                                     "a smaller mirror offset over the steps' spread"),
                  "mirror_farther": ("the mirror farther from the key", "the mirror nearer the key"),
                  "abs_offset": ("a larger mirror offset", "a smaller mirror offset"),
                  "small_fit_steps": ("a slower fit of the seen pairs", "a faster fit of the seen pairs")}
BEFORE_TRAINING = ("step_gap", "offset_over_sd", "mirror_farther", "abs_offset")


def op_set_outcomes(runs: pd.DataFrame, large: float = 0.3, small: float = 0.8,
                    per_init: int | None = None) -> pd.DataFrame:
    """:func:`crossing_rows` -> one row per op set: its properties (``abs_offset``; ``small_fit_steps``, the small
    init's median steps to ID 0.9, a run-level property: H4's clock), per init the runs and their outcomes
    (``small_compose``: fitted and final inferential >= 0.5; ``small_on_way``: inferential >= 0.5 at some evaluation;
    ``*_memorize``; ``small_unfit``), the papers' cell at the one peak (mean over seeds of each run's best over
    training: ``small_inferential_cell``, ``large_symmetric_cell``) and, in at least half of the runs, ``small_composes``,
    ``small_composes_on_way``, ``large_memorizes`` and ``contrast`` (both of the first and last); ``contrast_every_run``:
    every small-init run composes and every large-init run memorizes (the strict reading). ``small_done`` /
    ``done``: the small init's / both inits' runs number at least ``per_init`` (the design's runs per init; None: any
    run counts as done), so a reading over a study still running can keep to the op sets it has finished."""
    out = []
    for label, t in runs.groupby("op_set", sort=False):
        s, lg = t[t.paper_gamma.round(6) == round(small, 6)], t[t.paper_gamma.round(6) == round(large, 6)]
        row = {"op_set": label, **{p: float(t[p].iloc[0]) for p in ("step_gap", "offset_over_sd", "mirror_farther")},
               "abs_offset": abs(float(t.offset.iloc[0])), "small_fit_steps": float(s.steps_to_id_fit.median()),
               "n_small": len(s), "small_compose": int((s.outcome == "composes").sum()),
               "small_on_way": int((s[INF_BEST] >= 0.5).sum()),
               "small_memorize": int((s.outcome == "memorizes").sum()), "small_unfit": int((s.outcome == "unfit").sum()),
               "n_large": len(lg), "large_memorize": int((lg.outcome == "memorizes").sum()),
               "small_inferential_cell": float(s[INF_BEST].mean()),
               "large_symmetric_cell": float(lg[SYM_BEST].mean())}
        row["small_composes"] = bool(len(s)) and 2 * row["small_compose"] >= len(s)
        row["small_composes_on_way"] = bool(len(s)) and 2 * row["small_on_way"] >= len(s)
        row["large_memorizes"] = bool(len(lg)) and 2 * row["large_memorize"] >= len(lg)
        row["contrast"] = row["small_composes"] and row["large_memorizes"]
        row["contrast_every_run"] = (bool(len(s)) and row["small_compose"] == len(s)
                                     and bool(len(lg)) and row["large_memorize"] == len(lg))
        need = 1 if per_init is None else per_init
        row["small_done"] = len(s) >= need
        row["done"] = row["small_done"] and len(lg) >= need
        out.append(row)
    return pd.DataFrame(out)
