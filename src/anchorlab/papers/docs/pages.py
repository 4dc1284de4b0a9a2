"""The files that hold generated blocks, and rendering them: a block is the text between
``<!-- generated: NAME -->`` and ``<!-- end generated -->``; NAME is a block of
:data:`anchorlab.papers.reproduce.registry.BLOCKS`.

A block may appear in more than one file (results.md shows a claim's main table, its page every table); it is
drawn once per run.
"""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from anchorlab.papers.reproduce.registry import BLOCKS

# docs/results.md keeps each claim's status, figure, main table and caveats; its full evidence is a page of its own.
CLAIM_PAGES = tuple(f"docs/claims/{name}.md" for name in ("demo", *(f"c{i}" for i in range(1, 14)), "ev"))
FILES = ("README.md", "docs/results.md", *CLAIM_PAGES)
BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)
OPEN = re.compile(r"<!-- generated: ([^>]*?) -->")


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
            cache[name] = BLOCKS[name].render().rstrip("\n") + "\n"
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


def count_blocks(root: Path, files: tuple[str, ...] = FILES) -> int:
    """How many generated blocks the files hold."""
    return sum(len(OPEN.findall((root / f).read_text())) for f in files)
