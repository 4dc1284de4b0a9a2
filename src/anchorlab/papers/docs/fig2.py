"""Generated blocks of the headline claims: the Fig. 2 cell (C1) and Fig. 2 itself (C2).

Each block reads the reduced tables (fig2_cell_cpu_cells.csv and its fitted twin, demo_rule_cpu_*.csv)
and returns Markdown; the judgements (a cell's reading, the per-run rates) are the tables' own.
"""
from __future__ import annotations

import math

import pandas as pd

from anchorlab.papers.docs.common import clock_label, count, md_table, num, op_label, sci, sweep_scale, table

RANGE = "[1.1e-4, 3.3e-4]"          # the `lrs` value of cells read over the paper's corrected range
SIDE = {0.3: "large init", 0.5: "middle", 0.8: "small init"}
PAPER_READING = {0.3: "symmetric near 1 (memorizes)", 0.8: "inferential near 1 (composes)"}


def cells(fitted: bool = False) -> pd.DataFrame:
    d = table("fig2_cell_cpu_cells_fitted.csv" if fitted else "fig2_cell_cpu_cells.csv")
    d["op"] = d.op_set.map(op_label)
    return d


def _pick(d: pd.DataFrame, **eq) -> pd.DataFrame:
    for k, v in eq.items():
        d = d[d[k] == v]
    return d


def _cell(r) -> str:
    return f"{num(r.inferential_best)} / {num(r.symmetric_best)}"


def _per_run(r) -> str:
    return f"{count(r.inferential_per_run, r.n_runs)} / {count(r.symmetric_per_run, r.n_runs)}"


def _seeds(r) -> str:
    return f"{int(r.n_seeds)} ({int(r.n_runs)})"


def fig2_hero() -> str:
    """Fig. 2 at CPU scale (1/2x clock, papers' op set, the range's peaks) with the paper's reading."""
    d = _pick(cells(), clock=0.5, lrs=RANGE, devices="cpu")
    d = d[d.op.str.endswith("papers'")]
    rows = []
    for depth in sorted(d.n_layers.unique(), reverse=True):
        row = [str(depth)]
        for g in (0.3, 0.8):
            r = _pick(d, n_layers=depth, paper_gamma=g)
            if r.empty:
                row.append("not run")
                continue
            c = r.iloc[0]
            runs = (count(c.symmetric_per_run, c.n_runs) + " memorize" if g == 0.3 else
                    count(c.inferential_per_run, c.n_runs) + " compose")
            row.append(f"{_cell(c)}, {c.solution}; runs: {runs}")
        rows.append(row)
    rows.append(["paper, depth >= 2"] + [PAPER_READING[g] for g in (0.3, 0.8)])
    head = ["depth", "paper gamma 0.3 (large init): papers' cell, inferential / symmetric; per run",
            "paper gamma 0.8 (small init)"]
    return md_table(head, rows)


def c1_clock() -> str:
    """C1: the papers' op set at depth 2 over the range, per clock and paper gamma."""
    d = _pick(cells(), n_layers=2, lrs=RANGE, devices="cpu")
    d = d[d.op.str.endswith("papers'")].sort_values(["clock", "paper_gamma"])
    rows = [[clock_label(r.clock), f"{r.paper_gamma:g} ({SIDE.get(r.paper_gamma, '')})", _seeds(r),
             f"{_cell(r)} ({num(r.id_best)})", r.solution, _per_run(r)] for r in d.itertuples()]
    paper = sweep_scale("fig2_paper")
    n_peaks = int(paper["peak lr"].split(":")[0])
    rows.append(["paper (1x)", "0.3 / 0.8", f"{paper['seeds']} ({int(paper['seeds']) * n_peaks} each)", "-",
                 "memorizes / composes", "-"])
    return md_table(["clock", "paper gamma", "seeds (runs)", "papers' cell: inferential / symmetric (ID)",
                     "reads", "per run: composes / memorizes"], rows)


