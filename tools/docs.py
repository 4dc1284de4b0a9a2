"""Rewrite or check the generated blocks of README.md, docs/results.md and the claim pages (docs/claims/).

A generated block is the text between ``<!-- generated: NAME -->`` and ``<!-- end generated -->``;
NAME is a block declared with its figure, claim or study in the figure registry (anchorlab.papers.docs imports
them all), a function that reads committed tables under docs/figures/ (and the sweep presets, for a claim's
scale) and returns Markdown.

    python tools/docs.py --write     # rewrite every block from the tables (atomically, file by file)
    python tools/docs.py --check     # exit 1 naming each stale block; 0 when all are current
    python tools/docs.py --list      # the block names, each with its owner

Every number in README.md, docs/results.md and docs/claims/*.md sits in such a block; a block may appear in
more than one file (results.md shows a claim's main table, its page every table). tests/test_docs.py runs
the check.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from anchorlab.papers.docs import BLOCKS, FILES, DocsError, run
from anchorlab.papers.docs.common import ROOT
from anchorlab.papers.docs.pages import count_blocks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true", help="rewrite every generated block from the tables")
    g.add_argument("--check", action="store_true", help="exit 1 naming each stale block")
    g.add_argument("--list", action="store_true", help="print the block names, each with its owner")
    ap.add_argument("--root", type=Path, default=ROOT, help="the repository root (default: this checkout)")
    a = ap.parse_args(argv)
    if a.list:
        width = max(map(len, BLOCKS))
        print("\n".join(f"{n:{width}s}  {BLOCKS[n].owner}" for n in sorted(BLOCKS)))
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
        print(f"{count_blocks(a.root)} generated blocks current")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
