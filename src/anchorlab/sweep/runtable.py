"""One run table: sweep directories, run directories and committed CSVs -> one row per run.

:func:`run_table` is the one reader of final.json's raw dict for the studies and figures (every paper
figure, the demo, the robustness study; :func:`history_table` for their evaluations): a
source is a sweep directory (``<dir>/runs/*/final.json``), a run directory (``<dir>/final.json``) or
a committed run table (CSV). Every source gives rows of one schema:

============================  ==========================================================================
column                        meaning
============================  ==========================================================================
``run_id``                    the config's hash (one row per run: a run read from a directory wins over
                              a committed row; among directories / tables, the first source wins)
``status``                    ``finished`` / ``early_stopped`` / ...; ``in_progress`` or ``at_step`` in
                              :func:`in_progress_table` / :func:`at_step_table`; a committed table
                              without the column: ``finished``
``source``                    the directory or CSV the row was read from
``peak_lr``                   the schedule's peak (``optim.peak_lr``, else ``optim.lr`` x
                              ``optim.warmup_multiplier``)
``seed``                      ``train.init_seed``
``steps``, ``total_steps``    steps trained; steps planned
``wall_seconds``              training time
``device``                    final.json's device; for older runs the one its precision reason names
                              (``cpu`` / ``cuda``), else ``unrecorded``
``precision``                 the matmul dtype (``float32``, ``bfloat16``; ``unrecorded``)
``<section>.<field>``         every config field, dotted as sweep axes are (``init.gamma``,
                              ``model.n_layers``, ``optim.weight_decay``, ``train.data_seed``, ...);
                              a mapping or list value as JSON
``final.<metric>``            final.json's ``final`` metrics (the last evaluation)
``best.<metric>``             final.json's ``best`` metrics (the best over training)
``run_dir``                   the run's directory (empty for a committed row)
============================  ==========================================================================

A layer above may add columns of its own, computed from each run's final.json (``derive``: the papers' layer
adds the op set, the paper's gamma and the clock, :mod:`anchorlab.papers.runs`); the table itself knows no
task, no paper and never runs a model.

A committed table is read as it is: a study writes the columns above under these names, beside derived
columns of its own (e.g. ``lr_sum``, ``cond/*``, ``outcome``), which pass through.
:func:`history_table` is the same per-evaluation view with every metric a run logs: ``run_id``, ``step``,
then each metric of final.json's ``history`` as a column (NaN where an evaluation lacks it); for a committed
``X.csv``, its ``X_history.csv`` beside it where there is one. :func:`run_history` gives one run's
evaluations back as rows (a metric an evaluation lacks left out).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anchorlab.config import ConfigError
from anchorlab.io import read_json
from anchorlab.run_status import COMPLETED

if TYPE_CHECKING:
    import pandas as pd

SECTIONS = ("task", "model", "init", "optim", "train")
HEAD = ["run_id", "status", "source", "peak_lr", "seed", "steps", "total_steps", "wall_seconds", "device", "precision"]
HISTORY_HEAD = ["run_id", "step"]
Derive = Callable[[Mapping[str, Any]], dict[str, Any]]   # a final.json-shaped dict -> columns of a layer above


def device_of(final: Mapping[str, Any]) -> str:
    """The device a run trained on: final.json's ``device``; for runs written before it was recorded, the
    device its precision reason names ("on cuda" -> ``cuda``, "CPU" -> ``cpu``); else ``unrecorded``."""
    if final.get("device"):
        return str(final["device"])
    reason = str((final.get("precision") or {}).get("reason", ""))
    return "cuda" if "on cuda" in reason else "cpu" if "CPU" in reason else "unrecorded"


def _flat(value: Any) -> Any:
    return value if isinstance(value, (int, float, str, bool, type(None))) else json.dumps(value, sort_keys=True)


def run_row(final: Mapping[str, Any], source: str = "", derive: Derive | None = None) -> dict[str, Any]:
    """One final.json-shaped dict -> one row of the schema (:func:`run_table` calls it per run); ``derive``'s
    columns follow ``source``."""
    c = final.get("config") or {}
    o, t = c.get("optim", {}), c.get("train", {})
    peak = o.get("peak_lr") if o.get("peak_lr") is not None else o.get("lr", math.nan) * o.get("warmup_multiplier", 1)
    planned = final.get("total_steps") or final.get("steps")
    row: dict[str, Any] = {
        "run_id": final.get("run_id"), "status": final.get("status"), "source": source,
        **(derive(final) if derive else {}), "peak_lr": peak, "seed": t.get("init_seed"),
        "steps": final.get("steps"), "total_steps": planned, "wall_seconds": final.get("wall_seconds"),
        "device": device_of(final), "precision": (final.get("precision") or {}).get("matmul_dtype", "float32")}
    for sec in SECTIONS:
        for k, v in (c.get(sec) or {}).items():
            row[f"{sec}.{k}"] = _flat(v)
    for kind in ("final", "best"):
        for k, v in (final.get(kind) or {}).items():
            row[f"{kind}.{k}"] = v
    row["run_dir"] = str(final.get("run_dir") or "")
    row["name"] = final.get("name")
    return row


def rows_of(finals: Sequence[Mapping[str, Any]], source: str = "", derive: Derive | None = None) -> "pd.DataFrame":
    """final.json-shaped dicts -> run-table rows, in their order (no deduplication)."""
    import pandas as pd

    df = pd.DataFrame([run_row(f, source or str(Path(str(f.get("run_dir", ""))).parent.parent), derive)
                       for f in finals])
    return df if len(df) else pd.DataFrame(columns=[*HEAD, "run_dir"])


def _finals_of(path: Path, statuses: Sequence[str]) -> list[dict[str, Any]]:
    """The completed final.json dicts of a sweep directory (``runs/*``) or of one run directory."""
    files = [path / "final.json"] if (path / "final.json").is_file() else sorted(path.glob("runs/*/final.json"))
    out = []
    for p in files:
        f = read_json(p)
        if f.get("status") in statuses:
            out.append({**f, "run_dir": str(p.parent)})
    return out


def read_table(path: str | Path) -> "pd.DataFrame":
    """A committed run table (CSV) in the schema of this module; one row per run (the last copy). A file that
    is missing or has no ``run_id`` column is refused."""
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"--from-table {p}: no such file (a run table CSV with a run_id column)")
    df = pd.read_csv(p)
    if "run_id" not in df.columns:
        raise ConfigError(f"--from-table {p}: no run_id column; its columns: {', '.join(map(str, df.columns))}")
    if "seed" not in df.columns and "train.init_seed" in df.columns:
        df["seed"] = df["train.init_seed"]
    if "train.init_seed" not in df.columns and "seed" in df.columns:
        df["train.init_seed"] = df["seed"]
    defaults = {"status": "finished", "device": "unrecorded", "precision": "unrecorded"}
    for col, v in defaults.items():
        if col not in df.columns:
            df[col] = v
    df["source"], df["run_dir"] = str(p), ""   # a committed row is read from its table, never from a directory
    return df.drop_duplicates("run_id", keep="last")