def _device(dev: str) -> str:
    """'cpu: AMD EPYC (AVX512 ...)' -> 'AMD EPYC'; 'cuda: NVIDIA H200' -> 'NVIDIA H200'; a bare 'cpu' -> 'CPU'."""
    name = dev.split(":", 1)[1].split("(A")[0] if ":" in dev else dev.upper()
    return name.replace("(R)", "").replace(" Processor", "").strip()


def _precision(op: str, gamma: float, device: str) -> str:
    runs = table("fig2_cell_cpu.csv")
    runs = runs[(runs.op_set.map(op_label) == op) & (runs.paper_gamma == gamma) & (runs.clock == 0.5)
                & (runs["model.n_layers"] == 2) & runs.device.str.startswith(device)]
    kinds = sorted({f"{_device(dev)}, {p}" for dev, p in zip(runs.device, runs.precision)})
    return "; ".join(kinds) if kinds else "-"


def c1_opsets() -> str:
    """C1 robustness: the three op sets at 1/2x over the range, the papers' reading beside the fitted one."""
    d = _pick(cells(), clock=0.5, n_layers=2, lrs=RANGE)
    f = _pick(cells(fitted=True), clock=0.5, n_layers=2, lrs=RANGE).set_index(["op", "devices", "paper_gamma"])
    order = {"(4,3), papers'": 0, "(3,2)": 1, "(2,1)": 2}
    d = d.assign(o=d.op.map(order)).sort_values(["o", "paper_gamma", "devices"])
    rows = []
    for r in d.itertuples():
        fr = f.loc[(r.op, r.devices, r.paper_gamma)]
        rows.append([r.op, f"{r.paper_gamma:g}", _precision(r.op, r.paper_gamma, r.devices), _seeds(r),
                     f"{_cell(r)}, {r.solution}", f"{_cell(fr)}, {fr.solution}", _per_run(r)])
    return md_table(["op set (held out)", "paper gamma", "device, precision", "seeds (runs)",
                     "papers' cell, reads", "fitted reading, reads", "per run: composes / memorizes"], rows)


def c1_bracket() -> str:
    """C1: the papers' op set at 1/2x read over the paper's range and over our whole bracket of peaks."""
    runs = table("fig2_cell_cpu.csv")
    runs = runs[(runs.op_set.map(op_label) == "(4,3), papers'") & (runs.clock == 0.5) & (runs["model.n_layers"] == 2)]
    peaks = sorted(runs.peak_lr.unique())
    inside = [p for p in peaks if 1.1e-4 <= p <= 3.3e-4]
    d = _pick(cells(), clock=0.5, n_layers=2, devices="cpu")
    d = d[d.op.str.endswith("papers'")].sort_values(["paper_gamma", "lrs"], ascending=[True, False])
    rows = []
    for r in d.itertuples():
        over = f"the range {RANGE} ({len(inside)} peaks)" if r.lrs == RANGE else \
            f"our bracket {sci(peaks[0])}..{sci(peaks[-1])} ({len(peaks)} peaks)"
        rows.append([f"{r.paper_gamma:g}", over, _seeds(r), f"{_cell(r)} ({num(r.id_best)})", r.solution, _per_run(r)])
    return md_table(["paper gamma", "peaks", "seeds (runs)", "papers' cell: inferential / symmetric (ID)", "reads",
                     "per run: composes / memorizes"], rows)


def c2_depth() -> str:
    """C2: gamma x depth at 1/2x, papers' op set, the range's peaks, both readings."""
    d = _pick(cells(), clock=0.5, lrs=RANGE, devices="cpu")
    d = d[d.op.str.endswith("papers'") & d.paper_gamma.isin([0.3, 0.8])].sort_values(["n_layers", "paper_gamma"])
    f = _pick(cells(fitted=True), clock=0.5, lrs=RANGE, devices="cpu").set_index(["op", "n_layers", "paper_gamma"])
    rows = []
    for r in d.itertuples():
        fr = f.loc[(r.op, r.n_layers, r.paper_gamma)]
        rows.append([str(r.n_layers), f"{r.paper_gamma:g}", _seeds(r), f"{_cell(r)} ({num(r.id_best)})", r.solution,
                     f"{_cell(fr)}, {fr.solution}", _per_run(r)])
    return md_table(["depth", "paper gamma", "seeds (runs)", "papers' cell (ID)", "reads", "fitted reading",
                     "per run: composes / memorizes"], rows)



