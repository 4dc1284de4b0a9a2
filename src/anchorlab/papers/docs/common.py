"""Helpers shared by the generated documentation blocks (tools/docs.py).

Everything here reads committed files: the tables under docs/figures/ and the sweep presets
(src/anchorlab/papers/sweeps/). Nothing trains and nothing recomputes a judgement the tables already hold.
"""
from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Any, Iterable, Sequence

import pandas as pd

from anchorlab.papers.gammas import PAPER_WIDTH, convert

ROOT = Path(__file__).resolve().parents[4]   # the checkout (src/anchorlab/papers/docs/ -> the root)
FIGURES = ROOT / "docs" / "figures"
PAPERS_OP = "(4,3)"        # the papers' held-out pair


def table(name: str) -> pd.DataFrame:
    """A committed table under docs/figures/ (a missing file is an error naming it)."""
    path = FIGURES / name
    if not path.is_file():
        raise FileNotFoundError(f"docs/figures/{name}: no such table (a generated block reads it)")
    return pd.read_csv(path)


# ------------------------------------------------------------------ numbers and labels
def paper_gamma(gamma: float, width: float) -> float:
    """The gamma that gives, at width 400, the std ``width ** -gamma`` (:func:`anchorlab.papers.gammas.convert`)."""
    return convert(gamma, width)


def std_of(gamma: float, width: float) -> float:
    """The init std of a matrix with fan-in ``width`` at init rate ``gamma``."""
    return float(width) ** -float(gamma)


def num(x: Any, nd: int = 2) -> str:
    """A number to ``nd`` decimals; missing values as a dash."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{float(x):.{nd}f}"


def sci(x: float) -> str:
    """A learning rate the way the docs write it: 1.25e-4, 1e-3."""
    m, e = f"{float(x):.2e}".split("e")
    m = m.rstrip("0").rstrip(".")
    return f"{m}e{int(e)}"


def count(x: float, n: int) -> str:
    """A fraction of ``n`` runs as 'k/n' (the tables store the fraction)."""
    return f"{int(round(float(x) * n))}/{int(n)}"


def ratio(k: int, n: int) -> str:
    return f"{int(k)} of {int(n)}"


def op_label(op_set: str) -> str:
    """'{1:+5,...} (4,3) held out, ...' -> "(4,3), papers'" / '(3,2)' / '(2,1)'."""
    m = re.search(r"(\(\d,\d\)) held out", op_set)
    pair = m.group(1) if m else op_set
    return f"{pair}, papers'" if pair == PAPERS_OP and "{1:+5,2:+1,3:-2,4:-8}" in op_set else pair


def clock_label(c: float) -> str:
    return {0.5: "1/2x", 1.0: "1x", 2.0: "2x"}.get(round(float(c), 3), f"{float(c):g}x")


def md_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


# ------------------------------------------------------------------ scale of a sweep preset
def _dotted(d: dict, key: str, default: Any = None) -> Any:
    node: Any = d
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def _axis_values(spec: Any, key: str) -> list[Any] | None:
    for ax in spec.axes:
        if key in ax.keys:
            i = ax.keys.index(key)
            return [v[i] for v in ax.values]
    return None


def _data_clock(spec: Any, base: dict) -> list[tuple[Any, float]]:
    """(training set size, epochs) of every run: zipped where one axis holds both, else crossed."""
    ns = _axis_values(spec, "task.n_train") or [_dotted(base, "task.n_train")]
    es = _axis_values(spec, "train.epochs") or [_dotted(base, "train.epochs", 0)]
    same = any("task.n_train" in ax.keys and "train.epochs" in ax.keys for ax in spec.axes)
    return list(zip(ns, es)) if same else [(n, float(e)) for n in ns for e in es]


def sweep_scale(name: str, only_gammas: Sequence[float] | None = None) -> dict[str, str]:
    """The scale of a sweep preset in the paper's terms: runs, width, data, clock, peak lrs, gammas, seeds.

    Read from the preset file itself (its base config, its ``set`` and its axes), never from a run;
    ``only_gammas`` keeps the preset's gammas that are in it (the ones that ran, :func:`gammas_ran`).
    """
    from anchorlab.config.experiment import OptimConfig
    from anchorlab.sweep.grid import apply_set, load_sweep

    spec = load_sweep(name)
    base = apply_set(spec.base, spec.set)

    def values(key: str, default: Any = None) -> list[Any]:
        v = _axis_values(spec, key)
        return v if v is not None else [_dotted(base, key, default)]

    width = values("model.d_model")
    widths = sorted({w for w in width if w is not None})
    channels = _dotted(base, "model.channels")
    width_s = "/".join(str(w) for w in widths) if widths else (("U-Net " + "-".join(str(c) for c in channels)) if channels else "-")
    batch = _dotted(base, "train.batch_size", 1)
    max_steps = _dotted(base, "train.max_steps") or 0
    pairs = _data_clock(spec, base)
    n_train = sorted({n for n, _ in pairs if n})
    task = _dotted(base, "task.name") or "anchor"
    if task == "lm":
        seq, tokens = _dotted(base, "task.seq_len", 0), _dotted(base, "task.train_tokens", 0)
        total = max_steps * batch * seq if max_steps else tokens * max(e for _, e in pairs)
        data_s = f"{total / 1e6:,.1f}M tokens"
        clock_s = f"{max_steps:,} steps" if max_steps else f"{int(total // (batch * seq)):,} steps"
    else:
        data_s = "/".join(f"{n:,}" for n in n_train) if n_train else "the task's set"
        if max_steps:
            clock_s = f"{max_steps:,} steps (cap)"
        elif n_train:
            clock_s = "/".join(dict.fromkeys(f"{int(n // batch * e):,}" for n, e in pairs)) + " steps"
        else:
            clock_s = "/".join(dict.fromkeys(f"{e:.3g}" for _, e in pairs)) + " epochs"
    optim = {k: v for k, v in (base.get("optim") or {}).items() if k in OptimConfig.__dataclass_fields__}
    peaks = _axis_values(spec, "optim.peak_lr")
    if peaks is None:
        peaks = [OptimConfig(**optim).peak]
    peaks = sorted(set(float(p) for p in peaks))
    peak_s = sci(peaks[0]) if len(peaks) == 1 else f"{len(peaks)}: {sci(peaks[0])}..{sci(peaks[-1])}"
    gammas = [g for g in values("init.gamma") if g is not None and (only_gammas is None or g in only_gammas)]
    ref = _dotted(base, "init.ref_width")
    w0 = ref or (widths[0] if widths else None)
    if w0 and gammas:
        anchor = task in ("anchor", "complexity") and w0 != PAPER_WIDTH
        label = "paper gamma" if w0 == PAPER_WIDTH and task in ("anchor", "complexity") else f"gamma (std at width {w0})"
        gamma_s = ", ".join(f"{g:g} ({std_of(g, w0):.2g}" + (f"; paper gamma {paper_gamma(g, w0):.2f})" if anchor else ")")
                            for g in dict.fromkeys(gammas))
        gamma_s = f"{label}: {gamma_s}"
    else:
        gamma_s = ("plain gamma: " + ", ".join(f"{g:g}" for g in dict.fromkeys(gammas))) if gammas else "-"
    seeds = _axis_values(spec, "train.init_seed")
    return {"runs": str(spec.n_combinations), "width": width_s, "data": data_s, "clock": clock_s,
            "peak lr": peak_s, "init": gamma_s, "seeds": str(len(set(seeds)) if seeds else 1)}


@functools.lru_cache(maxsize=None)
def committed_run_ids() -> frozenset[str]:
    """Every run id in a committed table under docs/figures (a CSV with a run_id column)."""
    ids: set[str] = set()
    for f in sorted(FIGURES.glob("*.csv")):
        try:
            cols = pd.read_csv(f, nrows=0).columns
            if "run_id" in cols:
                ids.update(str(x) for x in pd.read_csv(f, usecols=["run_id"]).run_id.dropna())
        except (ValueError, pd.errors.ParserError):
            continue
    return frozenset(ids)


def ran_of(name: str, design: str) -> str:
    """How many of an anchor-task sweep preset's planned runs a committed table holds: ``"117 of 243 planned"``,
    or the planned count alone when every run is in (or none is: a paper-scale preset); for another task, the
    design's count (its configs need its data files)."""
    pr = _planned_and_ran(name)
    if pr is None:
        return design   # a task whose size is read from data files: the design's count
    planned, ran = pr
    return str(len(planned)) if len(ran) in (0, len(planned)) else f"{len(ran)} of {len(planned)} planned"