def run_table(sources: Sequence[str | Path], statuses: Sequence[str] = COMPLETED,
              derive: Derive | None = None) -> "pd.DataFrame":
    """Every run of ``sources`` (sweep directories, run directories, committed CSVs) with a status in
    ``statuses``, one row per run in the schema of this module: the directories' runs first (in source
    then run-id order; a run in several directories counts once, the first copy), then the committed
    rows whose run no directory holds (in their tables' order). A source that does not exist is refused.
    ``derive``: columns of a layer above, computed from each directory run's final.json (a committed row keeps
    its own)."""
    import pandas as pd

    dirs, tables = [], []
    for s in sources:
        p = Path(s)
        if p.suffix == ".csv":
            tables.append(read_table(p))
        elif p.is_dir():
            dirs.append(p)
        else:
            raise ConfigError(f"run table source {p}: neither a directory nor a CSV file")
    seen: dict[str, dict[str, Any]] = {}
    for d in dirs:
        for f in _finals_of(d, statuses):
            seen.setdefault(f["run_id"], {**f, "_source": str(d)})
    found = pd.DataFrame([run_row(f, f.pop("_source"), derive) for f in seen.values()])
    frames = [found] if len(found) else []
    for t in tables:
        t = t[t.status.isin(statuses)] if "status" in t.columns else t
        have = set().union(*(set(f.run_id) for f in frames)) if frames else set()
        t = t[~t.run_id.isin(have)]
        if len(t):
            frames.append(t)
    if not frames:
        return pd.DataFrame(columns=[*HEAD, "run_dir"])
    return head_first(pd.concat(frames, ignore_index=True))


def head_first(df: "pd.DataFrame", head: Sequence[str] = HEAD) -> "pd.DataFrame":
    """``df`` with the columns of ``head`` it has first, in that order, then the rest (a copy: one block per
    dtype, not one per column)."""
    first = [c for c in head if c in df.columns]
    return df[first + [c for c in df.columns if c not in first]].copy()


