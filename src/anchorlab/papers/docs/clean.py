"""Generated blocks of the mechanism claims read on the clean picks (anchorlab.papers.clean_picks / clean_mechanism).

Tables: clean_mechanism_cpu_picks.csv (the rule's picks with the committed and retrained final metrics),
clean_mechanism_cpu_runs.csv (every measure per retrained run), clean_mechanism_cpu_judged.csv (each measure
against the paper, per comparison) and clean_mechanism_cpu_spectra.csv (the embedding covariance's spectrum).
The judgement and the statuses are computed in anchorlab.papers.analysis.clean_mechanism; this module only renders.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from anchorlab.papers.docs.common import md_table, num, paper_gamma, scale_table, table
from anchorlab.papers.reproduce.registry import register_study

if TYPE_CHECKING:
    import pandas as pd

STEM = "clean_mechanism_cpu"
DEMO_STEM = "clean_mechanism_cpu_demo"   # the init contrast first read on the demo's seeds (kept beside the picks)
MIRROR_STEM = "fig7_mirror_cpu"   # the init contrast on the mirror task at the paper's data size (the ladder's runs)


def _init_gamma(side: str, stem: str = STEM) -> str:
    """``journal gamma 0.6-0.8`` for ``small_init``: the gammas of that side's runs in the init contrast's table,
    named by their convention (``paper`` at ref_width 400, ``journal`` at 640). A table without a gamma column is
    the demo's, whose init per side is :data:`~anchorlab.papers.demo_journal.GAMMAS` (journal gammas)."""
    init = table(f"{stem}_init.csv")
    if "gamma" not in init:
        from anchorlab.papers.demo_journal import GAMMAS

        return f"journal gamma {GAMMAS[side]:g}"
    from anchorlab.papers.analysis.clean_mechanism import gamma_label

    return gamma_label(init[init.side == side])


def _gamma(gamma: float, ref_width: float) -> str:
    """A pick's gamma in the paper's convention (its std at width 400), with its own convention beside."""
    if ref_width == ref_width and float(ref_width) == 400:
        return f"paper {gamma:g}"
    return f"paper {paper_gamma(gamma, 128):.2f} (plain {gamma:g} at width 128)"


def picks() -> str:
    """The picked runs: committed and retrained final metrics, and whether the retrained run kept its solution."""
    rows = []
    for r in table(f"{STEM}_picks.csv").to_dict("records"):
        mapping = "final.ood_inferential_acc" if r["side"] == "composes" else "final.ood_symmetric_acc"
        kept = r.get("same_solution")
        rows.append([r["side"], r["set"], f"`{r['run_id']}`", r["preset"], _gamma(r["gamma"], r["ref_width"]),
                     f"{r['weight_decay']:g}", num(r["final.id_acc"]), num(r[mapping]),
                     num(r.get(f"retrained.{mapping}")), {True: "yes", False: "no"}.get(kept, "not retrained")])
    return md_table(["side", "set", "run", "sweep", "init", "wd", "ID", "its mapping, committed", "retrained",
                     "same solution"], rows)


def _side(r: dict, side: str) -> str:
    return f"{num(r[side + '_mean'])} ({num(r[side + '_min'])} to {num(r[side + '_max'])})"


PAPER = {">": "composes above", "<": "composes below", "parallel": "composes: nearly parallel",
         "low": "memorizes: always low", "two directions": "composes: two directions"}


def claim_table(claim: str, main: bool = False) -> str:
    """Each measure of ``claim`` on the clean picks: the composing runs, the cleanest memorizing runs and the
    matched ones (same sweep and gamma as the composing runs), the paper's statement and the two readings.
    ``main``: the judged measures on the held-out pair's inputs only (no single-input or raw-attention rows)."""
    j = table(f"{STEM}_judged.csv")
    j = j[j.claim == claim]
    if main:
        j = j[j.kind.notna() & ~j.measure.str.startswith(("example ", "att "))]
    first, matched = j[j.comparison == "cleanest"], j[j.comparison == "matched"].set_index("measure")
    n_a, n_b, n_m = int(first.a_n.iloc[0]), int(first.b_n.iloc[0]), int(matched.b_n.iloc[0])
    rows = [[f"{r['label']} (`{r['measure']}`)", _side(r, "a"), _side(r, "b"), _side(matched.loc[r["measure"]], "b"),
             PAPER.get(r["kind"], "") if isinstance(r["kind"], str) else "", r["reading"],
             matched.loc[r["measure"], "reading"]] for r in first.to_dict("records")]
    return md_table(["measure", f"composes ({n_a} runs)", f"memorizes ({n_b} runs)", f"memorizes, matched ({n_m} runs)",
                     "the paper", "ours", "ours, matched"], rows)


