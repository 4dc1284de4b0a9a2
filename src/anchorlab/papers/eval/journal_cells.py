"""Journal Figs. 3B / 5C judged the journal's way from a run table: phase per cell, commutativity, stable rank.

Input: a run table (:mod:`anchorlab.sweep.runtable`) of the journal task (both (3,4) and (4,3) unseen) with,
where known, ``lr_sum`` (the sum of the learning rate over the run, for the decay exponent) and
``cond/wq0_stable_rank`` (of the first layer's query weights, heads merged: Fig. 5C). :func:`journal_view` adds
each run's journal gamma, decay row and phase per reading, and reads every other value under the run table's
names (``model.n_layers``, ``optim.weight_decay``, ``best.<metric>`` / ``final.<metric>`` of a metric
definition); :func:`journal_cells` gives one row per (depth, clock, init rate, weight decay) with the phase of
the cell's *mean* ID and OOD accuracy under both readings:

    best    each run's best over training (the authors' figure code, fig_code/fig3/figB.py: ``max`` of the log)
    final   each run's last evaluation

Commutativity is the unseen pair's (pred(a,b) == pred(b,a), key and fillers fixed) at the run's end in both
readings: its best over training would count the near-constant outputs of early training, which are
trivially commutative. The journal marks a cell whose commutativity is below 70% with a triangle (Fig. 3B);
its phase 2 splits into ``2n`` (below) and ``2c``. :func:`claim_lines` reads the journal's three claims along
each row and column of the grid beside the journal's own cells (:data:`JOURNAL_PHASES`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from anchorlab.config import ConfigError
from anchorlab.run_status import TRAINED
from anchorlab.eval.definitions import MetricDefinition
from anchorlab.eval.phases import PhaseThresholds, classify_phase
from anchorlab.papers.gammas import JOURNAL_WIDTH, read_at

JOURNAL_LR_SUM = 7.3752          # the journal's clock: 92,190 steps, 1e-5 -> 1.5e-4 over 4,390, cosine to 1e-5
JOURNAL_WDS = (0.0, 0.01, 0.1, 1.0)
# The journal's phase per (gamma, weight decay), rows gamma 0.4..0.8, columns JOURNAL_WDS: the size matrix of
# its Fig. 5C code (fig_code/fig5/figC.ipynb: 1 = phase 1, 2 = phase 2 without commutativity, 3 = with, 4 =
# phase 3), agreeing with Fig. 3B's code (fig_code/fig3/figB.py: hatched, poor ID, at gamma 0.4 x wd 0-0.1;
# triangles, poor commutativity, at gamma 0.4-0.5 x wd 0-0.1) and with Fig. 3A's phase bands at wd 0.01.
JOURNAL_PHASES: dict[float, tuple[str, str, str, str]] = {
    0.4: ("1", "1", "1", "2c"), 0.45: ("2n", "2n", "2n", "3"), 0.5: ("2n", "2n", "2n", "3"),
    0.55: ("2c", "2c", "2c", "3"), 0.6: ("3", "3", "3", "3"), 0.65: ("3", "3", "3", "3"),
    0.7: ("3", "3", "3", "3"), 0.75: ("3", "3", "3", "3"), 0.8: ("3", "3", "3", "3")}
READINGS = ("best", "final")
DEPTH, WD, STABLE_RANK = "model.n_layers", "optim.weight_decay", "cond/wq0_stable_rank"
CELL_KEYS = [DEPTH, "clock", "gamma_axis", WD]
AXIS_WORDS = {"gamma_axis": "gamma", WD: "weight_decay"}   # how a claim line names the axis it runs along
RANK = {"1": 1.0, "2n": 2.0, "2": 2.25, "2c": 2.5, "3": 3.0}   # order of the labels along the journal's axis


def _known(v: object) -> bool:
    return v is not None and v is not pd.NA and not (isinstance(v, float) and math.isnan(v))


def journal_gamma(gamma: float, ref_width: object, d_model: object) -> float:
    """The journal's gamma a run stands for (:func:`anchorlab.papers.gammas.read_at` width 640); NaN otherwise."""
    return read_at(gamma, ref_width, d_model, JOURNAL_WIDTH)


def journal_wd(weight_decay: float, lr_sum: float) -> float:
    """The journal's weight-decay row a run's decay matches by the decay exponent ``wd x sum of lr``
    (nearest on a log scale; 0 is 0); NaN where the sum is unknown."""
    if not _known(weight_decay) or weight_decay == 0:
        return 0.0 if _known(weight_decay) else math.nan
    if not _known(lr_sum):
        return math.nan
    w = weight_decay * lr_sum / JOURNAL_LR_SUM
    return min(JOURNAL_WDS[1:], key=lambda j: abs(math.log(w / j)))


