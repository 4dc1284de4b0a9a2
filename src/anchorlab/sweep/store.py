"""Results store of a sweep: one embedded SQLite file (stdlib ``sqlite3``, WAL journal).

Schema::

    runs     run_id TEXT PRIMARY KEY, sweep, status (pending|running|finished|stopped_early|failed|diverged),
             config (JSON), versions (JSON), started, finished (ISO-8601 UTC), wall_seconds,
             error (text), run_dir, checkpoint (paths relative to the store's folder),
             attempts (how many times the run was submitted),
             plus one column per sweep axis, named by its dotted key (e.g. "init.gamma")
    metrics  run_id, step, metric, value, kind (history|final|best),
             UNIQUE (run_id, step, metric, kind)
    meta     key, value (schema_version)

``final`` rows carry the step of the last evaluation; ``best`` rows the first
step at which the best value was reached (-1 when unknown). NaN values are
stored as NULL and read back as NaN. Every write is one transaction; only the
sweep driver writes (readers may poll the file at any time, as WAL allows).
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from anchorlab.config import ConfigError
from anchorlab.run_status import STATUSES
from anchorlab.sweep.grid import RunSpec

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

SCHEMA_VERSION = "2"   # 2: status 'stopped_early' (early stopping); version-1 stores are migrated on open
KINDS = ("history", "final", "best")
RUN_COLUMNS = ("run_id", "sweep", "status", "config", "versions", "started", "finished", "wall_seconds",
               "error", "run_dir", "checkpoint", "attempts")
TIMING_COLUMNS = ("started", "finished", "wall_seconds")
NOT_METRICS = ("step",)

_RUNS_TABLE = f"""
CREATE TABLE IF NOT EXISTS {{name}} (
    run_id TEXT PRIMARY KEY,
    sweep TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ({", ".join(repr(s) for s in STATUSES)})),
    config TEXT NOT NULL,
    versions TEXT,
    started TEXT,
    finished TEXT,
    wall_seconds REAL,
    error TEXT,
    run_dir TEXT,
    checkpoint TEXT,
    attempts INTEGER NOT NULL DEFAULT 0
)"""
_SCHEMA = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);\n" + _RUNS_TABLE.format(name="runs") + f""";
CREATE TABLE IF NOT EXISTS metrics (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    step INTEGER NOT NULL,
    metric TEXT NOT NULL,
    value REAL,
    kind TEXT NOT NULL CHECK (kind IN ({", ".join(repr(k) for k in KINDS)})),
    UNIQUE (run_id, step, metric, kind)
);
CREATE INDEX IF NOT EXISTS metrics_by_kind ON metrics (kind, metric);
"""


def _q(name: str) -> str:
    """Quote an identifier (axis names contain dots)."""
    return '"' + name.replace('"', '""') + '"'


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _sql_value(v: Any) -> Any:
    """Axis value -> something SQLite stores (lists/dicts as JSON text)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return json.dumps(v, default=str)


def _num(v: Any) -> float | None:
    """Metric value -> float or None (NaN -> NULL); non-numbers -> None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return None if math.isnan(v) else v


def metric_rows(run_id: str, result: Mapping[str, Any]) -> list[tuple[str, int, str, float | None, str]]:
    """A run function's result dict -> metric rows (run_id, step, metric, value, kind)."""
    history = [h for h in (result.get("history") or []) if isinstance(h, Mapping) and "step" in h]
    rows: dict[tuple[int, str, str], float | None] = {}
    for h in history:
        step = int(h["step"])
        for k, v in h.items():
            if k not in NOT_METRICS and isinstance(v, (int, float)) and not isinstance(v, bool):
                rows[(step, k, "history")] = _num(v)
    last_step = int(result.get("steps", history[-1]["step"] if history else -1))
    for k, v in (result.get("final") or {}).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            rows[(last_step, k, "final")] = _num(v)
    for k, v in (result.get("best") or {}).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            at = next((int(h["step"]) for h in history if h.get(k) == v), -1)
            rows[(at, k, "best")] = _num(v)
    return [(run_id, s, m, v, kind) for (s, m, kind), v in rows.items()]


