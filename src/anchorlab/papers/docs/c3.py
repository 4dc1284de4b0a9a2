"""Generated blocks of C3: the phases and weight decay (NeurIPS grid and the journal's own experiment), and its status.

Each function reads one study's committed tables and returns a Markdown table; none recomputes a
judgement the table already holds (a run's solution, a cell's phase, a claims row).
"""
from __future__ import annotations

import functools

import pandas as pd

from anchorlab.papers.docs.common import FIGURES, count, md_table, num, paper_gamma, ratio, table


# ------------------------------------------------------------------ C3: the journal's phases and weight decay
def c3_grid() -> str:
    d = table("gamma_wd_cpu_cells.csv").sort_values(["paper_gamma", "optim.weight_decay"])
    rows = [[f"{r.paper_gamma:g}", f"{r['optim.weight_decay']:g} ({num(r.decay_exponent)})",
             f"{num(r.inferential_best)} / {num(r.symmetric_best)} ({num(r.id_best)})", str(int(r.phase)),
             f"{count(r.composes_rate, r.n_runs)} / {count(r.memorizes_rate, r.n_runs)}",
             num(r["cond/wq0_mean_abs_cos"])] for _, r in d.iterrows()]
    return md_table(["paper gamma", "wd (decay exponent)", "papers' cell: inferential / symmetric (ID)", "phase",
                     "per run: composes / memorizes", "W_Q(1) mean abs cos"], rows)


def c3_rescue() -> str:
    rows = []
    for name, label in (("gamma_wd_cpu_rescue.csv", "grid draws"), ("wd_rescue_cpu_rescue.csv", "demo draws")):
        d = table(name)
        for g, part in d.groupby("init.gamma"):
            lost = part[part["wd=0"] != "composes"]
            pg = part.paper_gamma.iloc[0]
            gl = f"paper {pg:g}" if pd.notna(pg) else f"plain {g:g} at width 128 (paper {paper_gamma(g, 128):.2f})"
            rows.append([label, gl, ratio(len(lost), len(part)), ratio(int(lost.rescued.sum()), len(lost)),
                         ratio(int(lost.rescued_best.sum()), len(lost))])
    return md_table(["draws", "gamma", "draws not composing at wd 0", "rescued by a larger wd (final)",
                     "rescued (best over training)"], rows)


def _journal_runs() -> tuple[pd.DataFrame, int, int]:
    """The journal grid's committed per-run rows at the grid's depth (docs/figures/journal_fig3_cpu.csv; a
    corner run at another depth is left out) and the numbers of runs and cells of the figure's cpu grid (its
    default options)."""
    from anchorlab.papers.reproduce import FIGURES as REGISTERED
    from anchorlab.papers.reproduce.runner import figure_spec
    from anchorlab.sweep.grid import expand

    plan = expand(figure_spec(REGISTERED["journal-fig3"], "cpu"))
    cells = {(r.config.init.gamma, r.config.optim.weight_decay) for r in plan}
    runs = table("journal_fig3_cpu.csv")
    return runs[runs["model.n_layers"] == plan[0].config.model.n_layers], len(plan), len(cells)


def c3_journal_cells() -> str:
    """C3, the journal's own experiment: one row per cell of the main depth (docs/figures/journal_fig3_cpu_cells.csv,
    the figure's cells.csv), the phase of the cell's mean ID / OOD per reading beside the journal's phase."""
    runs, planned, planned_cells = _journal_runs()
    depth = int(runs["model.n_layers"].iloc[0])
    d = table("journal_fig3_cpu_cells.csv")
    main = d[d["model.n_layers"] == depth].sort_values(["paper_gamma", "optim.weight_decay"])
    rows = [[f"{r.paper_gamma:g} ({paper_gamma(r.paper_gamma, 640):.2f})",
             f"{r['optim.weight_decay']:g} ({r.journal_wd:g})", int(r.n_seeds), *_cell_readings(r, r.comm_low)]
            for _, r in main.iterrows()]
    head = (f"Runs: {len(runs)} of {planned} at {depth} layers; cells: {len(main)} of "
            f"{planned_cells} (a cell is the mean of its seeds).\n\n")
    return head + md_table(["journal gamma: std 640^-gamma (paper gamma)", "wd (journal's row)", "seeds",
                            *_CELL_READINGS, "journal's phase"], rows)


