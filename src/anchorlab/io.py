"""Atomic, durable file writes: write a temp file in the same folder, fsync it, rename, fsync the folder.

After :func:`atomic_write` returns, ``path`` holds either the old content or
the whole new content, even if the process is killed or the machine loses
power at any point (the rename is atomic on POSIX, and the fsyncs order the
data before the directory entry).

Committed research outputs (a fitted model, a measured rate) are not package data: they are read from
the figures folder, :func:`figures_dir`. The rule: the folder named by the environment variable
``ANCHORLAB_FIGURES`` when it is set, else ``docs/figures/`` of the source tree this package runs from
(a clone, or an editable install of one). A plain ``pip install`` has no such folder, so
:func:`figures_file` raises :class:`MissingResult` with one line naming the file and the variable.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any, Callable


FIGURES_ENV = "ANCHORLAB_FIGURES"


class MissingResult(FileNotFoundError):
    """A committed research file (docs/figures/...) is not at hand; the message is one line."""


def figures_dir() -> Path:
    """The folder of committed tables and fitted models: ``$ANCHORLAB_FIGURES``, else the clone's docs/figures."""
    env = os.environ.get(FIGURES_ENV, "").strip()
    return Path(env).expanduser() if env else Path(__file__).resolve().parents[2] / "docs" / "figures"


def figures_file(name: str, what: str) -> Path:
    """``figures_dir() / name``; :class:`MissingResult` (one line, naming ``what``) when it is absent."""
    path = figures_dir() / name
    if not path.is_file():
        via = f" (from ${FIGURES_ENV})" if os.environ.get(FIGURES_ENV, "").strip() else ""
        raise MissingResult(f"{what}: no file {path}{via}; it is in docs/figures/ of an anchorlab clone: "
                            f"set {FIGURES_ENV} to that folder")
    return path


def fsync_path(path: str | Path) -> None:
    """Flush a file's (or a folder's) content and metadata to disk.

    A file's errors propagate (a failing disk must not look like success); a
    folder that cannot be opened or synced (some platforms and filesystems) is skipped.
    """
    is_dir = Path(path).is_dir()
    try:
        fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if is_dir else 0))
    except OSError:
        if is_dir:
            return
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not is_dir:
            raise
    finally:
        os.close(fd)


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp_path)``, fsync it, atomically move it to ``path`` and fsync the folder.

    The file gets the mode a plain ``open(path, "w")`` would give (0666 less
    the umask: 0644 under the usual 022), so a group sharing the results can read them.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _create_temp(path)
    mode = os.stat(tmp).st_mode & 0o777
    try:
        write(Path(tmp))
        os.chmod(tmp, mode)   # a writer that recreates the file (safetensors does, 0600) gets the same mode
        fsync_path(tmp)
        os.replace(tmp, path)
        fsync_path(path.parent)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _create_temp(path: Path) -> str:
    """A new empty file beside ``path`` (``tempfile.mkstemp`` would make it 0600, unreadable by the group)."""
    while True:
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:
            continue


def write_text(path: str | Path, text: str) -> Path:
    return atomic_write(path, lambda p: p.write_text(text))


def write_json(path: str | Path, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_default) + "\n")


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())


def _default(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


PATH_COLUMNS = ("source", "run_dir")


def portable_paths(table, out: str | Path):
    """``table`` with no machine path in its path columns (:data:`PATH_COLUMNS`): a run directory is written
    relative to its sweep (``runs/<id>``), any other path under ``out`` relative to ``out`` (``sweep``), another
    absolute path relative to the working directory where it lies under it, else as its last three parts; relative
    paths and empty cells are kept. A committed table is read without its paths
    (:func:`anchorlab.sweep.runtable.run_table`), so nothing it draws depends on them."""
    cols = [c for c in PATH_COLUMNS if c in getattr(table, "columns", ())]
    if not cols:
        return table
    base, cwd = Path(out).resolve(), Path.cwd().resolve()

    def rel(v, col):
        if not isinstance(v, str) or not v or not os.path.isabs(v):
            return v
        p = Path(v).resolve()
        if col == "run_dir" and p.parent.name == "runs":
            return str(Path("runs", p.name))
        for root in (base, cwd):
            try:
                return str(p.relative_to(root))
            except ValueError:
                pass
        return str(Path(*p.parts[-3:]))

    t = table.copy()
    for c in cols:
        t[c] = t[c].map(lambda v, c=c: rel(v, c))
    return t
