"""Rewrite or check the generated blocks of README.md, docs/results.md and the claim pages (docs/claims/).

A generated block is the text between ``<!-- generated: NAME -->`` and ``<!-- end generated -->``;
NAME is one of :data:`BLOCKS`, each a function that reads committed tables under docs/figures/ (and
the sweep presets, for a claim's scale) and returns Markdown.

    python tools/docs.py --write     # rewrite every block from the tables (atomically, file by file)
    python tools/docs.py --check     # exit 1 naming each stale block; 0 when all are current
    python tools/docs.py --list      # the block names

Every number in README.md, docs/results.md and docs/claims/*.md sits in such a block; a block may appear in
more than one file (results.md shows a claim's main table, its page every table). tests/test_docs.py runs
the check.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import docs_claims as cl  # noqa: E402
import docs_clean as dc  # noqa: E402
import docs_fig2 as f2  # noqa: E402
import docs_status as st  # noqa: E402
from docs_common import ROOT  # noqa: E402

# docs/results.md keeps each claim's status, figure, main table and caveats; its full evidence is a page of its own.
CLAIM_PAGES = tuple(f"docs/claims/{name}.md" for name in ("demo", *(f"c{i}" for i in range(1, 14)), "ev"))
FILES = ("README.md", "docs/results.md", *CLAIM_PAGES)
BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)
OPEN = re.compile(r"<!-- generated: ([^>]*?) -->")

BLOCKS: dict[str, Callable[[], str]] = {
    "claims-short": lambda: st.status_table(short=True),
    "claims-status": st.status_table,
    "fig2-hero": f2.fig2_hero,
    "demo-pair": f2.demo_pair,
    "demo-journal-pair": f2.demo_journal_pair,
    "demo-rate": f2.demo_rate,
    "demo-clocks": f2.demo_clocks,
    "demo-rate-short": f2.demo_rate_short,
    "demo-rule": f2.demo_rule,
    "demo-rule-paths": f2.demo_rule_paths,
    "task": f2.task_paragraph,
    "c1-clock": f2.c1_clock,
    "c1-bracket": f2.c1_bracket,
    "c1-opsets": f2.c1_opsets,
    "c1-crossing": f2.c1_crossing,
    "c1-many": f2.c1_many,
    "c1-ladder": f2.c1_ladder,
    "c1-answers": f2.c1_answers,
    "c2-depth": f2.c2_depth,
    "c3-grid": cl.c3_grid,
    "c3-rescue": cl.c3_rescue,
    "c3-journal-cells": cl.c3_journal_cells,
    "c3-journal-claims": cl.c3_journal_claims,
    "c3-journal-depth": cl.c3_journal_depth,
    "mech-outcome": cl.mech_outcome,
    "mech-picks": cl.mech_picks,
    "clean-picks": dc.picks,
    "clean-scale": dc.scale,
    "mech-cell-scale": dc.cell_scale,
    "c4-clean": lambda: dc.claim_table("C4"),
    "c4-clean-main": lambda: dc.claim_table("C4", main=True),
    "c5-clean": lambda: dc.claim_table("C5"),
    "c5-clean-main": lambda: dc.claim_table("C5", main=True),
    "c5-init": lambda: dc.init_table("C5"),
    "c7-clean": lambda: dc.claim_table("C7"),
    "c7-init": lambda: dc.init_table("C7"),
    "c7-spectrum": dc.spectrum,
    **{f"{c.lower()}-seeds": (lambda c=c: cl.seeded_table(c)) for c in cl.SEEDED},
    "c4-flow": cl.c4_flow,
    "c5-parallel": cl.c5_parallel,
    "c6-condensation": cl.c6_condensation,
    "c7-embedding": cl.c7_embedding,
    "c8-speed": cl.c8_speed,
    "c9-scan-cogs": cl.c9_scan_cogs,
    "c10-addition": cl.c10_addition,
    "c11-lm": cl.c11_lm,
    "c12-concepts": cl.c12_concepts,
    "c12-precondition": cl.c12_precondition,
    "c8-long": cl.c8_long,
    "c3-definitions": cl.c3_definitions,
    "c13-prontoqa": cl.c13_prontoqa,
    "ev-verdict": cl.verdict,
    "ev-intervals": cl.predictor_intervals,
    **{f"{c.id.lower()}-scale": st.scale_block(c.id) for c in st.CLAIMS},
    **{f"{c.id.lower()}-status": st.status_line(c.id) for c in st.CLAIMS},
}


class DocsError(Exception):
    """A file's blocks cannot be read (an unknown name, an unclosed block)."""


def render(text: str, path: str, cache: dict[str, str]) -> tuple[str, list[str]]:
    """``text`` with every block rewritten, and the names of the blocks whose text changed."""
    names = OPEN.findall(text)
    closed = [m.group("name") for m in BLOCK.finditer(text)]
    if names != closed:
        bad = next((n for n in names if n not in closed), names[-1] if names else "?")
        raise DocsError(f"{path}: block {bad!r} is not closed by '<!-- end generated -->' on a line of its own")
    stale: list[str] = []

    def one(m: re.Match) -> str:
        name = m.group("name")
        if name not in BLOCKS:
            raise DocsError(f"{path}: unknown block {name!r}; blocks: {', '.join(sorted(BLOCKS))}")
        if name not in cache:
            cache[name] = BLOCKS[name]().rstrip("\n") + "\n"
        if m.group("body") != cache[name]:
            stale.append(name)
        return m.group(1) + cache[name] + m.group(4)

    return BLOCK.sub(one, text), stale


def atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run(root: Path, write: bool, files: tuple[str, ...] = FILES) -> dict[str, list[str]]:
    """Per file, the stale blocks (rewritten when ``write``)."""
    cache: dict[str, str] = {}
    out: dict[str, list[str]] = {}
    for rel in files:
        path = root / rel
        text = path.read_text()
        new, stale = render(text, rel, cache)
        out[rel] = stale
        if write and new != text:
            atomic_write(path, new)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true", help="rewrite every generated block from the tables")
    g.add_argument("--check", action="store_true", help="exit 1 naming each stale block")
    g.add_argument("--list", action="store_true", help="print the block names")
    ap.add_argument("--root", type=Path, default=ROOT, help="the repository root (default: this checkout)")
    a = ap.parse_args(argv)
    if a.list:
        print("\n".join(sorted(BLOCKS)))
        return 0
    try:
        result = run(a.root, write=a.write)
    except (DocsError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    stale = [(f, n) for f, names in result.items() for n in names]
    if a.write:
        print(f"rewrote {len(stale)} block(s)" + "".join(f"\n  {f}: {n}" for f, n in stale))
        return 0
    for f, n in stale:
        print(f"stale: {f}: block {n!r} differs from the tables; python tools/docs.py --write", file=sys.stderr)
    if not stale:
        print(f"{sum(len(OPEN.findall((a.root / f).read_text())) for f in FILES)} generated blocks current")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
