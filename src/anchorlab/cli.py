"""Command line: thin wrappers that parse, build a config, and call the library.

Every command works for every task family (``task.name`` in the config).
The flags are declared in :mod:`anchorlab.cli_parser`; what the commands share
(argument checks, messages, dry runs, cleanup) is in :mod:`anchorlab.cli_support`.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from pathlib import Path

from .cli_support import cleanup, config_arg, dry_run, name_flags, peak_line, resume_note, run_arg, will_create
from .config import ConfigError


def _cmd_config(a: argparse.Namespace) -> int:
    from .config import dump_config, load_config, preset_names

    if a.reference:
        from .config.reference import config_reference

        print(config_reference(), end="")
        return 0
    if a.list or not a.config:
        print("config presets (name, or any YAML file path):")
        for name in preset_names():
            print(f"  {name}")
        return 0
    cfg = load_config(config_arg(a.config, "config"), a.set)
    print(dump_config(cfg), end="")
    print(f"# run_id: {cfg.run_id()}")
    print(f"# {peak_line(cfg)}")
    return 0


def _print_metrics(task, metrics: dict) -> None:
    from .tasks.base import headline_lines

    for line in headline_lines(metrics, task.headline):
        print(line)


def _cmd_train(a: argparse.Namespace) -> int:
    from .config import load_config
    from .train import train

    cfg = load_config(config_arg(a.config, "train"), a.set)
    out = Path(a.out) if a.out else Path("runs") / f"{cfg.name}-{cfg.run_id()}"
    will_create(a, out)
    try:
        res = train(cfg, out, progress=not a.no_progress, announce=lambda line: print(line, flush=True))
    except BaseException as e:
        if not isinstance(e, ConfigError):
            a.resume_note = resume_note(out, "anchorlab " + shlex.join(a.argv))
        raise
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

    res = load_run(run_arg(a.run))
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
    will_create(a, out)
    state = res.final["status"] if res.finished else "unfinished"
    of = f" of {res.total_steps:,}" if res.total_steps else ""
    print(f"{a.run}: step {res.step:,}{of}, {state}" + ("" if res.finished else " (its latest checkpoint)"))
    written = []
    for name, table in result.tables.items():
        written.append(atomic_write(out / f"eval_{name}.csv", lambda p, t=table: t.to_csv(p, index=False)))
    run_state = {"step": res.step, "total_steps": res.total_steps, "run_status": state}
    written.append(write_json(out / "eval.json", run_state | result.metrics))
    _print_metrics(task, result.metrics)
    for line in getattr(task, "summary_lines", lambda r: [])(result):
        print(line)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def _cmd_demo(a: argparse.Namespace) -> int:
    import pandas as pd

    from .demo import DEMO_GAMMAS, DEMO_PRESET, measured_line, run_demo

    if a.dry_run:
        from .demo import demo_spec

        return dry_run(demo_spec(a.set, a.seeds, a.peak_lrs), Path(a.out), a.workers)
    print(f"anchorlab demo: training a large-init and a small-init model on the 'neurips' anchor task "
          f"(preset {DEMO_PRESET}, gammas {DEMO_GAMMAS}) in {a.workers} worker process(es)...", flush=True)
    will_create(a, Path(a.out))
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
    print(measured_line() + (f" (this run changes it: --set {' '.join(a.set)})" if a.set else ""))
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

    if a.dry_run:
        from .robustness import random_op_sets, study_spec

        ops = random_op_sets(a.op_sets, a.op_seed, include_papers=not a.no_papers_op_set)
        axes = {**vary, **({"optim.peak_lr": list(a.peak_lrs)} if a.peak_lrs else {})}
        return dry_run(study_spec(a.config, ops, seeds, settings, a.set, vary=axes or None), out, a.workers or 2)
    will_create(a, out)

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
    import dataclasses

    from .cli_args import parse_stack
    from .sweep.grid import SWEEP_DIR, load_sweep, resolve_sweep
    from .sweep.runner import plan_sweep, run_sweep

    if a.list or not a.spec:
        print("sweep presets (name, or any sweep YAML path):")
        for q in sorted(SWEEP_DIR.glob("*.yaml")):
            print(f"  {q.stem}")
        return 0
    spec = load_sweep(resolve_sweep(a.spec))
    if a.set:
        from .sweep.grid import parse_set

        spec = dataclasses.replace(spec, set=spec.set + parse_set(list(a.set)))
    if a.only:
        from .sweep.grid import restrict

        spec = restrict(spec, a.only)
    out = Path(a.out) if a.out else Path("runs") / spec.name
    from .sweep.results import done_ids

    elsewhere = done_ids(a.done_in)
    if a.dry_run:
        return dry_run(spec, out, a.workers or 2, elsewhere)
    plan = plan_sweep(spec, out, done_elsewhere=elsewhere)
    will_create(a, out)
    todo = int((plan.action != "skip").sum())
    away = f", {int((plan.status == 'elsewhere').sum())} done elsewhere (--done-in)" if a.done_in else ""
    print(f"sweep {spec.name}: {len(plan)} runs, {todo} to do{away}, executor={a.executor}, out={out}", flush=True)
    bar, on_result = _progress_bar(todo, spec.name, not a.no_progress)
    df = run_sweep(spec, out, executor=a.executor, max_workers=a.workers, stack=parse_stack(a.stack),
                   on_result=on_result, done_elsewhere=elsewhere)
    if bar:
        bar.close()
    st = df.drop_duplicates("run_id").status.value_counts().to_dict()
    print(f"done: {st}; results in {out / 'results.sqlite'}; `anchorlab report {out}` draws the figures")
    return 0


def _cmd_report(a: argparse.Namespace) -> int:
    from .report import make_report, screenshot

    will_create(a, Path(a.sweep_dir) / "report")
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
    will_create(a, Path(a.out) if a.out else Path(runs[0]) / "analysis")
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
    will_create(a, out)
    print(f"reproduce {a.figure} at scale {a.scale} -> {out}", flush=True)
    res = reproduce(a.figure, a.scale, out, executor=a.executor, workers=a.workers, dry_run=a.dry_run,
                    progress=not a.no_progress, overrides=a.set, train=not a.no_train)
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
    from .cli_parser import build_parser as build

    return build({"config": _cmd_config, "train": _cmd_train, "eval": _cmd_eval, "demo": _cmd_demo,
                  "robustness": _cmd_robustness, "sweep": _cmd_sweep, "report": _cmd_report, "analyze": _cmd_analyze,
                  "reproduce": _cmd_reproduce, "bench": _cmd_bench})


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.argv = argv
    if args.cmd == "reproduce":
        args.scale_given = "--scale" in argv or any(x.startswith("--scale=") for x in argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.fn(args)
    except ConfigError as e:
        cleanup(args)
        print(f"anchorlab: error: {name_flags(str(e), args)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        cleanup(args)
        note = getattr(args, "resume_note", None) or (
            "re-running the same command skips the finished runs and resumes any run that has a checkpoint")
        print(f"anchorlab: interrupted; {note}", file=sys.stderr)
        return 130
    except BrokenPipeError:   # the reader stopped reading (`anchorlab ... | head`): no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except BaseException:
        cleanup(args)
        if getattr(args, "resume_note", None):
            print(f"anchorlab: failed; {args.resume_note}", file=sys.stderr)
        raise


if __name__ == "__main__":
    sys.exit(main())
