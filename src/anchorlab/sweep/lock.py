"""One driver per sweep folder: a lock file that names the running driver.

:func:`driver_lock` holds ``OUT/.driver.lock`` (JSON: pid, host, command, start time) while a sweep runs into
``OUT``. A second driver into the same folder is refused in one line naming the first; a lock whose process is
gone (same host, pid not alive) is stale: it is taken over, with a warning that says so. Two drivers in one
folder would both train every run and write each step twice into its metrics.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from anchorlab.config import ConfigError

log = logging.getLogger(__name__)
LOCK_NAME = ".driver.lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:      # exists, owned by someone else
        return True
    return True


def read_lock(out: Path) -> dict | None:
    """The lock's record, or None when there is none (or it cannot be read)."""
    try:
        return json.loads((Path(out) / LOCK_NAME).read_text())
    except (OSError, ValueError):
        return None


def _describe(rec: dict) -> str:
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(rec.get("started", 0))))
    return f"pid {rec.get('pid')} on {rec.get('host')}, since {since}: {rec.get('command', '?')}"


@contextmanager
def driver_lock(out: str | Path) -> Iterator[None]:
    """Hold ``out``'s driver lock for the block; :class:`ConfigError` (one line) when a live driver holds it."""
    out = Path(out)
    path = out / LOCK_NAME
    me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
          "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:300]}
    for _ in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            rec = read_lock(out)
            if rec is None:          # being written this instant, or garbage: look again, then take it over
                time.sleep(0.2)
                rec = read_lock(out) or {}
            same_host = rec.get("host") == me["host"]
            pid = int(rec.get("pid") or 0)
            if rec and pid == me["pid"] and same_host:
                raise ConfigError(f"out_dir {out}: this process already drives it")
            if rec and (not same_host or _alive(pid)):
                where = "" if same_host else f"; if that driver is gone, remove {path}"
                raise ConfigError(f"out_dir {out}: another driver is running in it ({_describe(rec)}); wait for it "
                                  f"to finish or give another --out{where}")
            log.warning("out_dir %s: taking over a stale lock (%s: no longer running)", out,
                        _describe(rec) if rec else "unreadable")
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            continue
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        break
    else:
        raise ConfigError(f"out_dir {out}: could not take its driver lock {path}")
    try:
        yield
    finally:
        rec = read_lock(out)
        if rec and rec.get("pid") == me["pid"] and rec.get("host") == me["host"]:
            try:
                path.unlink()
            except FileNotFoundError:
                pass
