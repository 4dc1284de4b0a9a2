#!/usr/bin/env python
"""CPU-scale journal Fig. 7A,B: SCAN and COGS, small init + large wd vs large init + small wd.

For each dataset (SCAN addprim_turn_left, COGS variable-free) x setting x
training-set size, trains one model from the ``scan/cpu`` / ``cogs/cpu``
preset with the same number of optimizer steps (``--steps``; the warmup and
cosine schedule is rescaled to it for every size), one run directory per
config under OUT/runs (named by run id; a finished run is skipped, an
interrupted one resumes). Then writes into OUT:

  realtasks_cpu.csv      one row per run: dataset, setting, train_size, gamma, wd,
                         id/ood exact match and token accuracy, COGS per class, wall seconds
  fig_realtasks_cpu.png  exact match vs training-set size (OOD solid, ID dashed)

and prints the table and, per dataset and size, whether small init + large wd
beats large init + small wd on OOD exact match.

Each run uses one torch thread; at most ``--workers`` (default 2) run at once.

Usage:
  python scripts/realtasks_cpu.py runs/realtasks_cpu --data-dir ../shared/datasets
  python scripts/realtasks_cpu.py /tmp/rt --steps 60 --scan-sizes 500 --cogs-sizes 1000 --eval-max 50   # smoke
  python scripts/realtasks_cpu.py runs/realtasks_cpu --report-only
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import logging
import sys
import time
from pathlib import Path

import pandas as pd

from anchorlab.io import read_json
from anchorlab.seq2seq_train import (Seq2SeqExperimentConfig, final_table, load_seq2seq_config,
                                     run_seq2seq, seq2seq_from_dict)

# (label, init.gamma, optim.weight_decay): see docs/real_tasks.md for the choice.
SETTINGS = {
    "small init + large wd": (0.75, 0.5),
    "large init + small wd": (0.3, 0.01),
}


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def schedule_overrides(train_size: int, batch_size: int, steps: int) -> list[str]:
    """Epoch-based schedule for a fixed step budget: 5% warmup, cosine over the rest."""
    spe = max(train_size // batch_size, 1)
    epochs = steps / spe
    return [f"train.epochs={epochs:.6g}", f"train.max_steps={steps}", f"train.eval_every={max(steps // 2, 1)}",
            f"optim.warmup_epochs={0.05 * epochs:.6g}", f"optim.cosine_epochs={0.95 * epochs:.6g}"]


def grid(args: argparse.Namespace) -> list[tuple[str, Seq2SeqExperimentConfig]]:
    out = []
    for dataset, sizes in (("scan", args.scan_sizes), ("cogs", args.cogs_sizes)):
        for size in sizes:
            for label, (gamma, wd) in SETTINGS.items():
                base = load_seq2seq_config(f"{dataset}/cpu", [f"task.data_dir={args.data_dir}"]
                                           if args.data_dir else [])
                ov = [f"task.train_size={size}", f"task.eval_max={args.eval_max}", f"init.gamma={gamma}",
                      f"optim.weight_decay={wd}", f"train.data_seed={args.seed}",
                      f"train.init_seed={args.seed}", "train.threads=1",
                      f"name={dataset}-n{size}-g{gamma:g}-wd{wd:g}-s{args.seed}",
                      *schedule_overrides(size, base.train.batch_size, args.steps), *args.set]
                out.append((label, seq2seq_from_dict(base.to_dict(), ov, derive=False)))
    return out


def _work(cfg_dict: dict, run_dir: str) -> dict:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(processName)s %(message)s",
                        stream=sys.stderr, force=True)
    cfg = seq2seq_from_dict(cfg_dict, derive=False)
    t0 = time.perf_counter()
    final = run_seq2seq(cfg, run_dir)
    logging.info("%s done in %.0f s", cfg.name, time.perf_counter() - t0)
    return final


def run_grid(jobs: list[tuple[str, Seq2SeqExperimentConfig]], root: Path, workers: int) -> None:
    todo = [(label, cfg) for label, cfg in jobs if not (root / "runs" / cfg.run_id() / "final.json").exists()]
    logging.info("%d runs, %d to do, %d at once", len(jobs), len(todo), workers)
    with cf.ProcessPoolExecutor(max_workers=workers, max_tasks_per_child=1) as pool:
        futs = {pool.submit(_work, cfg.to_dict(), str(root / "runs" / cfg.run_id())): cfg for _, cfg in todo}
        for fut in cf.as_completed(futs):
            cfg = futs[fut]
            try:
                f = fut.result()
                logging.info("finished %s: id %.3f ood %.3f (%.0f s)", cfg.name, f["final"].get("id_exact", float("nan")),
                             f["final"].get("ood_exact", float("nan")), f["wall_seconds"])
            except Exception:  # report and continue: the other runs are independent
                logging.exception("run %s failed", cfg.name)


def report(jobs: list[tuple[str, Seq2SeqExperimentConfig]], root: Path) -> pd.DataFrame:
    from anchorlab.plots.realtasks import plot_exact_vs_train_size
    from anchorlab.plots.training import save_figure

    finals, labels = [], []
    for label, cfg in jobs:
        p = root / "runs" / cfg.run_id() / "final.json"
        if p.exists():
            finals.append(read_json(p))
            labels.append(label)
    if not finals:
        raise SystemExit(f"no finished runs under {root / 'runs'}")
    df = final_table(finals)
    df.insert(1, "setting", labels)
    keep = ["dataset", "setting", "train_size", "gamma", "weight_decay", "steps", "id_exact", "ood_exact",
            "id_token_acc", "ood_token_acc", "ood_exact/lexical", "ood_exact/structural", "train_loss",
            "wall_seconds", "status", "run_id"]
    df = df[[c for c in keep if c in df.columns]].sort_values(["dataset", "train_size", "setting"])
    df.to_csv(root / "realtasks_cpu.csv", index=False)
    save_figure(plot_exact_vs_train_size(df), root / "fig_realtasks_cpu", formats=("png",))
    return df


def verdicts(df: pd.DataFrame) -> list[str]:
    small, large = SETTINGS
    lines = []
    for (ds, n), g in df.groupby(["dataset", "train_size"]):
        v = g.set_index("setting")["ood_exact"]
        if small in v and large in v:
            word = "beats" if v[small] > v[large] else ("ties" if v[small] == v[large] else "does NOT beat")
            lines.append(f"{ds} n={n}: small init + large wd ({v[small]:.3f}) {word} "
                         f"large init + small wd ({v[large]:.3f}) on OOD exact match")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--data-dir", default=None, help="directory with scan/ and cogs/ (default: $ANCHORLAB_DATA_DIR or download)")
    ap.add_argument("--scan-sizes", type=ints, default=[2000, 8000])
    ap.add_argument("--cogs-sizes", type=ints, default=[4000, 16000])
    ap.add_argument("--steps", type=int, default=400, help="optimizer steps per run (batch 64)")
    ap.add_argument("--eval-max", type=int, default=300, help="examples per eval set")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--set", action="append", default=[], help="extra override KEY=VALUE (repeatable)")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = grid(args)
    t0 = time.perf_counter()
    if not args.report_only:
        run_grid(jobs, args.out, args.workers)
    df = report(jobs, args.out)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:.3f}".format):
        print(df.drop(columns=["run_id"]).to_string(index=False))
    for line in verdicts(df):
        print(line)
    print(f"total wall time {time.perf_counter() - t0:.0f} s; table and figure in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