def journal_label(gamma: float, wd: float) -> str:
    """The journal's phase label of the cell nearest (gamma, wd) on its grid; ``""`` off its grid."""
    if not _known(gamma) or not _known(wd) or wd not in JOURNAL_WDS:
        return ""
    g = min(JOURNAL_PHASES, key=lambda k: abs(k - gamma))
    return JOURNAL_PHASES[g][JOURNAL_WDS.index(wd)] if abs(g - gamma) < 0.026 else ""


def _col(rows: pd.DataFrame, name: str) -> pd.Series:
    return pd.to_numeric(rows[name], errors="coerce") if name in rows else pd.Series(math.nan, index=rows.index)


def reading_columns(d: MetricDefinition) -> dict[str, str]:
    """The run-table column each per-run reading of definition ``d`` is: ``id_best`` -> ``best.<d.id>``,
    ``ood_final`` -> ``final.<d.ood>``, ..., ``commutativity`` -> ``final.<d.commutativity>`` (at the run's end
    in both readings), ``stable_rank`` -> ``cond/wq0_stable_rank``. A cell's means carry the short names."""
    out = {f"{m}_{r}": f"{r}.{getattr(d, m)}" for r in READINGS for m in ("id", "ood")}
    return {**out, "commutativity": f"final.{d.commutativity}", "stable_rank": STABLE_RANK}


def journal_view(rows: pd.DataFrame, d: MetricDefinition, th: PhaseThresholds = PhaseThresholds()) -> pd.DataFrame:
    """One row per trained run (finished or stopped early): the run table's columns (those the judgement reads
    as numbers, NaN where unknown: ``model.n_layers``, ``optim.weight_decay``, ``clock``, ``seed``, ``lr_sum`` and
    the columns of :func:`reading_columns`), then ``paper_gamma`` (read at width 640), ``gamma_axis`` (the paper gamma,
    else the plain gamma), ``journal_wd`` and each run's ``phase_best`` / ``phase_final`` label, sorted by the
    cell keys and seed."""
    need = ["init.gamma", "optim.weight_decay", f"best.{d.id}", f"best.{d.ood}"]
    missing = [c for c in need if c not in rows]
    if missing:
        raise ConfigError(f"journal-fig3 run table: column(s) {', '.join(missing)} missing (metric definition "
                          f"{d.id!r} / {d.ood!r}: aggregate.metrics)")
    v = rows[rows.status.isin(TRAINED)].copy() if "status" in rows else rows.copy()
    g = _col(v, "init.gamma")
    v["paper_gamma"] = [journal_gamma(a, r, w) for a, r, w in zip(g, v.get("init.ref_width", [None] * len(v)),
                                                              v.get("model.d_model", [None] * len(v)))]
    v["gamma_axis"] = v.paper_gamma.fillna(g)
    v["journal_wd"] = [journal_wd(w, s) for w, s in zip(_col(v, WD), _col(v, "lr_sum"))]
    read = reading_columns(d)
    for col in (WD, "lr_sum", DEPTH, "clock", "seed", *read.values()):
        v[col] = _col(v, col)
    for reading in READINGS:
        v[f"phase_{reading}"] = [classify_phase(i, o, c, th)[1] for i, o, c in
                                 zip(v[read[f"id_{reading}"]], v[read[f"ood_{reading}"]], v[read["commutativity"]])]
    return v.sort_values([*CELL_KEYS, "seed"], na_position="first").reset_index(drop=True)


