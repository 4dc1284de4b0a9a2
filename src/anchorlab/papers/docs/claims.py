"""The claims C1-C13 and EV as the results page states them, each registered with the docs blocks it owns.

Each :class:`~anchorlab.papers.reproduce.registry.Claim` gives the paper's result (its words), ours (from the
committed tables), the sweeps of its scale and its status; the figures it reads are those whose ``cids`` name it.
Registering a claim here (:func:`_claim`) also registers its ``<id>-scale`` and ``<id>-status`` blocks
(:mod:`.status`). The order of the declarations is the results page's.

A status is computed from the tables where the claim has a numeric test (``docs_claims.*_status``);
the mechanism claims C4-C7 are judged per measure over the picked seeds (:func:`anchorlab.papers.docs.studies.seeded_status`).
"""
from __future__ import annotations

from typing import Callable

import pandas as pd

from anchorlab.papers.docs import c3, c13, status
from anchorlab.papers.docs import clean as dc
from anchorlab.papers.docs import fig2 as f2
from anchorlab.papers.docs import c1_scale as c1s
from anchorlab.papers.docs import studies as cl
from anchorlab.papers.docs.common import count, num, paper_gamma, ratio, table
from anchorlab.papers.reproduce.registry import BlockFn, Claim, register_claim


def _cell(op: str, clock: float, gamma: float, fitted: bool = False):
    d = f2.cells(fitted)
    d = d[(d.op == op) & (d.clock == clock) & (d.paper_gamma == gamma) & (d.n_layers == 2)
          & (d.lrs == f2.RANGE) & (d.devices == "cpu")]
    return d.iloc[0]


def _c1_ours() -> str:
    s, l_ = _cell("(4,3), papers'", 1.0, 0.8), _cell("(4,3), papers'", 1.0, 0.3)
    others = [_cell(op, 0.5, 0.8) for op in ("(3,2)", "(2,1)")]
    return (f"papers' op set at 1x: small init {s.solution} ({num(s.inferential_best)}; runs "
            f"{count(s.inferential_per_run, s.n_runs)}), large {l_.solution} ({num(l_.symmetric_best)}; runs "
            f"{count(l_.symmetric_per_run, l_.n_runs)}); the (3,2) and (2,1) op sets at 1/2x: small init reads "
            f"{' / '.join(o.solution for o in others)}; "
            + _c1_many())


def _c1_many() -> str:
    """The many-op-set study in a phrase: on how many finished op sets the contrast holds (at least half of the
    runs each way, and in every run), of how many in its design, and on which kind (``figures_opset_many.kind``)."""
    from anchorlab.papers.eval.crossing import op_set_outcomes
    from anchorlab.papers.reproduce.figures_opset_many import N_OP_SETS, RUNS_PER_INIT, kind

    o = op_set_outcomes(table("opset_many_cpu.csv"), per_init=RUNS_PER_INIT)
    done = o[o.done]
    of = f"{len(done)} finished of {N_OP_SETS}" if len(done) < N_OP_SETS else str(N_OP_SETS)
    where = kind(table("opset_properties_cpu.csv"), with_auc=False, with_fit=False)
    p = f2.distinct_chance(done, RUNS_PER_INIT)
    chance = "" if p is None else f"; spread as by chance, p {num(p)}"
    return (f"over {of} random op sets the contrast holds on {int(done.contrast.sum())} "
            f"({int(done.contrast_every_run.sum())} in every run{chance}); where the small init composes: {where}")


NEAR = 0.9   # the paper's "near 1": a cell's mapping at or above it counts as roughly the paper's size


def _c1_status() -> str:
    """reproduced: on the papers' op set at 1x the small init's cell composes and the large init's memorizes, each
    near the paper's size (its mapping >= NEAR), and the small init composes on the two other op sets; partly:
    the papers' op set in direction only, or without the others; not reproduced otherwise."""
    small, large = _cell("(4,3), papers'", 1.0, 0.8), _cell("(4,3), papers'", 1.0, 0.3)
    ok = small.solution == "composes" and large.solution == "memorizes"
    size = small.inferential_best >= NEAR and large.symmetric_best >= NEAR
    others = all(_cell(op, 0.5, 0.8).solution == "composes" for op in ("(3,2)", "(2,1)"))
    return "reproduced" if ok and size and others else "partly" if ok else "not reproduced"


def _c2_rows():
    d = f2.cells()
    return d[(d.op == "(4,3), papers'") & (d.clock == 0.5) & (d.lrs == f2.RANGE) & (d.devices == "cpu")
             & d.paper_gamma.isin([0.3, 0.8])]


