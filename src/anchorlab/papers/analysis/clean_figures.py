"""The lead figures of the mechanism claims' pages, drawn from the runs their statuses read.

C4 and C5 read the clean picks (:mod:`anchorlab.papers.clean_picks`): their figures are the first-ranked
composing and memorizing run of the cleanest set, the information flow by contribution (what the status
judges; NeurIPS Fig. 3) and the X_ao(2) cosines (NeurIPS Fig. 4a-b). C7 reads the init contrast on the
journal's task: its figures are the first run of each init, the key embeddings' PCA (NeurIPS Fig. 5c-d).
Each figure is the library's analysis (:func:`anchorlab.analysis.registry.run_analysis`), copied as
``<stem>_<analysis>_<side>.png``, and the sides side by side as ``<stem>_<analysis>.png`` (the results page's).
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

# analysis -> its options: flow as the status judges it (contribution, the skip path at one half)
PICK_FIGURES: dict[str, dict[str, object]] = {"flow": {"weight": "contribution", "residual": 0.5}, "cos-ao2": {}}
INIT_FIGURES: dict[str, dict[str, object]] = {"embedding": {}}


def lead_runs(retrained: pd.DataFrame) -> dict[str, str]:
    """Side -> run directory of the first-ranked pick of the cleanest set, per side (composes, memorizes)."""
    c = retrained[(retrained.set == "cleanest") & retrained.picked.astype(bool)].sort_values("rank")
    return {side: str(g.run_dir.iloc[0]) for side, g in c.groupby("side", sort=False)}


def init_runs(init: pd.DataFrame) -> dict[str, str]:
    """Side (small_init, large_init) -> run directory of the side's first row in the init table (``side``,
    ``run_dir``; the picks' table lists each side in rank order, the demo's by seed)."""
    missing = {"small_init", "large_init"} - set(init.side)
    if missing:
        raise ValueError(f"side: no run for {', '.join(sorted(missing))}")
    return {side: str(init[init.side == side].run_dir.iloc[0]) for side in ("small_init", "large_init")}


def side_by_side(pngs: list[Path], dest: Path) -> Path:
    """The images in one row, in order, without axes."""
    import matplotlib.pyplot as plt

    images = [plt.imread(p) for p in pngs]
    height = max(im.shape[0] for im in images)
    fig, axes = plt.subplots(1, len(images), figsize=(sum(im.shape[1] for im in images) / 130, height / 130),
                             gridspec_kw={"width_ratios": [im.shape[1] for im in images]})
    for ax, im in zip(axes, images):
        ax.imshow(im)
        ax.axis("off")
    fig.subplots_adjust(left=0, right=1, top=1, bottom=0, wspace=0.02)
    fig.savefig(dest, dpi=90)   # a third smaller than the panels: the page shows it at its width anyway
    plt.close(fig)
    return dest


def draw(runs: dict[str, str], analyses: dict[str, dict[str, object]], out: Path, stem: str) -> list[Path]:
    """Each analysis on each side's run, its figure copied to ``out/<stem>_<analysis>_<side>.png``, then the sides
    in one row (``out/<stem>_<analysis>.png``, in ``runs``' order)."""
    from anchorlab.analysis.registry import run_analysis

    made = []
    for name, opts in analyses.items():
        sides = []
        for side, run_dir in runs.items():
            png = run_analysis(run_dir, name, out / "analyses" / side, opts)["png"]
            sides.append(shutil.copyfile(png, out / f"{stem}_{name.replace('-', '_')}_{side}.png"))
        made += [*sides, side_by_side(sides, out / f"{stem}_{name.replace('-', '_')}.png")]
    return [Path(p) for p in made]