def journal_cells(view: pd.DataFrame, d: MetricDefinition, th: PhaseThresholds = PhaseThresholds()) -> pd.DataFrame:
    """One row per (depth, clock, init rate, weight decay) of a :func:`journal_view` under definition ``d``:
    ``n_seeds``, the mean ID / OOD of each reading (``id_best``, ``ood_best``, ``id_final``, ``ood_final``),
    the mean commutativity and its triangle (``comm_low``: below the commutativity threshold), the phase of
    the means per reading (``phase_best`` / ``phase_final``: label, ``phase_*_index``: 1-3), the mean
    ``stable_rank`` (NaN where no run of the cell has one), the journal's row (``journal_wd``) and its phase
    label there (``journal_phase``, ``""`` off its grid) and whether the best reading agrees with it."""
    if view.empty:
        return pd.DataFrame(columns=[*CELL_KEYS, "n_seeds"])
    read = reading_columns(d)
    t = view.groupby(CELL_KEYS, dropna=False)
    cells = t[list(read.values())].mean().set_axis(list(read), axis=1).reset_index()
    cells.insert(len(CELL_KEYS), "n_seeds", t.seed.nunique().to_numpy())
    cells.insert(len(CELL_KEYS), "paper_gamma", t.paper_gamma.first().to_numpy())
    cells["journal_wd"] = t.journal_wd.first().to_numpy()
    cells["comm_low"] = cells.commutativity < th.comm_threshold
    for reading in READINGS:
        got = [classify_phase(i, o, c, th) for i, o, c in
               zip(cells[f"id_{reading}"], cells[f"ood_{reading}"], cells.commutativity)]
        cells[f"phase_{reading}"] = [lab for _, lab in got]
        cells[f"phase_{reading}_index"] = pd.array([p for p, _ in got], dtype="Int64")
    cells["journal_phase"] = [journal_label(g, w) for g, w in zip(cells.paper_gamma, cells.journal_wd)]
    cells["agrees_best"] = [(_same(o, j) if j else pd.NA) for o, j in zip(cells.phase_best, cells.journal_phase)]
    return cells


def _same(ours: object, journal: str) -> bool:
    """A label matches the journal's; ours ``"2"`` (commutativity unknown) matches either phase 2."""
    return _known(ours) and (ours == journal or (ours == "2" and journal in ("2n", "2c")))