class ResultStore:
    """The ``results.sqlite`` of a sweep. Use as a context manager or call :meth:`close`."""

    def __init__(self, path: str | Path, axes: Sequence[str] = ()) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.root = self.path.parent
        self.con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        self.con.execute("PRAGMA journal_mode=WAL")
        self.con.execute("PRAGMA synchronous=NORMAL")
        self.con.execute("PRAGMA foreign_keys=ON")
        with self._tx():
            for stmt in _SCHEMA.strip().split(";\n"):
                if stmt.strip():
                    self.con.execute(stmt)
            self.con.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
        self._migrate()
        with self._tx():
            have = self._columns()
            for a in axes:
                if a not in have:
                    self.con.execute(f"ALTER TABLE runs ADD COLUMN {_q(a)}")

    def _migrate(self) -> None:
        """Bring an older store to this schema (version 1 lacked the status 'stopped_early')."""
        version = self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        if version == SCHEMA_VERSION:
            return
        if version != "1":
            raise ConfigError(f"{self.path}: results store schema {version!r} is newer than this anchorlab "
                              f"({SCHEMA_VERSION!r}); upgrade anchorlab")
        cols = self._columns()
        self.con.execute("PRAGMA foreign_keys=OFF")
        try:
            with self._tx():
                self.con.execute(_RUNS_TABLE.format(name="runs_v2"))
                for c in cols:
                    if c not in RUN_COLUMNS:
                        self.con.execute(f"ALTER TABLE runs_v2 ADD COLUMN {_q(c)}")
                names = ", ".join(_q(c) for c in cols)
                self.con.execute(f"INSERT INTO runs_v2 ({names}) SELECT {names} FROM runs")
                self.con.execute("DROP TABLE runs")
                self.con.execute("ALTER TABLE runs_v2 RENAME TO runs")
                self.con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (SCHEMA_VERSION,))
        finally:
            self.con.execute("PRAGMA foreign_keys=ON")
        log.info("migrated %s to results-store schema %s", self.path, SCHEMA_VERSION)

    # ---- plumbing
    def _tx(self) -> "_Transaction":
        return _Transaction(self.con)

    def _columns(self) -> list[str]:
        return [r[1] for r in self.con.execute("PRAGMA table_info(runs)")]

    @property
    def axes(self) -> list[str]:
        """Axis columns present in the store."""
        return [c for c in self._columns() if c not in RUN_COLUMNS]

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "ResultStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- writes
    def register(self, sweep: str, runs: Iterable[RunSpec],
                 run_dir_of: Callable[[str], "str | Path"] | None = None) -> None:
        """Insert missing runs as ``pending``; fill the axis columns of every given run."""
        axes = set(self.axes)
        with self._tx():
            for r in runs:
                rd = str(run_dir_of(r.run_id)) if run_dir_of else None
                self.con.execute(
                    "INSERT OR IGNORE INTO runs (run_id, sweep, status, config, run_dir) VALUES (?, ?, 'pending', ?, ?)",
                    (r.run_id, sweep, json.dumps(r.config.to_dict(), sort_keys=True), rd))
                vals = {k: v for k, v in r.values.items() if k in axes}
                if vals:
                    sets = ", ".join(f"{_q(k)} = ?" for k in vals)
                    self.con.execute(f"UPDATE runs SET {sets} WHERE run_id = ?",
                                     [*(_sql_value(v) for v in vals.values()), r.run_id])

    def reset_interrupted(self, run_ids: Iterable[str] | None = None) -> list[str]:
        """Runs left ``running`` by a driver that died -> ``pending``; returns their ids."""
        ids = self._ids_with("running", run_ids)
        with self._tx():
            self.con.executemany("UPDATE runs SET status = 'pending' WHERE run_id = ?", [(i,) for i in ids])
        return ids

    def mark_running(self, run_id: str) -> None:
        with self._tx():
            self.con.execute("UPDATE runs SET status = 'running', started = ?, finished = NULL, error = NULL, "
                             "attempts = attempts + 1 WHERE run_id = ?", (_now(), run_id))

    def record_result(self, run_id: str, result: Mapping[str, Any], status: str,
                      wall_seconds: float | None = None, checkpoint: str | None = None,
                      error: str | None = None) -> int:
        """Store a run's outcome and metrics (replacing earlier metric rows); returns the row count."""
        if status not in STATUSES:
            raise ConfigError(f"status: must be one of {', '.join(STATUSES)}, got {status!r}")
        rows = metric_rows(run_id, result)
        wall = result.get("wall_seconds", wall_seconds)
        with self._tx():
            self.con.execute("DELETE FROM metrics WHERE run_id = ?", (run_id,))
            self.con.executemany("INSERT OR REPLACE INTO metrics (run_id, step, metric, value, kind) "
                                 "VALUES (?, ?, ?, ?, ?)", rows)
            self.con.execute("UPDATE runs SET status = ?, versions = ?, finished = ?, wall_seconds = ?, "
                             "error = ?, checkpoint = ? WHERE run_id = ?",
                             (status, json.dumps(result.get("versions") or {}, sort_keys=True, default=str),
                              _now(), _num(wall), error, checkpoint, run_id))
        return len(rows)

    def record_failure(self, run_id: str, error: str, wall_seconds: float | None = None) -> None:
        """Mark a run ``failed`` with its error text; earlier metrics of the run are removed."""
        with self._tx():
            self.con.execute("DELETE FROM metrics WHERE run_id = ?", (run_id,))
            self.con.execute("UPDATE runs SET status = 'failed', finished = ?, wall_seconds = ?, error = ? "
                             "WHERE run_id = ?", (_now(), _num(wall_seconds), error, run_id))

    # ---- reads
    def _ids_with(self, status: str, run_ids: Iterable[str] | None) -> list[str]:
        q = "SELECT run_id FROM runs WHERE status = ?"
        args: list[Any] = [status]
        if run_ids is not None:
            q += " AND run_id IN (SELECT value FROM json_each(?))"
            args.append(json.dumps(list(run_ids)))
        return [r[0] for r in self.con.execute(q + " ORDER BY run_id", args)]

    def statuses(self) -> dict[str, str]:
        return dict(self.con.execute("SELECT run_id, status FROM runs"))

    def status(self, run_id: str) -> str | None:
        row = self.con.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return row[0] if row else None

    def runs_frame(self, run_ids: Iterable[str] | None = None, config: bool = False) -> pd.DataFrame:
        """One row per run: the runs table (``config``/``versions`` JSON only if ``config``)."""
        import pandas as pd

        cols = [c for c in self._columns() if config or c not in ("config", "versions")]
        q = f"SELECT {', '.join(_q(c) for c in cols)} FROM runs"
        args: list[Any] = []
        if run_ids is not None:
            q += " WHERE run_id IN (SELECT value FROM json_each(?))"
            args.append(json.dumps(list(run_ids)))
        df = pd.read_sql_query(q + " ORDER BY run_id", self.con, params=args)
        df.attrs["axes"] = self.axes
        return df

    def to_dataframe(self, run_ids: Iterable[str] | None = None,
                     kinds: Sequence[str] = ("final", "best")) -> pd.DataFrame:
        """Long tidy table: one row per run x kind x metric (x step for history).

        Columns: run_id, sweep, status, <axes>, error, wall_seconds, started, finished, run_dir,
        kind, step, metric, value. A run without metrics of these kinds (failed, pending) keeps one
        row with kind/step/metric/value missing.
        """
        import pandas as pd

        for k in kinds:
            if k not in KINDS:
                raise ConfigError(f"kinds: each must be one of {', '.join(KINDS)}, got {k!r}")
        axes = self.axes
        rcols = ["run_id", "sweep", "status", *axes, "error", "wall_seconds", "started", "finished", "run_dir"]
        sel = ", ".join(f"r.{_q(c)}" for c in rcols)
        q = (f"SELECT {sel}, m.kind, m.step, m.metric, m.value FROM runs r LEFT JOIN metrics m "
             f"ON m.run_id = r.run_id AND m.kind IN (SELECT value FROM json_each(?))")
        args: list[Any] = [json.dumps(list(kinds))]
        if run_ids is not None:
            q += " WHERE r.run_id IN (SELECT value FROM json_each(?))"
            args.append(json.dumps(list(run_ids)))
        q += " ORDER BY r.run_id, m.kind, m.metric, m.step"
        df = pd.read_sql_query(q, self.con, params=args)
        df["value"] = df["value"].astype(float)
        df.attrs["axes"] = axes
        return df

    def export(self, path: str | Path, run_ids: Iterable[str] | None = None,
               kinds: Sequence[str] = ("final", "best")) -> Path:
        """Write :meth:`to_dataframe` to ``.csv`` or ``.parquet`` (by extension), atomically."""
        return export_frame(self.to_dataframe(run_ids, kinds), path)


