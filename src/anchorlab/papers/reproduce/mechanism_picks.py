"""Which runs the mechanism figures analyze: per seed, a small-init run that composes and a large-init run that
memorizes, picked from the figure's sweep by one stated rule (:func:`pick_runs`).

The candidates (:func:`candidate_table`) are the completed runs of the spec a sweep directory was last run
with (``sweep.yaml``), so a directory that also holds Fig. 2's runs gives this figure's runs only; where
they span several depths, the depth-2 runs (the papers' mechanism model). One row per run, under the run
table's names: ``init.gamma``, ``model.n_layers`` and the final metrics the rule reads (``final.id_acc``,
``final.ood_inferential_acc``, ``final.ood_symmetric_acc``; the vocabulary of :mod:`anchorlab.papers.eval.judgement`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from anchorlab.config import ConfigError, check_range

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

SIDES = ("small_init", "large_init")
SIDE_MAPPING = {"small_init": "inferential", "large_init": "symmetric"}
SIDE_VERB = {"small_init": "composes", "large_init": "memorizes"}
# the final metrics the rule reads: eval.judgement.MAPPINGS' columns (id, inferential, symmetric; a test checks)
FINAL_METRICS = ("final.id_acc", "final.ood_inferential_acc", "final.ood_symmetric_acc")
MAPPINGS = dict(zip(("id", "inferential", "symmetric"), FINAL_METRICS))
GAMMA = "init.gamma"
CANDIDATE_COLUMNS = ["run_id", "run_dir", "seed", GAMMA, "peak_lr", "model.n_layers", *FINAL_METRICS]
PICK_COLUMNS = ["side", "seed", "picked", "run_id", "peak_lr", GAMMA, *FINAL_METRICS, "eligible",
                "candidates", "note"]


@dataclass(frozen=True)
class PickRule:
    """The bars of :func:`pick_runs`: a run fits when its final ID accuracy >= ``id_min``; it composes when it
    fits and its final inferential accuracy >= ``compose_min``; it memorizes when it fits and its final
    symmetric accuracy >= ``memorize_min`` (0.9 and 0.5: the papers' ID bar and the journal's reasoning
    threshold, as the Fig. 2 cell is judged)."""

    id_min: float = 0.9
    compose_min: float = 0.5
    memorize_min: float = 0.5

    def __post_init__(self) -> None:
        for name in ("id_min", "compose_min", "memorize_min"):
            check_range(name, getattr(self, name), 0.0, 1.0)

    def describe(self) -> str:
        return (f"per seed, the small-init (largest gamma) run with the highest final inferential accuracy among "
                f"those with final ID >= {self.id_min:g} and inferential >= {self.compose_min:g}, and the "
                f"large-init (smallest gamma) run with the highest final symmetric accuracy among those with "
                f"final ID >= {self.id_min:g} and symmetric >= {self.memorize_min:g}; ties go to the higher ID, "
                f"then the lower peak lr; a seed with no such run is reported as none, never replaced")


DEFAULT_RULE = PickRule()


def _spec_run_ids(sweep_dir: Path) -> set[str] | None:
    """Run ids of the spec in ``sweep_dir/sweep.yaml``; None without one (or when it no longer expands)."""
    from anchorlab.sweep.grid import expand
    from anchorlab.sweep.results import sweep_spec

    spec = sweep_spec(sweep_dir)
    if not spec:
        return None
    try:
        return {r.run_id for r in expand(spec)}
    except ConfigError as e:
        log.warning("%s/sweep.yaml does not expand (%s); every completed run is a candidate", sweep_dir, e)
        return None


def candidate_table(sweep_dir: str | Path) -> pd.DataFrame:
    """One row per candidate run of ``sweep_dir`` (see the module docstring), read through the run table
    (:func:`anchorlab.sweep.runtable.run_table`): :data:`CANDIDATE_COLUMNS`, ``seed`` = ``train.init_seed``,
    final metrics NaN where a run lacks them; in run-id order."""
    import pandas as pd

    from anchorlab.papers.runs import run_table

    sweep_dir = Path(sweep_dir)
    ids = _spec_run_ids(sweep_dir)
    t = run_table([sweep_dir])
    if ids is not None and len(t):
        t = t[t.run_id.isin(ids)]
    if t.empty:
        return pd.DataFrame(columns=CANDIDATE_COLUMNS)
    out = pd.DataFrame({"run_id": t.run_id, "run_dir": t.run_dir, "seed": t.seed.astype(int),
                        GAMMA: t[GAMMA].astype(float), "peak_lr": t.peak_lr.astype(float),
                        "model.n_layers": t["model.n_layers"].astype(int),
                        **{m: pd.to_numeric(t.get(m, math.nan)) for m in MAPPINGS.values()}},
                       columns=CANDIDATE_COLUMNS)
    depth = out["model.n_layers"]
    if depth.nunique() > 1:
        out = out[depth == 2]
    return out.reset_index(drop=True)


def pick_runs(candidates: pd.DataFrame, rule: PickRule = DEFAULT_RULE) -> pd.DataFrame:
    """THE rule that picks the runs the mechanism figures analyze (:meth:`PickRule.describe` says it in words).

    ``candidates``: one row per run with ``run_id``, ``seed``, ``init.gamma``, ``peak_lr`` and the final
    ``final.id_acc``, ``final.ood_inferential_acc``, ``final.ood_symmetric_acc``. The small-init side is the runs at
    the largest gamma, the large-init side those at the smallest. For every side and every seed either side has runs
    at, one row: ``picked`` True with the chosen run's id, lr and metrics, or ``picked`` False and no run when
    none of that seed's runs on the side composes (small init) / memorizes (large init); ``eligible``: how
    many of its runs passed the bar, ``candidates``: how many it had, ``note``: the pick or why there is none.
    Columns :data:`PICK_COLUMNS`; rows ordered by side (small init first), then seed."""
    import pandas as pd

    from anchorlab.papers.eval.judgement import per_run_passes

    missing = [c for c in ("run_id", "seed", GAMMA, "peak_lr", *MAPPINGS.values()) if c not in candidates]
    if missing:
        raise ConfigError(f"pick_runs: candidates lack column(s) {', '.join(missing)}")
    if candidates.empty:
        return pd.DataFrame(columns=PICK_COLUMNS)
    gamma = candidates[GAMMA]
    if gamma.nunique() < 2:
        raise ConfigError(f"pick_runs: needs runs at two init rates (init.gamma) at least, got "
                          f"{sorted(gamma.unique())}")
    gammas = {"small_init": gamma.max(), "large_init": gamma.min()}
    rows = []
    for side in SIDES:
        mapping = SIDE_MAPPING[side]
        bar = rule.compose_min if side == "small_init" else rule.memorize_min
        on_side = candidates[gamma == gammas[side]]
        for seed in sorted(candidates.seed.unique()):
            runs = on_side[on_side.seed == seed]
            ok = runs[per_run_passes(runs, mapping, bar, rule.id_min)]
            row = {"side": side, "seed": int(seed), "picked": False, "run_id": None, "peak_lr": math.nan,
                   GAMMA: float(gammas[side]), **dict.fromkeys(MAPPINGS.values(), math.nan),
                   "eligible": len(ok), "candidates": len(runs)}
            if ok.empty:
                best = runs[MAPPINGS[mapping]].max() if len(runs) else math.nan
                row["note"] = (f"none: no run of seed {seed} at gamma {gammas[side]:g} {SIDE_VERB[side]} "
                               f"({len(runs)} run(s); best final {mapping} {best:.3g}; bar ID >= "
                               f"{rule.id_min:g}, {mapping} >= {bar:g})")
                log.warning("%s, seed %s: %s", side, seed, row["note"])
            else:
                top = ok.sort_values([MAPPINGS[mapping], MAPPINGS["id"], "peak_lr", "run_id"],
                                     ascending=[False, False, True, True]).iloc[0]
                row.update(picked=True, run_id=top.run_id, peak_lr=float(top.peak_lr),
                           **{m: float(top[m]) for m in MAPPINGS.values()},
                           note=f"{SIDE_VERB[side]}: {mapping} {top[MAPPINGS[mapping]]:.3g} at lr "
                                f"{top.peak_lr:g} (best of {len(ok)} eligible of {len(runs)})")
            rows.append(row)
    return pd.DataFrame(rows, columns=PICK_COLUMNS)


def picks_line(picks: pd.DataFrame) -> str:
    """``small init composes: 2 of 3 seeds (none: seed 2); large init memorizes: 3 of 3 seeds``."""
    parts = []
    for side in SIDES:
        p = picks[picks.side == side]
        none = sorted(p[~p.picked.astype(bool)].seed)
        tail = f" (none: seed {', '.join(map(str, none))})" if none else ""
        parts.append(f"{side.replace('_', ' ')} {SIDE_VERB[side]}: {int(p.picked.sum())} of {len(p)} seeds{tail}")
    return "; ".join(parts)


__all__ = ["PickRule", "DEFAULT_RULE", "SIDES", "candidate_table", "pick_runs", "picks_line"]
