"""Every command's flags, each with its help and its default (the parser of :mod:`anchorlab.cli`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

from anchorlab.cli.support import DESCRIPTION, WORKFLOW, HelpFormatter


def build_parser(handlers: Mapping[str, Callable[[argparse.Namespace], int]],
                 figure_options: Mapping[str, Any] | None = None) -> argparse.ArgumentParser:
    """The parser of every command; ``handlers[name]`` runs command ``name`` (``args.fn``); ``figure_options``:
    the figures' options (:func:`anchorlab.papers.reproduce.registry.figure_options`), each a ``reproduce`` flag."""
    from anchorlab import __version__

    p = argparse.ArgumentParser(prog="anchorlab", description=DESCRIPTION, epilog=WORKFLOW,
                                formatter_class=HelpFormatter)
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO level (also after the command)")
    p.add_argument("--version", action="version", version=f"anchorlab {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    def positive(text: str) -> int:   # --workers, --seeds: 0 or less is refused, not read as "the default"
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
        if n < 1:
            raise argparse.ArgumentTypeError(f"must be a positive integer (1 or more), got {n}")
        return n

    def floats(text: str) -> list[float]:
        return [float(v) for v in text.split(",") if v.strip()]

    def with_lrs(sp: argparse.ArgumentParser) -> None:   # the papers' judgement beside the per-run rate
        sp.add_argument("--peak-lrs", type=floats, metavar="LR,...", help="train at each peak lr (docs/protocol.md)")
        sp.add_argument("--thresholds", type=floats, default=[0.5, 0.8], metavar="T,...", help="OOD thresholds")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, description=help, formatter_class=HelpFormatter)
        # SUPPRESS: an absent -v here keeps the value given before the command
        sp.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log at INFO level")
        return sp

    def overrides(sp: argparse.ArgumentParser, help: str, metavar: str = "KEY=VALUE") -> None:
        sp.add_argument("--set", action="append", default=[], metavar=metavar, help=help + " (repeatable)")

    def execution(sp: argparse.ArgumentParser, workers: str = "parallel runs (default: the CPU count)") -> None:
        sp.add_argument("--executor", default="process", choices=["process", "inprocess", "ray"],
                        help="where runs train: a local process pool, this process, or a Ray cluster")
        sp.add_argument("--workers", type=positive, default=None, help=workers)

    def no_progress(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--no-progress", action="store_true", help="no progress bar or per-run lines")
    b = (command, overrides, execution, no_progress, with_lrs, positive, floats, handlers, figure_options or {})
    for group in (_run_commands, _demo_commands, _sweep_commands, _reproduce_command, _bench_command):
        group(b)
    return p


def _run_commands(b: tuple) -> None:
    """The config, train and eval commands."""
    command, overrides, execution, no_progress, with_lrs, positive, floats, handlers, figure_options = b
    sp = command("config", "print the resolved config, its run id and its peak lr; --list the presets")
    sp.add_argument("config", nargs="?", help="YAML file or preset name (e.g. neurips/paper, demo/small, scan/cpu)")
    overrides(sp, "dotted override, e.g. --set init.gamma=0.45")
    sp.add_argument("--list", action="store_true", help="list the config presets")
    sp.add_argument("--reference", action="store_true",
                    help="print the reference of every config field (markdown, as docs/config_reference.md)")
    sp.set_defaults(fn=handlers["config"])

    sp = command("train", "train one model (any task); re-running the same command resumes it")
    sp.add_argument("config", help="YAML file or preset name (e.g. neurips/paper, demo/small, scan/cpu)")
    overrides(sp, "dotted override, e.g. --set init.gamma=0.45")
    sp.add_argument("--out", help="run directory (default: runs/<name>-<run_id>); resumes if it exists")
    no_progress(sp)
    sp.set_defaults(fn=handlers["train"])

    sp = command("eval", "re-evaluate a trained (or unfinished) run: the task's metrics and tables (CSV)")
    sp.add_argument("run", help="run directory")
    overrides(sp, "task override for this evaluation, e.g. task.n_eval_per_group=2000", "task.KEY=VALUE")
    sp.add_argument("--out", help="where to write eval files (default: the run directory)")
    sp.set_defaults(fn=handlers["eval"])


def _demo_commands(b: tuple) -> None:
    """The demo and robustness commands."""
    command, overrides, execution, no_progress, with_lrs, positive, floats, handlers, figure_options = b
    sp = command("demo", "train a large-init and a small-init model and compare them")
    sp.add_argument("--task", default="journal", choices=["journal", "neurips"],
                    help="journal: both (3,4) and (4,3) unseen, journal gamma 0.4 vs 0.8 (the init-rate contrast); "
                         "neurips: the mirror task, plain gamma 0.3 vs 0.45 (both on the paper's large-init side)")
    sp.add_argument("--out", default="demo_out", help="output directory (resumable)")
    sp.add_argument("--workers", type=positive, default=2, help="parallel training processes")
    sp.add_argument("--seed", type=int, default=0, help="init and data seed (--task journal; the first of --seeds)")
    sp.add_argument("--op-set", type=int, default=0,
                    help="--task journal: 0 the papers' steps, K >= 1 the K-th valid random step set (docs/demo.md)")
    sp.add_argument("--seeds", type=positive, default=1,
                    help="seeds per model; the contrast rate is reported over them")
    overrides(sp, "override the demo config for both models")
    sp.add_argument("--dry-run", action="store_true", help="print the runs and their estimated cost; train nothing")
    no_progress(sp)
    with_lrs(sp)
    sp.set_defaults(fn=handlers["demo"])

    sp = command("robustness", "the headline over random anchor op sets x seeds: large vs small init")
    sp.add_argument("config", nargs="?", default="demo/small", help="base config")
    sp.add_argument("--out", required=True, help="study directory (resumable)")
    sp.add_argument("--op-sets", type=positive, default=5, help="number of op sets, the papers' first")
    sp.add_argument("--no-papers-op-set", action="store_true", help="draw every op set at random")
    sp.add_argument("--op-seed", type=int, default=0, help="seed of the op-set draw")
    sp.add_argument("--seeds", type=positive, default=3, help="seeds per op set and setting")
    sp.add_argument("--setting", action="append", default=[], metavar="NAME:KEY=VALUE[,...]",
                    help="a model setting, first the memorizing one, e.g. large_init:init.gamma=0.3 "
                         "(none given: the demo's two gammas)")
    overrides(sp, "override for every run")
    sp.add_argument("--vary", action="append", default=[], metavar="KEY=V1,V2[,...]",
                    help="regime map: repeat the study at each value (several --vary are crossed), "
                         "e.g. --vary train.epochs=3,12 --vary optim.peak_lr=5e-4,2e-3; writes map.csv")
    sp.add_argument("--dry-run", action="store_true", help="print the runs and their estimated cost; train nothing")
    execution(sp)
    no_progress(sp)
    with_lrs(sp)
    sp.set_defaults(fn=handlers["robustness"])


def _sweep_commands(b: tuple) -> None:
    """The sweep, status, report and analyze commands."""
    command, overrides, execution, no_progress, with_lrs, positive, floats, handlers, figure_options = b
    sp = command("sweep", "run (or resume) a sweep: a base config x axes, results in SQLite; --list the presets")
    sp.add_argument("spec", nargs="?", help="sweep YAML or preset (e.g. fig2_cpu)")
    sp.add_argument("--list", action="store_true", help="list the sweep presets")
    overrides(sp, "dotted override for every run, after the spec's own set, e.g. --set train.epochs=2")
    sp.add_argument("--only", action="append", default=[], metavar="KEY=V[,V...]",
                    help="run a slice: keep the axis values given (repeatable; run ids unchanged, so the full "
                         "sweep into the same --out skips them), e.g. --only init.gamma=0.3 --only train.init_seed=0")
    sp.add_argument("--out", help="sweep directory (default: runs/<name>)")
    sp.add_argument("--done-in", action="append", default=[], metavar="TABLE",
                    help="a run table CSV with a run_id column (e.g. docs/figures/fig2_cell_cpu.csv): its completed "
                         "runs were done on another machine and are not trained again (repeatable)")
    sp.add_argument("--dry-run", action="store_true",
                    help="list the runs, each run's peak lr, what would be done and its estimated cost; train nothing")
    execution(sp)
    sp.add_argument("--stack", default="auto",
                    help="train same-shape runs as stacked models: auto (where faster), never, or a max size")
    no_progress(sp)
    sp.set_defaults(fn=handlers["sweep"])

    sp = command("status", "how far a running or stopped sweep is: runs done / running / left, each running "
                           "run's step and ETA, the sweep's ETA")
    sp.add_argument("dir", help="a sweep folder (the --out of sweep or demo; reproduce's --out or its sweep/)")
    sp.add_argument("--workers", type=positive, default=None,
                    help="the workers the ETA assumes (default: the runs training now)")
    sp.set_defaults(fn=handlers["status"])

    sp = command("report", "HTML page with the figures and tables of a sweep")
    sp.add_argument("sweep_dir", help="a sweep directory (the --out of `anchorlab sweep`)")
    sp.add_argument("--screenshot", metavar="PNG", help="also render the page with headless Chromium into PNG")
    sp.set_defaults(fn=handlers["report"])

    sp = command("analyze", "analyses of trained runs (PNG + CSV); --list shows them")
    sp.add_argument("args", nargs="*", metavar="RUN... ANALYSIS",
                    help="run directory (several for multi-run analyses) then the analysis name")
    sp.add_argument("--list", action="store_true", help="list the analyses and the tasks they apply to")
    sp.add_argument("--out", help="output directory (default: RUN/analysis)")
    sp.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="analysis option, YAML value, e.g. --option keys=[30,31,32] (see docs/mechanism.md)")
    sp.set_defaults(fn=handlers["analyze"])