def c1_crossing() -> str:
    """C1: the op-set crossing so far (docs/figures/opset_cross_cpu.csv), per op set and paper gamma, with the
    rule's reading (anchorlab.papers.eval.crossing: pending until 9 small-init runs per op set)."""
    from anchorlab.papers.eval.crossing import crossing_verdict, op_set_counts
    from anchorlab.papers.reproduce.figures_opset import O1, O2
    from anchorlab.tasks.anchor.opsets import op_set_properties

    runs = table("opset_cross_cpu.csv")
    planned = {0.8: 9, 0.3: 3}
    c = op_set_counts(runs)
    fit = runs.groupby(["op_set", "paper_gamma"]).agg(fit=("steps_to_id_fit", "median"),
                                                       at_fit=("inferential_at_fit", "mean")).reset_index()
    c = c.merge(fit, on=["op_set", "paper_gamma"])
    names = {O1.label: "O1", O2.label: "O2"}
    rows = []
    for op in (O1, O2):
        for g in (0.8, 0.3):
            r = c[(c.op_set == op.label) & (c.paper_gamma.round(6) == g)]
            q = op_set_properties(op)
            props = f"gap {int(q['step_gap'])}, offset {num(q['offset_over_sd'])} sd"
            if not len(r):
                rows.append([f"{names[op.label]} ({op.held_out[0]},{op.held_out[1]}) {props}", f"{g:g}",
                             f"0 of {planned[g]}", "", "", "", "", ""])
                continue
            r = r.iloc[0]
            rows.append([f"{names[op.label]} ({op.held_out[0]},{op.held_out[1]}) {props}", f"{g:g}",
                         f"{int(r.n_runs)} of {planned[g]}", str(int(r.n_unfit)), str(int(r.n_memorize)),
                         f"{int(r.n_compose_final)} / {int(r.n_compose_on_way)}",
                         "never" if math.isnan(r.fit) else f"{r.fit / 1000:.1f}k", num(r.at_fit)])
    v = crossing_verdict(runs, O1.label, O2.label)
    return (md_table(["op set (held out)", "paper gamma", "runs done", "unfit", "memorize",
                      "compose: final / on the way", "median steps to ID 0.9", "inferential at the fit"], rows)
            + f"\n\nThe rule's reading: O1 {v['O1']}, O2 {v['O2']}; verdict: {v['verdict']}"
            + ("" if v["verdict"] != "pending" else f"; still possible: {v['still_possible']}") + ".\n")


def distinct_chance(done: pd.DataFrame, per_op_set: int) -> float | None:
    """With k composing small-init runs over N op sets of ``per_op_set`` runs each, all on different op sets: how
    likely k runs placed at random would all land on different op sets, had the op set no say (None when fewer
    than two runs compose or two share an op set)."""
    k, n = int(done.small_compose.sum()), len(done)
    if k < 2 or int((done.small_compose > 0).sum()) < k:
        return None
    return math.comb(n, k) * per_op_set ** k / math.comb(n * per_op_set, k)


def _chance_of_distinct(done: pd.DataFrame, per_op_set: int) -> str:
    """C1's chance baseline (:func:`distinct_chance`) in a paragraph, with the per-seed split of the op sets that
    compose."""
    k, n = int(done.small_compose.sum()), len(done)
    m = int((done.small_compose > 0).sum())
    p = distinct_chance(done, per_op_set)
    if p is None:
        return ""
    every = int((done.small_compose == per_op_set).sum())
    return (f"\nWhich op sets compose is close to chance: the {k} composing small-init runs sit on {m} different op "
            f"sets, and {every} op sets compose in every seed; {k} runs placed at random among the "
            f"{n * per_op_set} would all land on different op sets with probability {num(p)}, so the op sets that "
            f"compose once say little about the op set's part.\n")