def c3_journal_depth() -> str:
    """C3: the depth contrast at one corner of the journal grid (docs/figures/journal_fig3_cpu_depth.csv, the
    figure's depth.csv: the cells run at more than one depth), one row per depth."""
    d = table("journal_fig3_cpu_depth.csv").sort_values(["gamma_axis", "optim.weight_decay", "model.n_layers"])
    rows = [[f"{r.gamma_axis:g} ({paper_gamma(r.gamma_axis, 640):.2f})", f"{r['optim.weight_decay']:g}",
             int(r["model.n_layers"]), int(r.n_seeds), *_cell_readings(r)] for _, r in d.iterrows()]
    return md_table(["journal gamma (paper gamma)", "wd", "layers", "seeds", *_CELL_READINGS,
                     "journal's phase (10 layers)"], rows)


_CELL_READINGS = ["ID / OOD, best over training", "phase (best)", "ID / OOD, final", "phase (final)",
                  "commutativity (final)", "W_Q(1) stable rank"]


def _cell_readings(r, comm_low: bool = False) -> list[object]:
    """One journal cell's readings in the columns of ``_CELL_READINGS``, then the journal's phase there
    (``-`` off its grid); ``comm_low`` marks the commutativity as the cells table marks it."""
    return [f"{num(r.id_best)} / {num(r.ood_best)}", r.phase_best, f"{num(r.id_final)} / {num(r.ood_final)}",
            r.phase_final, num(r.commutativity) + (" (low)" if comm_low else ""), num(r.stable_rank, 1),
            "-" if pd.isna(r.journal_phase) or r.journal_phase == "" else str(r.journal_phase)]


def _held(v: object) -> bool | None:
    """A claims-table ``holds_*`` cell as read back from its CSV (a bool, its text, or empty: not judged)."""
    return None if pd.isna(v) else str(v) in ("True", "1", "1.0")


def c3_journal_claims() -> str:
    """C3: the journal's three claims along each row and column of the grid run so far
    (docs/figures/journal_fig3_cpu_claims.csv, the figure's claims.csv)."""
    d = table("journal_fig3_cpu_claims.csv")

    def held(v: object) -> str:
        return {None: "n/a", True: "yes", False: "no"}[_held(v)]

    def word(v: object) -> str:
        return "n/a" if pd.isna(v) else str(v)

    rows = []
    for r in d.itertuples():
        stable = r.claim.startswith("stable rank")
        line = r.line.replace("gamma", "journal gamma") if r.line.startswith("gamma") else r.line
        rows.append([r.claim, line, r.along.replace("weight_decay", "wd").replace("gamma", "journal gamma"),
                     f"{r.journal} ({word(r.journal_reading)})",
                     f"{r.ours_best} ({word(r.reading_best)})", held(r.holds_best),
                     "-" if stable else f"{r.ours_final} ({word(r.reading_final)})",
                     "-" if stable else held(r.holds_final)])
    return md_table(["claim", "line", "along", "journal", "ours, best", "holds (best)", "ours, final",
                     "holds (final)"], rows)


def _journal_holds(claim: str) -> tuple[int, int]:
    """(lines on which a journal claim goes the journal's way, lines judged), best over training, from
    docs/figures/journal_fig3_cpu_claims.csv (a line is judged where both ends of it were run)."""
    d = table("journal_fig3_cpu_claims.csv")
    held = [h for h in map(_held, d[d.claim == claim].holds_best) if h is not None]
    return sum(held), len(held)


