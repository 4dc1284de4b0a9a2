"""The figure registry: what a reproducible paper figure is, the papers' claims it bears on, and the docs blocks.

A :class:`Figure` names, per scale (``demo`` / ``cpu`` / ``paper``), the sweep that
trains its runs (a bundled sweep preset or an inline spec). Its maker turns the
runs into tables and files (the figure itself, drawn by :mod:`anchorlab.plots`):
either ``make`` (the finished sweep directory -> tables and files) or ``tables``
(the run table, :func:`anchorlab.sweep.runtable.run_table` of ``out/sweep`` and of
any committed run tables given with ``--from-table``, -> tables and files), so
that a committed table redraws its figure without training and a partly run
sweep merges with committed rows. :class:`Option` s are choices a figure offers
on the command line (e.g. ``--clock 1``), each a change of its sweep spec.

One claim type, :class:`Claim`: a claim of the papers (or one of our own studies) as the results page states it,
by its C-id (``C1`` ... ``C13``, ``EV``), with the paper's words, ours and its status read from the committed
tables, and the sweeps of its scale. A figure names the claims it bears on (``Figure.cids``), and each of its
:class:`Reading` s is that claim read on the figure's own run tables: the paper's value where it gives one beside
ours, so ``anchorlab reproduce`` writes the two side by side. A claim's figures are the registered figures that
name it (:func:`claim_figures`); a claim that reads no registered figure says why (``Claim.no_figure``).

Docs blocks (the generated text of README.md, docs/results.md and docs/claims/, ``tools/docs.py``) are declared
with their owner: a figure's ``blocks``, a claim's ``blocks``, or :func:`register_blocks` for a study with no
figure or claim of its own; registering the owner registers them in :data:`BLOCKS`, where a name is unique.

Figures register themselves in :data:`FIGURES` from the modules ``figures_*.py`` of this package; the claims and
their blocks from :mod:`anchorlab.papers.docs` (they read the committed tables); a new task family adds its own
module.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

Tables = dict[str, "pd.DataFrame"]
Made = tuple[Tables, dict[str, Path]]


@dataclass(frozen=True)
class Reading:
    """A figure's claims read on its own tables: ``text``: the paper's statement; ``paper``: its value as the paper
    gives it ("100%", "> 99%", "qualitative"); ``ours(tables)`` -> our number (or a short text), NaN when the tables
    cannot say. Which :class:`Claim` s they read is the figure's ``cids``."""

    text: str
    paper: str
    ours: Callable[[Tables], float | str]


BlockFn = Callable[[], str]          # a generated docs block: the committed tables -> Markdown
CID = re.compile(r"C\d+|[A-Z]{2,}")   # C1 ... C13; EV (a claim of our own)
BLOCK_NAME = re.compile(r"[\w-]+")   # as the docs' block markers allow


@dataclass(frozen=True)
class Claim:
    """A claim as the results page states it: ``id`` (its C-id), ``name`` (what it is about, the paper's figure),
    ``paper`` (the paper's result in its words; "-" for a claim of our own), ``ours()`` and ``status()`` (read from
    the committed tables), ``sweeps`` (our sweep preset, the paper-scale preset: its scale), ``blocks`` (the docs
    blocks it owns, name -> renderer). Its figures are the registered figures whose ``cids`` name it; one that
    reads none gives the reason in ``no_figure``."""

    id: str
    name: str
    paper: str
    ours: BlockFn
    status: BlockFn
    sweeps: tuple[str, str]
    blocks: Mapping[str, BlockFn] = field(default_factory=dict)
    no_figure: str = ""
    runs: BlockFn | None = None     # the runs its status reads, where they are not its sweep's seeds (picks)

    def __post_init__(self) -> None:
        if not CID.fullmatch(self.id):
            raise ValueError(f"claim {self.id!r}: an id is C<number> or an upper-case tag (EV)")


