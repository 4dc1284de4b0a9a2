"""The CPU demo on the journal's task: a large-init and a small-init model, side by side.

The journal's task holds out both (3,4) and (4,3) and trains no mirror. A model that composes the single
steps answers them (journal phase 3); one that memorized the seen pairs' composite mappings cannot (phase
2). Both models share the config ``demo/journal`` except the init rate, journal gamma 0.4 (large init) and
0.8 (small init): every matrix's std is 640^-gamma at the model's width 128 (``init.ref_width: 640``).

The demo is a sweep (axis ``init.gamma``, seeds zipped) on the one sweep runner: two worker processes, one
torch thread each, resumable, results in ``DIR/results.sqlite``::

    DIR/runs/<run_id>/           run directories (DIR/large_init, DIR/small_init link to them)
    DIR/summary.json             {"models": one object per model (arm, init.gamma, paper_gamma, final.id_acc,
                                 final.ood_acc, best.ood_acc, the answers on the unseen pairs, verdict, wall
                                 time), "rule", "measured"}
    DIR/summary.csv              one row per model
    DIR/rate.csv                 the rate table's rows for these runs (docs/figures/demo_rate_cpu.csv's columns)
    DIR/demo.png                 ID and unseen-pair accuracy over training; each model's W_Q(1) cosine matrix

The setting's measured rate is a research output read from the committed table ``demo_rate_cpu.csv`` in the
figures folder (:func:`anchorlab.io.figures_dir`), never kept in the code.

A model's row names its values as the run table does (``init.gamma``, ``final.id_acc``, ``final.ood_acc``,
``best.ood_acc``, ``seed``, ``steps``, ``wall_seconds``, ``device``); its own columns keep theirs (``arm``,
``op_set``, ``paper_gamma``, ``std``, the answer shares, ``verdict``) and ``precision_label`` is the precision
in a word or two (``bf16 autocast``), not the run table's ``precision`` (the matmul dtype).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from anchorlab.papers.gammas import JOURNAL_WIDTH, PAPER_WIDTH, convert
from anchorlab.config import ConfigError, load_yaml
from anchorlab.io import MissingResult, atomic_write, figures_file, write_json
from anchorlab.run_status import TRAINED

PRESET = "demo/journal"
GAMMAS = {"large_init": 0.4, "small_init": 0.8}   # journal gammas: std = 640^-gamma
REF_WIDTH = JOURNAL_WIDTH                          # "journal gamma": every std read at width 640
ID_MIN, COMPOSE_MIN, MEMORIZE_MAX = 0.9, 0.8, 0.2
RULE = (f"small init composes: ID >= {ID_MIN} and unseen-pair accuracy >= {COMPOSE_MIN}; large init memorizes "
        f"the seen pairs: ID >= {ID_MIN} and unseen-pair accuracy <= {MEMORIZE_MAX}; the contrast holds for a "
        f"seed when both do")
RATE_TABLE = "demo_rate_cpu.csv"
GAMMA, ID, OOD, OOD_BEST = "init.gamma", "final.id_acc", "final.ood_acc", "best.ood_acc"
RATE_COLUMNS = ["op_set", "seed", "arm", GAMMA, "paper_gamma", ID, OOD, "wall_seconds"]
RATE_EXTRA = [OOD_BEST, "steps", "precision_label", "device", "run_id"]   # the best over training (the papers' cell
# reads it: mean over seeds of each run's best), what ran, and the run id the demo's spec gives
RATE_STUDY = ("anchorlab demo --seeds 10 --out runs/demo_rate; anchorlab demo --seeds 3 --op-set K --out "
              "runs/demo_rate_opK (K = 1, 2)")
ANSWERS = ("composition", "trained target", "other")


def paper_gamma(gamma: float) -> float:
    """The paper gamma (the std at width 400) of journal gamma ``gamma`` (std 640^-gamma)."""
    return convert(gamma, REF_WIDTH, PAPER_WIDTH)


def arm_of(gamma: float) -> str:
    return next((k for k, g in GAMMAS.items() if g == gamma), f"gamma={gamma:g}")


def verdict(id_acc: float, ood_acc: float) -> str:
    """A model's reading in words: composes (phase 3), memorized the seen pairs (phase 2), unfit, in between."""
    if id_acc < ID_MIN:
        return "unfit (seen pairs not learned)"
    if ood_acc >= COMPOSE_MIN:
        return "composes (answers the unseen pairs)"
    if ood_acc <= MEMORIZE_MAX:
        return "memorized the seen pairs (fails the unseen ones)"
    return "in between"


