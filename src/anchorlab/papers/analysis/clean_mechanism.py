"""The mechanism claims (C4, C5, C7) measured as the paper measures them, on the clean picks.

Inputs: the retrained picks of :mod:`anchorlab.papers.clean_picks` (``retrained.csv``). Per run
(:func:`measures`):

- C4, information flow (NeurIPS Fig. 3): on inputs of the held-out pair (keys from the test split, the
  paper's Fig. 3 input is one of them), every role-to-role edge by its contribution to the last position's
  output (:func:`anchorlab.analysis.attention.output_contributions`), the raw attention beside it (``att``
  prefix), and the contributions on the paper's one input (``example`` prefix).
- C5, fused vectors (NeurIPS §5.2, Fig. 4): the raw levels of the cosines (:func:`cosine_levels`) of X_ao(2)
  (equal-target vs the rest) and of V(2) at the first anchor; the journal's Fig. 4D (second anchor masked)
  as its own contrast.
- C7, embeddings (NeurIPS Fig. 5c-d, App. B Fig. 7): the covariance spectrum's top-two share and
  participation ratio, the step-3 / step-4 directions in the leading PC plane, the magnitude ordering beside.

:func:`judged` reads every measure against the paper's statement (:data:`MEASURES`): a direction between
the two solutions (composes above / below memorizes; ``apart`` when the sides' ranges do not meet) or a level
(every run of a side beyond the bar the paper's words set, :data:`LEVELS`), for each comparison: the cleanest
picks of both sides, and the composing picks against the memorizing runs of their own sweep and gamma.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd
    import torch

    from anchorlab.train import RunResult

# the bars that the paper's words set for C5's levels, fixed before the clean picks were measured:
# "nearly parallel" = mean raw cosine of equal-target X_ao(2) vectors >= 0.9; "always low" = mean |cosine| <= 0.3
# C7's "steps of 3 and 4 from two directions" (NeurIPS Fig. 5c): every run of the small-init / composing side has
# its mean +3 and +4 directions at least 45 degrees apart (halfway between one direction and orthogonal). Fixed
# after the angles were first shown unjudged. The init contrast (the status's comparison) reads the same for any bar
# above 0.2 degrees; the clean picks' composing runs (31-46 degrees) would read as the paper for a bar up to 31.
LEVELS = {"parallel": 0.9, "low": 0.3, "two directions": 45.0}
# (claim, column, label, kind): kind ">" / "<": composes above / below memorizes; "parallel" / "low" /
# "two directions": a level the composing (or small-init) / memorizing / composing side must reach; "" shown,
# not judged
MEASURES: list[tuple[str, str, str, str]] = [
    ("C4", "L0 anchors->key", "layer 1: the anchors read the key (inferential route)", ">"),
    ("C4", "L1 last->anchors", "layer 2: the last token reads the anchors (inferential route)", ">"),
    ("C4", "L0 last->anchors", "layer 1: the last token merges the anchors (symmetric route)", "<"),
    ("C4", "L1 last->key", "layer 2: the last token reads the key (symmetric route)", "<"),
    ("C4", "example L0 anchors->key", "the paper's input: layer 1, anchors read the key", ">"),
    ("C4", "example L1 last->anchors", "the paper's input: layer 2, last reads the anchors", ">"),
    ("C4", "example L0 last->anchors", "the paper's input: layer 1, last merges the anchors", "<"),
    ("C4", "example L1 last->key", "the paper's input: layer 2, last reads the key", "<"),
    ("C4", "att L0 anchors->key", "raw attention: layer 1, anchors read the key", ""),
    ("C4", "att L1 last->anchors", "raw attention: layer 2, last reads the anchors", ""),
    ("C4", "att L0 last->anchors", "raw attention: layer 1, last merges the anchors", ""),
    ("C4", "att L1 last->key", "raw attention: layer 2, last reads the key", ""),
    ("C5", "ao2 equal_mean", "X_ao(2), equal targets: mean cosine (composes: nearly parallel)", "parallel"),
    ("C5", "ao2 equal_abs", "X_ao(2), equal targets: mean abs cosine (memorizes: always low)", "low"),
    ("C5", "ao2 unequal_abs", "X_ao(2), other pairs: mean abs cosine (memorizes: always low)", "low"),
    ("C5", "ao2 unequal_mean", "X_ao(2), other pairs: mean cosine", ""),
    ("C5", "v2 equal_mean", "V(2) at the first anchor, equal g(x; a1): mean cosine", ">"),
    ("C5", "v2 unequal_mean", "V(2) at the first anchor, other pairs: mean cosine", ""),
    ("C5", "masked contrast", "second anchor masked: contrast by g(x; a1) (journal Fig. 4D)", ">"),
    ("C5", "masked contrast centered", "second anchor masked, centered (not the paper's raw cosines)", ""),
    ("C7", "top2_share", "embedding covariance: share of the top two eigenvalues (Fig. 7)", ">"),
    ("C7", "participation", "embedding covariance: participation ratio (Fig. 7)", "<"),
    ("C7", "consistency_3", "+3 moves in the PC plane: one direction (Fig. 5c)", ">"),
    ("C7", "consistency_4", "+4 moves in the PC plane: one direction (Fig. 5c)", ">"),
    ("C7", "angle_deg", "angle between the +3 and +4 directions (two directions: 45 degrees or more)",
     "two directions"),
    ("C7", "ordinal_spearman", "magnitude ordering: Spearman with the key order along a leading PC", ">"),
]
EDGES = ("L0 anchors->key", "L1 last->anchors", "L0 last->anchors", "L1 last->key")
COMPARISONS = {"cleanest": ("cleanest", "cleanest"), "matched": ("cleanest", "matched")}


def _edges(summary: "pd.DataFrame", prefix: str) -> dict[str, float]:
    s = summary.set_index(["layer", "edge"]).score
    return {f"{prefix}{e}": float(s.get((int(e[1]), e.split(" ")[1]), np.nan)) for e in EDGES}


def _example(run: Any, residual: float) -> dict[str, float]:
    """Contributions on the paper's Fig. 3 input, where it fits the task (NaN otherwise)."""
    import torch

    from anchorlab.analysis.attention import attention_patterns, flow_scores, flow_summary, output_contributions
    from anchorlab.analysis.mechanism.common import PAPER_EXAMPLE, PAPER_EXAMPLE_KEY_POS, paper_example_fits

    if not paper_example_fits(run.task):
        return {f"example {e}": np.nan for e in EDGES}
    pats = output_contributions(attention_patterns(run.model, torch.tensor([PAPER_EXAMPLE])), residual)
    return _edges(flow_summary(flow_scores(pats, torch.tensor([PAPER_EXAMPLE_KEY_POS]))), "example ")