def c1_many() -> str:
    """C1: the many-op-set study so far (docs/figures/opset_many_cpu.csv: random_op_sets(12, seed=0) x paper gamma
    0.3 / 0.8 x seeds 0-1 at one peak, 1/2x clock), one row per op set, and the property AUCs
    (docs/figures/opset_properties_cpu.csv) once both outcomes occur."""
    from anchorlab.analysis.answers import KINDS
    from anchorlab.papers.eval.crossing import op_set_outcomes
    from anchorlab.papers.reproduce.figures_opset_many import N_OP_SETS, RUNS_PER_INIT, kind, per_run_rate, run_fit_auc
    from anchorlab.tasks.anchor.opsets import op_set_properties, random_op_sets

    ops = random_op_sets(N_OP_SETS, seed=0)
    runs = table("opset_many_cpu.csv")
    o = op_set_outcomes(runs, per_init=RUNS_PER_INIT).set_index("op_set")
    try:
        ans = table("opset_many_cpu_answers.csv").merge(runs[["run_id", "op_set", "paper_gamma"]], on="run_id")
        ans = ans[ans.paper_gamma.round(6) == 0.8]
    except FileNotFoundError:
        ans = None

    def answered(label: str) -> str:
        t = ans[ans.op_set == label] if ans is not None else []
        if not len(t):
            return "n/a"
        k = t.top_kind.value_counts()
        return " / ".join(str(int(k.get(x, 0))) for x in KINDS)

    rows = []
    for i, op in enumerate(ops, 1):
        q = op_set_properties(op)
        a, b = op.held_out
        name = f"{i}: {{{','.join(f'{op.anchors[k]:+d}' for k in sorted(op.anchors))}}} ({a},{b})"
        props = [str(int(q["step_gap"])), num(q["offset_over_sd"]), f"x{int(q['composition']):+d} / x{op.mirror_shift:+d}"]
        if op.label not in o.index:
            rows.append([name, *props, f"0 of {RUNS_PER_INIT}", "", "", f"0 of {RUNS_PER_INIT}", "", "", "not run"])
            continue
        r = o.loc[op.label]
        small = (f"{int(r.small_compose)} / {int(r.small_on_way)} / {int(r.small_memorize)} / {int(r.small_unfit)}"
                 if r.n_small else "")
        reads = ("pending" if not r.done else
                 "holds" if r.contrast else "small init composes, large does not memorize" if r.small_composes
                 else "small init does not compose")
        cell = f"{num(r.small_inferential_cell)} / {num(r.large_symmetric_cell)}"
        rows.append([name, *props, f"{int(r.n_small)} of {RUNS_PER_INIT}", small, answered(op.label),
                     f"{int(r.n_large)} of {RUNS_PER_INIT}", str(int(r.large_memorize)) if r.n_large else "", cell, reads])
    done = o[o.done]

    text = md_table(["op set: steps (held out)", "step gap", "offset / sd", "composition / mirror",
                     "small init runs", "composes final / on the way / memorizes / unfit",
                     "its top answer: composition / mirror / another pair's target / other", "large init runs",
                     "memorizes", "papers' cell: small inferential / large symmetric", "the contrast"], rows)
    text += (f"\n\nRuns done: {len(runs)} of {2 * RUNS_PER_INIT * len(ops)}; op sets with all "
             f"{2 * RUNS_PER_INIT} runs: {len(done)} of {len(ops)}; the contrast holds on "
             f"{int(done.contrast.sum())} of them ({int(done.contrast_every_run.sum())} in every run), the small init "
             f"composes on {int(done.small_composes.sum())}, the large init memorizes on "
             f"{int(done.large_memorizes.sum())}. \"Holds\" and \"composes\" count an op set where at least half of "
             f"its runs do, {math.ceil(RUNS_PER_INIT / 2)} of {RUNS_PER_INIT} here. Per run, over every op "
             f"set: the small init composes in {per_run_rate(runs, 0.8, 'composes')} and the large init memorizes "
             f"in {per_run_rate(runs, 0.3, 'memorizes')}.\n")
    text += _chance_of_distinct(done, RUNS_PER_INIT)
    try:
        aucs = table("opset_properties_cpu.csv")
    except FileNotFoundError:
        return text

    def cell(p: str, label: str) -> str:
        r = aucs[(aucs.property == p) & (aucs.label == label)]
        if not len(r) or pd.isna(r.auc.iloc[0]):
            return "n/a (one class)"
        r = r.iloc[0]
        return f"{num(r.auc)} [{num(r.auc_lo)}, {num(r.auc_hi)}] ({int(r.n_positive)} of {int(r.n_op_sets)})"

    arows = [[p, cell(p, "small_composes"), cell(p, "small_composes_on_way")] for p in aucs.property.unique()]
    auc, lo, hi, n_runs, k = run_fit_auc(runs)
    per_run = ("" if auc != auc else
               f"\nPer run rather than per op set, the AUC of a small-init run's own steps to fit the seen pairs for "
               f"its composing (above one half: the slower fits compose): {num(auc)} [{num(lo)}, {num(hi)}] over its "
               f"{n_runs} fitted runs ({k} compose), bootstrap over runs. Seeds of one op set can differ here, which no "
               f"op-set property can see.\n")
    n = int(aucs.n_op_sets.max())
    lead = ("\nWhich op-set property predicts the small init composing (AUC over op sets, bootstrap 95% over op sets)"
            + (f"; provisional, over the {n} op sets whose small-init runs are all done:" if n < N_OP_SETS else ":") + "\n\n")
    where = (f"\nThe kind of op set the small init composes on (the properties whose interval excludes one half): "
             f"{kind(aucs)}.\n")
    return text + lead + md_table(["property", "AUC: small init composes, final (op sets composing)",
                                   "AUC: composes on the way"], arows) + "\n" + where + per_run