def _c2_ours() -> str:
    d = _c2_rows()
    deep = d[d.n_layers >= 2]
    small, large = deep[deep.paper_gamma == 0.8], deep[deep.paper_gamma == 0.3]
    def runs(side, col: str) -> str:
        return ", ".join(count(getattr(r, col), r.n_runs) for r in side.sort_values("n_layers").itertuples())

    return (f"depths {deep.n_layers.min()}-{deep.n_layers.max()}: small init composes "
            f"({num(small.inferential_best.min())}-{num(small.inferential_best.max())}; runs "
            f"{runs(small, 'inferential_per_run')}), large init memorizes "
            f"({num(large.symmetric_best.min())}-{num(large.symmetric_best.max())}; runs "
            f"{runs(large, 'symmetric_per_run')}); depth 1 {d[d.n_layers == 1].solution.iloc[0]}")


def _c2_status() -> str:
    d = _c2_rows()
    deep = d[d.n_layers >= 2]
    direction = all(deep[deep.paper_gamma == 0.8].solution == "composes") and all(deep[deep.paper_gamma == 0.3].solution == "memorizes")
    return ("reproduced" if deep.inferential_best.max() >= 0.9 else "partly") if direction else "not reproduced"


def _c3_ours() -> str:
    d = table("gamma_wd_cpu_cells.csv")
    g = d[d.paper_gamma == d.paper_gamma.min()].sort_values("optim.weight_decay")
    runs = table("gamma_wd_cpu.csv")
    runs = runs[runs.paper_gamma == runs.paper_gamma.min()]
    by_wd = {w: part.solution for w, part in runs.groupby("optim.weight_decay")}
    lo, top = min(by_wd), max(by_wd)
    best_final = max(by_wd, key=lambda w: (by_wd[w] == "composes").mean())
    return (f"NeurIPS task: wd lifts the largest init (best over training {num(g.inferential_best.iloc[0])} -> "
            f"{num(g.inferential_best.iloc[-1])}, {ratio(int((by_wd[top] == 'unfit').sum()), len(by_wd[top]))} end "
            f"unfit; composing runs {ratio(int((by_wd[lo] == 'composes').sum()), len(by_wd[lo]))} -> "
            f"{ratio(int((by_wd[best_final] == 'composes').sum()), len(by_wd[best_final]))} at wd {best_final:g}); "
            f"smaller inits memorize at every wd; "
            + c3.c3_journal_reading() + "; " + _demo_reading())


def _demo_reading() -> str:
    """The demo as an instance of C3's init-rate axis: phase 2 (large init) against phase 3 (small init)."""
    from anchorlab.papers import demo_journal as dj

    s = dj.rate_summary(table(dj.RATE_TABLE))
    first = s.iloc[0]
    g = dj.GAMMAS
    return (f"the demo (journal task, journal gamma {g['large_init']:g} vs {g['small_init']:g}, wd 0): large init "
            f"phase 2 and small init phase 3 together in {int(first.contrast)} of {int(first.seeds)} seeds")


def _mech(col: str) -> Callable[[], str]:
    def ours() -> str:
        d = table("mechanism_compare_demo.csv" if col in table("mechanism_compare_demo.csv").columns
                  else "complexity_summary_demo.csv").set_index("gamma")
        return " vs ".join(f"{num(d.loc[g, col])} at paper gamma {paper_gamma(g, 128):.2f}" for g in d.index) + f" (`{col}`)"
    return ours


def _c8_ours() -> str:
    d = cl.c8_runs()
    large, small = d[d.paper_gamma == d.paper_gamma.min()], d[d.paper_gamma == d.paper_gamma.max()]
    cap = f"the {int(small.epochs.max())}-epoch cap"
    return (f"large init slows {num(cl.slowdown(d, large.paper_gamma.iloc[0]))}x by k={large.k.max()}; small init "
            f"hits {cap} in {int(small.censored.sum())} of {len(small)}")


def _c12_ours() -> str:
    base, diff, _ = cl._c12_shape()
    return (f"default init draws the unseen nodes' shape right {num(base)} of the time"
            + (": no failure to fix" if base >= cl.SHAPE_FAILS else f"; largest rate minus default {num(diff)}"))


def _claims_ours(name: str, row: int, what: str) -> Callable[[], str]:
    return lambda: f"{what} {num(float(table(name).ours.iloc[row]))}"


def _c9_ours() -> str:
    scan, runs = table("fig7a_matched_cpu_claims.csv"), table("fig7b_matched_cpu_runs.csv")
    large = runs[runs.setting == "large init + small wd"]
    return (f"SCAN gap {num(float(scan.ours.iloc[2]))} at matched ID; COGS: the large setting fits ID in "
            f"{int(large.reached_id.sum())} of {len(large)} runs, so no matched gap")