def main_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells the claims read: the depth and clock with the most cells (a corner run at another depth
    or clock is left to the depth table)."""
    t = cells
    for key in (DEPTH, "clock"):
        if key in t and len(t) and t[key].notna().any():
            t = t[t[key] == t[key].value_counts().idxmax()]
    return t


def _direction(values: Sequence[float], tol: float = 0.1) -> str:
    """``rises`` / ``falls`` / ``flat`` from the first to the last known value (within ``tol`` relative:
    flat), ``n/a`` with fewer than two."""
    v = [x for x in values if _known(x)]
    if len(v) < 2:
        return "n/a"
    a, b = float(v[0]), float(v[-1])
    if abs(b - a) <= tol * max(abs(a), abs(b), 1e-12):
        return "flat"
    return "rises" if b > a else "falls"


def _phase_walk(labels: Sequence[object]) -> str:
    """``rises`` when the labels never fall along the line and end higher, ``flat`` when all equal,
    ``falls`` / ``mixed`` otherwise, ``n/a`` with fewer than two known labels."""
    r = [RANK[str(x)] for x in labels if _known(x) and str(x) in RANK]
    if len(r) < 2:
        return "n/a"
    steps = [b - a for a, b in zip(r, r[1:])]
    if all(s == 0 for s in steps):
        return "flat"
    if all(s >= 0 for s in steps):
        return "rises"
    return "falls" if all(s <= 0 for s in steps) else "mixed"


def _line(labels: Sequence[object]) -> str:
    return " -> ".join(str(x) if _known(x) and str(x) else "?" for x in labels)


def claim_lines(cells: pd.DataFrame, readings: Sequence[str] = READINGS) -> pd.DataFrame:
    """The journal's three claims read along each line of the grid (the main cells, :func:`main_cells`):

    * ``init rate``: per weight-decay row, the phases from the largest init (smallest gamma) to the smallest;
    * ``weight decay``: per init-rate column, the phases from the smallest decay to the largest;
    * ``stable rank``: the mean stable rank along each of those lines.

    One row per (claim, line) with the journal's phases there (its cells at the matched gammas and decay
    rows; ``?`` off its grid) and its reading (``rises`` / ``flat`` / ...; for the stable rank the journal
    reads ``falls`` where its phase rises and ``flat`` where it stays, Sec. VI-C: "within the same phase,
    the stable rank values remain relatively consistent"), ours per reading, ``matches_<reading>`` (cells
    equal to the journal's, ``k/n``) and ``holds_<reading>``: our line goes the journal's way."""
    t = main_cells(cells)
    out: list[dict[str, object]] = []
    for claim, along, across in (("init rate", "gamma_axis", WD), ("weight decay", WD, "gamma_axis")):
        for key, line in t.sort_values(along).groupby(across, sort=True):
            journal = list(line.journal_phase)
            where = (f"wd {key:g} (journal {line.journal_wd.iloc[0]:g})" if across == WD else f"gamma {key:g}")
            j_walk = _phase_walk(journal)
            row: dict[str, object] = {"claim": f"phase 1 -> 2 -> 3 with the {claim}", "line": where,
                                      "along": f"{AXIS_WORDS[along]} " + " / ".join(f"{x:g}" for x in line[along]),
                                      "journal": _line(journal), "journal_reading": j_walk}
            sr = {"claim": f"stable rank falls with the {claim}", "line": where, "along": row["along"],
                  "journal": _line(journal),
                  "journal_reading": {"rises": "falls", "flat": "flat"}.get(j_walk, "n/a")}
            for reading in readings:
                ours = list(line[f"phase_{reading}"])
                row[f"ours_{reading}"] = _line(ours)
                row[f"reading_{reading}"] = walk = _phase_walk(ours)
                known = [(o, j) for o, j in zip(ours, journal) if j]
                row[f"matches_{reading}"] = f"{sum(_same(o, j) for o, j in known)}/{len(known)}" if known else "n/a"
                row[f"holds_{reading}"] = walk == j_walk if j_walk != "n/a" else pd.NA
            ranks = list(line.stable_rank)
            sr["ours_best"] = " -> ".join(f"{x:.3g}" if _known(x) else "?" for x in ranks)
            sr["reading_best"] = _direction(ranks)
            sr["holds_best"] = sr["reading_best"] == sr["journal_reading"] if sr["journal_reading"] != "n/a" else pd.NA
            out += [row, sr]
    return pd.DataFrame(out)


def claim_summary(lines: pd.DataFrame, claim: str, reading: str = "best") -> str:
    """``k of n lines`` on which a claim (a prefix of its text) goes the journal's way in ``reading``."""
    col = f"holds_{reading}" if f"holds_{reading}" in lines else "holds_best"
    t = lines[lines.claim.str.startswith(claim)] if len(lines) else lines
    judged = t[col].dropna() if len(t) else t
    return f"{int(judged.astype(bool).sum())} of {len(judged)} lines" if len(judged) else "n/a"


def journal_reading(claim: str, lines: pd.DataFrame) -> str:
    """The journal's own reading of a claim over the lines our grid matches: ``rises on k of n``."""
    t = lines[lines.claim.str.startswith(claim)] if len(lines) else lines
    j = t.journal_reading[t.journal_reading != "n/a"] if len(t) else t
    word = "falls" if "stable rank" in claim else "rises"
    return f"{word} on {int((j == word).sum())} of {len(j)} lines" if len(j) else "n/a"


def depth_table(cells: pd.DataFrame, readings: Sequence[str] = READINGS) -> pd.DataFrame:
    """The cells run at more than one depth (same clock, init rate and decay), one row per (cell, depth)."""
    keys = ["clock", "gamma_axis", WD]
    n = cells.groupby(keys, dropna=False)[DEPTH].transform("nunique") if len(cells) else pd.Series(dtype=int)
    cols = [*keys, DEPTH, "n_seeds", *[f"{m}_{r}" for r in readings for m in ("id", "ood", "phase")],
            "commutativity", "stable_rank", "journal_phase"]
    return cells[n > 1][cols].sort_values([*keys, DEPTH]).reset_index(drop=True) if len(cells) else cells


def cell_readings(cells: pd.DataFrame) -> pd.DataFrame:
    """The cell table in the columns the figure writes (``cells.csv``)."""
    cols = [*CELL_KEYS[:2], "paper_gamma", "gamma_axis", WD, "journal_wd", "n_seeds", "id_best",
            "ood_best", "phase_best", "id_final", "ood_final", "phase_final", "commutativity", "comm_low",
            "stable_rank", "journal_phase", "agrees_best"]
    return cells[[c for c in cols if c in cells]]


LONGER_CLOCK_READINGS = ("fit cut short", "still unfit", "fits, not phase 3")


def longer_clock_reading(id_acc: float, ood_acc: float, th: PhaseThresholds = PhaseThresholds()) -> str:
    """A run that was unfit on the shorter clock, read on the longer one (notes/2026-12-c3-1x.md): *fit cut short*
    when it now fits (ID >= ``th.id_threshold``) and reads phase 3 (OOD >= ``th.ood_threshold``), *still unfit*
    when ID stays below, *fits, not phase 3* otherwise."""
    if not id_acc >= th.id_threshold:
        return LONGER_CLOCK_READINGS[1]
    return LONGER_CLOCK_READINGS[0] if ood_acc >= th.ood_threshold else LONGER_CLOCK_READINGS[2]


def control_reading(id_acc: float, ood_acc: float, th: PhaseThresholds = PhaseThresholds()) -> str:
    """A run that fitted on the shorter clock (a control) read on the longer one: ``control: phase 3`` when it
    still fits and reads phase 3, ``control: fits, not phase 3``, or ``control: unfit``."""
    if not id_acc >= th.id_threshold:
        return "control: unfit"
    return "control: phase 3" if ood_acc >= th.ood_threshold else "control: fits, not phase 3"


def clock_pairs(short: pd.DataFrame, long: pd.DataFrame, d: MetricDefinition,
                th: PhaseThresholds = PhaseThresholds()) -> pd.DataFrame:
    """Each run of ``long`` (a run table on the longer clock) beside its twin on the shorter clock in ``short``
    (the same init, seed, depth and decay exponent, matched by :func:`journal_wd`), under definition ``d``: one row
    per run with ``gamma_axis``, ``seed``, ``journal_wd``, the short and long runs' ID / OOD per reading
    (``short_id_final`` ...), ``short_fitted`` (the short run's final ID >= ``th.id_threshold``) and the
    :func:`longer_clock_reading` of the long run per reading (``reading_final`` / ``reading_best``), or its
    :func:`control_reading` where the short run fitted. A long run without a twin is an error naming it."""
    read = reading_columns(d)
    s, lg = journal_view(short, d, th), journal_view(long, d, th)
    keys = ["gamma_axis", "seed", DEPTH, "journal_wd"]
    rows = []
    for _, r in lg.iterrows():
        twin = s[(s.gamma_axis.round(6) == round(r.gamma_axis, 6)) & (s.seed == r.seed)
                 & (s[DEPTH] == r[DEPTH]) & (s.journal_wd == r.journal_wd) & (s.clock < r.clock)]
        if twin.empty:
            raise ConfigError(f"run {r.run_id}: no run on a shorter clock with the same "
                              f"{', '.join(f'{k} {r[k]}' for k in keys)}")
        t = twin.iloc[0]
        row = {"run_id": r.run_id, "short_run_id": t.run_id, **{k: r[k] for k in keys},
               "short_clock": t.clock, "clock": r.clock}
        row["short_fitted"] = bool(t[read["id_final"]] >= th.id_threshold)
        for reading in READINGS:
            for m in ("id", "ood"):
                row[f"short_{m}_{reading}"] = t[read[f"{m}_{reading}"]]
                row[f"{m}_{reading}"] = r[read[f"{m}_{reading}"]]
            row[f"reading_{reading}"] = (control_reading if row["short_fitted"] else longer_clock_reading)(
                row[f"id_{reading}"], row[f"ood_{reading}"], th)
        rows.append(row)
    return pd.DataFrame(rows)


def clock_verdict(pairs: pd.DataFrame, planned: int, reading: str) -> str:
    """One sentence on :func:`clock_pairs` under ``reading`` (``best`` / ``final``): how many of the runs unfit on
    the shorter clock read each :data:`LONGER_CLOCK_READINGS` on the longer one, and the runs that fitted on the
    shorter clock (the controls). The verdict (notes/2026-12-c3-1x.md) is given only when all ``planned`` runs are
    in; before that the sentence says *pending* with the count."""
    if reading not in READINGS:
        raise ConfigError(f"reading: {reading!r} is not one of {', '.join(READINGS)}")
    fitted = pairs["short_fitted"].astype(bool) if len(pairs) else pd.Series(dtype=bool)
    read = pairs[f"reading_{reading}"] if len(pairs) else pd.Series(dtype=object)
    failed, ctrl = read[~fitted], read[fitted]
    counts = {k: int((failed == k).sum()) for k in LONGER_CLOCK_READINGS}
    n = len(failed)
    tally = ", ".join(f"{v} *{k}*" for k, v in counts.items())
    control = f"; runs fitted on the shorter clock: {', '.join(f'*{x}*' for x in ctrl)}" if len(ctrl) else ""
    head = f"{reading} reading: of {n} run(s) unfit on the shorter clock, {tally}{control}"
    if len(pairs) < planned:
        return f"{head}. Verdict pending: {len(pairs)} of {planned} runs in."
    cut = counts[LONGER_CLOCK_READINGS[0]]
    if n == 0:
        verdict = "no run was unfit on the shorter clock, so nothing was cut short"
    elif cut == n:
        verdict = "every failure on the shorter clock was a fit cut short"
    elif cut == 0:
        verdict = "no failure on the shorter clock was a fit cut short"
    else:
        verdict = f"{cut} of {n} failures on the shorter clock were fits cut short"
    return f"{head}. **Verdict: {verdict}.**"