def op_set_steps(k: int) -> dict[int, int] | None:
    """Step set ``k`` of the demo: 0 is the papers' ({1:+5,2:+1,3:-2,4:-8}), k >= 1 the k-th valid draw of
    :func:`anchorlab.tasks.anchor.opsets.journal_op_sets` (op seed 0)."""
    from anchorlab.tasks.anchor.opsets import PAPERS, journal_op_sets

    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ConfigError(f"op_set: must be 0 (the papers' steps) or a positive integer, got {k!r}")
    return dict(PAPERS["anchors"]) if k == 0 else journal_op_sets(k)[k - 1]


def spec(overrides: list[str] | tuple[str, ...] = (), seeds: int = 1, first_seed: int = 0,
         op_set: int = 0) -> dict[str, Any]:
    """The demo as a sweep spec: ``demo/journal`` + overrides, one run per gamma x seed (init and data seed
    together, ``first_seed`` .. ``first_seed + seeds - 1``), on step set ``op_set``."""
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ConfigError(f"seeds: must be a positive integer (1 or more), got {seeds!r}")
    if isinstance(first_seed, bool) or not isinstance(first_seed, int) or first_seed < 0:
        raise ConfigError(f"seed: must be a non-negative integer, got {first_seed!r}")
    for ov in overrides:
        key = ov.split("=", 1)[0].strip()
        if key in ("init.gamma", "train.init_seed", "train.data_seed", "task.anchors", "task.preset"):
            raise ConfigError(f"--set {ov}: the demo sets {key} itself (allowed instead: --seed, --seeds, --op-set; "
                              f"any other config key)")
    base = load_yaml(PRESET)
    sets: list[Any] = list(overrides)
    if op_set:
        sets.append({"task.anchors": op_set_steps(op_set)})
    seed_list = list(range(first_seed, first_seed + seeds))
    return {"name": "demo-journal", "base": base, "set": sets, "axes": {"init.gamma": list(GAMMAS.values())},
            "zip": [{"train.init_seed": seed_list, "train.data_seed": seed_list}]}


def answer_shares(run) -> dict[str, Any]:
    """What a model answers on the unseen pairs, pooled over both and both key splits: the share of each kind
    (``composition``, ``trained target``: a seen pair's target, ``other``) and the top answer."""
    from anchorlab.analysis.answers import AnswersOptions, compute_answers

    a = compute_answers(run, AnswersOptions(split="all"))["answers"]
    pooled = a.groupby(["answer", "kind", "matches"], as_index=False)["count"].sum()
    n = pooled["count"].sum()
    out = {f"answer_{k.replace(' ', '_')}": float(pooled["count"][pooled.kind == k].sum() / n) for k in ANSWERS}
    top = pooled.sort_values("count", ascending=False, kind="stable").iloc[0]
    out["top_answer"] = f"{top.answer} ({top.kind}{': ' + top.matches if top.matches else ''}, " \
                        f"{top['count'] / n:.0%})"
    return out


def model_row(run_dir: Path) -> dict[str, Any]:
    """One summary row of a finished demo run."""
    from anchorlab.papers.demo import precision_label
    from anchorlab.tasks.anchor.opsets import steps_label
    from anchorlab.train import load_run

    res = load_run(run_dir)
    final = res.final
    f = final["final"]
    g = float(res.cfg.init.gamma)
    row = {"arm": arm_of(g), "seed": int(res.cfg.train.init_seed), "op_set": steps_label(res.task.cfg.anchors),
           GAMMA: g, "paper_gamma": round(paper_gamma(g), 3), "std": round(REF_WIDTH ** -g, 4),
           ID: float(f["id_acc"]), OOD: float(f["ood_acc"]),
           OOD_BEST: float((final.get("best") or {}).get("ood_acc", float("nan"))), **answer_shares(res),
           "verdict": verdict(float(f["id_acc"]), float(f["ood_acc"])), "steps": int(final["steps"]),
           "wall_seconds": round(float(final["wall_seconds"]), 1),
           "precision_label": precision_label(final.get("precision") or {}),
           "device": (final.get("precision") or {}).get("device", ""), "run_id": Path(run_dir).name,
           "run_dir": str(run_dir)}
    return row