def _read_only(path: str | Path, query: str) -> list[tuple]:
    """Rows of ``query`` on an existing store, opened read-only (nothing is created or written)."""
    con = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def stored_statuses(path: str | Path) -> dict[str, str]:
    """run_id -> status of the store at ``path``, read-only; ``{}`` when there is no store yet."""
    return dict(_read_only(path, "SELECT run_id, status FROM runs")) if Path(path).exists() else {}


def stored_task(path: str | Path) -> str:
    """``task.name`` of the store's runs (from the first run's config), read-only; "anchor" when empty."""
    row = next(iter(_read_only(path, "SELECT config FROM runs LIMIT 1")), None)
    return (json.loads(row[0]).get("task") or {}).get("name", "anchor") if row else "anchor"


def export_frame(df: pd.DataFrame, path: str | Path) -> Path:
    """DataFrame -> CSV or Parquet by the file extension (Parquet needs pyarrow)."""
    from anchorlab.io import atomic_write

    path = Path(path)
    ext = path.suffix.lower()
    if ext == ".csv":
        return atomic_write(path, lambda p: df.to_csv(p, index=False))
    if ext in (".parquet", ".pq"):
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ConfigError(f"export {path}: Parquet needs pyarrow (pip install 'anchorlab[parquet]'); "
                              "or use a .csv path") from None
        return atomic_write(path, lambda p: df.to_parquet(p, index=False))
    raise ConfigError(f"export {path}: extension must be .csv or .parquet, got {ext or 'none'!r}")


class _Transaction:
    """``with``: BEGIN IMMEDIATE ... COMMIT, ROLLBACK on error (autocommit connection)."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con

    def __enter__(self) -> sqlite3.Connection:
        self.con.execute("BEGIN IMMEDIATE")
        return self.con

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.con.execute("ROLLBACK" if exc_type else "COMMIT")
