"""``anchorlab reproduce``: every paper figure with data behind it, at CPU and at paper scale.

:data:`FIGURES` maps a figure id (``neurips-fig2``, ``journal-fig7b``, ...) to
its sweeps, maker, the claims it bears on (C-ids) and their readings (:mod:`.registry`); :func:`figure_options` the command line's
``reproduce`` flags, made from the figures' options; :func:`reproduce`
runs one (:mod:`.runner`); :func:`describe_figures` lists them with their runs
and estimated compute. Figure modules: ``figures_*.py``.
"""

import importlib as _importlib
import pkgutil as _pkgutil

# every module figures_*.py of this package registers its figures on import: a new figure is a new module
for _m in sorted(m.name for m in _pkgutil.iter_modules(__path__) if m.name.startswith("figures_")):
    _importlib.import_module(f"{__name__}.{_m}")

from anchorlab.papers.reproduce.registry import (BLOCKS, CLAIMS, FIGURES, Claim, Figure, FlagSpec, Option, Reading, register,
                                                 register_claim, register_study)
from anchorlab.papers.reproduce.runner import describe_figures, figure_spec, reproduce


def figure_options() -> dict[str, FlagSpec]:
    """Every option name the registered figures declare -> its command-line flag (the CLI's ``reproduce`` flags
    are these, nothing else); a figure refuses a value it does not offer (:func:`anchorlab.papers.reproduce.runner`)."""
    by_name: dict[str, list[tuple[str, Option]]] = {}
    for fig in FIGURES.values():
        for opt in fig.options:
            by_name.setdefault(opt.name, []).append((fig.id, opt))
    out = {}
    for name, offers in by_name.items():
        values = tuple(dict.fromkeys(v for _, o in offers for v in o.values))
        groups: dict[tuple[tuple[str, ...], str], list[str]] = {}
        for fid, o in offers:
            groups.setdefault((tuple(o.values), o.default), []).append(fid)
        figs = "; ".join(f"{', '.join(ids)}: {', '.join(vals)}, default {d}" for (vals, d), ids in groups.items())
        out[name] = FlagSpec(name, values, f"{offers[0][1].help} [{figs}]")
    return out


__all__ = ["FIGURES", "CLAIMS", "BLOCKS", "Claim", "Reading", "Figure", "register", "register_claim", "register_study", "describe_figures", "figure_spec", "reproduce", "figure_options"]
