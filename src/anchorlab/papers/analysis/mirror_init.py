"""NeurIPS Fig. 7 on its own task: the init contrast of C7 (and the journal's Fig. 4D contrast of C5) read on the
mirror task at the paper's data size, from the scale ladder's finished runs.

The rule, fixed before any of these runs was read:

- runs: the ladder's ``w128 x 900k`` rung (900k training sequences, the paper's data size, batch and the 1/2x
  clock), the papers' op set, paper gamma 0.8 (small init) against 0.3 (large init), every seed the ladder
  finished, each run whatever its solution (the paper's Fig. 7 is drawn by init, not by solution);
- measures, bars and readings: those of the journal-task contrast
  (:data:`~anchorlab.papers.analysis.clean_mechanism.MEASURES`, ``LEVELS``), judged as comparison
  :data:`COMPARISON`;
- C7's status reads this comparison beside the journal task's (reproduced only when every measure reads as the
  paper in both).

``python -m anchorlab.papers.analysis.mirror_init --ladder docs/figures/scale_ladder_cpu.csv --runs DIR --out
docs/figures`` writes ``fig7_mirror_cpu_{init,judged,spectra}.csv`` and the spectra figure.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

COMPARISON = "init, mirror task"
RUNG = "w128 x 900k"
OP_SET = "{1:+5,2:+1,3:-2,4:-8} (4,3) held out, (3,4)->x-6"
SIDES = {0.8: "small_init", 0.3: "large_init"}   # paper gamma -> side
STEM = "fig7_mirror_cpu"


def ladder_rows(ladder: "pd.DataFrame", runs: Path, rung: str = RUNG, op_set: str = OP_SET) -> "pd.DataFrame":
    """The rule's runs from the ladder's per-run table: run_id, side, seed, paper_gamma and run_dir (under
    ``runs/<run_id>``). A missing run directory is an error naming it: the reading never silently drops a seed."""
    t = ladder[(ladder.rung == rung) & (ladder.op_set == op_set) & ladder.paper_gamma.isin(list(SIDES))]
    if t.empty:
        raise ValueError(f"ladder: no run on rung {rung!r} and op set {op_set!r} at paper gamma "
                         f"{' or '.join(f'{g:g}' for g in SIDES)}")
    t = t.assign(side=t.paper_gamma.map(SIDES), run_dir=[str(runs / r) for r in t.run_id])
    missing = [d for d in t.run_dir if not (Path(d) / "config.yaml").exists()]
    if missing:
        raise FileNotFoundError(f"runs: no finished run at {', '.join(missing)}")
    t = t[["run_id", "side", "seed", "paper_gamma", "run_dir"]]
    return t.sort_values(["side", "seed"], ascending=[False, True]).reset_index(drop=True)   # small init first


def main(argv: list[str] | None = None) -> int:
    import argparse

    import pandas as pd

    from anchorlab.papers.analysis.clean_mechanism import init_labels, init_tables
    from anchorlab.papers.plots.spectrum import plot_spectra

    ap = argparse.ArgumentParser(prog="python -m anchorlab.papers.analysis.mirror_init",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--ladder", required=True, type=Path, help="the ladder's per-run table (scale_ladder_cpu.csv)")
    ap.add_argument("--runs", required=True, type=Path, help="the folder holding the ladder's runs by run id")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--stem", default=STEM)
    a = ap.parse_args(argv)
    rows = ladder_rows(pd.read_csv(a.ladder), a.runs)
    emb, judged, spec = init_tables(rows)
    judged = judged.assign(comparison=COMPARISON)
    a.out.mkdir(parents=True, exist_ok=True)
    emb.to_csv(a.out / f"{a.stem}_init.csv", index=False)
    judged.to_csv(a.out / f"{a.stem}_judged.csv", index=False)
    spec.to_csv(a.out / f"{a.stem}_spectra.csv", index=False)
    title = "the mirror task at 900k sequences: small vs large init"
    plot_spectra(spec, labels=init_labels(emb), titles=(title,)).savefig(a.out / f"{a.stem}_spectra.png", dpi=110)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
