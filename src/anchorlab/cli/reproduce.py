"""The ``reproduce`` command: a paper figure's sweep, analyses, figure and paper values."""

from __future__ import annotations

import argparse
from pathlib import Path

from anchorlab.config import ConfigError
from anchorlab.cli.support import will_create


def cmd_reproduce(a: argparse.Namespace) -> int:
    from anchorlab.papers.reproduce import FIGURES, describe_figures, reproduce
    from anchorlab.papers.reproduce import figure_options

    if a.list or not a.figure:
        print(describe_figures(a.scale if a.scale_given else None))
        return 0
    if a.figure not in FIGURES:
        raise ConfigError(f"reproduce: unknown figure {a.figure!r}; one of {', '.join(FIGURES)} "
                          "(`anchorlab reproduce --list`)")
    out = Path(a.out) if a.out else Path("runs") / "reproduce" / f"{a.figure}-{a.scale}"
    will_create(a, out)
    print(f"reproduce {a.figure} at scale {a.scale} -> {out}", flush=True)
    options = {k: getattr(a, k) for k in figure_options() if getattr(a, k, None) is not None}
    res = reproduce(a.figure, a.scale, out, executor=a.executor, workers=a.workers, dry_run=a.dry_run,
                    progress=not a.no_progress, overrides=a.set, train=not a.no_train, options=options,
                    from_tables=a.from_table)
    for k, v in res.items():
        print(f"{k}: {v}")
    return 0