def judge_seeds(rate: pd.DataFrame) -> pd.DataFrame:
    """Per op set and seed: whether the small init composed, the large init memorized, and both (the contrast)."""
    t = rate.assign(fit=rate[ID] >= ID_MIN)
    rows = []
    for (op, seed), g in t.groupby(["op_set", "seed"], sort=False):
        small, large = g[g.arm == "small_init"], g[g.arm == "large_init"]
        sc = bool(len(small) and small.fit.iloc[0] and small[OOD].iloc[0] >= COMPOSE_MIN)
        lm = bool(len(large) and large.fit.iloc[0] and large[OOD].iloc[0] <= MEMORIZE_MAX)
        rows.append({"op_set": op, "seed": int(seed), "small_composes": sc, "large_memorizes": lm,
                     "contrast": sc and lm})
    return pd.DataFrame(rows)


def rate_summary(rate: pd.DataFrame) -> pd.DataFrame:
    """Per op set: seeds, and how many of them the small init composed, the large init memorized, both."""
    j = judge_seeds(rate)
    return (j.groupby("op_set", sort=False)
            .agg(seeds=("seed", "size"), small_composes=("small_composes", "sum"),
                 large_memorizes=("large_memorizes", "sum"), contrast=("contrast", "sum")).reset_index())


def measured() -> pd.DataFrame:
    """The committed rate table (``demo_rate_cpu.csv``); :class:`~anchorlab.io.MissingResult` when absent."""
    return pd.read_csv(figures_file(RATE_TABLE, "the demo's measured rate"))


def measured_lines() -> list[str]:
    """The setting's measured rate, one line per op set, from the committed table (or where it is)."""
    try:
        s = rate_summary(measured())
    except MissingResult as e:
        return [str(e)]
    papers = " (the papers' steps)"
    return [f"  {r.op_set}{papers if i == 0 else ''}: contrast in {r.contrast} of {r.seeds} "
            f"seeds (small init composes {r.small_composes}/{r.seeds}, large init memorizes "
            f"{r.large_memorizes}/{r.seeds})" for i, r in enumerate(s.itertuples(index=False))]


def run(out_dir: str | Path, overrides: list[str] | tuple[str, ...] = (), workers: int = 2, seeds: int = 1,
        first_seed: int = 0, op_set: int = 0, progress: bool = False) -> pd.DataFrame:
    """Train both models (in parallel, resumably) for each seed; write the files of the module docstring;
    return the summary table (one row per model and seed). ``progress``: the live display (each evaluation's
    step and ETA) on stderr."""
    from anchorlab.papers.plots.demo import plot_demo
    from anchorlab.plots.save import save_figure
    from anchorlab.sweep.runtable import history_table
    from anchorlab.sweep.watch import run_watched

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    df = run_watched(spec(overrides, seeds, first_seed, op_set), out, "demo", progress,
                     workers if workers > 1 else None, executor="process" if workers > 1 else "inprocess")
    runs = df.drop_duplicates("run_id")
    failed = runs[~runs.status.isin(TRAINED)]
    if len(failed):
        raise RuntimeError(f"demo runs did not finish: {failed[['run_id', 'status', 'error']].to_dict('records')}")
    rows = sorted((model_row(out / "runs" / rid) for rid in runs.run_id), key=lambda r: (r["seed"], r[GAMMA]))
    for r in rows:   # friendly names beside the run-id directories
        link = out / (r["arm"] + ("" if seeds == 1 else f"_seed{r['seed']}"))
        if not link.exists() and not link.is_symlink():
            try:
                os.symlink(Path("runs") / Path(r["run_dir"]).name, link)
            except OSError:
                pass
    table = pd.DataFrame(rows)
    try:
        measured_rows = measured().to_dict("records")
    except MissingResult:
        measured_rows = None
    write_json(out / "summary.json", {"models": rows, "rule": RULE, "measured": measured_rows})
    atomic_write(out / "summary.csv", lambda p: table.to_csv(p, index=False))
    atomic_write(out / "rate.csv", lambda p: table[RATE_COLUMNS + RATE_EXTRA].to_csv(p, index=False))
    first = [r for r in rows if r["seed"] == rows[0]["seed"]]
    history = history_table([out])
    curves = {r["arm"]: history[history.run_id == Path(r["run_dir"]).name].reset_index(drop=True) for r in first}
    wq = {r["arm"]: first_layer_wq(Path(r["run_dir"])) for r in first}
    labels = {r["arm"]: f"{r['arm']}: journal gamma {r[GAMMA]:g} (std {r['std']:.3g})" for r in first}
    save_figure(plot_demo(curves, wq, labels), out / "demo", formats=("png",), dpi=120)
    return table


