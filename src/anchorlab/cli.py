"""Command line: thin wrappers that parse, build a config, and call the library.

Every command works for every task family (``task.name`` in the config).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from .config import ConfigError


def _cmd_config(a: argparse.Namespace) -> int:
    from .config import dump_config, load_config

    cfg = load_config(a.config, a.set)
    print(dump_config(cfg), end="")
    print(f"# run_id: {cfg.run_id()}")
    return 0


def _print_metrics(task, metrics: dict) -> None:
    from .tasks.base import headline_lines

    for line in headline_lines(metrics, task.headline):
        print(line)


def _cmd_train(a: argparse.Namespace) -> int:
    from .config import load_config
    from .train import train

    cfg = load_config(a.config, a.set)
    out = Path(a.out) if a.out else Path("runs") / f"{cfg.name}-{cfg.run_id()}"
    res = train(cfg, out, progress=not a.no_progress)
    f = res.final
    print(f"run {out}  task={cfg.task.name}  status={f['status']}  steps={f['steps']}  "
          f"wall={f['wall_seconds']:.1f}s")
    if cfg.train.amp != "none" and "precision" in f:
        print(f"precision: {f['precision']['matmul_dtype']} matmuls ({f['precision']['reason']})")
    _print_metrics(res.task, f["final"])
    return 0


def _cmd_eval(a: argparse.Namespace) -> int:
    from dataclasses import replace

    from .config import experiment_from_dict
    from .io import atomic_write, write_json
    from .tasks.base import build_task
    from .train import load_run

    res = load_run(a.run)
    task, cfg = res.task, res.cfg
    if a.set:
        bad = [s for s in a.set if not s.startswith("task.")]
        if bad:
            raise ConfigError(f"--set {bad[0]}: eval takes task.* overrides only (e.g. task.n_eval_per_group=2000)")
        cfg = experiment_from_dict(cfg.to_dict(), a.set)
        task = build_task(cfg.task)
        res = replace(res, task=task, cfg=cfg)
    result = task.evaluate(res.model, task.eval_data(cfg.train.data_seed))
    out = Path(a.out) if a.out else Path(a.run)
    written = []
    for name, table in result.tables.items():
        written.append(atomic_write(out / f"eval_{name}.csv", lambda p, t=table: t.to_csv(p, index=False)))
    written.append(write_json(out / "eval.json", result.metrics))
    _print_metrics(task, result.metrics)
    for line in getattr(task, "summary_lines", lambda r: [])(result):
        print(line)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def _cmd_demo(a: argparse.Namespace) -> int:
    import pandas as pd

    from .demo import DEMO_GAMMAS, DEMO_PRESET, run_demo

    print(f"anchorlab demo: training a large-init and a small-init model on the 'neurips' anchor task "
          f"(preset {DEMO_PRESET}, gammas {DEMO_GAMMAS}) in {a.workers} worker process(es)...", flush=True)
    table = run_demo(a.out, a.set, workers=a.workers, progress=not a.no_progress, seeds=a.seeds,
                     peak_lrs=a.peak_lrs, thresholds=a.thresholds)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        shown = table.drop(columns=["train_acc", "run_dir"] + (["seed"] if a.seeds == 1 else [])
                           + ([] if a.peak_lrs else ["peak_lr"]), errors="ignore")
        print(shown.to_string(index=False, float_format=lambda v: f"{v:.3f}", formatters={"peak_lr": "{:g}".format}))
    r = table.attrs["rates"]
    print(f"\ncontrast (large init: symmetric >= 0.8, small init: inferential >= 0.8, ID >= 0.9 both) in "
          f"{r['contrast_rate']:.0%} of {r['cases']} seed(s)" + (" x lr(s)" if a.peak_lrs else ""))
    print("\n".join(table.attrs["summary"]))
    print(f"\nwrote {Path(a.out) / 'summary.json'} and {Path(a.out) / 'ood_over_training.png'}")
    return 0


def _cmd_robustness(a: argparse.Namespace) -> int:
    import pandas as pd

    from .cli_args import parse_setting, parse_vary
    from .robustness import DEFAULT_SETTINGS, run_study

    settings = [parse_setting(s) for s in a.setting] or list(DEFAULT_SETTINGS)
    vary = dict(parse_vary(v) for v in a.vary)
    seeds = list(range(a.seeds))
    out = Path(a.out)
    print(f"robustness: {a.op_sets} op sets x {len(seeds)} seeds x settings "
          f"{', '.join(f'{s.name} {s.overrides}' for s in settings)}; base {a.config}; out {out}"
          + (f"; regime map over {vary}" if vary else ""), flush=True)

    def done(run, status: str) -> None:
        if not a.no_progress:
            print(f"  run {run.run_id}: {status}", flush=True)

    res = run_study(str(out), a.config, a.op_sets, seeds, settings, a.set, a.op_seed, a.workers, a.executor,
                    done, include_papers=not a.no_papers_op_set, vary=vary, peak_lrs=a.peak_lrs,
                    thresholds=a.thresholds)
    accs = [c for c in res["judged"].columns if c.endswith(("id_acc", "_acc"))]
    cols = [*vary, "op_set", "seed", *(["peak_lr"] if a.peak_lrs else []), *accs, "contrast"]
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.max_colwidth", 60):
        print(res["judged"][cols].to_string(index=False, float_format=lambda v: f"{v:.2f}",
                                            formatters={"peak_lr": "{:g}".format}))
    r = res["rates"]
    print(f"\ncontrast in {r['contrast_rate']:.0%} of {r['cases']} cases (large init memorizes "
          f"{r['large_memorizes_rate']:.0%}, small init composes {r['small_composes_rate']:.0%}); "
          f"tables in {out}")
    print("\n".join(res["summary"]))
    if vary:
        with pd.option_context("display.width", 250, "display.max_columns", 30):
            print("\nregime map (map.csv, regime_map.png):")
            print(res["map"].to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    return 0


def _progress_bar(total: int, desc: str, enabled: bool):
    """A per-run progress display (a bar on a terminal, one line per finished run elsewhere)."""
    if not enabled or not total:
        return None, None
    from .progress import Progress

    bar = Progress(True, total, 0, desc, unit="run")

    def on_result(run, status: str) -> None:
        bar.update(1)
        values = ", ".join(f"{k}={v}" for k, v in run.values.items())
        bar.note(f"run {run.run_id} {status}" + (f" ({values})" if values else ""))

    return bar, on_result


def _cmd_sweep(a: argparse.Namespace) -> int:
    import pandas as pd

    from .cli_args import parse_stack
    from .sweep.grid import load_sweep, resolve_sweep
    from .sweep.runner import plan_sweep, run_sweep

    spec = load_sweep(resolve_sweep(a.spec))
    out = Path(a.out) if a.out else Path("runs") / spec.name
    plan = plan_sweep(spec, out)
    if a.dry_run:
        with pd.option_context("display.width", 200, "display.max_rows", 500, "display.max_columns", 30):
            print(plan.to_string(index=False))
        print(f"{len(plan)} runs; {int((plan.action != 'skip').sum())} to do; out: {out}")
        return 0
    todo = int((plan.action != "skip").sum())
    print(f"sweep {spec.name}: {len(plan)} runs, {todo} to do, executor={a.executor}, out={out}", flush=True)
    bar, on_result = _progress_bar(todo, spec.name, not a.no_progress)
    df = run_sweep(spec, out, executor=a.executor, max_workers=a.workers, stack=parse_stack(a.stack),
                   on_result=on_result)
    if bar:
        bar.close()
    st = df.drop_duplicates("run_id").status.value_counts().to_dict()
    print(f"done: {st}; results in {out / 'results.sqlite'}; `anchorlab report {out}` draws the figures")
    return 0


def _cmd_report(a: argparse.Namespace) -> int:
    from .report import make_report, screenshot

    path = make_report(a.sweep_dir)
    print(f"wrote {path}")
    if a.screenshot:
        print(f"wrote {screenshot(path, a.screenshot)}")
    return 0


def _cmd_analyze(a: argparse.Namespace) -> int:
    from .analysis.registry import ANALYSES, MULTI_RUN, run_analysis, run_multi_analysis

    if a.list:
        for name, an in ANALYSES.items():
            tasks = ", ".join(an.tasks) if an.tasks else "any"
            print(f"  {name:20s} [{tasks}] {an.summary}")
        for name, m in MULTI_RUN.items():
            tasks = ", ".join(m.tasks) if getattr(m, "tasks", None) else "any"
            print(f"  {name:20s} [{tasks}; several runs] {m.summary}")
        return 0
    if len(a.args) < 2:
        raise ConfigError("analyze: expected RUN [RUN ...] ANALYSIS (see `anchorlab analyze --list`)")
    *runs, name = a.args
    if name in MULTI_RUN:
        path, table = run_multi_analysis(runs, name, a.out, a.option)
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print(f"wrote {path}")
        return 0
    if len(runs) != 1:
        raise ConfigError(f"analyze {name}: takes one RUN, got {len(runs)}")
    for k, v in run_analysis(runs[0], name, a.out, a.option).items():
        print(f"{k}: {v}")
    return 0


def _cmd_reproduce(a: argparse.Namespace) -> int:
    from .reproduce import FIGURES, describe_figures, reproduce

    if a.list or not a.figure:
        print(describe_figures(a.scale if a.scale_given else None))
        return 0
    if a.figure not in FIGURES:
        raise ConfigError(f"reproduce: unknown figure {a.figure!r}; one of {', '.join(FIGURES)} "
                          "(`anchorlab reproduce --list`)")
    out = Path(a.out) if a.out else Path("runs") / "reproduce" / f"{a.figure}-{a.scale}"
    print(f"reproduce {a.figure} at scale {a.scale} -> {out}", flush=True)
    res = reproduce(a.figure, a.scale, out, executor=a.executor, workers=a.workers, dry_run=a.dry_run,
                    progress=not a.no_progress, overrides=a.set)
    for k, v in res.items():
        print(f"{k}: {v}")
    return 0


def _cmd_bench(a: argparse.Namespace) -> int:
    from .bench import format_result, run_bench

    steps = {}
    for item in a.steps.split(","):
        name, _, n = item.partition("=")
        if not n.isdigit() or int(n) < 1:
            raise ConfigError(f"--steps: expected SHAPE=N[,...] with N >= 1, got {item!r}")
        steps[name] = int(n)
    try:
        r = run_bench(a.shapes.split(","), a.precisions.split(","), steps=steps, warmup=a.warmup, threads=a.threads,
                      clock=a.clock, profile=a.profile, malloc_retain=not a.no_malloc_retain)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    print(format_result(r))
    if a.csv:
        from .io import atomic_write

        base = Path(a.csv)
        atomic_write(base, lambda p: r.steps.to_csv(p, index=False))
        peaks = base.with_name(base.stem + "_peaks.csv")
        atomic_write(peaks, lambda p: r.peaks.to_csv(p, index=False))
        print(f"wrote {base}, {peaks}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="anchorlab", description=__doc__)
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = p.add_subparsers(dest="cmd", required=True)

    def floats(text: str) -> list[float]:
        return [float(v) for v in text.split(",") if v.strip()]

    def with_lrs(sp: argparse.ArgumentParser) -> None:   # the papers' judgement beside the per-run rate
        sp.add_argument("--peak-lrs", type=floats, metavar="LR,...", help="train at each peak lr (docs/headline.md)")
        sp.add_argument("--thresholds", type=floats, default=[0.5, 0.8], metavar="T,...", help="OOD thresholds")

    def with_config(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("config", help="YAML file or preset name (e.g. neurips/paper, demo/small, scan/cpu)")
        sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="dotted override, e.g. --set init.gamma=0.8 (repeatable)")

    sp = sub.add_parser("config", help="print the resolved config and its run id")
    with_config(sp)
    sp.set_defaults(fn=_cmd_config)

    sp = sub.add_parser("train", help="train one model (any task)")
    with_config(sp)
    sp.add_argument("--out", help="run directory (default runs/<name>-<run_id>); resumes if it exists")
    sp.add_argument("--no-progress", action="store_true")
    sp.set_defaults(fn=_cmd_train)

    sp = sub.add_parser("eval", help="re-evaluate a trained run: the task's metrics and tables (CSV)")
    sp.add_argument("run", help="run directory")
    sp.add_argument("--set", action="append", default=[], metavar="task.KEY=VALUE",
                    help="task override for this evaluation, e.g. task.n_eval_per_group=2000")
    sp.add_argument("--out", help="where to write eval files (default: the run directory)")
    sp.set_defaults(fn=_cmd_eval)

    sp = sub.add_parser("demo", help="train a large-init and a small-init model and compare them")
    sp.add_argument("--out", default="demo_out")
    sp.add_argument("--workers", type=int, default=2, help="parallel training processes (default 2)")
    sp.add_argument("--seeds", type=int, default=1, help="seeds per model; the contrast rate is reported over them")
    sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override the demo config for both models")
    sp.add_argument("--no-progress", action="store_true")
    with_lrs(sp)
    sp.set_defaults(fn=_cmd_demo)

    sp = sub.add_parser("robustness", help="the headline over random anchor op sets x seeds: large vs small init")
    sp.add_argument("config", nargs="?", default="demo/small", help="base config (default demo/small)")
    sp.add_argument("--out", required=True, help="study directory (resumable)")
    sp.add_argument("--op-sets", type=int, default=5, help="number of op sets, the papers' first (default 5)")
    sp.add_argument("--no-papers-op-set", action="store_true", help="draw every op set at random")
    sp.add_argument("--op-seed", type=int, default=0, help="seed of the op-set draw")
    sp.add_argument("--seeds", type=int, default=3, help="seeds per op set and setting (default 3)")
    sp.add_argument("--setting", action="append", default=[], metavar="NAME:KEY=VALUE[,...]",
                    help="a model setting, first the memorizing one, e.g. large_init:init.gamma=0.3 "
                         "(default: the demo's two gammas)")
    sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override for every run")
    sp.add_argument("--vary", action="append", default=[], metavar="KEY=V1,V2[,...]",
                    help="regime map: repeat the study at each value (several --vary are crossed), "
                         "e.g. --vary train.epochs=3,12 --vary optim.peak_lr=5e-4,2e-3; writes map.csv")
    sp.add_argument("--executor", default="process", choices=["process", "inprocess", "ray"])
    sp.add_argument("--workers", type=int, default=None)
    sp.add_argument("--no-progress", action="store_true")
    with_lrs(sp)
    sp.set_defaults(fn=_cmd_robustness)

    sp = sub.add_parser("sweep", help="run (or resume) a sweep: a base config x axes, results in SQLite")
    sp.add_argument("spec", help="sweep YAML or preset (e.g. fig2_cpu)")
    sp.add_argument("--out", help="sweep directory (default runs/<name>)")
    sp.add_argument("--dry-run", action="store_true", help="list the runs, each run's peak lr, and what would be done")
    sp.add_argument("--executor", default="process", choices=["process", "inprocess", "ray"])
    sp.add_argument("--workers", type=int, default=None, help="parallel runs (default: CPU count)")
    sp.add_argument("--stack", default="auto",
                    help="train same-shape runs as stacked models: auto (where faster), never, or a max size")
    sp.add_argument("--no-progress", action="store_true")
    sp.set_defaults(fn=_cmd_sweep)

    sp = sub.add_parser("report", help="HTML page with the figures and tables of a sweep")
    sp.add_argument("sweep_dir")
    sp.add_argument("--screenshot", metavar="PNG", help="also render the page with headless Chromium into PNG")
    sp.set_defaults(fn=_cmd_report)

    sp = sub.add_parser("analyze", help="analyses of trained runs (PNG + CSV); --list shows them")
    sp.add_argument("args", nargs="*", metavar="RUN... ANALYSIS",
                    help="run directory (several for multi-run analyses) then the analysis name")
    sp.add_argument("--list", action="store_true", help="list the analyses and the tasks they apply to")
    sp.add_argument("--out", help="output directory (default RUN/analysis)")
    sp.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="analysis option, YAML value, e.g. --option keys=[30,31,32] (see docs/mechanism.md)")
    sp.set_defaults(fn=_cmd_analyze)

    sp = sub.add_parser("reproduce", help="reproduce a paper figure: sweep + analyses + figure + paper values")
    sp.add_argument("figure", nargs="?", help="figure id (see --list)")
    sp.add_argument("--list", action="store_true", help="list the figures, their runs and estimated compute")
    sp.add_argument("--scale", default="cpu", choices=["cpu", "paper"])
    sp.add_argument("--out", help="output directory (default runs/reproduce/<figure>-<scale>)")
    sp.add_argument("--executor", default="process", choices=["process", "inprocess", "ray"])
    sp.add_argument("--workers", type=int, default=None)
    sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra override for every run of the figure's sweep (e.g. train.epochs=2)")
    sp.add_argument("--dry-run", action="store_true", help="list the runs without training")
    sp.add_argument("--no-progress", action="store_true")
    sp.set_defaults(fn=_cmd_reproduce)

    sp = sub.add_parser("bench", help="this CPU's matmul peak per dtype and the training step per precision",
                        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    sp.add_argument("--shapes", default="demo,paper", help="demo (demo/small) and/or paper (neurips/paper, batch 2048)")
    sp.add_argument("--precisions", default="fp32,bf16", help="fp32 (train.amp=none) and/or bf16 (train.amp=bf16)")
    sp.add_argument("--steps", default="demo=20,paper=4", help="timed steps per shape")
    sp.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    sp.add_argument("--threads", type=int, default=1, help="torch threads (training uses 1 per worker)")
    sp.add_argument("--clock", default="wall", choices=["wall", "process"],
                    help="process: this process's CPU seconds (fair on a machine shared with other jobs)")
    sp.add_argument("--profile", action="store_true", help="also split each step's operator time by category")
    sp.add_argument("--no-malloc-retain", action="store_true",
                    help="leave glibc's malloc thresholds alone (as train.malloc_retain=false)")
    sp.add_argument("--csv", metavar="PATH", help="also write the step table (and PATH's stem + _peaks.csv)")
    sp.set_defaults(fn=_cmd_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if args.cmd == "reproduce":
        args.scale_given = "--scale" in argv or any(x.startswith("--scale=") for x in argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.fn(args)
    except ConfigError as e:
        print(f"anchorlab: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("anchorlab: interrupted (runs resume from their last checkpoint)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