DEFINITIONS = (("authors-fig3", "the figure code's"), ("anchorlab", "the text's"))


@functools.lru_cache(maxsize=None)
def _holds_by_definition() -> dict[tuple[str, str, str], tuple[int, int]]:
    """(definition, claim, reading) -> (lines on which the journal claim goes the journal's way, lines judged),
    recomputed from the grid's committed runs under each of :data:`DEFINITIONS` (a line is judged where both of
    its ends were run). Cached: C3's line is drawn in several blocks of one docs build, from the same tables."""
    from anchorlab.eval.definitions import METRIC_DEFINITIONS
    from anchorlab.papers.eval.journal_cells import claim_lines, journal_cells, journal_view
    from anchorlab.papers.reproduce.figures_journal3 import INIT, WD, with_values
    from anchorlab.papers.runs import run_table

    runs, _, _ = _journal_runs()
    rows = run_table([FIGURES / "journal_fig3_cpu.csv"])
    rows = rows[rows.run_id.isin(runs.run_id)]
    out = {}
    for name, _ in DEFINITIONS:
        d = METRIC_DEFINITIONS[name]
        lines = claim_lines(journal_cells(journal_view(with_values(rows), d), d))
        for claim in (INIT, WD):
            for reading in ("best", "final"):
                held = [h for h in map(_held, lines[lines.claim == claim][f"holds_{reading}"]) if h is not None]
                out[name, claim, reading] = (sum(held), len(held))
    return out


def c3_journal_reading() -> str:
    """C3 in one line from the journal's own grid: its runs (when some are missing) and, per claim, the lines
    that go the journal's way under the figure code's ID and OOD, best over training, then at the runs' end and
    under the text's definitions."""
    from anchorlab.papers.reproduce.figures_journal3 import INIT, WD

    runs, planned, _ = _journal_runs()
    h = _holds_by_definition()
    parts = [f"{what} on {ratio(*h['authors-fig3', claim, 'best'])} {unit}" for what, claim, unit in (
        ("the phase rises with the init rate", INIT, "rows"), ("with the weight decay", WD, "columns"))]

    def pair(name: str, reading: str) -> str:
        return " and ".join(str(h[name, c, reading][0]) for c in (INIT, WD))

    ran = "" if len(runs) == planned else f"{ratio(len(runs), planned)} runs, "
    return (f"on the journal's own task ({ran}the figure code's ID and OOD, best over training): " + ", ".join(parts)
            + f" (final: {pair('authors-fig3', 'final')}; the text's ID and OOD: {pair('anchorlab', 'best')}, "
            f"final {pair('anchorlab', 'final')})")


def c3_definitions() -> str:
    """C3 under both definitions of ID and OOD, side by side: the authors' figure code's (ID = pair (1,2) on
    test keys, OOD = pair (4,3) on training keys: the figure's own reading) and the text's (ID = the seen pairs,
    OOD = both unseen pairs): on how many of the grid's lines each journal claim holds, per reading."""
    from anchorlab.eval.definitions import METRIC_DEFINITIONS
    from anchorlab.papers.reproduce.figures_journal3 import INIT, WD

    h = _holds_by_definition()
    out = []
    for name, label in DEFINITIONS:
        text = METRIC_DEFINITIONS[name].text.split(";")
        out.append([f"{label} (`{name}`): {text[0]}; {text[1].strip()}",
                    *(ratio(*h[name, c, r]) for c in (INIT, WD) for r in ("best", "final"))])
    return md_table(["definition of ID and OOD", "init rate: rows holding (best)", "(final)",
                     "weight decay: columns holding (best)", "(final)"], out)


