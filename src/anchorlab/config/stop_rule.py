"""``train.stop_when`` rules: ``"metric>=value"`` / ``"metric<=value"`` parsed with one-line errors."""

from __future__ import annotations

import re

from anchorlab.config.base import check_range, fail

STOP_RULE = re.compile(r"^\s*([A-Za-z0-9_/.,()\-]+)\s*(>=|<=)\s*([-+0-9.eE]+)\s*$")


def parse_stop_rule(path: str, rule: str) -> tuple[str, str, float]:
    """``"id_exact>=0.99"`` -> ``("id_exact", ">=", 0.99)``."""
    m = STOP_RULE.match(rule)
    if m is None:
        fail(path, f"must look like 'metric>=value' or 'metric<=value', got {rule!r}")
    try:
        value = float(m.group(3))
    except ValueError:
        fail(path, f"threshold must be a number, got {m.group(3)!r}")
    check_range(path, value)
    return m.group(1), m.group(2), value
