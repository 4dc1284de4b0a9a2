"""Command line: thin wrappers that parse, build a config, and call the library."""

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


def _is_seq2seq(spec: str) -> bool:
    from .config import load_yaml

    task = load_yaml(spec).get("task") or {}
    return isinstance(task, dict) and "dataset" in task


def _cmd_train_seq2seq(a: argparse.Namespace) -> int:
    from .seq2seq_train import load_seq2seq_config, run_seq2seq

    cfg = load_seq2seq_config(a.config, a.set)
    out = Path(a.out) if a.out else Path("runs") / f"{cfg.name}-{cfg.run_id()}"
    final = run_seq2seq(cfg, out, progress=not a.no_progress)
    print(f"run {out}  status={final['status']}  steps={final['steps']}  wall={final['wall_seconds']:.1f}s")
    for k, v in final["final"].items():
        if "/" not in k or k.endswith(("structural", "lexical")):
            print(f"  {k:22s} {v:.4f}")
    return 0


def _cmd_train(a: argparse.Namespace) -> int:
    from .config import load_config
    from .train.loop import train

    if _is_seq2seq(a.config):
        return _cmd_train_seq2seq(a)
    cfg = load_config(a.config, a.set)
    out = Path(a.out) if a.out else Path("runs") / f"{cfg.name}-{cfg.run_id()}"
    res = train(cfg, out, progress=not a.no_progress)
    f = res.final["final"]
    print(f"run {out}  status={res.final['status']}  steps={res.final['steps']}  "
          f"wall={res.final['wall_seconds']:.1f}s")
    for k in ("train_loss", "train_acc", "id_acc", "ood_inferential_acc", "ood_symmetric_acc",
              "ood_other_frac", "commutativity"):
        print(f"  {k:22s} {f.get(k, float('nan')):.4f}")
    return 0


def _cmd_eval(a: argparse.Namespace) -> int:
    from .eval.metrics import evaluate, top_deviations
    from .io import atomic_write, write_json
    from .train.loop import config_of, load_run

    res = load_run(a.run)
    cfg = config_of(a.run)
    sets = res.task.eval_sets(cfg.train.data_seed, a.n)
    metrics, rows, devs = evaluate(res.model, res.task, sets)
    out = Path(a.out) if a.out else Path(a.run)
    atomic_write(out / "eval_groups.csv", lambda p: rows.to_csv(p, index=False))
    atomic_write(out / "eval_deviations.csv", lambda p: devs.to_csv(p, index=False))
    write_json(out / "eval.json", metrics)
    for k in ("train_acc", "id_acc", "ood_inferential_acc", "ood_symmetric_acc", "ood_other_frac",
              "commutativity"):
        print(f"  {k:22s} {metrics[k]:.4f}")
    for a1, a2 in res.task.held_out_pairs:
        top = ", ".join(f"{d:+d}: {p:.0%}" for d, p in top_deviations(devs, f"{a1}{a2}"))
        print(f"  ({a1},{a2}) prediction - inferential target: {top}")
    print(f"wrote {out / 'eval_groups.csv'}, {out / 'eval_deviations.csv'}, {out / 'eval.json'}")
    return 0


def _cmd_demo(a: argparse.Namespace) -> int:
    import pandas as pd

    from .demo import DEMO_GAMMAS, DEMO_PRESET, run_demo

    print(f"anchorlab demo: training two models on the 'neurips' anchor task (preset {DEMO_PRESET}), "
          f"gammas {DEMO_GAMMAS}, in {a.workers} worker process(es)...", flush=True)
    table = run_demo(a.out, a.set, workers=a.workers)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.drop(columns=["train_acc"]).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"\nwrote {Path(a.out) / 'summary.json'} and {Path(a.out) / 'ood_over_training.png'}")
    return 0


SWEEP_DIR = Path(__file__).parent / "sweeps"


def resolve_sweep(spec: str) -> Path:
    """A sweep YAML path or a bundled sweep preset name (e.g. ``fig2_cpu``)."""
    p = Path(spec)
    if p.is_file():
        return p
    cand = SWEEP_DIR / (spec if spec.endswith(".yaml") else f"{spec}.yaml")
    if cand.is_file():
        return cand
    names = sorted(q.stem for q in SWEEP_DIR.glob("*.yaml"))
    raise ConfigError(f"sweep spec {spec!r}: no such file or preset; presets: {', '.join(names)}")


def _cmd_sweep(a: argparse.Namespace) -> int:
    from .sweep.grid import load_sweep
    from .sweep.runner import plan_sweep, run_sweep

    path = resolve_sweep(a.spec)
    spec = load_sweep(path)
    out = Path(a.out) if a.out else Path("runs") / spec.name
    plan = plan_sweep(spec, out)
    if a.dry_run:
        import pandas as pd
        with pd.option_context("display.width", 200, "display.max_rows", 500, "display.max_columns", 30):
            print(plan.to_string(index=False))
        print(f"{len(plan)} runs; {int((plan.action != 'skip').sum())} to do; out: {out}")
        return 0
    todo = int((plan.action != "skip").sum())
    print(f"sweep {spec.name}: {len(plan)} runs, {todo} to do, executor={a.executor}, out={out}", flush=True)
    bar = None
    if not a.no_progress and todo:
        from tqdm.auto import tqdm
        bar = tqdm(total=todo, desc=spec.name, unit="run")
    stack = int(a.stack) if a.stack.isdigit() else a.stack
    if stack not in ("auto", "never") and not isinstance(stack, int):
        raise ConfigError(f"--stack: must be 'auto', 'never' or a maximum stack size, got {a.stack!r}")
    df = run_sweep(spec, out, executor=a.executor, max_workers=a.workers, stack=stack,
                   on_result=(lambda r, st: bar.update(1)) if bar else None)
    if bar:
        bar.close()
    st = df.drop_duplicates("run_id").status.value_counts().to_dict()
    print(f"done: {st}; results in {out / 'results.sqlite'}; `anchorlab report {out}` draws the figures")
    return 0


