"""Progress display: a tqdm bar on a terminal, plain lines anywhere else.

When the stream is not a terminal (CI, ``nohup``, a cluster job's log file)
a carriage-return bar would fill the log with updates, so :class:`Progress`
writes one line per event instead: per evaluation for training, per finished
run for sweeps. It is a display object the caller asks for (``progress=True``,
the CLI's default), so it writes to its stream directly, as tqdm would.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is an interactive terminal."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or not a file
        return False


def hms(seconds: float | None) -> str:
    """A duration as ``1h02m``, ``4m10s`` or ``35s``; ``?`` for None or NaN."""
    if seconds is None or seconds != seconds:
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else (f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s")


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


class Progress:
    """Progress over ``total`` units (steps or runs) from ``initial``.

    ``update(n)`` advances; ``show(row, keys)`` reports an evaluation row
    (bar postfix on a terminal, else one line with ``step`` and the ``keys``);
    ``note(text)`` reports an event (``tqdm.write`` on a terminal, else one line).
    A disabled instance does nothing.
    """

    def __init__(self, enabled: bool, total: int, initial: int = 0, desc: str = "", unit: str = "step",
                 stream: IO[str] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total, self.n, self.desc, self.unit = total, initial, desc, unit
        self.initial = initial
        self.t0 = time.perf_counter()
        self.bar = None
        self.lines = False
        if not enabled:
            return
        if is_terminal(self.stream):
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, dynamic_ncols=True,
                            file=self.stream)
        else:
            self.lines = True

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.bar is not None:
            self.bar.update(n)

    def _line(self, text: str) -> None:
        elapsed = time.perf_counter() - self.t0
        done = self.n - self.initial
        eta = (f", ETA {hms(elapsed / done * (self.total - self.n))}"
               if self.unit == "step" and 0 < done and self.n < self.total else "")
        self.stream.write(f"{self.desc} [{self.n}/{self.total} {self.unit}s, {elapsed:.0f}s{eta}] {text}\n")
        self.stream.flush()

    def show(self, row: Mapping[str, Any], keys: Sequence[str] = ()) -> None:
        vals = {k: row[k] for k in keys if isinstance(row.get(k), (int, float)) and not isinstance(row.get(k), bool)}
        if self.bar is not None:
            self.bar.set_postfix({k: f"{v:.3g}" for k, v in vals.items()})
        elif self.lines:
            head = f"step {row['step']}" if "step" in row else ""
            self._line(" ".join([head] + [f"{k}={_fmt(v)}" for k, v in vals.items()]).strip())

    def note(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(text, file=self.stream)
        elif self.lines:
            self._line(text)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