def measures(run: "RunResult", n_inputs: int = 2000, n_draws: int = 4, residual: float = 0.5,
             seed: int = 0) -> dict[str, float]:
    """Every measure of :data:`MEASURES` for one loaded run (:func:`anchorlab.train.load_run`; see the module
    docstring)."""
    from anchorlab.analysis.mechanism.flow import FlowScoresOptions, compute_flow_scores
    from anchorlab.analysis.mechanism.representations import (CosAo2Options, CosV2Options, compute_cos_ao2,
                                                              compute_cos_v2)
    from anchorlab.analysis.similarity import cosine_levels

    row: dict[str, float] = {}
    for weight, prefix in (("contribution", ""), ("attention", "att ")):
        opts = FlowScoresOptions(n_inputs=n_inputs, split="test", by_pair=False, pairs="held_out", weight=weight,
                                 residual=residual, seed=seed)
        row.update(_edges(compute_flow_scores(run, opts)["summary"], prefix))
    row.update(_example(run, residual))
    ao = cosine_levels(compute_cos_ao2(run, CosAo2Options(n_draws=n_draws, seed=seed))["cosine"])
    v2 = cosine_levels(compute_cos_v2(run, CosV2Options(n_draws=n_draws, seed=seed))["cosine"])
    row.update({f"ao2 {k}": v for k, v in ao.items()})
    row.update({f"v2 {k}": v for k, v in v2.items()})
    row.update(masked_contrasts(run, n_draws, seed))
    row.update(embedding_measures(run.model.embed.weight))
    return row