def _cmd_report(a: argparse.Namespace) -> int:
    from .report import make_report

    path = make_report(a.sweep_dir)
    print(f"wrote {path}")
    return 0


def _cmd_analyze(a: argparse.Namespace) -> int:
    from .analysis.complexity_report import NAMES as CX, complexity_summary, run_complexity_analysis

    if a.analysis == "complexity-summary":
        df = complexity_summary(a.run, param=a.param)
        out = Path(a.out) if a.out else Path(a.run[0]) / "analysis"
        out.mkdir(parents=True, exist_ok=True)
        from .io import atomic_write
        atomic_write(out / "complexity-summary.csv", lambda p: df.to_csv(p, index=False))
        print(df.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        return 0
    if len(a.run) != 1:
        raise ConfigError(f"analyze {a.analysis}: takes one RUN, got {len(a.run)}")
    run = a.run[0]
    if a.analysis in CX:
        paths = run_complexity_analysis(run, a.analysis, a.out, param=a.param)
    else:
        try:
            from .analysis.mechanism import ANALYSES, run_analysis
        except ImportError as e:  # pragma: no cover
            raise ConfigError(f"analyze: mechanism analyses unavailable ({e})") from None
        if a.analysis not in ANALYSES:
            raise ConfigError(f"analyze: unknown analysis {a.analysis!r}; choose from "
                              f"{', '.join([*ANALYSES, *CX, 'complexity-summary'])}")
        opts = {}
        for kv in a.option:
            if "=" not in kv:
                raise ConfigError(f"--option {kv!r}: expected KEY=VALUE")
            k, v = kv.split("=", 1)
            opts[k] = v
        paths = run_analysis(run, a.analysis, a.out or Path(run) / "analysis", **opts)
    for k, v in paths.items():
        print(f"{k}: {v}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="anchorlab", description=__doc__)
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = p.add_subparsers(dest="cmd", required=True)

    def with_config(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("config", help="YAML file or preset name (e.g. neurips/paper, demo/small, scan/cpu)")
        sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="dotted override, e.g. --set init.gamma=0.8 (repeatable)")

    sp = sub.add_parser("config", help="print the resolved config and its run id")
    with_config(sp)
    sp.set_defaults(fn=_cmd_config)

    sp = sub.add_parser("train", help="train one model")
    with_config(sp)
    sp.add_argument("--out", help="run directory (default runs/<name>-<run_id>); resumes if it exists")
    sp.add_argument("--no-progress", action="store_true")
    sp.set_defaults(fn=_cmd_train)

    sp = sub.add_parser("eval", help="re-evaluate a trained run: per-group accuracy, hypotheses, deviations")
    sp.add_argument("run", help="run directory")
    sp.add_argument("--n", type=int, default=None, help="sequences per group (default: the config's)")
    sp.add_argument("--out", help="where to write eval files (default: the run directory)")
    sp.set_defaults(fn=_cmd_eval)

    sp = sub.add_parser("demo", help="train a large-init and a small-init model and compare them")
    sp.add_argument("--out", default="demo_out")
    sp.add_argument("--workers", type=int, default=2, help="parallel training processes (default 2)")
    sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override the demo config for both models")
    sp.set_defaults(fn=_cmd_demo)

    sp = sub.add_parser("sweep", help="run (or resume) a sweep: a base config x axes, results in SQLite")
    sp.add_argument("spec", help="sweep YAML or preset (e.g. fig2_cpu)")
    sp.add_argument("--out", help="sweep directory (default runs/<name>)")
    sp.add_argument("--dry-run", action="store_true", help="list the runs and what would be done")
    sp.add_argument("--executor", default="process", choices=["process", "inprocess", "ray"])
    sp.add_argument("--workers", type=int, default=None, help="parallel runs (default: CPU count)")
    sp.add_argument("--stack", default="auto",
                    help="train same-shape runs as stacked models: auto (where faster), never, or a max size")
    sp.add_argument("--no-progress", action="store_true")
    sp.set_defaults(fn=_cmd_sweep)

    sp = sub.add_parser("report", help="HTML page with the figures and tables of a sweep")
    sp.add_argument("sweep_dir")
    sp.set_defaults(fn=_cmd_report)

    sp = sub.add_parser("analyze", help="analyses of trained runs (PNG + CSV)")
    sp.add_argument("run", nargs="+", help="run directory (several for complexity-summary)")
    sp.add_argument("analysis", help="flow, flow-scores, mask-key, mask-anchor2, tsne-ao1, cos-ao2, cos-v2, "
                    "condensation, embedding, cov-spectrum, stable-rank, complexity-summary")
    sp.add_argument("--out", help="output directory (default RUN/analysis)")
    sp.add_argument("--param", default="blocks.0.attn.W_Q.weight", help="matrix for condensation")
    sp.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="option of a mechanism analysis, e.g. --option n_inputs=500 (see docs/mechanism.md)")
    sp.set_defaults(fn=_cmd_analyze)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