def _c11_ours() -> str:
    d = table("fig7d_seeds_cpu_summary.csv").sort_values("init.gamma")
    return ("perplexity " + " / ".join(num(p, 1) for p in d.final_val_ppl) + " at gamma "
            + " / ".join(f"{g:g}" for g in d["init.gamma"]) + " (std read at the paper's width 1024)")


def _c13_ours() -> str:
    d, p, s = table("fig7e_cpu_runs.csv"), table("prontoqa_probe_cpu.csv"), table(c13.SEARCH_TABLE)
    acc = pd.concat([d.test_final, p["final.test_acc"], s["final.test_acc"]])
    return f"test accuracy {num(acc.min())}-{num(acc.max())}, chance, in every setting tried"


def _verdict_ours() -> str:
    v = table("predictors_cpu_verdict.csv")
    r = v[(v.model == "margin/pair") & (v.validation == "cv") & (v.at_fraction == 0.1)].iloc[0]
    return f"at {r.at_fraction:.0%} of training: CV AUC {num(r.auc)}, accuracy {num(r.accuracy)} ({r.n_runs} runs)"


EV_AUC, EV_BY = 0.9, 0.1   # EV's rule, written after its table: the margin verdict's AUC bar and the latest read-out


def ev_status() -> str:
    """EV, our own claim (no paper to match): ``holds in its one setting`` when, at some read-out no later than
    :data:`EV_BY` of training, the margin verdict's AUC reaches :data:`EV_AUC` under every validation (cross-validated
    and both design swaps); ``does not hold`` otherwise."""
    v = table("predictors_cpu_verdict.csv")
    v = v[(v.model == "margin/pair") & (v.at_fraction <= EV_BY)]
    holds = (v.groupby("at_fraction").auc.min() >= EV_AUC).any()
    return "holds in its one setting" if holds else "does not hold"


def _claim(c: Claim) -> Claim:
    """Register ``c`` with its own blocks and the two every claim has: its scale (ours beside the paper's) and its
    status line."""
    return register_claim(Claim(c.id, c.name, c.paper, c.ours, c.status, c.sweeps, no_figure=c.no_figure, runs=c.runs,
                                blocks={**c.blocks, f"{c.id.lower()}-scale": status.scale_block(c.id),
                                        f"{c.id.lower()}-status": status.status_line(c.id)}))


def _seeds(claim: str) -> dict[str, BlockFn]:
    """A mechanism claim's table over the picked seeds of the std-matched cell."""
    return {f"{claim.lower()}-seeds": lambda: cl.seeded_table(claim)} if claim in cl.SEEDED else {}


_claim(Claim("C1", "the headline", "small init composes, large init memorizes the mirror (each near 1)", _c1_ours,
             _c1_status, ("fig2_cell_clock_cpu", "fig2_paper"),
             blocks={"c1-clock": f2.c1_clock, "c1-bracket": f2.c1_bracket, "c1-opsets": f2.c1_opsets,
                     "c1-crossing": f2.c1_crossing, "c1-many": f2.c1_many, "c1-ladder": c1s.c1_ladder,
                     "c1-ladder-line": c1s.c1_ladder_line,
                     "c1-ladder-opsets": c1s.c1_ladder_opsets,
                     "c1-answers": f2.c1_answers, "c1-path-draw": c1s.c1_path_draw,
                     "c1-path-draw-line": c1s.c1_path_draw_line}))
_claim(Claim("C2", "gamma x depth (NeurIPS Fig. 2)", "the contrast at every depth >= 2", _c2_ours, _c2_status,
             ("fig2_depth_cpu", "fig2_paper"), blocks={"c2-depth": f2.c2_depth, "fig2-hero": f2.fig2_hero}))
_claim(Claim("C3", "phases and weight decay (journal Fig. 3, 10)",
             "smaller init and larger wd both move the model to reasoning", _c3_ours, c3.c3_status,
             ("journal_fig3_cpu", "fig3_paper"),
             blocks={"c3-grid": c3.c3_grid, "c3-rescue": c3.c3_rescue, "c3-journal-cells": c3.c3_journal_cells,
                     "c3-journal-claims": c3.c3_journal_claims, "c3-journal-depth": c3.c3_journal_depth,
                     "c3-definitions": c3.c3_definitions, "c3-one-x": c3.c3_one_x,
                     "c3-one-x-verdict": c3.c3_one_x_verdict}))
_claim(Claim("C4", "information flow (NeurIPS Fig. 3)", "composing: the anchors read the key, the last token reads the "
             "anchors; memorizing: the last token merges the anchors, then reads the key",
             dc.claim_ours("C4"), dc.claim_status("C4"), ("predictors_cpu", "mechanism_paper"),
             blocks={"c4-clean": lambda: dc.claim_table("C4"), "c4-clean-main": lambda: dc.claim_table("C4", main=True),
                     "c4-flow": cl.c4_flow, **_seeds("C4")}, runs=dc.claim_runs("C4")))
