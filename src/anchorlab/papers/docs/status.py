"""The results' status table and each claim's scale and status blocks, built from the claim registry.

The rows are :data:`anchorlab.papers.reproduce.registry.CLAIMS` in their order (the results page's); a claim's
scale is read from its sweep presets (:func:`~anchorlab.papers.docs.common.sweep_scale`), never from a run.
"""
from __future__ import annotations

from typing import Callable

from anchorlab.papers.docs.common import md_table, scale_table, sweep_scale
from anchorlab.papers.reproduce.registry import CLAIMS, register_study


def _scale_short(ours: str, paper: str, runs: str | None = None) -> str:
    """Width and seeds, ours (the paper's); ``runs`` replaces our seeds where the status reads picked runs."""
    o, p = sweep_scale(ours), sweep_scale(paper)
    return f"{o['width']} ({p['width']}); {runs or o['seeds']} ({p['seeds']})"


def status_table(short: bool = False) -> str:
    """One row per registered claim: the paper's words, ours, the scale, the status (``short``: the README's,
    the paper's claims only and no scale)."""
    rows = []
    for c in CLAIMS.values() if not short else [c for c in CLAIMS.values() if c.paper != "-"]:
        one, runs = sweep_scale(c.sweeps[0]), c.runs() if c.runs else None
        scale = (_scale_short(*c.sweeps, runs) if c.sweeps[0] != c.sweeps[1]
                 else f"{one['width']}; {runs or one['seeds']}")
        if short:   # the README's: the scale is on the results page
            rows.append([c.id, c.paper, c.ours(), f"**{c.status()}**"])
        else:
            rows.append([f"[{c.id}](#{c.id.lower()})", c.name, c.paper, c.ours(), scale, f"**{c.status()}**"])
    head = ["claim", "the paper", "ours", "width; seeds: ours (paper)", "status"]
    return md_table(head[:3] + head[4:] if short else head[:1] + ["what"] + head[1:], rows)


def scale_block(claim: str) -> Callable[[], str]:
    """The block of ``claim``'s scale: its sweep beside the paper-scale one (the claim is looked up when drawn)."""
    return lambda: scale_table([("ours", CLAIMS[claim].sweeps[0]), ("paper", CLAIMS[claim].sweeps[1])])


def status_line(claim: str) -> Callable[[], str]:
    """The block of ``claim``'s status and ours, one line."""
    return lambda: f"**Status: {CLAIMS[claim].status()}.** Ours: {CLAIMS[claim].ours()}."


register_study("results", "the status table over every registered claim", {
    "claims-short": lambda: status_table(short=True),
    "claims-status": status_table,
})