def init_table(claim: str, stem: str = STEM) -> str:
    """The measures of ``claim`` read as an init contrast (every run of each init), from ``stem``'s tables
    (``STEM``: the journal grid's picks; ``DEMO_STEM``: the demo's seeds, the earlier reading; ``MIRROR_STEM``: the
    mirror task at the paper's data size, :mod:`anchorlab.papers.analysis.mirror_init`)."""
    j = table(f"{stem}_judged.csv")
    j = j[(j.claim == claim) & j.comparison.str.startswith("init")]
    init = table(f"{stem}_init.csv")
    paper = {">": "small above large", "<": "small below large", "two directions": "small: two directions"}
    rows = [[f"{r['label']} (`{r['measure']}`)", _side(r, "a"), _side(r, "b"),
             paper.get(r["kind"], "") if isinstance(r["kind"], str) else "", r["reading"]]
            for r in j.to_dict("records")]
    n = init.groupby("side").size()
    return md_table(["measure", f"small init, {_init_gamma('small_init', stem)} ({n['small_init']} runs)",
                     f"large init, {_init_gamma('large_init', stem)} ({n['large_init']} runs)", "the paper",
                     "ours"], rows)


def claim_status(claim: str, comparisons: tuple[str, ...] = ("cleanest", "matched"),
                 stems: tuple[str, ...] = (STEM,)) -> Callable[[], str]:
    """The claim's status by the legend's rule over ``comparisons``, from the judged tables of ``stems``."""
    def status() -> str:
        import pandas as pd

        from anchorlab.papers.analysis.clean_mechanism import claim_status as rule

        return rule(pd.concat([table(f"{s}_judged.csv") for s in stems], ignore_index=True), claim, comparisons)
    return status


def _judged(claim: str, comparison: str, stem: str = STEM) -> pd.DataFrame:
    """``claim``'s judged measures (those with a direction or level) in ``comparison``, from ``stem``'s table."""
    j = table(f"{stem}_judged.csv")
    return j[(j.claim == claim) & j.kind.notna() & (j.comparison == comparison)]


def claim_ours(claim: str, comparison: str = "cleanest") -> Callable[[], str]:
    """The claim's first judged measure in ``comparison``, how many judged measures read as the paper, and (where
    fewer) how many of those clear the status's bar: the sides apart, or the level met."""
    def ours() -> str:
        j = _judged(claim, comparison)
        top = j.iloc[0]
        good = j.reading.str.startswith("as the paper").sum()
        met = j.reading.isin(["as the paper, apart", "as the paper"]).sum()   # the status's bar: apart, or level met
        who = "small vs large init (journal task)" if comparison == "init" else "composing vs memorizing (clean picks)"
        return (f"{num(top.a_mean)} vs {num(top.b_mean)}, {who} (`{top.measure}`); {good} of {len(j)} measures "
                f"as the paper" + (f", {met} apart" if met < good else ""))
    return ours


def claim_runs(claim: str, comparisons: tuple[str, ...] = ("cleanest",),
               stems: tuple[str, ...] = (STEM,)) -> Callable[[], str]:
    """The runs ``claim``'s status reads, a side each per comparison (the status table's seeds column, which would
    otherwise give the sweep's seeds where the status reads picks): comparison i read from ``stems[i]``."""
    def runs() -> str:
        sides = []
        for comparison, stem in zip(comparisons, stems):
            j = _judged(claim, comparison, stem)
            sides.append(f"{int(j.a_n.max())}+{int(j.b_n.max())}")
        return ", ".join(sides) + (" runs" if comparisons[0].startswith("init") else " picks")
    return runs


def spectrum(top_k: int = 5) -> str:
    """NeurIPS Fig. 7's quantity: the key embeddings' covariance eigenvalues as shares of the trace, the mean
    over each side's runs (range), largest first: the clean picks, the init contrast on the journal's task and on
    the mirror task at the paper's data size."""
    rows = []
    for stem, task in ((STEM, "journal task"), (MIRROR_STEM, "mirror task, 900k sequences")):
        s = table(f"{stem}_spectra.csv")
        s = s[s["index"] <= top_k]
        for (side, st), g in s.groupby(["side", "set"], sort=False):
            cells = [f"{num(v.share.mean())} ({num(v.share.min())} to {num(v.share.max())})"
                     for _, v in g.groupby("index")]
            label = (f"{side.split('_')[0]} init, {_init_gamma(side, stem)} ({task})" if st == "init"
                     else f"{side} ({st}, clean picks)")
            rows.append([f"{label}, {g.run_id.nunique()} runs", *cells])
    return md_table(["runs", *[f"eigenvalue {i}" for i in range(1, top_k + 1)]], rows)


def scale() -> str:
    """The sweeps the clean picks came from, beside the paper's mechanism run."""
    sweeps = dict.fromkeys(table(f"{STEM}_picks.csv").preset)
    return scale_table([*(("ours", s) for s in sweeps), ("paper", "mechanism_paper")])


def cell_scale() -> str:
    """The std-matched cell's mechanism sweep, beside the paper's mechanism run."""
    return scale_table([("ours", "mechanism_cpu"), ("paper", "mechanism_paper")])


register_study("clean-picks", "the mechanism claims' (C4-C7) clean picks and the sweeps they came from", {
    "clean-picks": picks, "clean-scale": scale, "mech-cell-scale": cell_scale,
})