def _reproduce_command(b: tuple) -> None:
    """The reproduce command."""
    command, overrides, execution, no_progress, with_lrs, positive, floats, handlers, figure_options = b
    sp = command("reproduce", "reproduce a paper figure: sweep + analyses + figure + paper values")
    sp.add_argument("figure", nargs="?", help="figure id (see --list)")
    sp.add_argument("--list", action="store_true", help="list the figures, their runs and estimated compute")
    sp.add_argument("--scale", default="cpu", choices=["demo", "cpu", "paper"],
                    help="the figure's sweep: demo (a fast look), cpu or paper scale (default: cpu); --list shows "
                         "which a figure has and their rules")
    sp.add_argument("--out", help="output directory (default: runs/reproduce/<figure>-<scale>)")
    execution(sp)
    overrides(sp, "extra override for every run of the figure's sweep (e.g. train.epochs=2)")
    for name, opt in figure_options.items():   # declared once, by the figures (papers/reproduce/registry.py)
        sp.add_argument(f"--{name}", choices=opt.values, metavar=opt.metavar, help=opt.help)
    sp.add_argument("--from-table", action="append", default=[], metavar="CSV",
                    help="a committed run table (e.g. docs/figures/fig2_cell_cpu.csv) whose rows join the runs of "
                         "OUT/sweep (a run found there wins); with --no-train it redraws a committed figure; "
                         "repeatable")
    sp.add_argument("--dry-run", action="store_true",
                    help="list the runs, the estimated hours on this machine and the scale rule; train nothing")
    sp.add_argument("--no-train", action="store_true",
                    help="draw the figure from the completed runs OUT/sweep already holds (and the --from-table "
                         "rows); train nothing")
    no_progress(sp)
    sp.set_defaults(fn=handlers["reproduce"])


