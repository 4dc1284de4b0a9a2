"""The one figure saver: a ``matplotlib.figure.Figure`` -> files, written atomically.

Every figure module of :mod:`anchorlab.plots` builds ``Figure`` objects directly
(no pyplot, no backend switch), so importing anchorlab never changes the backend
of a notebook or script; :func:`save_figure` renders with each format's own canvas.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from matplotlib.figure import Figure


def save_figure(fig: Figure, path_without_ext: str | Path, formats: Sequence[str] = ("png", "pdf"),
                dpi: int = 150) -> list[Path]:
    """Write ``fig`` as ``<path>.<ext>`` for each of ``formats`` at ``dpi``, atomically; return the paths."""
    from anchorlab.io import atomic_write

    out = []
    for ext in formats:
        p = Path(f"{path_without_ext}.{ext}")
        atomic_write(p, lambda tmp, e=ext: fig.savefig(tmp, format=e, dpi=dpi, bbox_inches="tight"))
        out.append(p)
    return out