def c1_answers() -> str:
    """C1: what the crossing's runs answer on the held-out pair (docs/figures/opset_cross_cpu_answers.csv, the
    ``answers-summary`` analysis of every run), per op set and paper gamma: how many runs' most frequent answer is the
    composition, the mirror, another trained pair's target (which pairs) or other, and the mean share of each kind."""
    from collections import Counter

    from anchorlab.analysis.answers import KINDS
    from anchorlab.papers.reproduce.figures_opset import O1, O2
    from anchorlab.tasks.anchor.opsets import op_set_properties

    runs = table("opset_cross_cpu.csv")[["run_id", "op_set", "paper_gamma"]]
    a = table("opset_cross_cpu_answers.csv").merge(runs, on="run_id")
    names = {O1.label: "O1", O2.label: "O2"}
    rows = []
    for op in (O1, O2):
        for g in (0.8, 0.3):
            t = a[(a.op_set == op.label) & (a.paper_gamma.round(6) == g)]
            if not len(t):
                continue
            top = Counter(t.top_kind)
            borrowed = Counter(f"{r.top_answer} {r.top_matches}" for r in t.itertuples() if r.top_kind == "trained target")
            which = ", ".join(f"{k} ({n})" for k, n in borrowed.most_common())
            comp = int(op_set_properties(op)["composition"])
            rows.append([f"{names[op.label]} ({op.held_out[0]},{op.held_out[1]}): composition x{comp:+d}, "
                         f"mirror x{op.mirror_shift:+d}", f"{g:g}", str(len(t)),
                         " / ".join(str(top[k]) for k in KINDS), which or "-",
                         " / ".join(num(t[f"{k.replace(' ', '_')}_share"].mean()) for k in KINDS)])
    return md_table(["op set (held out)", "paper gamma", "runs", "top answer: composition / mirror / another pair's "
                     "target / other", "the borrowed targets (runs)", "mean share: composition / mirror / another "
                     "pair's target / other"], rows) + "\n"


# ------------------------------------------------------------------ C1: the scale ladder
