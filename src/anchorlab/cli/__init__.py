"""Command line: thin wrappers that parse, build a config, and call the library.

Every command works for every task family (``task.name`` in the config). The package:

* :mod:`.parser` declares every command's flags; :mod:`.args` parses the values that are more than a flag;
* :mod:`.support` holds what the commands share (argument checks, messages, dry runs, cleanup);
* :mod:`.runs` (config, train, eval, analyze, bench), :mod:`.studies` (demo, robustness, sweep, report) and
  :mod:`.reproduce` hold the command handlers;
* ``main`` (the ``anchorlab`` console script; ``python -m anchorlab.cli``) runs one command and turns a
  config error into one line on stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from anchorlab.config import ConfigError
from anchorlab.cli.support import check_out, cleanup, name_flags


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """Every command's parser; the figures' options become ``reproduce`` flags (read from the figure registry only
    where ``argv`` names the command, so that other commands start without importing the figures)."""
    from anchorlab.cli.parser import build_parser as build
    from anchorlab.cli.reproduce import cmd_reproduce
    from anchorlab.cli.runs import cmd_analyze, cmd_bench, cmd_config, cmd_eval, cmd_train
    from anchorlab.cli.studies import cmd_demo, cmd_report, cmd_robustness, cmd_status, cmd_sweep

    return build({"config": cmd_config, "train": cmd_train, "eval": cmd_eval, "demo": cmd_demo,
                  "robustness": cmd_robustness, "sweep": cmd_sweep, "report": cmd_report, "status": cmd_status,
                  "analyze": cmd_analyze,
                  "reproduce": cmd_reproduce, "bench": cmd_bench},
                 _figure_options() if argv is None or "reproduce" in argv else {})


def _figure_options() -> dict:
    from anchorlab.papers.reproduce import figure_options

    return figure_options()


def local_cores() -> int:
    """The cores this process may run on (its affinity where the OS says, else the CPU count)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return max(os.cpu_count() or 1, 1)


def cap_workers(args: argparse.Namespace) -> None:
    """A local pool never gets more workers than this machine has cores: a larger ``--workers`` is lowered, and
    said in one line (a Ray cluster's workers are its own)."""
    n = getattr(args, "workers", None)
    if not isinstance(n, int) or getattr(args, "executor", "process") == "ray":
        return
    cores = local_cores()
    if n > cores:
        print(f"anchorlab: --workers {n}: this machine has {cores} core(s); using {cores}", file=sys.stderr)
        args.workers = cores


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    args.argv = argv
    if args.cmd == "reproduce":
        args.scale_given = "--scale" in argv or any(x.startswith("--scale=") for x in argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    cap_workers(args)
    from anchorlab.config.process_settings import PROCESS_SETTINGS_ENV, ask_for_process_settings

    before = os.environ.get(PROCESS_SETTINGS_ENV)
    ask_for_process_settings()   # the command line's training (and its workers) asks for them
    try:
        check_out(args)
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
    finally:
        if before is None:
            os.environ.pop(PROCESS_SETTINGS_ENV, None)
        else:
            os.environ[PROCESS_SETTINGS_ENV] = before