def spectrum(E: "torch.Tensor", top_k: int = 10) -> list[float]:
    """The ``top_k`` largest eigenvalues of the key embeddings' covariance (``E``: vocab x d_model), as shares of
    its trace."""
    from anchorlab.analysis.embedding import DEFAULT_TOKENS, covariance_spectrum

    ev = covariance_spectrum(E, DEFAULT_TOKENS)
    return (ev[:top_k] / ev.sum()).tolist()


def _spectrum_rows(E: "torch.Tensor", side: str, set_: str, run_id: str, top_k: int) -> list[dict[str, Any]]:
    return [{"side": side, "set": set_, "run_id": run_id, "index": i + 1, "share": v}
            for i, v in enumerate(spectrum(E, top_k))]


def per_run(retrained: "pd.DataFrame", top_k: int = 10, **kw: Any) -> tuple["pd.DataFrame", "pd.DataFrame"]:
    """``retrained.csv`` (the picks that reached their solution again) -> (one row per run: side, set, run id,
    gamma, the retrained final metrics, then :func:`measures`; the long spectra table side / set / run_id /
    index (1 = largest) / share, :func:`spectrum`), each run loaded once."""
    import pandas as pd

    from anchorlab.train import load_run

    keep = ["side", "set", "rank", "run_id", "preset", "gamma", "weight_decay", "retrained.final.id_acc",
            "retrained.final.ood_inferential_acc", "retrained.final.ood_symmetric_acc"]
    rows, spec = [], []
    for r in retrained[retrained.same_solution.astype(bool)].to_dict("records"):
        run = load_run(r["run_dir"])
        rows.append({**{k: r[k] for k in keep}, **measures(run, **kw)})
        spec += _spectrum_rows(run.model.embed.weight, r["side"], r["set"], r["run_id"], top_k)
    return pd.DataFrame(rows), pd.DataFrame(spec)


def _read(a: "pd.Series", b: "pd.Series", kind: str) -> str:
    """How a measure reads against the paper: ``a`` is the side the paper puts above (the composing runs, or the
    small init), ``b`` the other; levels bind ``a`` (``parallel``, ``two directions``) or ``b`` (``low``)."""
    if not kind or a.empty or b.empty:
        return "(shown, not judged)"
    if kind in ("parallel", "two directions"):
        return "as the paper" if (a >= LEVELS[kind]).all() else "not as the paper"
    if kind == "low":
        return "as the paper" if (b <= LEVELS["low"]).all() else "not as the paper"
    up = a.mean() > b.mean() if kind == ">" else a.mean() < b.mean()
    apart = a.min() > b.max() if kind == ">" else a.max() < b.min()
    return ("as the paper, apart" if apart else "as the paper, overlapping") if up else "the other way"


def judge(a: "pd.DataFrame", b: "pd.DataFrame", comparison: str, claims: tuple[str, ...] = ("C4", "C5", "C7"),
          a_name: str = "composes", b_name: str = "memorizes") -> "pd.DataFrame":
    """One row per measure of :data:`MEASURES` (of ``claims``) present in both frames: comparison, claim,
    measure, label, kind, the sides' names (``a``, ``b``), each side's n / mean / min / max (``a_*``, ``b_*``)
    and the reading (:func:`_read`)."""
    import pandas as pd

    rows = []
    for claim, col, label, kind in MEASURES:
        if claim not in claims or col not in a or col not in b:
            continue
        x, y = a[col].astype(float), b[col].astype(float)
        rows.append({"comparison": comparison, "claim": claim, "measure": col, "label": label, "kind": kind,
                     "a": a_name, "b": b_name, "a_n": len(x), "a_mean": x.mean(), "a_min": x.min(), "a_max": x.max(),
                     "b_n": len(y), "b_mean": y.mean(), "b_min": y.min(), "b_max": y.max(),
                     "reading": _read(x, y, kind)})
    return pd.DataFrame(rows)


def judged(runs: "pd.DataFrame") -> "pd.DataFrame":
    """:func:`judge` for the clean picks' two comparisons (:data:`COMPARISONS`): the composing picks against
    the cleanest memorizing picks, and against the memorizing runs of their own sweep and gamma."""
    import pandas as pd

    parts = []
    for name, (cset, mset) in COMPARISONS.items():
        parts.append(judge(runs[(runs.side == "composes") & (runs.set == cset)],
                           runs[(runs.side == "memorizes") & (runs.set == mset)], name))
    return pd.concat(parts, ignore_index=True)


