"""Generated blocks of C1's two questions about single runs and scale: the scale ladder (does the contrast sharpen
toward the paper's width and data?) and the path draw (how often does a run's solution move with the precision
path?). Each reads its committed per-run table and the rule's own judgement.
"""
from __future__ import annotations

import pandas as pd

from anchorlab.papers.docs.common import md_table, num, ratio, sci, table


def _rungs() -> pd.DataFrame:
    """The ladder's rates per rung and op set (and over all op sets), from scale_ladder_cpu.csv."""
    from anchorlab.papers.reproduce import figures_scale as fs

    return fs.rung_table(table("scale_ladder_cpu.csv"))


def _ladder() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the rates per rung over all op sets, indexed by rung; the rule's verdicts)."""
    from anchorlab.papers.reproduce import figures_scale as fs

    rungs = _rungs()
    return rungs[rungs.op_set == "all"].set_index("rung", drop=False), fs.verdict_table(rungs)


def c1_ladder() -> str:
    """The scale ladder (scale_ladder_cpu.csv, one row per run): per rung over the three op sets, each rate with
    its Wilson interval and the papers' cell beside it; then the rule's verdict for width and for data."""
    pooled, v = _ladder()
    rows = []
    for r in pooled.itertuples():
        rows.append([r.rung, f"{int(r.n_small)} / {int(r.n_large)}",
                     f"{ratio(r.small_composes, r.n_small)} [{num(r.compose_lo)}, {num(r.compose_hi)}]",
                     f"{ratio(r.large_memorizes, r.n_large)} [{num(r.memorize_lo)}, {num(r.memorize_hi)}]",
                     f"{int(r.small_unfit)} / {int(r.large_unfit)}",
                     f"{num(r.papers_cell_small_inferential)} / {num(r.papers_cell_large_symmetric)}",
                     "yes" if r.ready else "no"])
    head = ["rung (width, data)", "runs: small / large init", "small init composes (Wilson 95%)",
            "large init memorizes (Wilson 95%)", "unfit: small / large", "papers' cell: inferential / symmetric",
            "rung ready (seeds 0-1 of every op set)"]
    lines = [md_table(head, rows), ""]
    for r in v.itertuples():
        lines.append(f"- {r.comparison} ({r.from_rung} -> {r.to_rung}): **{r.verdict}**{_moves(r)}")
    return "\n".join(lines) + "\n"


def _moves(r) -> str:
    """A verdict's two rates as the rule reads them: from -> to, the change against the larger half-width, and
    whether it moved ('' while the verdict is pending)."""
    if r.verdict.startswith("pending"):
        return ""
    get = r._asdict()
    return ": " + "; ".join(
        f"{what} {num(get[f'{rate}_from'])} -> {num(get[f'{rate}_to'])}, change {num(get[f'{rate}_change'])} "
        f"against half-width {num(get[f'{rate}_half_width'])}: {move}"
        for (what, rate), move in zip((("small init composes", "compose_rate"),
                                       ("large init memorizes", "memorize_rate")), r.moves.split("/")))


def c1_ladder_opsets() -> str:
    """The scale ladder per rung and op set (scale_ladder_cpu.csv): each init's per-run rate with its unfit runs,
    and the papers' cell (each mapping's best over training, mean over seeds) beside them."""
    rungs = _rungs()
    rows = [[r.rung, r.op_set, f"{ratio(r.small_composes, r.n_small)} ({int(r.small_unfit)} unfit)",
             f"{ratio(r.large_memorizes, r.n_large)} ({int(r.large_unfit)} unfit)",
             f"{num(r.papers_cell_small_inferential)} / {num(r.papers_cell_large_symmetric)}"]
            for r in rungs[rungs.op_set != "all"].itertuples()]
    return md_table(["rung", "op set", "small init composes", "large init memorizes",
                     "papers' cell: inferential / symmetric"], rows)


def c1_ladder_line() -> str:
    """The results page's line of :func:`c1_ladder`: the rule's verdict for data and for width, with the pooled
    rates where a verdict is in."""
    pooled, v = _ladder()
    parts = []
    for r in v.sort_values("comparison").itertuples():
        rates = ""
        if not r.verdict.startswith("pending"):   # a verdict is in only where both rungs are
            a, b = pooled.loc[r.from_rung], pooled.loc[r.to_rung]
            rates = (f" (small composes {ratio(a.small_composes, a.n_small)} -> {ratio(b.small_composes, b.n_small)}"
                     f", large memorizes {ratio(a.large_memorizes, a.n_large)} -> "
                     f"{ratio(b.large_memorizes, b.n_large)})")
        parts.append(f"{r.comparison}, {r.from_rung} -> {r.to_rung}: **{r.verdict}**{rates}")
    return ("The scale ladder's verdicts "
            "([claims/c1.md](claims/c1.md#does-the-contrast-sharpen-toward-the-papers-scale)): " + "; ".join(parts) + ".")


PATH_DRAW_TABLE = "path_draw_native_cpu.csv"


def _path_draw() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(every planned run of the path draw beside its autocast twin, the runs done)."""
    from anchorlab.papers.eval.path_draw import path_pairs

    p = path_pairs(table("fig2_cell_cpu.csv"), table(PATH_DRAW_TABLE), "native")
    p = p.sort_values(["optim.peak_lr", "train.init_seed"])
    return p, p[p.solution != "queued"]


def c1_path_draw_line() -> str:
    """The results page's caveat of :func:`c1_path_draw`: how often a run's solution moved with the precision path."""
    p, done = _path_draw()
    return (f"- One run is partly a draw: on the native bf16 path, {int(done.changed.sum())} of {len(done)} of the "
            f"cell's small-init runs changed solution ({len(done)} of {len(p)} re-run); {_compose_rates(done)} "
            "([claims/c1.md](claims/c1.md)).")


def _compose_rates(done: pd.DataFrame) -> str:
    """The per-run compose rate on each path over the runs done, and how many composing runs are not the same."""
    a, b = done.twin_solution == "composes", done.solution == "composes"
    return (f"composing: {ratio(int(a.sum()), len(done))} on autocast, {ratio(int(b.sum()), len(done))} on native, "
            f"{int((a != b).sum())} runs on one path only")


def c1_path_draw() -> str:
    """C1: the cell's small-init runs re-trained on the native bf16 path beside their committed autocast twins
    (:mod:`anchorlab.papers.eval.path_draw`; docs/figures/path_draw_native_cpu.csv), final ID / inferential /
    symmetric and the per-run solution; the count of solutions that changed."""
    p, done = _path_draw()

    def acc(r: pd.Series, pre: str = "") -> str:
        return " / ".join(num(r[f"{pre}final.{m}"]) for m in ("id_acc", "ood_inferential_acc", "ood_symmetric_acc"))

    queued = p.solution == "queued"
    rows = [[sci(r["optim.peak_lr"]), int(r["train.init_seed"]), acc(r, "twin_"), r.twin_solution,
             "-" if q else acc(r), r.solution, "-" if q else ("yes" if r.changed else "no")]
            for (_, r), q in zip(p.iterrows(), queued)]
    head = (f"Re-run: {len(done)} of {len(p)}; solution changed in {int(done.changed.sum())} of {len(done)}; "
            f"{_compose_rates(done)}.\n\n")
    return head + md_table(["peak lr", "seed", "autocast (committed): ID / inferential / symmetric", "solution",
                            "native: ID / inferential / symmetric", "solution", "changed"], rows)
