"""What a reproducible paper figure is: sweeps per scale, a maker, and the paper's claims.

A :class:`Figure` names, per scale (``demo`` / ``cpu`` / ``paper``), the sweep that
trains its runs (a bundled sweep preset or an inline spec). Its maker turns the
runs into tables and files (the figure itself, drawn by :mod:`anchorlab.plots`):
either ``make`` (the finished sweep directory -> tables and files) or ``tables``
(the run table, :func:`anchorlab.sweep.runtable.run_table` of ``out/sweep`` and of
any committed run tables given with ``--from-table``, -> tables and files), so
that a committed table redraws its figure without training and a partly run
sweep merges with committed rows. :class:`Option` s are choices a figure offers
on the command line (e.g. ``--clock 1``), each a change of its sweep spec.
Each :class:`Claim` states what the paper says of the figure (its number where
it gives one) and reads our value from the tables, so ``anchorlab reproduce``
writes the paper's value beside ours.

Figures register themselves in :data:`FIGURES` from the modules
``figures_*.py`` of this package; a new task family adds its own module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

Tables = dict[str, "pd.DataFrame"]
Made = tuple[Tables, dict[str, Path]]


@dataclass(frozen=True)
class Claim:
    """``text``: the paper's statement; ``paper``: its value as the paper gives it ("100%", "> 99%",
    "qualitative"); ``ours(tables)`` -> our number (or a short text), NaN when the tables cannot say."""

    text: str
    paper: str
    ours: Callable[[Tables], float | str]


@dataclass(frozen=True)
class Option:
    """A choice a figure offers on the command line (``--<name> VALUE``): per value, the changes to the
    figure's sweep spec, ``{dotted key: value}`` (a key that is an axis of the spec takes a list: the axis's
    new values, or a ``slice`` of the axis as the options before it left it; any other key is set on every
    run). ``scales``: where the option applies; elsewhere only
    its default is accepted (and changes nothing)."""

    name: str                                          # "clock" -> --clock
    values: Mapping[str, Mapping[str, Any]]            # "1" -> {"train.epochs": 236.4, ...}
    default: str
    help: str
    scales: tuple[str, ...] = ("cpu",)

    def __post_init__(self) -> None:
        if self.default not in self.values:
            raise ValueError(f"option {self.name}: default {self.default!r} is not one of {list(self.values)}")


RowsMaker = Callable[["pd.DataFrame", Path, str], Made]   # (run table, out dir, scale) -> (tables, files)


@dataclass(frozen=True)
class Figure:
    """A paper figure with data behind it: ``make`` or ``tables`` (exactly one) makes its tables and files."""

    id: str
    paper: str                                   # "NeurIPS 2024" | "journal"
    number: str                                  # "Fig. 2", "Fig. 7A"
    shows: str                                   # one line: what the figure shows
    sweeps: Mapping[str, str | dict[str, Any]]   # scale -> sweep preset name or inline spec
    make: Callable[[Path, Path, str], Made] | None = None   # (sweep dir, out dir, scale) -> (tables, files)
    claims: tuple[Claim, ...] = ()
    notes: str = ""                              # scale caveats, extras needed
    extra: str | None = None                     # pip extra the figure needs, e.g. "hf"
    tables: RowsMaker | None = None              # (run table, out dir, scale) -> (tables, files)
    options: tuple[Option, ...] = ()             # command-line choices that change the sweep spec
    rules: Mapping[str, str] = field(default_factory=dict)   # scale -> its scale rule in one line
    # a ``tables`` maker sees only its own design's runs: rows (in out/sweep or a --from-table CSV) whose run id
    # is not one of the figure's sweep spec are dropped, for a study that borrows runs from another's table
    design_only: bool = False

    def __post_init__(self) -> None:
        if (self.make is None) == (self.tables is None):
            raise ValueError(f"figure {self.id}: give exactly one of make (sweep dir) and tables (run table)")
        if self.design_only and self.tables is None:
            raise ValueError(f"figure {self.id}: design_only needs a tables maker (run table)")
        for sc in self.rules:
            if sc not in self.sweeps:
                raise ValueError(f"figure {self.id}: a rule for scale {sc!r}, which it has no sweep for")


FIGURES: dict[str, Figure] = {}


@dataclass(frozen=True)
class FlagSpec:
    """One ``reproduce`` flag made from the figures' :class:`Option` s of one name: every value any figure
    offers, and a help naming the figures and each one's default."""

    name: str
    values: tuple[str, ...]
    help: str

    @property
    def metavar(self) -> str:
        return "{" + ",".join(self.values) + "}"


def register(fig: Figure) -> Figure:
    if fig.id in FIGURES:
        raise ValueError(f"figure {fig.id!r} registered twice")
    FIGURES[fig.id] = fig
    return fig


# ------------------------------------------------------------------ helpers for makers
def value(table: pd.DataFrame, column: str, where: Mapping[str, Any] | Callable[[pd.DataFrame], Any] = (),
          how: str = "mean") -> float:
    """One number from a table: ``column`` over the rows matching ``where`` (mean/min/max); NaN if none."""
    import pandas as pd

    t = table
    if callable(where):
        t = t[where(t)]
    else:
        for k, v in dict(where).items():
            t = t[t[k] == v]
    if column not in t or t.empty:
        return math.nan
    s = pd.to_numeric(t[column], errors="coerce").dropna()
    if s.empty:
        return math.nan
    return float(getattr(s, how)())


def by_gamma(table: pd.DataFrame, which: str) -> pd.DataFrame:
    """Rows of the smallest (``which="large_init"``) or largest (``"small_init"``) init.gamma."""
    g = table["init.gamma"]
    return table[g == (g.min() if which == "large_init" else g.max())]


@dataclass
class Result:
    """What ``reproduce`` returns: paths written, and the claims table."""

    files: dict[str, Path] = field(default_factory=dict)
    claims: pd.DataFrame | None = None
