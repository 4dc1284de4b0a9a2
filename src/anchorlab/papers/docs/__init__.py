"""The generated documentation: the papers' claims C1-C13 (and EV) with their docs blocks, read from the tables.

Every number in README.md, docs/results.md and docs/claims/*.md sits in a generated block, rewritten from the
committed tables under docs/figures/ (and the sweep presets, for a claim's scale) by ``tools/docs.py``. A block is
declared with its owner in the figure registry (:mod:`anchorlab.papers.reproduce.registry`): a figure, a claim, or
a study with neither. Importing this package registers them all:

    common     reading a committed table, numbers and labels, a sweep preset's scale
    claims     the claims C1-C13 and EV (the paper's words, ours, status, scale) and the blocks each owns
    status     the results' status table and each claim's scale and status blocks
    fig2       blocks of the headline claims (C1, C2)     demo      blocks of the CPU demo (a study)
    c3         blocks of C3                                studies   blocks of C4-C13 and EV
    clean      the mechanism claims on the clean picks     pages     the files holding blocks: render, check, write
"""
from anchorlab.papers.docs import claims, demo, status  # noqa: F401  (register)
from anchorlab.papers.docs.pages import FILES, DocsError, render, run
from anchorlab.papers.reproduce import FIGURES  # noqa: F401  (the figures whose ``cids`` name the claims)
from anchorlab.papers.reproduce.registry import BLOCKS, CLAIMS, STUDIES

__all__ = ["BLOCKS", "CLAIMS", "STUDIES", "FILES", "DocsError", "render", "run"]