def _bench_command(b: tuple) -> None:
    """The bench command."""
    command, overrides, execution, no_progress, with_lrs, positive, floats, handlers, figure_options = b
    sp = command("bench", "this CPU's GEMM rate per layout and dtype and the training step per precision")
    sp.add_argument("--shapes", default="demo,paper", help="demo (demo/small) and/or paper (neurips/paper, batch 2048)")
    sp.add_argument("--precisions", default="fp32,bf16,bf16-native",
                    help="fp32 (train.amp=none), bf16 (train.amp=bf16, bf16_path=autocast), "
                         "bf16-native (train.amp=bf16, bf16_path=native)")
    sp.add_argument("--steps", default="demo=20,paper=4", help="timed steps per shape")
    sp.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    sp.add_argument("--rounds", type=int, default=1,
                    help="time the steps this many times, every precision once per round in turn; the "
                         "speed-up is against the same round's fp32 step and the targets read the median round")
    sp.add_argument("--threads", type=int, default=1, help="torch threads (training uses 1 per worker)")
    sp.add_argument("--clock", default="wall", choices=["wall", "process"],
                    help="process: this process's CPU seconds (fair on a machine shared with other jobs)")
    sp.add_argument("--profile", action="store_true",
                    help="also split each step's operator time by category, with the cast share of forward+backward")
    sp.add_argument("--no-cuda", action="store_true", help="skip the GPU bench even where a CUDA device is present")
    sp.add_argument("--no-malloc-retain", action="store_true",
                    help="leave glibc's malloc thresholds alone (as train.malloc_retain=false)")
    sp.add_argument("--csv", metavar="PATH", help="also write the step table (and PATH's stem + _layouts.csv, "
                                                  "_profile.csv with --profile, _cuda.csv where a GPU ran)")
    overrides(sp, "a config override for every step (CPU and GPU), e.g. optim.fused=true "
                  "(not train.amp / train.bf16_path: --precisions sets those)")
    sp.set_defaults(fn=handlers["bench"])
