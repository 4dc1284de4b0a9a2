#!/usr/bin/env python
"""CPU-scale prediction experiment (NeurIPS Fig. 6 / journal Fig. 8), resumable.

Trains the grid k (noise groups) x depth x gamma (small vs large init) x seed
from the ``prediction/cpu`` preset, one run directory per config (named by
its run id; a run whose final.json exists is skipped, so re-running resumes),
then writes into OUT:

  speed.csv          one row per run: k, depth, gamma, seed, epochs to the loss threshold, censored
  speed_summary.csv  mean/sem per (gamma, depth, k), n_censored
  slowdown.csv       epochs(k_max) / epochs(k_min) per (gamma, depth)
  pair_speed.csv     per run and pair: epochs to the pair threshold (acc/<ab>/train)
  suspects.csv       per run with k > 0: precision/recall/AUC of flagging slow pairs
  fig_complexity_speed.png   Fig. 6 / 8A
  fig_pair_speed_k1.png      Fig. 8B (small init, k=1)

Usage:
  python scripts/prediction_cpu.py --out runs/prediction_cpu            # the grid
  python scripts/prediction_cpu.py --out /tmp/size --ks 5 --depths 2 --gammas 0.8 --seeds 0   # one run, to size
  python scripts/prediction_cpu.py --out runs/prediction_cpu --report-only
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import logging
import sys
import time
from pathlib import Path

import pandas as pd

from anchorlab.analysis.speed import (complexity_slowdown, pair_fit_speed, rule_violating_pairs,
                                      speed_table, summarize_pair_speed, summarize_speed,
                                      suspect_report)
from anchorlab.config import ExperimentConfig, TaskConfig, from_dict, load_config


def floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def grid(args: argparse.Namespace) -> list[ExperimentConfig]:
    cfgs = []
    for gamma in args.gammas:
        for depth in args.depths:
            for k in args.ks:
                for seed in args.seeds:
                    ov = [f"task.complexity_k={k}", f"model.n_layers={depth}", f"init.gamma={gamma}",
                          f"train.init_seed={seed}", f"train.data_seed={seed}", "train.threads=1",
                          f"name=pred-k{k}-L{depth}-g{gamma:g}-s{seed}", *args.set]
                    cfgs.append(load_config(args.config, ov))
    # longest first (deeper models, more noise groups) so the pool ends together
    return sorted(cfgs, key=lambda c: (-c.model.n_layers, -c.task.complexity_k))


def run_dir(out: Path, cfg: ExperimentConfig) -> Path:
    return out / "runs" / f"{cfg.name}-{cfg.run_id()}"


def work(cfg_dict: dict, path: str, stop_loss: float | None, stop_pair_acc: float, chunk_epochs: float) -> str:
    """One run in a worker process (one torch thread); returns a status line.

    With ``stop_loss`` the run is trained in chunks of ``chunk_epochs`` (the
    loop resumes exactly from its checkpoint) and stopped once the training
    loss has reached ``stop_loss`` and every pair's training-key accuracy has
    reached ``stop_pair_acc``: later epochs cannot change a first crossing.
    final.json then has status "stopped_early"; otherwise the run goes to
    ``train.epochs`` (which caps it: a run that never crosses is censored).
    """
    import torch

    from anchorlab.analysis.speed import pair_fit_speed, steps_to_threshold
    from anchorlab.train.checkpoint import save_weights
    from anchorlab.train.loop import finalize, steps_plan, train

    torch.set_num_threads(1)
    cfg = from_dict(ExperimentConfig, cfg_dict)
    run = Path(path)
    t = time.perf_counter()
    spe, total, eval_every = steps_plan(cfg)
    if stop_loss is None:
        f = train(cfg, run).final
        return f"{run.name}  {f['status']}  {f['steps']} steps  {time.perf_counter() - t:.0f}s"
    chunk = max(int(round(chunk_epochs * spe / eval_every)), 1) * eval_every
    stop = chunk
    while True:
        res = train(cfg, run, stop_after_step=stop)
        if res.final.get("status") != "interrupted":
            f = res.final
            return f"{run.name}  {f['status']}  {f['steps']} steps  {time.perf_counter() - t:.0f}s"
        hist = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
        done = not steps_to_threshold(hist, "train_loss", stop_loss).censored
        if done:
            done = not pair_fit_speed(hist, threshold=stop_pair_acc).censored.any()
        if done:
            save_weights(run / "model.safetensors", res.model, {"run_id": cfg.run_id()})
            finalize(cfg, run, hist, "stopped_early", float(hist[-1]["wall_seconds"]), int(hist[-1]["step"]))
            return f"{run.name}  stopped_early  {hist[-1]['step']} steps  {time.perf_counter() - t:.0f}s"
        stop += chunk


def train_grid(cfgs: list[ExperimentConfig], out: Path, workers: int, stop_loss: float | None,
               stop_pair_acc: float, chunk_epochs: float) -> None:
    todo = [(c, run_dir(out, c)) for c in cfgs if not (run_dir(out, c) / "final.json").exists()]
    print(f"{len(cfgs)} runs in the grid, {len(cfgs) - len(todo)} done, {len(todo)} to train "
          f"on {workers} worker(s)", flush=True)
    if not todo:
        return
    t0 = time.perf_counter()
    with cf.ProcessPoolExecutor(max_workers=workers) as pool:
        futs = {pool.submit(work, c.to_dict(), str(p), stop_loss, stop_pair_acc, chunk_epochs): p
                for c, p in todo}
        for i, fut in enumerate(cf.as_completed(futs), 1):
            try:
                msg = fut.result()
            except Exception as e:  # keep the rest of the grid going
                msg = f"{futs[fut]}  FAILED: {type(e).__name__}: {e}"
            print(f"[{i}/{len(todo)} {time.perf_counter() - t0:.0f}s] {msg}", flush=True)


def report(cfgs: list[ExperimentConfig], out: Path, args: argparse.Namespace) -> None:
    from anchorlab.plots.speed import plot_complexity_speed, plot_pair_speed
    from anchorlab.plots.training import save_figure

    runs = []
    for c in cfgs:
        p = run_dir(out, c) / "final.json"
        if p.exists():
            runs.append(json.loads(p.read_text()))
    if not runs:
        print("no finished runs to report")
        return
    thr = args.loss_threshold
    speed = speed_table(runs, threshold=thr, interpolate=args.interpolate)
    speed.to_csv(out / "speed.csv", index=False)
    summ = summarize_speed(speed)
    summ.to_csv(out / "speed_summary.csv", index=False)
    pd.set_option("display.width", 160)
    print(f"\nEpochs to train loss <= {thr:g} (mean over seeds; censored = never reached, value is a lower bound)")
    print(summ.to_string(index=False, float_format=lambda v: f"{v:.2f}"))

    ks = sorted(speed.k.unique())
    if len(ks) >= 2:
        slow = complexity_slowdown(summ, k_hi=ks[-1], k_lo=ks[0])
        slow.to_csv(out / "slowdown.csv", index=False)
        print(f"\nSlowdown epochs(k={ks[-1]}) / epochs(k={ks[0]}):")
        print(slow.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    fig = plot_complexity_speed(summ, threshold_label=f"train loss <= {thr:g}")
    save_figure(fig, out / "fig_complexity_speed", formats=("png",))

    # per-pair fitting speed and the suspect-data test
    prows, srows = [], []
    for r in runs:
        c = r["config"]
        tcfg = from_dict(TaskConfig, c["task"])
        bad = rule_violating_pairs(tcfg)
        ps = pair_fit_speed(r["history"], threshold=args.pair_threshold, interpolate=args.interpolate)
        meta = dict(run_id=r["run_id"], k=tcfg.complexity_k, depth=c["model"]["n_layers"],
                    gamma=c["init"]["gamma"], seed=c["train"]["init_seed"])
        prows.append(ps.assign(**meta, violating=ps.pair.isin(bad)))
        if bad:
            for rule, top in (("mad", None), ("top_n_bad", len(bad))):
                rep = suspect_report(ps, known_bad=bad, top=top)
                srows.append(dict(meta, rule=rule, rule_text=rep.rule, n_bad=len(bad),
                                  flagged=" ".join(rep.flagged), precision=rep.precision,
                                  recall=rep.recall, auc=rep.auc))
    pairs = pd.concat(prows, ignore_index=True)
    pairs.to_csv(out / "pair_speed.csv", index=False)
    if srows:
        sus = pd.DataFrame(srows)
        sus.to_csv(out / "suspects.csv", index=False)
        agg = (sus.groupby(["gamma", "depth", "k", "n_bad", "rule"])[["precision", "recall", "auc"]]
               .mean().reset_index())
        print(f"\nSuspect data: pairs slowest to reach {args.pair_threshold:.0%} train accuracy vs the "
              f"n_bad rule-violating pairs (mean over seeds; chance precision = n_bad/16, chance AUC = 0.5;\n"
              f"rule mad: epochs > median + 3 MAD; top_n_bad: the n_bad slowest):")
        print(agg.to_string(index=False, float_format=lambda v: f"{v:.2f}"))

    small = max(speed.gamma)
    k1 = pairs[(pairs.k == 1) & (pairs.gamma == small)]
    if not k1.empty:
        depth = max(k1.depth)
        k1 = k1[k1.depth == depth]
        ps = summarize_pair_speed(k1)
        bad = sorted(set(k1.pair[k1.violating]))
        print(f"\nPer-pair epochs to {args.pair_threshold:.0%} (k=1, gamma={small:g}, depth={depth}); "
              f"rule-violating: {bad}")
        print(ps[["pair", "epochs", "n", "n_censored"]].to_string(index=False, float_format=lambda v: f"{v:.2f}"))
        fig = plot_pair_speed(ps, highlight=bad, threshold_label=f"{args.pair_threshold:.0%} train accuracy",
                              title=f"k=1, gamma={small:g}, depth {depth}")
        save_figure(fig, out / "fig_pair_speed_k1", formats=("png",))
    print(f"\nwrote {out}/speed.csv, speed_summary.csv, pair_speed.csv, suspects.csv and figures")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("runs/prediction_cpu"))
    ap.add_argument("--config", default="prediction/cpu", help="preset name or YAML file")
    ap.add_argument("--ks", type=ints, default=[0, 1, 5], help="noise groups, e.g. 0,1,5")
    ap.add_argument("--depths", type=ints, default=[1, 2])
    ap.add_argument("--gammas", type=floats, default=[0.8, 0.4], help="small init (large gamma), large init")
    ap.add_argument("--seeds", type=ints, default=[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--set", action="append", default=[], help="extra override, e.g. train.epochs=30")
    ap.add_argument("--loss-threshold", type=float, default=5e-2)
    ap.add_argument("--pair-threshold", type=float, default=0.6)
    ap.add_argument("--interpolate", action="store_true", help="interpolate crossings between evals")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--full", action="store_true",
                    help="train every run for train.epochs (default: stop once loss and pair thresholds are met)")
    ap.add_argument("--chunk-epochs", type=float, default=2.0, help="how often to check the stop criterion")
    args = ap.parse_args(argv)
    if not 1 <= args.workers <= 2:
        ap.error("--workers: this machine allows 1 or 2")
    logging.basicConfig(level=logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    cfgs = grid(args)
    if not args.report_only:
        train_grid(cfgs, args.out, args.workers, None if args.full else args.loss_threshold,
                   args.pair_threshold, args.chunk_epochs)
    report(cfgs, args.out, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
