"""Training speed as a prediction test (NeurIPS §6 / Fig. 6; journal §VIII / Fig. 8).

The papers predict that a model with small initialization (large gamma) needs
more epochs to fit data of larger *inferential complexity* k (the number of
symmetric pair groups whose target breaks the composition rule), while a
model with large initialization needs about the same number for every k; and
that, under small initialization, the rule-violating pairs are the slow ones
to fit (journal Fig. 8B), so slow fitting can flag suspect data.

Everything here is a pure function of run histories (lists of evaluation rows
as written to ``metrics.jsonl``, or a run's rows of the history table of
:mod:`anchorlab.sweep.runtable`) and returns a
record or a tidy DataFrame; figures live in :mod:`anchorlab.papers.plots.speed`.

Time to threshold
    The first evaluation at which the metric crosses the threshold (``<=`` for
    ``below=True``, ``>=`` otherwise). Rows whose metric is missing or NaN are
    skipped (the step-0 row has no training loss). With ``interpolate=True``
    the crossing is placed by linear interpolation, in the metric's value,
    between the last non-crossing evaluation and the first crossing one; the
    resolution of the answer is otherwise one evaluation interval
    (``train.eval_every``). A metric that never crosses gives a *censored*
    record whose epochs/steps are those of the last evaluation with a finite
    value — a lower bound on the true time, never 0 and never dropped.

Censored summaries
    :func:`summarize_speed` averages the observed-or-censoring epochs per cell
    and reports ``n_censored``; when ``n_censored > 0`` the mean is a lower
    bound on the cell's true mean (flag ``censored``). No parametric
    survival model is fitted: with a handful of seeds it would add assumptions
    and no information.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from anchorlab.config import ConfigError
from anchorlab.tasks.anchor.config import AnchorTaskConfig

log = logging.getLogger(__name__)

History = Sequence[Mapping[str, Any]] | pd.DataFrame
PAIR_PREFIX = "acc/"


@dataclass(frozen=True)
class Crossing:
    """When a metric first crossed a threshold.

    ``epochs``/``steps`` are the crossing time, or for ``censored=True`` the
    last evaluation with a finite value (a lower bound). ``value`` is the
    metric at that evaluation.
    """

    metric: str
    threshold: float
    below: bool
    epochs: float
    steps: float
    censored: bool
    value: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _history_frame(history: History) -> pd.DataFrame:
    df = history.copy() if isinstance(history, pd.DataFrame) else pd.DataFrame(list(history))
    if df.empty:
        raise ConfigError("history: is empty; need at least one evaluation row")
    for col in ("step", "epoch"):
        if col not in df:
            raise ConfigError(f"history: rows need a {col!r} field (as in metrics.jsonl)")
    return df.sort_values("step", kind="stable").reset_index(drop=True)


def _crossing(df: pd.DataFrame, metric: str, threshold: float, below: bool,
              interpolate: bool) -> Crossing:
    if metric not in df:
        raise ConfigError(f"metric: {metric!r} is not in the history; available: "
                          f"{', '.join(sorted(map(str, df.columns)))}")
    vals = pd.to_numeric(df[metric], errors="coerce").to_numpy(dtype=float)
    ok = np.isfinite(vals)
    if not ok.any():
        last = df.iloc[-1]
        return Crossing(metric, threshold, below, float(last.epoch), float(last.step), True, math.nan)
    steps = df.step.to_numpy(dtype=float)[ok]
    epochs = df.epoch.to_numpy(dtype=float)[ok]
    v = vals[ok]
    hit = v <= threshold if below else v >= threshold
    if not hit.any():
        return Crossing(metric, threshold, below, float(epochs[-1]), float(steps[-1]), True, float(v[-1]))
    i = int(np.argmax(hit))
    s, e = float(steps[i]), float(epochs[i])
    if interpolate and i > 0 and v[i] != v[i - 1]:
        # fraction of the way from eval i-1 to eval i where the line meets the threshold
        frac = float(np.clip((v[i - 1] - threshold) / (v[i - 1] - v[i]), 0.0, 1.0))
        s = float(steps[i - 1] + frac * (steps[i] - steps[i - 1]))
        e = float(epochs[i - 1] + frac * (epochs[i] - epochs[i - 1]))
    return Crossing(metric, threshold, below, e, s, False, float(v[i]))


def steps_to_threshold(history: History, metric: str = "train_loss", threshold: float = 5e-2,
                       below: bool = True, interpolate: bool = False) -> Crossing:
    """First evaluation at which ``metric`` crosses ``threshold``.

    history: evaluation rows (dicts or a DataFrame) with ``step``, ``epoch``
    and ``metric``. ``below=True`` looks for ``metric <= threshold`` (a loss),
    ``below=False`` for ``metric >= threshold`` (an accuracy). See the module
    docstring for interpolation and censoring.
    """
    return _crossing(_history_frame(history), metric, float(threshold), below, interpolate)


def pair_metrics(history: History, split: str = "train") -> dict[str, str]:
    """Pair label -> metric column ``acc/<ab>/<split>`` present in the history."""
    cols = _history_frame(history).columns if not isinstance(history, pd.DataFrame) else history.columns
    out = {}
    for c in cols:
        parts = str(c).split("/")
        if len(parts) == 3 and parts[0] == "acc" and parts[2] == split:
            out[parts[1]] = str(c)
    return dict(sorted(out.items()))


def pair_fit_speed(history: History, threshold: float = 0.6, split: str = "train",
                   interpolate: bool = False) -> pd.DataFrame:
    """Epochs for each pair's accuracy (``acc/<ab>/<split>``) to reach ``threshold``.

    Returns DataFrame(pair, epochs, steps, censored), one row per pair found in
    the history (journal Fig. 8B uses 60% on training keys).
    """
    df = _history_frame(history)
    cols = pair_metrics(df, split)
    if not cols:
        raise ConfigError(f"history: no per-pair accuracy columns 'acc/<ab>/{split}'")
    rows = []
    for pair, col in cols.items():
        c = _crossing(df, col, float(threshold), False, interpolate)
        rows.append(dict(pair=pair, epochs=c.epochs, steps=c.steps, censored=c.censored))
    return pd.DataFrame(rows, columns=["pair", "epochs", "steps", "censored"])


def rule_violating_pairs(task: AnchorTaskConfig) -> list[str]:
    """Labels (``"12"``) of the trained pairs whose target is not inferential."""
    from anchorlab.tasks.anchor import AnchorTask, pair_label

    return [pair_label(p) for p in AnchorTask(task).non_inferential_pairs]


# ---------------------------------------------------------------- many runs
SPEED_COLUMNS = ["run_id", "name", "status", "k", "depth", "gamma", "seed", "data_seed",
                 "epochs", "steps", "censored", "value"]


def speed_table(rows: pd.DataFrame, history: pd.DataFrame, metric: str = "train_loss", threshold: float = 5e-2,
                below: bool = True, interpolate: bool = False) -> pd.DataFrame:
    """One row per run of a run table (:func:`anchorlab.sweep.runtable.run_table`): the grid coordinates
    and time to threshold, read from the run's evaluations in the history table ``history``
    (:func:`anchorlab.sweep.runtable.history_table`).

    Columns: run_id, name, status, k (task.complexity_k), depth
    (model.n_layers), gamma (init.gamma), seed (train.init_seed), data_seed,
    epochs, steps, censored, value.
    """
    need = ["model.n_layers", "init.gamma", "train.init_seed", "train.data_seed"]
    missing = [c for c in need if c not in rows] + [c for c in ("run_id", "step") if c not in history]
    if len(rows) and missing:
        raise ConfigError(f"rows / history: missing columns {missing}; pass a run table and its history table")
    out = []
    for _, r in rows.iterrows():
        h = history[history.run_id == r.run_id].drop(columns="run_id").dropna(axis=1, how="all")
        c = steps_to_threshold(h.reset_index(drop=True), metric, threshold, below, interpolate)
        k = r.get("task.complexity_k")
        out.append(dict(run_id=r.run_id, name=r.get("name"), status=r.get("status"),
                        k=0 if k is None or pd.isna(k) else int(k), depth=int(r["model.n_layers"]),
                        gamma=float(r["init.gamma"]), seed=int(r["train.init_seed"]),
                        data_seed=int(r["train.data_seed"]), epochs=c.epochs, steps=c.steps,
                        censored=c.censored, value=c.value))
    return pd.DataFrame(out, columns=SPEED_COLUMNS)


def _summarize(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    missing = [c for c in [*by, "epochs", "censored"] if c not in df]
    if missing:
        raise ConfigError(f"df: missing columns {missing}; expected {by + ['epochs', 'censored']}")

    def agg(g: pd.DataFrame) -> pd.Series:
        e = g.epochs.to_numpy(dtype=float)
        n = len(e)
        nc = int(g.censored.astype(bool).sum())
        return pd.Series(dict(epochs=float(e.mean()),
                              sem=float(e.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan,
                              min=float(e.min()), max=float(e.max()), n=n, n_censored=nc,
                              censored=nc > 0))

    out = df.groupby(by, sort=True)[["epochs", "censored"]].apply(agg).reset_index()
    out["n"] = out.n.astype(int)
    out["n_censored"] = out.n_censored.astype(int)
    out["censored"] = out.censored.astype(bool)
    return out


def summarize_speed(df: pd.DataFrame, by: Sequence[str] = ("gamma", "depth", "k")) -> pd.DataFrame:
    """Mean/sem of epochs-to-threshold per (gamma, depth, k) cell.

    Censored runs enter with their censoring epoch (a lower bound), so a cell
    with ``n_censored > 0`` has ``censored=True`` and its mean is a lower
    bound. Columns: *by, epochs (mean), sem (NaN for n=1), min, max, n,
    n_censored, censored.
    """
    return _summarize(df, list(by))


def summarize_pair_speed(df: pd.DataFrame) -> pd.DataFrame:
    """Per-pair mean over runs of :func:`pair_fit_speed` tables (same estimator)."""
    return _summarize(df, ["pair"])


def complexity_slowdown(summary: pd.DataFrame, k_hi: int, k_lo: int = 0) -> pd.DataFrame:
    """Ratio epochs(k_hi) / epochs(k_lo) per (gamma, depth) from :func:`summarize_speed`.

    Censored means are lower bounds, so ``bound`` says what the ratio is:
    "exact" (neither censored), "lower" (only k_hi censored), "upper" (only
    k_lo censored), or "unknown" (both; ratio NaN). Columns: gamma, depth,
    epochs_lo, epochs_hi, ratio, bound, lo_censored, hi_censored.
    """
    rows = []
    for (g, d), cell in summary.groupby(["gamma", "depth"], sort=True):
        lo, hi = cell[cell.k == k_lo], cell[cell.k == k_hi]
        if lo.empty or hi.empty:
            continue
        elo, ehi = float(lo.epochs.iloc[0]), float(hi.epochs.iloc[0])
        clo, chi = bool(lo.censored.iloc[0]), bool(hi.censored.iloc[0])
        bound = {(False, False): "exact", (False, True): "lower", (True, False): "upper",
                 (True, True): "unknown"}[(clo, chi)]
        ratio = ehi / elo if elo > 0 and bound != "unknown" else math.nan
        rows.append(dict(gamma=g, depth=d, epochs_lo=elo, epochs_hi=ehi, ratio=ratio, bound=bound,
                         lo_censored=clo, hi_censored=chi))
    return pd.DataFrame(rows, columns=["gamma", "depth", "epochs_lo", "epochs_hi", "ratio", "bound",
                                       "lo_censored", "hi_censored"])


# ---------------------------------------------------------------- suspect data
@dataclass(frozen=True)
class SuspectReport:
    """Groups ranked by fitting time, the slow ones flagged.

    table: DataFrame(label, epochs, censored, rank, flagged, known_bad), slowest
    first (rank 1). ``cutoff`` is the epoch value above which a group is
    flagged (NaN when ``top`` chose them). precision/recall are NaN when
    undefined (nothing flagged / nothing known bad); ``auc`` is the chance
    that a known-bad group is slower than a good one (ties count 1/2).
    """

    table: pd.DataFrame
    rule: str
    cutoff: float
    precision: float
    recall: float
    auc: float

    @property
    def flagged(self) -> list[str]:
        return self.table.label[self.table.flagged].tolist()


def _as_label(x: Any) -> str:
    if isinstance(x, (tuple, list)) and len(x) == 2:
        return f"{x[0]}{x[1]}"
    return str(x)


def suspect_report(speeds: History, known_bad: Iterable[Any] | None = None, top: int | None = None,
                   c: float = 3.0, label: str = "pair", threshold: float = 0.6) -> SuspectReport:
    """Rank groups by time to fit and flag the slow ones as suspect.

    speeds: a run history (per-pair times are computed with
    :func:`pair_fit_speed` at ``threshold``) or a table with columns
    ``label``, ``epochs`` and optionally ``censored`` (several rows per label,
    e.g. seeds, are averaged; a label is censored if any of its rows is).
    Flag rule: the ``top`` slowest when given (e.g. 2k when k groups are known
    to be bad; groups tied with the ``top``-th slowest are flagged too, so an
    all-tied table flags everything), else ``epochs > median + c * 1.4826 * MAD``; with MAD = 0 the
    rule is ``epochs > median``. Censored groups sort as slower than
    uncensored groups of the same time. known_bad: labels or ``(a, b)``
    tuples for precision/recall.
    """
    if top is not None and top < 0:
        raise ConfigError(f"top: must be >= 0 or None, got {top!r}")
    if c < 0:
        raise ConfigError(f"c: must be >= 0, got {c!r}")
    # a list of rows, or a frame with a "step" column, is a history; any other frame a speed table
    is_history = not isinstance(speeds, pd.DataFrame) or "step" in speeds
    if is_history:
        df = pair_fit_speed(speeds, threshold=threshold).rename(columns={"pair": "label"})
    else:
        if label not in speeds or "epochs" not in speeds:
            raise ConfigError(f"speeds: needs columns {label!r} and 'epochs' (or pass a history)")
        df = speeds.rename(columns={label: "label"}).copy()
        if "censored" not in df:
            df["censored"] = False
    df["label"] = df.label.map(_as_label)
    t = (df.groupby("label", sort=True)
           .agg(epochs=("epochs", "mean"), censored=("censored", "any")).reset_index())
    t = t.sort_values(["epochs", "censored", "label"], ascending=[False, False, True],
                      kind="stable").reset_index(drop=True)
    t["rank"] = np.arange(1, len(t) + 1)
    if top is not None:
        # the `top` slowest, plus anything tied with the last of them (a tie carries no ranking)
        if top == 0:
            t["flagged"] = False
        else:
            last = t.iloc[min(top, len(t)) - 1]
            t["flagged"] = (t.epochs > last.epochs) | ((t.epochs == last.epochs) & (t.censored >= last.censored))
        rule, cutoff = f"top {top} (ties included)", math.nan
    else:
        med = float(t.epochs.median())
        mad = 1.4826 * float((t.epochs - med).abs().median())
        cutoff = med + c * mad
        t["flagged"] = t.epochs > cutoff
        rule = f"epochs > median + {c:g} * MAD" if mad > 0 else "epochs > median (MAD = 0)"
    bad = {_as_label(b) for b in (known_bad or [])}
    unknown = bad - set(t.label)
    if unknown:
        log.warning("known_bad labels not in the table: %s", sorted(unknown))
    t["known_bad"] = t.label.isin(bad)
    tp = int((t.flagged & t.known_bad).sum())
    nf, nb = int(t.flagged.sum()), int(t.known_bad.sum())
    precision = tp / nf if nf else math.nan
    recall = tp / nb if nb else math.nan
    auc = math.nan
    if 0 < nb < len(t):
        eb = t.epochs[t.known_bad].to_numpy()[:, None]
        eg = t.epochs[~t.known_bad].to_numpy()[None, :]
        auc = float(((eb > eg) + 0.5 * (eb == eg)).mean())
    return SuspectReport(t[["label", "epochs", "censored", "rank", "flagged", "known_bad"]],
                         rule, cutoff, precision, recall, auc)


__all__ = ["Crossing", "SuspectReport", "steps_to_threshold", "pair_metrics", "pair_fit_speed",
           "rule_violating_pairs", "speed_table", "summarize_speed", "summarize_pair_speed",
           "complexity_slowdown", "suspect_report"]