def masked_contrasts(run: Any, n_draws: int = 4, seed: int = 0) -> dict[str, float]:
    """Journal Fig. 4D's contrast with the second anchor masked: on the raw cosines the paper uses (``masked
    contrast``) and centered per filler draw (``masked contrast centered``, the earlier pick's reading)."""
    from anchorlab.analysis.mechanism.masks import MaskAnchor2Options, anchor2_masked_cosines
    from anchorlab.analysis.similarity import contrast_of

    return {f"masked contrast{' centered' if c else ''}": contrast_of(anchor2_masked_cosines(
        run, MaskAnchor2Options(n_draws=n_draws, seed=seed, center=c))) for c in (False, True)}


def gamma_span(gammas: Any) -> str:
    """``0.6-0.8`` for the gammas of a side's runs, ``0.4`` where they are one (the init contrast's labels)."""
    g = sorted(set(float(x) for x in gammas))
    return f"{g[0]:g}" + (f"-{g[-1]:g}" if len(g) > 1 else "")


def gamma_label(runs: "pd.DataFrame") -> str:
    """``journal gamma 0.6-0.8``: the gammas of one side's runs (columns ``gamma``, ``ref_width``), named by the
    convention they are read in (:func:`anchorlab.papers.gammas.convention`)."""
    from anchorlab.papers.gammas import convention

    return f"{convention(runs.ref_width.iloc[0])} gamma {gamma_span(runs.gamma)}"


def init_labels(emb: "pd.DataFrame") -> dict[tuple[str, str], str]:
    """The spectra legend's labels of an init contrast (:func:`init_contrast`'s per-run table): each side with
    the gammas its runs have."""
    return {("init", side): f"{side.split('_')[0]} init ({gamma_label(g)})" for side, g in emb.groupby("side")}


def embedding_measures(E: "torch.Tensor") -> dict[str, float]:
    """C7's measures of one embedding matrix (vocab, d_model) over the key tokens 40..79."""
    from anchorlab.analysis.embedding import (DEFAULT_TOKENS, covariance_participation_ratio, ordinal_rank_correlation,
                                              step_directions, top_variance_fraction)

    return {"top2_share": top_variance_fraction(E, DEFAULT_TOKENS, 2),
            "participation": covariance_participation_ratio(E, DEFAULT_TOKENS),
            **step_directions(E, DEFAULT_TOKENS), "ordinal_spearman": ordinal_rank_correlation(E, DEFAULT_TOKENS)}


def init_contrast(runs: "pd.DataFrame", top_k: int = 10, n_draws: int = 4,
                  seed: int = 0) -> tuple["pd.DataFrame", "pd.DataFrame"]:
    """The init contrast as the papers draw it, every seed on its own: C7 (NeurIPS Fig. 7, journal Fig. 5B) and
    the journal's Fig. 4D (the second anchor masked: ``masked contrast``). From rows with ``run_id``, ``side``
    (``small_init`` / ``large_init``), ``seed`` and ``run_dir``: (per-run measures with each run's gamma and
    ref_width, long spectra table side / run_id / index / share)."""
    import pandas as pd

    from anchorlab.train import load_run

    rows, spec = [], []
    for r in runs.to_dict("records"):
        run = load_run(r["run_dir"])
        rows.append({"side": r["side"], "seed": r["seed"], "run_id": r["run_id"], "gamma": run.cfg.init.gamma,
                     "ref_width": run.cfg.init.ref_width, **masked_contrasts(run, n_draws, seed),
                     **embedding_measures(run.model.embed.weight)})
        spec += _spectrum_rows(run.model.embed.weight, r["side"], "init", r["run_id"], top_k)
    return pd.DataFrame(rows), pd.DataFrame(spec)


def init_tables(runs: "pd.DataFrame", **kw: Any) -> tuple["pd.DataFrame", "pd.DataFrame", "pd.DataFrame"]:
    """:func:`init_contrast` of ``runs`` and its judgement, small against large init (comparison ``init``, the
    measures of C5 and C7 it has): (per-run measures, judged, spectra)."""
    emb, spec = init_contrast(runs, **kw)
    judged_ = judge(emb[emb.side == "small_init"], emb[emb.side == "large_init"], "init", ("C5", "C7"),
                    "small_init", "large_init")
    return emb, judged_, spec


