"""The two readings of the papers' rule over peak lrs, and the keys of a Fig. 2 cell (:mod:`.cells`).

The papers' cell takes each seed's best over its peak lrs. :func:`lr_readings` gives a run table twice: over
every peak run (``lrs`` = ``"all"``) and over the peaks inside the paper's range after the batch and width
corrections (:data:`PAPER_LR_RANGE`), so that peaks run outside it (the outer peaks, 5e-4) never move the
range cell. A cell is keyed by :data:`CELL_KEYS`, which include the kind of device its runs trained on.
"""

from __future__ import annotations

import pandas as pd

# a cell of the tables; ``devices``: the kind of device its runs trained on (``cpu``, ``cuda``, ...), so that
# the same configs on two machines make two cells, never one that mixes them
CELL_KEYS = ["clock", "n_layers", "op_set", "paper_gamma", "devices"]
TABLE_KEYS = [*CELL_KEYS, "lrs"]   # ... read over every peak lr ("all") or over a range of them
# the paper's peak range [1e-4, 3e-4] after the batch and width corrections (x 1.1, docs/protocol.md),
# fixed before the runs: the papers' rule is read over the peaks inside it and over every peak run
PAPER_LR_RANGE = (1.1e-4, 3.3e-4)
ALL_LRS = "all"


def lr_range_label(lo: float, hi: float) -> str:
    """``[1.1e-4, 3.3e-4]`` for (1.1e-4, 3.3e-4)."""
    def sci(v: float) -> str:
        m, e = f"{v:.3e}".split("e")
        return f"{m.rstrip('0').rstrip('.')}e{int(e)}"
    return f"[{sci(lo)}, {sci(hi)}]"


def checked_lr_range(lo: float, hi: float) -> tuple[float, float]:
    """(LO, HI) if 0 < LO <= HI, else ValueError."""
    if not 0 < lo <= hi:
        raise ValueError(f"need 0 < LO <= HI, got {lo:g},{hi:g}")
    return lo, hi


def parse_lr_range(text: str) -> tuple[float, float] | None:
    """``"LO,HI"`` -> :func:`checked_lr_range` (LO, HI); ``"none"`` -> None; ValueError otherwise."""
    if text == "none":
        return None
    lo, hi = (float(v) for v in text.split(","))
    return checked_lr_range(lo, hi)


def lr_readings(rows: pd.DataFrame, lr_range: tuple[float, float] | None = PAPER_LR_RANGE) -> pd.DataFrame:
    """A run table twice, as the two readings of the papers' rule: every run (``lrs`` = "all") and the runs
    whose peak lr lies in ``lr_range`` (``lrs`` = "[LO, HI]"); ``None``: the first only."""
    rows = rows.assign(devices=device_kind(rows.device))
    out = [rows.assign(lrs=ALL_LRS)]
    if lr_range is not None:
        lo, hi = checked_lr_range(*lr_range)
        inside = rows[(rows.peak_lr >= lo * (1 - 1e-9)) & (rows.peak_lr <= hi * (1 + 1e-9))]
        out.append(inside.assign(lrs=lr_range_label(lo, hi)))
    return pd.concat(out, ignore_index=True)


def device_kind(device: pd.Series) -> pd.Series:
    """``cuda: NVIDIA H200`` -> ``cuda``: the part of a run table's ``device`` that keys its cells."""
    return device.fillna("unrecorded").astype(str).str.split(":").str[0]
