"""The sweep presets' search path: a preset's name (``fig2_cpu``) -> its YAML file.

A preset is ``<name>.yaml`` in a folder of the search path; ``anchorlab sweep NAME``, ``load_sweep(NAME)``,
``anchorlab reproduce`` (a figure's sweep per scale) and :func:`resolve_sweep` read it by name. The library
holds no preset: every one is a paper figure's or a study's spec, and lives with them in the package above the
library (``anchorlab.papers``, ``papers/sweeps/``), which the library never imports by name (the layer rule of
docs/architecture.md). So the folders come from outside, never from a package name written here:

* the entry-point group ``anchorlab.sweeps`` of the installed distributions, each entry a ``module:attribute``
  naming a folder (this project's pyproject.toml declares ``papers = "anchorlab.papers:SWEEP_DIR"``): a
  package above the library, or a plugin, adds its presets by declaring them, and the name is looked up the
  same way wherever it is used, from Python as from the command line. The entries are loaded (their module
  imported) on the first look-up only;
* :func:`add_sweep_dir`: a folder added at run time (one's own presets, a test).

A name found in two folders is refused, so a name means one file wherever it is looked up. A sweep YAML path
works too. An editable install made before the entry point existed lacks it (its metadata is written at
install time): the error then says to reinstall.
"""

from __future__ import annotations

import functools
import logging
from importlib.metadata import entry_points
from pathlib import Path

from anchorlab.config import ConfigError

log = logging.getLogger(__name__)

GROUP = "anchorlab.sweeps"
_ADDED: list[Path] = []


def add_sweep_dir(folder: str | Path) -> None:
    """Put ``folder`` (its ``*.yaml`` files) on the search path, before the declared folders."""
    p = Path(folder).resolve()
    if not p.is_dir():
        raise ConfigError(f"sweep preset folder {folder}: no such directory")
    if p not in _ADDED:
        _ADDED.append(p)


@functools.lru_cache(maxsize=1)
def declared_dirs() -> tuple[Path, ...]:
    """The folders the installed distributions declare under the entry-point group :data:`GROUP`."""
    out = []
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            out.append(Path(ep.load()).resolve())
        except Exception as e:   # a broken plugin must not hide the other folders' presets
            log.warning("sweep presets %s = %s: not loaded (%s)", ep.name, ep.value, e)
    return tuple(out)


def sweep_dirs() -> list[Path]:
    """The search path: the folders added at run time, then the declared ones (each once)."""
    return list(dict.fromkeys([*_ADDED, *declared_dirs()]))


def sweep_presets() -> dict[str, Path]:
    """Every preset on the search path: name -> file, by name; a name in two folders is a ConfigError."""
    found: dict[str, Path] = {}
    for folder in sweep_dirs():
        for p in sorted(folder.glob("*.yaml")):
            if p.stem in found and found[p.stem] != p:
                raise ConfigError(f"sweep preset {p.stem!r}: in two folders of the search path, {found[p.stem]} "
                                  f"and {p}; rename one")
            found[p.stem] = p
    return dict(sorted(found.items()))


def resolve_sweep(spec: str | Path) -> Path:
    """A sweep YAML path, or a preset's name (``.yaml`` optional) on the search path."""
    p = Path(spec)
    if p.is_file():
        return p
    presets = sweep_presets()
    name = str(spec).removesuffix(".yaml")
    if name in presets:
        return presets[name]
    if not presets:
        raise ConfigError(f"sweep spec {str(spec)!r}: no such file, and no preset on the search path (the "
                          f"installed anchorlab declares none under the entry point {GROUP}: reinstall it, "
                          f"`pip install -e .`)")
    raise ConfigError(f"sweep spec {str(spec)!r}: no such file or preset; presets: {', '.join(presets)}")
