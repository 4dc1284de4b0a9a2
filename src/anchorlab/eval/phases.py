"""Phase of a solution from its ID, OOD and commutativity accuracy (journal §IV).

    phase 1   poor ID                       id_acc <  id_threshold
    phase 2   good ID, poor OOD             id_acc >= id_threshold, ood_acc <  ood_threshold
      "2c"      commutative                   commutativity >= comm_threshold
      "2n"      not commutative               commutativity <  comm_threshold
    phase 3   good ID, good OOD             id_acc >= id_threshold, ood_acc >= ood_threshold

A value exactly at a threshold counts as good (the rules are strict ``<`` for
"poor"). The OOD rule (accuracy on the held-out pairs under the inferential
mapping >= 50%) is the one the journal states for Fig. 5C; Fig. 3's
commutativity markers use 70%. A phase that cannot be decided because a needed
value is NaN is left missing (``pd.NA``); phase 2 with a NaN commutativity gets
the label ``"2"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from anchorlab.config import ConfigError

if TYPE_CHECKING:
    import pandas as pd

PHASE_LABELS = ("1", "2n", "2c", "2", "3")


@dataclass(frozen=True)
class PhaseThresholds:
    """Cut-offs of the phase rule; each a fraction in [0, 1]."""

    id_threshold: float = 0.9
    ood_threshold: float = 0.5
    comm_threshold: float = 0.7

    def __post_init__(self) -> None:
        for name in ("id_threshold", "ood_threshold", "comm_threshold"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
                raise ConfigError(f"thresholds.{name}: must be a number in [0, 1], got {v!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "PhaseThresholds":
        """Accepts the long names or the short ones ``id``, ``ood``, ``commutativity``."""
        alias = {"id": "id_threshold", "ood": "ood_threshold", "commutativity": "comm_threshold",
                 "comm": "comm_threshold"}
        kw: dict[str, float] = {}
        for k, v in (data or {}).items():
            name = alias.get(k, k)
            if name not in ("id_threshold", "ood_threshold", "comm_threshold"):
                raise ConfigError(f"thresholds.{k}: unknown key; allowed: id, ood, commutativity")
            try:
                kw[name] = float(v)
            except (TypeError, ValueError):
                raise ConfigError(f"thresholds.{k}: must be a number in [0, 1], got {v!r}") from None
        return cls(**kw)


def _nan(v: Any) -> bool:
    import pandas as pd

    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def classify_phase(id_acc: float, ood_acc: float, commutativity: float = math.nan,
                   thresholds: PhaseThresholds = PhaseThresholds()) -> tuple[int | None, str | None]:
    """One cell -> (phase 1/2/3 or None, label "1"|"2c"|"2n"|"2"|"3" or None)."""
    t = thresholds
    if _nan(id_acc):
        return None, None
    if id_acc < t.id_threshold:
        return 1, "1"
    if _nan(ood_acc):
        return None, None
    if ood_acc >= t.ood_threshold:
        return 3, "3"
    if _nan(commutativity):
        return 2, "2"
    return 2, "2c" if commutativity >= t.comm_threshold else "2n"


def classify_phases(table: pd.DataFrame, thresholds: PhaseThresholds = PhaseThresholds(), *,
                    id_col: str = "id_acc", ood_col: str = "ood_acc",
                    comm_col: str = "commutativity") -> pd.DataFrame:
    """Copy of ``table`` (one row per cell or run) with ``phase`` (Int64) and ``phase_label`` columns.

    ``comm_col`` may be absent (phase 2 is then labelled ``"2"``).
    """
    import pandas as pd

    for col in (id_col, ood_col):
        if col not in table.columns:
            raise ConfigError(f"classify_phases: column {col!r} not in table; columns: "
                              f"{', '.join(map(str, table.columns))}")
    comm = table[comm_col] if comm_col in table.columns else pd.Series(math.nan, index=table.index)
    res = [classify_phase(i, o, c, thresholds) for i, o, c in zip(table[id_col], table[ood_col], comm)]
    out = table.copy()
    out["phase"] = pd.array([p for p, _ in res], dtype="Int64")
    out["phase_label"] = pd.array([lab for _, lab in res], dtype="string")
    return out