def per_evaluation(sources: Sequence[str | Path], suffix: str, of_finals: Any, strict: bool) -> "pd.DataFrame":
    """A per-evaluation table of ``sources``: ``of_finals`` over the completed runs of their directories (a run
    in several read once, the first copy), then the rows of each committed ``X.csv``'s ``X<suffix>.csv`` whose run
    no directory holds. ``strict``: a source that is neither a directory nor a CSV is refused."""
    import pandas as pd

    seen: dict[str, dict[str, Any]] = {}
    olds = []
    for s in sources:
        p = Path(s)
        if p.suffix == ".csv":
            q = p.with_name(p.stem + suffix)
            if q.is_file():
                olds.append(pd.read_csv(q))
        elif p.is_dir():
            for f in _finals_of(p, COMPLETED):
                seen.setdefault(f["run_id"], f)
        elif strict:
            raise ConfigError(f"history table source {p}: neither a directory nor a CSV file")
    new = of_finals(list(seen.values()))
    frames = [f for f in [new] + [o[~o.run_id.isin(set(seen))] for o in olds] if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else new


def histories_of(finals: Sequence[Mapping[str, Any]]) -> "pd.DataFrame":
    """final.json-shaped dicts -> one row per (run, evaluation): ``run_id``, ``step``, then every metric of
    the runs' ``history`` (first-seen order; NaN where an evaluation lacks it), in the runs' order."""
    import pandas as pd

    df = pd.DataFrame([{"run_id": f["run_id"], **h} for f in finals for h in f.get("history") or []])
    if not len(df):
        return pd.DataFrame(columns=HISTORY_HEAD)
    return df[HISTORY_HEAD + [c for c in df.columns if c not in HISTORY_HEAD]]


def history_table(sources: Sequence[str | Path]) -> "pd.DataFrame":
    """Every evaluation of the completed runs of ``sources`` (:func:`histories_of`; the same runs as
    :func:`run_table`, a run in several directories read once, the first copy); for a committed ``X.csv``,
    its ``X_history.csv`` beside it where there is one. A run read from a directory wins over a committed
    history."""
    return per_evaluation(sources, "_history.csv", histories_of, strict=True)


def run_history(history: "pd.DataFrame", run_id: str) -> list[dict[str, Any]]:
    """One run's evaluations of a history table (:func:`history_table`) as rows in their order, each
    without ``run_id`` and without the metrics it lacks (NaN)."""
    rows = history[history.run_id == run_id].drop(columns="run_id").to_dict("records")
    return [{k: v for k, v in r.items() if not (v is None or (isinstance(v, float) and math.isnan(v)))}
            for r in rows]


def in_progress_table(sweep_dirs: Sequence[str | Path], derive: Derive | None = None) -> "pd.DataFrame":
    """The runs of ``sweep_dirs`` that stopped before their end (:func:`anchorlab.sweep.results.in_progress`)
    as run-table rows, status ``in_progress``: ``best.*`` the best so far, ``final.*`` and ``steps`` the last
    evaluation. They never enter a judgement."""
    from anchorlab.sweep.results import in_progress

    return rows_of(in_progress(sweep_dirs), derive=derive)


def at_step_table(sweep_dirs: Sequence[str | Path], steps: Sequence[int],
                  derive: Derive | None = None) -> "pd.DataFrame":
    """Every run of ``sweep_dirs`` read at each of ``steps`` it reached, finished or not, as if it stopped
    there (:func:`anchorlab.sweep.results.at_step`), status ``at_step``, ``steps`` the evaluation read."""
    import pandas as pd

    from anchorlab.sweep.results import at_step

    runs = at_step(sweep_dirs, steps)
    frames = [rows_of(runs[s], derive=derive) for s in steps if runs[s]]
    return pd.concat(frames, ignore_index=True) if frames else rows_of([], derive=derive)


def _unflat(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value.item() if hasattr(value, "item") else value


def row_section(row: Mapping[str, Any], section: str) -> dict[str, Any]:
    """One config section of a run-table row (its ``<section>.<field>`` columns) as a mapping, JSON values
    parsed, the fields the row lacks (NaN) left out: what a partial config of an older run records."""
    out = {}
    for key, v in row.items():
        sec, _, field = str(key).partition(".")
        if sec == section and field and _unflat(v) is not None:
            out[field] = _unflat(v)
    return out


def row_config(row: Mapping[str, Any]) -> Any:
    """The ExperimentConfig of a run rebuilt from its run-table row (its ``<section>.<field>`` columns);
    a :class:`~anchorlab.config.ConfigError` where the row does not hold a whole config (a committed row that
    keeps only some config fields)."""
    from anchorlab.config import experiment_from_dict
    from anchorlab.config.precision_rules import as_recorded

    nested: dict[str, dict[str, Any]] = {}
    for key, v in row.items():
        sec, _, field = str(key).partition(".")
        if sec in SECTIONS and field:
            nested.setdefault(sec, {})[field] = _unflat(v)
    if set(nested) != set(SECTIONS) or any(all(v is None for v in nested[sec].values()) for sec in SECTIONS):
        raise ConfigError(f"run {row.get('run_id')}: its row holds no whole config (sections "
                          f"{', '.join(sorted(nested)) or 'none'})")
    cfg = experiment_from_dict(as_recorded(nested))   # a row from before train.bf16_path trained on autocast
    if row.get("run_id") and cfg.run_id() != row["run_id"]:
        raise ConfigError(f"run {row['run_id']}: the config rebuilt from its row has run id {cfg.run_id()}")
    return cfg
