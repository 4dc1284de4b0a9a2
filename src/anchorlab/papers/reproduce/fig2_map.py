"""The map at a glance: the Fig. 2 cell tables (:mod:`anchorlab.papers.eval.judgement`) as Markdown.

:func:`cells_markdown` writes the papers' cell beside the per-run rate, a table per reading of the peak lrs;
:func:`pairs_markdown` the contrast case by case. ``anchorlab reproduce neurips-fig2`` writes both into
``map.md`` (and the fitted reading into ``map_fitted.md``).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from anchorlab.papers.eval.judgement import ALL_LRS, CELL_KEYS


def cells_markdown(cells: pd.DataFrame) -> str:
    """:func:`anchorlab.papers.eval.judgement.cell_table` -> the map at a glance, a Markdown table per reading of the lrs
    (``lrs``): per (clock, depth, op set, device, paper gamma) the papers' cell (inferential / symmetric, mean
    best ID), how it reads on both mappings (``solution``), and the per-run rate as counts of runs (final ID >=
    id_min and that mapping >= the threshold); a cell whose seeds have different numbers of lrs says so beside
    its runs."""
    out = []
    t, i = cells.iloc[0].threshold, cells.iloc[0].id_min
    for lrs, g in cells.groupby("lrs", sort=False):
        which = "every peak lr run" if lrs == ALL_LRS else f"the peaks in {lrs}"
        out += [f"Over {which}; OOD >= {t:g}, ID >= {i:g}.", "",
                "| clock | depth | op set | device | paper gamma | seeds (runs) | papers' cell: inferential / "
                "symmetric (ID) | reads | per run: composes / memorizes |", "|" + "---|" * 9]
        for r in g.sort_values(CELL_KEYS).itertuples(index=False):
            n = int(r.n_runs)
            out.append(f"| {r.clock:g}x | {int(r.n_layers)} | {r.op_set} | {r.devices} | {r.paper_gamma:g} | "
                       f"{int(r.n_seeds)} ({n}{_partial(r)}) | {r.inferential_best:.2f} / {r.symmetric_best:.2f} ({r.id_best:.2f}) | "
                       f"{r.solution} | {round(r.inferential_per_run * n)}/{n} / {round(r.symmetric_per_run * n)}/{n} |")
        out.append("")
    return "\n".join(out)


def pairs_markdown(pairs: pd.DataFrame, threshold: float, id_min: float) -> str:
    """:func:`anchorlab.papers.eval.judgement.pair_table` as a Markdown table for the map ("" without cases)."""
    head = (f"\nCase by case: the same seed and peak lr at paper gammas 0.3 and 0.8, final metrics (OOD >= "
            f"{threshold:g}, ID >= {id_min:g}).\n\n| clock | depth | op set | device | cases | large init memorizes "
            "and small init composes | large init memorizes | small init composes |\n" + "|---" * 8 + "|\n")
    return head + "".join(f"| {p.clock:g}x | {int(p.n_layers)} | {p.op_set} | {p.devices} | {int(p.cases)} | "
                          f"{int(p.contrast)} | {int(p.large_memorizes)} | {int(p.small_composes)} |\n"
                          for p in pairs.itertuples()) if len(pairs) else ""


def _partial(cell: Any) -> str:
    """``"; 4-5 lrs a seed"`` where a cell's seeds have different numbers of lrs (a partial cell), else ``""``."""
    lo, hi = getattr(cell, "lrs_min", None), getattr(cell, "lrs_max", None)
    return f"; {int(lo)}-{int(hi)} lrs a seed" if lo is not None and lo == lo and lo != hi else ""