@functools.lru_cache(maxsize=None)
def _planned_and_ran(name: str) -> tuple[list[Any], list[Any]] | None:
    """An anchor-task sweep preset's planned runs (:func:`anchorlab.sweep.grid.expand`) and those a committed table
    holds; None for a task whose size is read from data files (its configs need its data files)."""
    from anchorlab.sweep.grid import apply_set, expand, load_sweep

    spec = load_sweep(name)
    if (_dotted(apply_set(spec.base, spec.set), "task.name") or "anchor") != "anchor":
        return None
    planned = expand(name)
    return planned, [r for r in planned if r.run_id in committed_run_ids()]


def gammas_ran(name: str) -> list[float] | None:
    """The init gammas of an anchor-task sweep preset's planned runs that a committed table holds, in the preset's
    order; None when every planned run is in, none is, or the task's size is read from data files."""
    pr = _planned_and_ran(name)
    if pr is None or len(pr[1]) in (0, len(pr[0])):
        return None
    return list(dict.fromkeys(r.config.init.gamma for r in pr[1]))


def scale_table(rows: Sequence[tuple[str, str]]) -> str:
    """(label, sweep preset) rows -> a Markdown table of their scales; for ours, ``runs`` says how many ran and
    ``init`` lists only the gammas that ran."""
    keys = ["runs", "width", "data", "clock", "peak lr", "init", "seeds"]
    out = []
    for label, name in rows:
        s = sweep_scale(name, gammas_ran(name) if label == "ours" else None)
        if label == "ours":
            s = {**s, "runs": ran_of(name, s["runs"])}
        out.append([f"{label} (`{name}`)"] + [s[k] for k in keys])
    return md_table(["scale", *keys], out)
