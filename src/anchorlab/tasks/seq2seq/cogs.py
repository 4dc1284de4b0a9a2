"""COGS (Kim & Linzen 2020): loaders for both logical-form formats, and metrics.

Files are TSV rows ``sentence <TAB> logical form <TAB> type``:

* ``original``: the official COGS logical forms (``x _ 1`` variables), from
  najoungkim/COGS ``data/{train,dev,test,gen}.tsv``.
* ``varfree``: the variable-free logical forms of Qiu et al. (2022) for the
  same sentences, as shipped with SLOG, keeping COGS's own row types.

Splits: ``train`` (in_distribution + primitive + exposure_example_* rows),
``dev`` and ``test`` (in-distribution), ``gen`` (out of distribution, 21
generalization types x 1,000). Structural types are ``cp_recursion``,
``pp_recursion`` and ``obj_pp_to_subj_pp``; the other generalization types are
lexical. Accuracy is exact match of the whole logical form (tokens compared
after whitespace normalisation), reported overall, per class and per type.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from anchorlab.config.base import ConfigError, check_choice
from anchorlab.datasets import REGISTRY, default_data_dir, fetch_known
from anchorlab.tasks.seq2seq.task import EvalSet, Row, Seq2SeqTask, Seq2SeqTaskConfig

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

FORMATS = ("varfree", "original")
SPLITS = ("train", "dev", "test", "gen")
STRUCTURAL_TYPES = frozenset({"cp_recursion", "pp_recursion", "obj_pp_to_subj_pp"})
LEXICAL_TYPES = frozenset({
    "active_to_passive", "do_dative_to_pp_dative", "obj_omitted_transitive_to_transitive",
    "obj_to_subj_common", "obj_to_subj_proper", "only_seen_as_transitive_subj_as_unacc_subj",
    "only_seen_as_unacc_subj_as_obj_omitted_transitive_subj",
    "only_seen_as_unacc_subj_as_unerg_subj", "passive_to_active", "pp_dative_to_do_dative",
    "prim_to_inf_arg", "prim_to_obj_common", "prim_to_obj_proper", "prim_to_subj_common",
    "prim_to_subj_proper", "subj_to_obj_common", "subj_to_obj_proper", "unacc_to_transitive",
})
GEN_TYPES = STRUCTURAL_TYPES | LEXICAL_TYPES  # the 21 generalization types
ID_TYPE_PREFIXES = ("in_distribution", "primitive", "exposure_example_")
CLASSES = ("structural", "lexical", "in_distribution")


class CogsRecord(NamedTuple):
    """One COGS row."""

    sentence: str
    lf: str
    type: str


def is_structural(type_: str) -> bool:
    """True for the structural generalization types (cp/pp recursion, obj_pp_to_subj_pp)."""
    return type_ in STRUCTURAL_TYPES


def type_class(type_: str) -> str:
    """'structural', 'in_distribution' (in_distribution/primitive/exposure_example_*) or 'lexical'."""
    if is_structural(type_):
        return "structural"
    if type_.startswith(ID_TYPE_PREFIXES):
        return "in_distribution"
    return "lexical"


def parse_cogs_tsv(text: str, source: str = "<text>") -> list[CogsRecord]:
    """Parse COGS TSV text (3 tab-separated fields per non-empty line)."""
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise ValueError(f"{source}:{i}: expected 3 tab-separated fields "
                             f"(sentence, logical form, type), got {len(parts)}")
        out.append(CogsRecord(parts[0].strip(), parts[1].strip(), parts[2].strip()))
    return out


def read_cogs_tsv(path: str | Path) -> list[CogsRecord]:
    """Read one COGS TSV file."""
    path = Path(path)
    return parse_cogs_tsv(path.read_text(encoding="utf-8"), str(path))


def load_cogs(fmt: str = "varfree", data_dir: str | Path | None = None,
              splits: Sequence[str] | None = None) -> dict[str, list[CogsRecord]]:
    """Load COGS splits as {split: [CogsRecord, ...]} in file order.

    ``data_dir`` (default ``$ANCHORLAB_DATA_DIR``) holds ``cogs/<fmt>/<split>.tsv``;
    missing files are fetched into the cache (:mod:`anchorlab.datasets`).
    ``splits=None`` loads train, dev and test, plus gen where present: with a
    data directory, only if it holds ``gen.tsv``; without one, it is
    downloaded. Name a split explicitly to require it.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"fmt: must be one of {', '.join(repr(f) for f in FORMATS)}, got {fmt!r}")
    root = default_data_dir(data_dir)
    if splits is None:
        splits = list(SPLITS[:3])
        if root is None or (root / f"cogs/{fmt}/gen.tsv").is_file():
            splits.append("gen")
        else:
            log.info("COGS %s: no gen.tsv in %s; loading train/dev/test only", fmt, root)
    out = {}
    for split in splits:
        if split not in SPLITS:
            raise ConfigError(f"splits: each must be one of {', '.join(SPLITS)}, got {split!r}")
        name = f"cogs/{fmt}/{split}.tsv"
        assert name in REGISTRY
        out[split] = read_cogs_tsv(fetch_known(name, data_dir=root))
    return out