def first_layer_wq(run_dir: Path):
    """The cosine matrix of the first layer's W_Q rows (heads merged), its rows in condensed groups: journal Fig.
    5C / 10's picture. The order is a hierarchical clustering (scipy, the ``analysis`` extra); without scipy, the
    rows sorted along the leading eigenvector of |cos| (a plain install runs the demo too)."""
    import torch

    from anchorlab.analysis.condensation import condensation_order, cosine_matrix
    from anchorlab.extras import MissingExtra
    from anchorlab.train import load_run

    C = cosine_matrix(load_run(run_dir).model.blocks[0].attn.W_Q.weight.detach().float())
    try:
        o = condensation_order(C)
    except MissingExtra:
        _, vecs = torch.linalg.eigh(C.abs().double())
        o = torch.argsort(vecs[:, -1] * torch.sign(vecs[:, -1].sum() + 1e-12))
    return C[o][:, o].numpy()


def expected_seconds() -> float | None:
    """The median wall time of one seed's pair (the slower model's run) in the committed rate table, the papers'
    steps; None when the table is not at hand."""
    try:
        rate = measured()
    except MissingResult:
        return None
    papers = rate[rate.op_set == rate.op_set.iloc[0]]
    return float(papers.groupby("seed").wall_seconds.max().median())


def expected_line(seeds: int = 1, workers: int = 2, overrides: list[str] | tuple[str, ...] = ()) -> str:
    """One line: how long the demo should take here (a timed probe of this CPU, cached: one model's run, the
    two side by side on two workers) beside the committed runs' measured time."""
    from anchorlab.config import load_config
    from anchorlab.sweep.probe import enabled, run_seconds
    from anchorlab.progress import hms

    pairs = seeds * (2 if workers < 2 else 1)    # one worker trains the two models one after the other
    here = run_seconds(load_config(PRESET, list(overrides))) * pairs if enabled() else float("nan")
    t = expected_seconds()
    said = (f"~{hms(here)} on this CPU (a timed probe of its step and evaluation)" if here == here else
            "not probed on this CPU (ANCHORLAB_PROBE=off)" if not enabled() else
            "unknown on this CPU (the probe could not time it)")
    committed = (f"; the committed runs took {t / 60:.1f} min a pair (median of docs/figures/{RATE_TABLE}, "
                 f"{_device_of_table()})" if t is not None else "")
    return f"expected time: {said}{committed}"


def _device_of_table() -> str:
    try:
        d = measured().device.dropna()
        return str(d.mode().iloc[0]) if len(d) else "device unrecorded"
    except MissingResult:
        return ""


def plain_sentence(table: pd.DataFrame) -> str:
    """The demo's outcome in one plain sentence (the first seed's pair)."""
    first = table[table.seed == table.seed.iloc[0]]
    by = {r["arm"]: r for r in first.to_dict("records")}
    large, small = by.get("large_init"), by.get("small_init")
    if large is None or small is None:
        return ""
    j = judge_seeds(first.assign(op_set=first.op_set.iloc[0]))
    shows = bool(j.contrast.iloc[0])
    return (f"In plain words: the large init {large['verdict'].split(' (')[0]} (unseen pairs {large[OOD]:.2f}) "
            f"and the small init {small['verdict'].split(' (')[0]} (unseen pairs {small[OOD]:.2f}): "
            + ("the init rate decided between memorizing and reasoning." if shows else
               "this seed does not show the contrast; the measured rate above says how often it holds."))