AGAINST = ("the other way", "not as the paper")


def claim_status(judgement: "pd.DataFrame", claim: str, comparisons: tuple[str, ...] = tuple(COMPARISONS)) -> str:
    """A claim's status by the results' legend, from :func:`judge` rows: ``reproduced`` when every judged measure
    of the claim reads as the paper (a direction with the sides apart, a level met) in every one of
    ``comparisons``; ``not reproduced`` when most of them go against the paper in the first comparison;
    ``partly`` otherwise."""
    j = judgement[(judgement.claim == claim) & (judgement.kind.fillna("") != "")
                  & judgement.comparison.isin(list(comparisons))]
    if j.empty:
        raise ValueError(f"claim: no judged measure of {claim!r} in {', '.join(comparisons)}")
    if j.reading.isin(["as the paper, apart", "as the paper"]).all():
        return "reproduced"
    first = j[j.comparison == comparisons[0]]
    return "not reproduced" if 2 * first.reading.isin(AGAINST).sum() > len(first) else "partly"


def main(argv: list[str] | None = None) -> int:
    """``python -m anchorlab.papers.analysis.clean_mechanism --runs DIR --out DIR``: the tables from the clean
    picks' folder (``picks.csv``, ``retrained.csv`` and the runs)."""
    import argparse

    import pandas as pd

    ap = argparse.ArgumentParser(prog="python -m anchorlab.papers.analysis.clean_mechanism",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--runs", required=True, type=Path, help="the clean picks' folder (retrained.csv)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--stem", default="clean_mechanism_cpu")
    ap.add_argument("--init-table", type=Path, help="C7's init contrast: a table with run_id, arm (small_init / "
                    "large_init), seed and op_set (the demo's rate table), its runs under --init-runs/runs/<run_id>")
    ap.add_argument("--init-runs", type=Path)
    ap.add_argument("--op-set", default="{1:+5,2:+1,3:-2,4:-8}", help="the init table's rows on these steps only")
    ap.add_argument("--figures", action="store_true", help="also the claim pages' lead figures "
                    "(anchorlab.papers.analysis.clean_figures)")
    a = ap.parse_args(argv)
    retrained = pd.read_csv(a.runs / "retrained.csv")
    a.out.mkdir(parents=True, exist_ok=True)
    got = ["run_id", "side", "set", *[c for c in retrained.columns if c.startswith("retrained.")], "same_solution"]
    picks = pd.read_csv(a.runs / "picks.csv").merge(retrained[got], on=["run_id", "side", "set"], how="left")
    picks.to_csv(a.out / f"{a.stem}_picks.csv", index=False)
    runs, clean_spec = per_run(retrained)
    runs.to_csv(a.out / f"{a.stem}_runs.csv", index=False)
    judgement, spec = [judged(runs)], [clean_spec]
    if a.init_table is not None:
        t = pd.read_csv(a.init_table)
        t = t[t.op_set == a.op_set].rename(columns={"arm": "side"})
        t = t.assign(run_dir=[str(a.init_runs / "runs" / r) for r in t.run_id])
        emb, init_judged, sp = init_tables(t)
        emb.to_csv(a.out / f"{a.stem}_init.csv", index=False)
        judgement.append(init_judged)
        spec.append(sp)
    pd.concat(judgement, ignore_index=True).to_csv(a.out / f"{a.stem}_judged.csv", index=False)
    spec = pd.concat(spec, ignore_index=True)
    spec.to_csv(a.out / f"{a.stem}_spectra.csv", index=False)
    from anchorlab.papers.plots.spectrum import plot_spectra

    labels = init_labels(emb) if a.init_table is not None else {}
    plot_spectra(spec, labels=labels).savefig(a.out / f"{a.stem}_spectra.png", dpi=110)
    if a.figures:
        from anchorlab.papers.analysis import clean_figures as cf

        cf.draw(cf.lead_runs(retrained), cf.PICK_FIGURES, a.out, a.stem)
        if a.init_table is not None:
            cf.draw(cf.init_runs(t), cf.INIT_FIGURES, a.out, a.stem)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
