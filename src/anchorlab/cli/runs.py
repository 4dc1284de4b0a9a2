"""The commands on one config or one run: ``config``, ``train``, ``eval``, ``analyze``, ``bench``."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from anchorlab.config import ConfigError
from anchorlab.cli.support import config_arg, peak_line, preset_lines, resume_note, run_arg, will_create


def cmd_config(a: argparse.Namespace) -> int:
    from anchorlab.config import dump_config, load_config, preset_names

    if a.reference:
        from anchorlab.config.reference import config_reference

        print(config_reference(), end="")
        return 0
    if a.list or not a.config:
        from anchorlab.config.base import PRESET_DIR

        print("config presets (name, or any YAML file path):")
        print(preset_lines({name: PRESET_DIR / f"{name}.yaml" for name in preset_names()}))
        return 0
    cfg = load_config(config_arg(a.config, "config"), a.set)
    print(dump_config(cfg), end="")
    print(f"# run_id: {cfg.run_id()}")
    print(f"# {peak_line(cfg)}")
    return 0


def _print_metrics(task, metrics: dict) -> None:
    from anchorlab.tasks.base import headline_lines

    for line in headline_lines(metrics, task.headline):
        print(line)


def cmd_train(a: argparse.Namespace) -> int:
    from anchorlab.config import load_config
    from anchorlab.train import train

    cfg = load_config(config_arg(a.config, "train"), a.set)
    out = Path(a.out) if a.out else Path("runs") / f"{cfg.name}-{cfg.run_id()}"
    will_create(a, out)
    from anchorlab.train.environment import pick_device

    if not a.no_progress and pick_device(cfg.train.device).type == "cpu":
        from anchorlab.progress import hms
        from anchorlab.sweep.probe import run_seconds

        t = run_seconds(cfg)
        if t == t:
            print(f"expected: ~{hms(t)} on this CPU for the whole run (a timed probe of this model's step and "
                  f"evaluation)", flush=True)
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
        p = f["precision"]
        path = f", {p.get('path', 'autocast')} path" if p["amp"] == "bf16" else ""
        print(f"precision: {p['matmul_dtype']} matmuls{path} ({p['reason']})")
    _print_metrics(res.task, f["final"])
    return 0


def cmd_eval(a: argparse.Namespace) -> int:
    from dataclasses import replace

    from anchorlab.config import experiment_from_dict
    from anchorlab.io import atomic_write, write_json
    from anchorlab.tasks.base import build_task
    from anchorlab.train import load_run

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


def cmd_analyze(a: argparse.Namespace) -> int:
    from anchorlab.analysis.registry import ANALYSES, MULTI_RUN, run_analysis, run_multi_analysis
    from anchorlab.papers import analyses  # noqa: F401  (registers the papers' analyses)

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


def cmd_bench(a: argparse.Namespace) -> int:
    from anchorlab.bench import format_result, run_bench

    steps = {}
    for item in a.steps.split(","):
        name, _, n = item.partition("=")
        if not n.isdigit() or int(n) < 1:
            raise ConfigError(f"--steps: expected SHAPE=N[,...] with N >= 1, got {item!r}")
        steps[name] = int(n)
    try:
        r = run_bench(a.shapes.split(","), a.precisions.split(","), steps=steps, warmup=a.warmup, threads=a.threads,
                      clock=a.clock, profile=a.profile, malloc_retain=not a.no_malloc_retain, cuda=not a.no_cuda,
                      overrides=a.set, rounds=a.rounds)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    print(format_result(r))
    if a.csv:
        from anchorlab.io import atomic_write

        base = Path(a.csv)
        tables = {base: r.steps, base.with_name(base.stem + "_layouts.csv"): r.layouts}
        if r.splits:
            tables[base.with_name(base.stem + "_profile.csv")] = r.profile_compare()
        if r.cuda_steps is not None:
            tables[base.with_name(base.stem + "_cuda.csv")] = r.cuda_steps
        for path, table in tables.items():
            atomic_write(path, lambda p, t=table: t.to_csv(p, index=False))
        print(f"wrote {', '.join(str(p) for p in tables)}")
    return 0