@dataclass(frozen=True)
class Block:
    """A generated docs block: its name (``<!-- generated: NAME -->``), renderer and owner (a figure id, a C-id,
    or a study's name)."""

    name: str
    render: BlockFn
    owner: str
    why: str = ""      # for a study's block (no figure or claim of its own): what it is


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
    readings: tuple[Reading, ...] = ()          # its claims (cids) read on its tables, beside the paper's values
    notes: str = ""                              # scale caveats, extras needed
    extra: str | None = None                     # pip extra the figure needs, e.g. "hf"
    tables: RowsMaker | None = None              # (run table, out dir, scale) -> (tables, files)
    options: tuple[Option, ...] = ()             # command-line choices that change the sweep spec
    rules: Mapping[str, str] = field(default_factory=dict)   # scale -> its scale rule in one line
    # a ``tables`` maker sees only its own design's runs: rows (in out/sweep or a --from-table CSV) whose run id
    # is not one of the figure's sweep spec are dropped, for a study that borrows runs from another's table
    design_only: bool = False
    cids: tuple[str, ...] = ()                   # the claims (C-ids) its readings bear on
    blocks: Mapping[str, BlockFn] = field(default_factory=dict)   # the docs blocks it owns, name -> renderer

    def __post_init__(self) -> None:
        for cid in self.cids:
            if not CID.fullmatch(cid):
                raise ValueError(f"figure {self.id}: {cid!r} is not a claim id (C<number>, EV)")
        if (self.make is None) == (self.tables is None):
            raise ValueError(f"figure {self.id}: give exactly one of make (sweep dir) and tables (run table)")
        if self.design_only and self.tables is None:
            raise ValueError(f"figure {self.id}: design_only needs a tables maker (run table)")
        for sc in self.rules:
            if sc not in self.sweeps:
                raise ValueError(f"figure {self.id}: a rule for scale {sc!r}, which it has no sweep for")


FIGURES: dict[str, Figure] = {}
CLAIMS: dict[str, Claim] = {}      # by C-id, in the order of the results page
BLOCKS: dict[str, Block] = {}      # by block name
STUDIES: dict[str, str] = {}       # a study with blocks but no figure or claim of its own -> what it is


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


def register_blocks(owner: str, blocks: Mapping[str, BlockFn], why: str = "") -> None:
    """Add ``owner``'s blocks to :data:`BLOCKS`; a malformed or already declared name is an error (nothing of
    ``blocks`` is added then)."""
    for name in blocks:
        if not isinstance(name, str) or not BLOCK_NAME.fullmatch(name):
            raise ValueError(f"{owner}: block name {name!r} is not letters, digits, '_' and '-'")
        if name in BLOCKS:
            raise ValueError(f"{owner}: block {name!r} is already declared by {BLOCKS[name].owner}")
    for name, fn in blocks.items():
        BLOCKS[name] = Block(name, fn, owner, why)


def register_study(name: str, why: str, blocks: Mapping[str, BlockFn]) -> None:
    """Blocks of a study that reads no registered figure and states no claim (the CPU demo, the results' status
    table): declared as such, ``why`` saying what it is."""
    if not why:
        raise ValueError(f"study {name!r}: say what it is (it has no figure or claim)")
    if name in STUDIES or name in FIGURES or name in CLAIMS:
        raise ValueError(f"study {name!r}: the name is taken")
    register_blocks(name, blocks, why)
    STUDIES[name] = why


def register(fig: Figure) -> Figure:
    """Add a figure to :data:`FIGURES` and its blocks to :data:`BLOCKS`."""
    if fig.id in FIGURES:
        raise ValueError(f"figure {fig.id!r} registered twice")
    register_blocks(fig.id, fig.blocks)
    FIGURES[fig.id] = fig
    return fig


def register_claim(claim: Claim) -> Claim:
    """Add a claim to :data:`CLAIMS` (after those registered before it: the results page's order) and its blocks
    to :data:`BLOCKS`."""
    if claim.id in CLAIMS:
        raise ValueError(f"claim {claim.id!r} registered twice")
    register_blocks(claim.id, claim.blocks)
    CLAIMS[claim.id] = claim
    return claim


def claim_figures(cid: str) -> tuple[str, ...]:
    """The registered figures that name claim ``cid``, in registration order."""
    return tuple(f.id for f in FIGURES.values() if cid in f.cids)


def unread_claims() -> list[str]:
    """What is wrong between the claims and the figures: a figure naming a claim that is not registered, a claim
    no figure names that does not say why (``no_figure``), or one that says so while a figure names it."""
    out = [f"figure {f.id}: claim {c} is not registered" for f in FIGURES.values() for c in f.cids if c not in CLAIMS]
    for c in CLAIMS.values():
        figs = claim_figures(c.id)
        if not figs and not c.no_figure:
            out.append(f"claim {c.id}: no registered figure names it, and it does not say why (no_figure)")
        elif figs and c.no_figure:
            out.append(f"claim {c.id}: says it reads no figure, but {', '.join(figs)} name it")
    return out


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
