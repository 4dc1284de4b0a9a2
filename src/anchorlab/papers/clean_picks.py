"""The cleanest composing and memorizing runs of the committed record, picked by one rule and retrained.

The mechanism claims (information flow, fused-vector cosines, ordered embeddings) describe the two solutions;
a run that half composes (final inferential 0.6) or half memorizes (symmetric 0.54) blurs them. This study
picks, from every committed per-run table of the mirror task, the runs that hold a solution most cleanly, by
a rule fixed before any pick (:class:`CleanRule`), and retrains them from their configs (weights are not
committed); a retrained run counts only when it reaches the same solution under the rule's bars.

Candidates (:func:`candidates`): the committed rows (``docs/figures/*.csv`` read as run tables) whose run id a
bundled sweep preset expands to (so the exact config is at hand), on the papers' op set with one held-out pair
and its mirror trained (the run logs a symmetric accuracy), depth two. A run composes cleanly when its final
ID accuracy >= ``id_min`` and its final inferential accuracy >= ``bar``; it memorizes cleanly with the
symmetric accuracy instead. Per side (:func:`pick`): the ``per_side`` eligible runs ranked by that accuracy,
then ID, then fewer planned steps (cheaper to retrain), then less weight decay, then run id; runs over
``max_steps`` planned steps are listed but not picked (a CPU session cannot retrain them). The matched set:
the composing picks' own sweep at their own gamma also holds memorizing runs (the seeds alone decide there);
its ``matched`` cleanest memorizing runs are picked beside them, so that one comparison holds the init fixed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anchorlab.config import ConfigError, check_range

if TYPE_CHECKING:
    import pandas as pd

    from anchorlab.config import ExperimentConfig

log = logging.getLogger(__name__)

SIDES = {"composes": "final.ood_inferential_acc", "memorizes": "final.ood_symmetric_acc"}
COLUMNS = ["side", "set", "rank", "picked", "run_id", "preset", "table", "gamma", "ref_width", "weight_decay",
           "planned_steps", "final.id_acc", "final.ood_inferential_acc", "final.ood_symmetric_acc", "note"]


@dataclass(frozen=True)
class CleanRule:
    """The bars and counts of :func:`pick` (the issue's bars: ID >= 0.95, the side's mapping >= 0.8)."""

    id_min: float = 0.95
    bar: float = 0.8
    per_side: int = 3
    matched: int = 2
    max_steps: int = 10_000
    n_layers: int = 2

    def __post_init__(self) -> None:
        check_range("id_min", self.id_min, 0.0, 1.0)
        check_range("bar", self.bar, 0.0, 1.0)
        for name in ("per_side", "matched", "max_steps", "n_layers"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{name}: must be >= 1, got {getattr(self, name)!r}")

    def describe(self) -> str:
        return (f"per side, the {self.per_side} runs of the committed mirror-task tables (papers' op set, depth "
                f"{self.n_layers}, config in a bundled sweep) with final ID >= {self.id_min:g} and the side's "
                f"mapping >= {self.bar:g}, ranked by that mapping, then ID, then fewer planned steps, then less "
                f"weight decay, then run id; runs over {self.max_steps:,} planned steps are not retrained; beside "
                f"them the {self.matched} cleanest memorizing runs of the composing picks' own sweep and gamma")


RULE = CleanRule()


def designs() -> dict[str, tuple[str, "ExperimentConfig"]]:
    """run id -> (sweep preset, config) over every bundled sweep preset that expands on this machine."""
    from anchorlab.sweep.grid import expand
    from anchorlab.sweep.presets import sweep_presets

    out: dict[str, tuple[str, Any]] = {}
    for name, path in sweep_presets().items():
        try:
            runs = expand(path)
        except ConfigError as e:   # a real-task preset whose data is not cached here
            log.debug("sweep %s does not expand here: %s", name, e)
            continue
        for r in runs:
            out.setdefault(r.run_id, (name, r.config))
    return out


def candidates(tables: list[str | Path], rule: CleanRule = RULE) -> "pd.DataFrame":
    """One row per committed run of ``tables`` that the rule can consider (see the module docstring)."""
    import pandas as pd

    from anchorlab.papers.reproduce.figures_fig2 import PAPERS_OP_SET
    from anchorlab.papers.runs import op_set_label, run_table
    from anchorlab.train.run import steps_plan

    known = designs()
    rows = []
    for t in tables:
        for r in run_table([t]).to_dict("records"):
            if r["run_id"] not in known or pd.isna(r.get("final.ood_symmetric_acc")):
                continue
            preset, cfg = known[r["run_id"]]
            if (cfg.task.name != "anchor" or cfg.model.n_layers != rule.n_layers
                    or op_set_label(cfg.to_dict()["task"]) != PAPERS_OP_SET):
                continue
            rows.append({"run_id": r["run_id"], "preset": preset, "table": Path(t).name, "gamma": cfg.init.gamma,
                         "ref_width": cfg.init.ref_width, "weight_decay": cfg.optim.weight_decay,
                         "planned_steps": steps_plan(cfg, cfg.task.n_train)[1],
                         **{c: float(r[c]) for c in ("final.id_acc", *SIDES.values())}})
    cols = ["run_id", "preset", "table", "gamma", "ref_width", "weight_decay", "planned_steps", "final.id_acc",
            *SIDES.values()]
    return pd.DataFrame(rows, columns=cols).drop_duplicates("run_id").reset_index(drop=True)


def _ranked(c: "pd.DataFrame", metric: str, rule: CleanRule) -> "pd.DataFrame":
    ok = c[(c["final.id_acc"] >= rule.id_min) & (c[metric] >= rule.bar)]
    return ok.sort_values([metric, "final.id_acc", "planned_steps", "weight_decay", "run_id"],
                          ascending=[False, False, True, True, True])


def pick(cands: "pd.DataFrame", rule: CleanRule = RULE) -> "pd.DataFrame":
    """:data:`COLUMNS`: per side the eligible runs in rank order up to the first ``per_side`` retrainable ones
    (``set`` = ``cleanest``; a skipped one says why), then the matched memorizing runs (``set`` = ``matched``)."""
    import pandas as pd

    out = []
    for side, metric in SIDES.items():
        n = 0
        for rank, r in enumerate(_ranked(cands, metric, rule).to_dict("records"), 1):
            cheap = r["planned_steps"] <= rule.max_steps
            out.append({**r, "side": side, "set": "cleanest", "rank": rank, "picked": cheap,
                        "note": "" if cheap else f"not retrained: {r['planned_steps']:,} planned steps"})
            n += cheap
            if n == rule.per_side:
                break
    comp = [r for r in out if r["side"] == "composes" and r["picked"]]
    if comp:
        home = cands[(cands.preset == comp[0]["preset"]) & (cands.gamma == comp[0]["gamma"])]
        taken = {r["run_id"] for r in out if r["picked"]}
        mem = _ranked(home, SIDES["memorizes"], rule)
        mem = mem[~mem.run_id.isin(taken) & (mem.planned_steps <= rule.max_steps)].head(rule.matched)
        out += [{**r, "side": "memorizes", "set": "matched", "rank": i, "picked": True, "note": ""}
                for i, r in enumerate(mem.to_dict("records"), 1)]
    return pd.DataFrame(out, columns=COLUMNS)


def train_or_read(cfg: "ExperimentConfig", run_dir: Path, what: str) -> "pd.DataFrame":
    """The one-row run table of ``cfg`` trained into ``run_dir``, training it first unless it finished there
    before (resumable: a directory without a finished run is trained again); ``what`` names it in the log."""
    from anchorlab.sweep.runtable import run_table
    from anchorlab.train import run

    done = run_table([run_dir]) if run_dir.is_dir() else None   # no finished run reads as no row
    if done is None or done.empty or done.status.iloc[0] != "finished":
        log.info("retraining %s", what)
        run(cfg, run_dir)
        done = run_table([run_dir])
    return done


def retrain(picks: "pd.DataFrame", out: str | Path, rule: CleanRule = RULE) -> "pd.DataFrame":
    """Train every picked run from its preset's config into ``out/runs/<run_id>`` (a finished one is kept:
    resumable) and return the picks with the retrained final metrics (``retrained.*``) and ``same_solution``
    (the retrained run passes its side's bars of ``rule`` again)."""
    known = designs()
    rows = []
    for r in picks[picks.picked.astype(bool)].to_dict("records"):
        cfg = known[r["run_id"]][1]
        if cfg.run_id() != r["run_id"]:
            raise ConfigError(f"run {r['run_id']}: its preset no longer expands to the committed config")
        d = Path(out) / "runs" / r["run_id"]
        done = train_or_read(cfg, d, f"{r['run_id']} ({r['side']}, {r['preset']})")
        got = {f"retrained.{k}": (done[k].iloc[0] if k in done else None) for k in ("final.id_acc", *SIDES.values())}
        same = (got["retrained.final.id_acc"] >= rule.id_min
                and got[f"retrained.{SIDES[r['side']]}"] >= rule.bar)
        rows.append({**r, **got, "same_solution": bool(same), "run_dir": str(d)})
    import pandas as pd

    return pd.DataFrame(rows)


def _header(path: Path) -> str:
    with path.open() as f:
        return f.readline()


def main(argv: list[str] | None = None) -> int:
    """``python -m anchorlab.papers.clean_picks --out DIR [--pick-only]``: pick, write ``picks.csv``, retrain."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m anchorlab.papers.clean_picks", description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--figures", type=Path, default=Path("docs/figures"), help="the committed tables' folder")
    ap.add_argument("--pick-only", action="store_true", help="write picks.csv and stop")
    a = ap.parse_args(argv)
    # retrain as the command line trained the committed runs: glibc's malloc thresholds and flat parameters on
    # (a library call leaves them off, which pages in every step's activations anew)
    from anchorlab.config.process_settings import ask_for_process_settings

    ask_for_process_settings()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    log.setLevel(logging.INFO)
    tables = [p for p in sorted(a.figures.glob("*.csv")) if "run_id" in _header(p)]
    a.out.mkdir(parents=True, exist_ok=True)
    picks = pick(candidates(tables))
    picks.to_csv(a.out / "picks.csv", index=False)
    log.info("rule: %s\n%s", RULE.describe(), picks.to_string())
    if not a.pick_only:
        retrain(picks, a.out).to_csv(a.out / "retrained.csv", index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
