"""The cleanest runs of the journal's own task, picked by one rule and retrained, for the journal-task readings
of the mechanism claims (C7's init contrast, C5's journal Fig. 4D).

Those readings first used the demo's rate runs: a tenth of the clock, where no small-init run reaches an OOD
accuracy of 0.95. The journal grid at half the clock (``journal_fig3_cpu``) holds cleaner runs. The rule
(:class:`JournalRule`), fixed before any pick, takes the grid's committed runs without weight decay (the init
contrast alone) at depth two, and reads each by its final metrics under the text's definitions (ID: the seen
pairs on ID-test keys; OOD: the held-out pairs' composition on both key splits):

- small init: journal gamma >= ``small_min`` (the journal's reasoning phase), final ID >= ``id_min`` and final
  OOD > ``ood_small`` (the issue's bar);
- large init: journal gamma <= ``large_max``, final ID >= ``id_min`` and final OOD < ``ood_large`` (the seen
  pairs fitted, the unseen ones not composed);

up to ``per_side`` runs a side, ranked by OOD (highest first for the small init, lowest for the large), then
ID, then run id. Each is retrained from the preset's config (weights are not committed); a retrained run counts
only when it passes its side's bars again. The output is ``picks.csv``, ``retrained.csv`` and ``init.csv``
(run_id, arm, seed, op_set: the table ``clean_mechanism --init-table`` reads, runs under ``runs/<run_id>``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from anchorlab.config import ConfigError, check_range

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

PRESET = "journal_fig3_cpu"
TABLE = "journal_fig3_cpu.csv"
ARMS = ("small_init", "large_init")


@dataclass(frozen=True)
class JournalRule:
    """The bars of :func:`pick` (module docstring)."""

    id_min: float = 0.95
    ood_small: float = 0.95
    ood_large: float = 0.05
    small_min: float = 0.6
    large_max: float = 0.4
    per_side: int = 3
    n_layers: int = 2

    def __post_init__(self) -> None:
        for name in ("id_min", "ood_small", "ood_large"):
            check_range(name, getattr(self, name), 0.0, 1.0)
        if self.small_min <= self.large_max:
            raise ConfigError(f"small_min: must exceed large_max ({self.large_max:g}), got {self.small_min:g}")
        if self.per_side < 1:
            raise ConfigError(f"per_side: must be >= 1, got {self.per_side!r}")

    def passes(self, arm: str, id_acc: float, ood: float) -> bool:
        """Whether final metrics hold ``arm``'s solution (gamma aside)."""
        if arm not in ARMS:
            raise ConfigError(f"arm: must be one of {', '.join(ARMS)}, got {arm!r}")
        return id_acc >= self.id_min and (ood > self.ood_small if arm == "small_init" else ood < self.ood_large)

    def describe(self) -> str:
        return (f"from {PRESET}'s committed runs at weight decay 0 and depth {self.n_layers}, final metrics (the "
                f"text's ID and OOD): small init = journal gamma >= {self.small_min:g} with ID >= {self.id_min:g} and "
                f"OOD > {self.ood_small:g}; large init = journal gamma <= {self.large_max:g} with ID >= "
                f"{self.id_min:g} and OOD < {self.ood_large:g}; up to {self.per_side} a side, ranked by OOD, then ID, "
                f"then run id")


RULE = JournalRule()


def pick(runs: "pd.DataFrame", rule: JournalRule = RULE) -> "pd.DataFrame":
    """The picks of the grid's run table ``runs`` (its committed columns): arm, rank, run_id, gamma, seed, ID, OOD."""
    import pandas as pd

    base = runs[(runs["optim.weight_decay"] == 0) & (runs["model.n_layers"] == rule.n_layers)]
    out = []
    for arm in ARMS:
        side = base[base["init.gamma"] >= rule.small_min] if arm == "small_init" else \
            base[base["init.gamma"] <= rule.large_max]
        ok = side[[rule.passes(arm, i, o) for i, o in zip(side["final.id_acc"], side["final.ood_acc"])]]
        ok = ok.sort_values(["final.ood_acc", "final.id_acc", "run_id"],
                            ascending=[arm == "large_init", False, True]).head(rule.per_side)
        out += [{"arm": arm, "rank": k, "run_id": r["run_id"], "gamma": r["init.gamma"], "seed": r["train.init_seed"],
                 "final.id_acc": r["final.id_acc"], "final.ood_acc": r["final.ood_acc"], "op_set": r["op_set"]}
                for k, r in enumerate(ok.to_dict("records"), 1)]
    return pd.DataFrame(out, columns=["arm", "rank", "run_id", "gamma", "seed", "final.id_acc", "final.ood_acc",
                                      "op_set"])


def retrain(picks: "pd.DataFrame", out: str | Path, rule: JournalRule = RULE) -> "pd.DataFrame":
    """Train every pick from the preset's config into ``out/runs/<run_id>`` (a finished one is kept: resumable);
    the picks with ``retrained.*`` final metrics and ``same_solution``."""
    import pandas as pd

    from anchorlab.papers.clean_picks import train_or_read
    from anchorlab.sweep.grid import expand

    configs = {r.run_id: r.config for r in expand(PRESET)}
    rows = []
    for r in picks.to_dict("records"):
        if r["run_id"] not in configs:
            raise ConfigError(f"run {r['run_id']}: {PRESET} no longer expands to the committed config")
        d = Path(out) / "runs" / r["run_id"]
        done = train_or_read(configs[r["run_id"]], d, f"{r['run_id']} ({r['arm']}, journal gamma {r['gamma']:g}, "
                             f"seed {r['seed']})")
        got = {f"retrained.{k}": float(done[k].iloc[0]) for k in ("final.id_acc", "final.ood_acc")}
        rows.append({**r, **got, "run_dir": str(d),
                     "same_solution": rule.passes(r["arm"], got["retrained.final.id_acc"],
                                                  got["retrained.final.ood_acc"])})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    """``python -m anchorlab.papers.journal_picks --out DIR [--pick-only]``: pick, write ``picks.csv``, retrain,
    write ``retrained.csv`` and ``init.csv`` (the runs that kept their solution)."""
    import argparse

    import pandas as pd

    ap = argparse.ArgumentParser(prog="python -m anchorlab.papers.journal_picks", description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--table", type=Path, default=Path("docs/figures") / TABLE, help="the grid's committed runs")
    ap.add_argument("--pick-only", action="store_true", help="write picks.csv and stop")
    a = ap.parse_args(argv)
    # retrain as the command line trained the committed runs: glibc's malloc thresholds and flat parameters on
    # (a library call leaves them off, which pages in every step's activations anew)
    from anchorlab.config.process_settings import ask_for_process_settings

    ask_for_process_settings()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    log.setLevel(logging.INFO)
    a.out.mkdir(parents=True, exist_ok=True)
    picks = pick(pd.read_csv(a.table, low_memory=False))
    picks.to_csv(a.out / "picks.csv", index=False)
    log.info("rule: %s\n%s", RULE.describe(), picks.to_string())
    if a.pick_only:
        return 0
    done = retrain(picks, a.out)
    done.to_csv(a.out / "retrained.csv", index=False)
    kept = done[done.same_solution.astype(bool)]
    kept[["run_id", "arm", "seed", "op_set"]].to_csv(a.out / "init.csv", index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