def normalize_lf(lf: str) -> str:
    """Collapse runs of whitespace: the unit of exact-match comparison."""
    return " ".join(lf.split())


def cogs_accuracy(records: Sequence[CogsRecord], predictions: Sequence[str],
                  split: str | None = None) -> pd.DataFrame:
    """Exact-match accuracy of predicted logical forms, as a tidy table.

    One row per group: ``level`` 'overall' (group 'all'), 'class'
    (structural / lexical / in_distribution, as present) and 'type' (each row
    type present); columns ``split, level, group, n, n_correct, accuracy``.
    ``predictions[i]`` is compared with ``records[i].lf`` after whitespace
    normalisation.
    """
    import pandas as pd

    if len(records) != len(predictions):
        raise ConfigError(f"predictions: need one per record ({len(records)}), got {len(predictions)}")
    df = pd.DataFrame({
        "type": [r.type for r in records],
        "correct": [normalize_lf(p) == normalize_lf(r.lf) for r, p in zip(records, predictions)],
    })
    df["class"] = df["type"].map(type_class)
    rows = [{"level": "overall", "group": "all", "n": len(df), "n_correct": int(df["correct"].sum())}]
    for level, col in (("class", "class"), ("type", "type")):
        for group, g in df.groupby(col, sort=True):
            rows.append({"level": level, "group": group, "n": len(g),
                         "n_correct": int(g["correct"].sum())})
    out = pd.DataFrame(rows, columns=["level", "group", "n", "n_correct"])
    out["accuracy"] = out["n_correct"] / out["n"].where(out["n"] > 0)
    out.insert(0, "split", split)
    return out


# --------------------------------------------------------------------------- the task
@functools.lru_cache(maxsize=4)
def _rows(fmt: str, data_dir: str | None) -> dict[str, tuple[Row, ...]]:
    c = load_cogs(fmt, data_dir)
    return {k: tuple((r.sentence, r.lf, r.type) for r in c[k]) for k in ("train", "test", "gen") if k in c}


@dataclass(frozen=True)
class CogsTaskConfig(Seq2SeqTaskConfig):
    """COGS (journal Fig. 7B): ``id`` is ``test.tsv`` (in distribution), ``ood`` is ``gen.tsv``.

    ``fmt``: logical-form format (``varfree`` or ``original``). With
    ``keep_primitives`` a ``train_size`` subset always holds the
    ``primitive`` and ``exposure_example_*`` rows (the only rows that show
    the words the lexical generalization types test) and fills the rest from
    ``in_distribution`` rows.
    """

    name: str = "cogs"
    fmt: str = "varfree"
    keep_primitives: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("task.name", self.name, ("cogs",))
        check_choice("task.fmt", self.fmt, FORMATS)

    def raw(self) -> dict[str, tuple[Row, ...]]:
        return _rows(self.fmt, self.data_dir)

    def eval_sources(self) -> dict[str, str]:
        return {"id": "test", "ood": "gen"}

    def keep_types(self) -> bool:
        return self.keep_primitives


class CogsTask(Seq2SeqTask):
    """Adds ``ood_exact/<type>``, ``ood_exact/structural`` and ``ood_exact/lexical``."""

    name = "cogs"
    headline = Seq2SeqTask.headline + ("ood_exact/structural", "ood_exact/lexical")

    def extra_metrics(self, name: str, es: EvalSet, predictions: list[str]) -> dict[str, float]:
        if name != "ood" or not any(es.types):
            return {}
        table = cogs_accuracy([CogsRecord(a, b, t) for (a, b), t in zip(es.pairs, es.types)], predictions)
        out = {}
        for level in ("class", "type"):
            for _, r in table[table.level == level].iterrows():
                out[f"ood_exact/{r.group}"] = float(r.accuracy)
        return out