def c3_status() -> str:
    """From the journal's own grid once all its runs are in, by the page's legend: both claims go the journal's
    way on every line judged: reproduced; on some lines: partly; on none: not reproduced. Until then from the
    NeurIPS-task grid (gamma_wd_cpu): wd lifts every gamma's inferential accuracy, and the smallest init beats
    the largest at no decay."""
    from anchorlab.papers.reproduce.figures_journal3 import INIT, WD

    runs, planned, _ = _journal_runs()
    if len(runs) >= planned:
        held = [_journal_holds(c) for c in (INIT, WD)]
        if all(k == n and n > 0 for k, n in held):
            return "reproduced"
        return "partly" if any(k > 0 for k, _ in held) else "not reproduced"
    d = table("gamma_wd_cpu_cells.csv")
    wd = d["optim.weight_decay"]
    top, low = wd.max(), wd.min()
    wd_helps = all(d[(d.paper_gamma == g) & (wd == top)].inferential_best.iloc[0]
                   > d[(d.paper_gamma == g) & (wd == low)].inferential_best.iloc[0]
                   for g in d.paper_gamma.unique())
    at0 = d[wd == low].sort_values("paper_gamma").inferential_best.tolist()
    gamma_helps = at0[-1] > at0[0]
    return "reproduced" if wd_helps and gamma_helps else "partly" if wd_helps or gamma_helps else "not reproduced"


ONE_X_SWEEP, ONE_X_TABLE = "journal_fig3_decay_1x_cpu", "journal_fig3_cpu_1x.csv"


def _one_x_pairs():
    """(each 1x run beside its 1/2x twin, the figure code's ID / OOD; the planned runs)."""
    from anchorlab.eval.definitions import METRIC_DEFINITIONS
    from anchorlab.papers.eval.journal_cells import clock_pairs
    from anchorlab.sweep.grid import expand

    runs, _, _ = _journal_runs()
    p = clock_pairs(runs, table(ONE_X_TABLE), METRIC_DEFINITIONS["authors-fig3"])
    return p.sort_values(["gamma_axis", "seed"], ascending=[False, True]), len(expand(ONE_X_SWEEP))


def c3_one_x() -> str:
    """C3's most-decay row at 1x the clock (``journal_fig3_decay_1x_cpu``; notes/2026-12-c3-1x.md): each 1x run
    beside its 1/2x twin, the figure code's ID / OOD (final, then best over training) and the rule's reading of the
    1x run per reading (:func:`~anchorlab.papers.eval.journal_cells.clock_pairs`), then the rule's verdict per reading
    (:func:`~anchorlab.papers.eval.journal_cells.clock_verdict`; pending until every planned run is in)."""
    from anchorlab.papers.eval.journal_cells import READINGS, clock_verdict

    p, planned = _one_x_pairs()
    rows = [[f"{r.gamma_axis:g} ({paper_gamma(r.gamma_axis, 640):.2f})", int(r.seed),
             f"{num(r.short_id_final)} / {num(r.short_ood_final)}" + ("" if r.short_fitted else " (unfit)"),
             f"{num(r.id_final)} / {num(r.ood_final)}", r.reading_final,
             f"{num(r.id_best)} / {num(r.ood_best)}", r.reading_best] for r in p.itertuples()]
    head = f"Runs: {len(p)} of {planned} (`{ONE_X_SWEEP}`); the figure code's ID and OOD.\n\n"
    verdicts = "".join(f"- {clock_verdict(p, planned, r)}\n" for r in sorted(READINGS, reverse=True))
    return head + md_table(["journal gamma (paper gamma)", "seed", "1/2x: ID / OOD, final", "1x: ID / OOD, final",
                            "reading (final)", "1x: ID / OOD, best", "reading (best)"], rows) + "\n\n" + verdicts


def c3_one_x_verdict() -> str:
    """The results page's line of :func:`c3_one_x`: the rule's verdict on the final reading, with its runs."""
    from anchorlab.papers.eval.journal_cells import clock_verdict

    p, planned = _one_x_pairs()
    return f"The most-decay row at 1x ({len(p)} of {planned} runs), the {clock_verdict(p, planned, 'final')}"