_claim(Claim("C5", "parallel vectors (NeurIPS Fig. 4)", "equal-target X_ao(2) nearly parallel when composing; all low "
             "when memorizing", dc.claim_ours("C5"), dc.claim_status("C5"), ("predictors_cpu", "mechanism_paper"),
             blocks={"c5-clean": lambda: dc.claim_table("C5"), "c5-clean-main": lambda: dc.claim_table("C5", main=True),
                     "c5-init": lambda: dc.init_table("C5"),
                     "c5-init-demo": lambda: dc.init_table("C5", dc.DEMO_STEM),
                     "c5-init-mirror": lambda: dc.init_table("C5", dc.MIRROR_STEM), "c5-parallel": cl.c5_parallel,
                     **_seeds("C5")}, runs=dc.claim_runs("C5")))
_claim(Claim("C6", "condensation (NeurIPS Fig. 5; journal Fig. 5)", "small init condenses the input weights",
             cl.seeded_ours("C6"), cl.seeded_status("C6"), ("mechanism_cpu", "mechanism_paper"),
             blocks={"c6-condensation": cl.c6_condensation, **_seeds("C6")}, runs=cl.seeded_runs("C6")))
_claim(Claim("C7", "ordered embeddings (NeurIPS Fig. 5, 7)", "small init: keys on a few large eigenvalues, +3 / +4 in "
             "two directions", dc.claim_ours("C7", "init"),
             dc.claim_status("C7", ("init", "init, mirror task"), (dc.STEM, dc.MIRROR_STEM)),
             ("demo_rate_cpu", "mechanism_paper"),
             blocks={"c7-clean": lambda: dc.claim_table("C7"), "c7-init": lambda: dc.init_table("C7"),
                     "c7-init-demo": lambda: dc.init_table("C7", dc.DEMO_STEM),
                     "c7-init-mirror": lambda: dc.init_table("C7", dc.MIRROR_STEM), "c7-spectrum": dc.spectrum,
                     "c7-embedding": cl.c7_embedding, **_seeds("C7")},
             runs=dc.claim_runs("C7", ("init", "init, mirror task"), (dc.STEM, dc.MIRROR_STEM))))
_claim(Claim("C8", "inferential complexity vs training speed (NeurIPS Fig. 6)",
             "large init fits at one speed whatever the complexity; small init slows with it", _c8_ours, cl.c8_status,
             ("prediction_matched_long_cpu", "prediction_paper"),   # the runs c8_status reads (studies.c8_runs)
             blocks={"c8-speed": cl.c8_speed, "c8-long": cl.c8_long}))
_claim(Claim("C9", "SCAN / COGS (journal Fig. 7A, B)", "at matched ID, small init + large wd generalizes better",
             _c9_ours, cl.c9_status, ("scan_matched_cpu", "scan_matched_paper"),
             blocks={"c9-scan-cogs": cl.c9_scan_cogs}))
_claim(Claim("C10", "addition (journal Fig. 7C)", "small init + large wd fills the held-out square",
             _claims_ours("fig7c_knobs_cpu_claims.csv", 1, "square accuracy"), cl.c10_status,
             ("addition_knobs_cpu", "addition_knobs_paper"), blocks={"c10-addition": cl.c10_addition}))
_claim(Claim("C11", "language modelling (journal Fig. 7D)", "smaller init, lower perplexity", _c11_ours, cl.c11_status,
             ("lm_seeds_cpu", "lm_paper"), blocks={"c11-lm": cl.c11_lm}))
_claim(Claim("C12", "concept-graph diffusion (journal Fig. 6)", "small init draws the unseen concept combinations",
             _c12_ours, cl.c12_status, ("concepts_seeds_cpu", "concepts_fig6_paper"),
             blocks={"c12-concepts": cl.c12_concepts, "c12-precondition": cl.c12_precondition}))
_claim(Claim("C13", "PrOntoQA (journal Fig. 7E)", "small init + large wd generalizes across hops", _c13_ours,
             c13.c13_status, ("prontoqa_cpu", "prontoqa_paper"),
             blocks={"c13-prontoqa": c13.c13_prontoqa, "c13-search": c13.c13_search}))
_claim(Claim("EV", "the early verdict (ours, no paper claim)", "-", _verdict_ours, ev_status,
             ("predictors_cpu", "predictors_cpu"), blocks={"ev-verdict": cl.verdict, "ev-intervals": cl.predictor_intervals}))
