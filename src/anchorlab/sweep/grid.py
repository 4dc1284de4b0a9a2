"""Sweep specs: a base config, overrides, and axes -> one validated config per run.

A spec (YAML file or mapping)::

    name: fig2-cpu
    base: demo/small              # preset name, config path, or an inline mapping
    set: [train.epochs=2]         # dotted overrides applied to the base first: KEY=VALUE strings,
                                  # or a mapping {model.d_model: 64, train.epochs: 2} (YAML-typed values)
    axes:                         # product over every axis, in this order
      init.gamma: [0.3, 0.5, 0.8]
      model.n_layers: [1, 2]
      optim.lr: [1.0e-4, 2.0e-4]
    zip:                          # each group is ONE axis whose keys vary together
      - train.init_seed: [0, 1, 2]
        train.data_seed: [0, 1, 2]
    aggregate: {source: best, select_over: [optim.lr]}   # see sweep.aggregate

Every combination goes through the config validation, so an unknown axis key or
a bad value fails with the config's :class:`~anchorlab.config.ConfigError`
naming the dotted key. Combinations giving the same config (same ``run_id``)
collapse to one run.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import yaml

from anchorlab.config import (ConfigError, ExperimentConfig, apply_overrides, experiment_from_dict, load_yaml, parse_scalar,
                      set_dotted)
from anchorlab.sweep.aggregate import AggregateOptions
from anchorlab.sweep.presets import resolve_sweep   # a preset's name -> its file (the search path)

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

SPEC_KEYS = ("name", "base", "set", "axes", "zip", "aggregate", "captions")


@dataclass(frozen=True)
class Axis:
    """One sweep dimension: ``keys`` vary together; ``values[i]`` holds one value per key."""

    keys: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]

    def __post_init__(self) -> None:
        if not self.keys:
            raise ConfigError("axes: an axis needs at least one key")
        for v in self.values:
            if len(v) != len(self.keys):
                raise ConfigError(f"zip {', '.join(self.keys)}: every value needs one entry per key")
        if not self.values:
            raise ConfigError(f"axes.{self.keys[0]}: needs at least one value")


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: its id, config, and the value of every axis key (as typed by the config)."""

    run_id: str
    config: ExperimentConfig
    values: dict[str, Any]


@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep: ``base`` is the resolved base config mapping (before ``set``).

    ``set`` holds overrides in order: ``"KEY=VALUE"`` strings or ``(key, value)`` pairs.
    """

    name: str
    base: dict[str, Any] = field(default_factory=dict)
    set: tuple[str | tuple[str, Any], ...] = ()
    axes: tuple[Axis, ...] = ()
    aggregate: AggregateOptions = field(default_factory=AggregateOptions)
    # labels its report's figures carry (anchorlab.report: "depth", "weight_decay", "stable_rank", and "rows":
    # {"KEY=VALUE": label}) when the sweep ran this spec unchanged; not part of any run's config
    captions: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError(f"name: the sweep needs a non-empty name, got {self.name!r}")
        seen: set[str] = set()
        for ax in self.axes:
            for k in ax.keys:
                if k in seen:
                    raise ConfigError(f"axes.{k}: key appears in more than one axis")
                if k == "name":
                    raise ConfigError("axes.name: the run name is not part of the run id; sweep a config key")
                seen.add(k)

    @property
    def axis_keys(self) -> tuple[str, ...]:
        return tuple(k for ax in self.axes for k in ax.keys)

    @property
    def n_combinations(self) -> int:
        n = 1
        for ax in self.axes:
            n *= len(ax.values)
        return n

    def to_dict(self) -> dict[str, Any]:
        """Spec mapping (inline base) that :func:`load_sweep` reads back to an equal spec."""
        axes = {ax.keys[0]: [v[0] for v in ax.values] for ax in self.axes if len(ax.keys) == 1}
        zips = [{k: [v[i] for v in ax.values] for i, k in enumerate(ax.keys)}
                for ax in self.axes if len(ax.keys) > 1]
        d: dict[str, Any] = {"name": self.name, "base": copy.deepcopy(self.base), "set": [s if isinstance(s, str) else {s[0]: s[1]} for s in self.set],
                             "axes": axes}
        if zips:
            d["zip"] = zips
        d["aggregate"] = self.aggregate.to_dict()
        if self.captions:
            d["captions"] = copy.deepcopy(self.captions)
        return d


# ------------------------------------------------------------------ parsing
def _axis(key: Any, values: Any) -> Axis:
    if not isinstance(key, str) or not key:
        raise ConfigError(f"axes: keys must be dotted config keys such as 'init.gamma', got {key!r}")
    if not isinstance(values, (list, tuple)) or not values:
        raise ConfigError(f"axes.{key}: expected a non-empty list of values, got {values!r}")
    return Axis((key,), tuple((v,) for v in values))


def _zip_axis(group: Any) -> Axis:
    if not isinstance(group, Mapping) or not group:
        raise ConfigError(f"zip: each entry must map dotted keys to equal-length lists, got {group!r}")
    keys = tuple(group)
    cols = [_axis(k, v) for k, v in group.items()]
    lengths = {len(c.values) for c in cols}
    if len(lengths) != 1:
        raise ConfigError(f"zip {', '.join(map(str, keys))}: lists must have equal lengths, got "
                          f"{[len(c.values) for c in cols]}")
    values = tuple(tuple(c.values[i][0] for c in cols) for i in range(lengths.pop()))
    return Axis(keys, values)


def _resolve_base(base: Any, spec_dir: Path | None) -> dict[str, Any]:
    if base is None:
        return {}
    if isinstance(base, Mapping):
        return copy.deepcopy(dict(base))
    if isinstance(base, (str, Path)):
        if spec_dir is not None and (spec_dir / str(base)).exists():
            return load_yaml(spec_dir / str(base))
        return load_yaml(base)
    raise ConfigError(f"base: expected a preset name, a config path or a mapping, got {base!r}")


SET_HELP = "a mapping {dotted.key: value} or a list of KEY=VALUE strings (or one-key mappings)"


def _typed(text: str) -> Any:
    """A command-line value as YAML types it (:func:`parse_scalar`), with ``1e-3``-style floats (YAML 1.1
    reads them as text)."""
    v = parse_scalar(text)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return v
    return v


def _same(a: Any, b: Any) -> bool:
    """Equal as the config would type them (a spec may hold ``'1e-4'`` as text)."""
    a, b = (_typed(x) if isinstance(x, str) else x for x in (a, b))
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)
    return a == b


def split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets: ``"{1: 5, 2: 1},{1: -2, 2: 3}"`` -> two mappings."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch in "[{") - (ch in "]}")
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]]


def restrict(spec: "SweepSpec", only: Sequence[str]) -> "SweepSpec":
    """``spec`` with its axes cut to the values of ``only`` (``KEY=V1[,V2...]``, a key of an axis; a value may
    be a YAML mapping or list, e.g. ``task.anchors={1: -2, 2: 3, 3: 1, 4: -5}``): a slice
    of a sweep, in the spec's order, whose runs keep their run ids (a run is its config, not its sweep).
    Several entries for one key add values; a key that is not an axis key, or a value not on its axis, is a
    :class:`ConfigError` naming the allowed keys or values."""
    want: dict[str, list[Any]] = {}
    for item in only:
        key, sep, vals = str(item).partition("=")
        key = key.strip()
        if not sep or not key or not vals.strip():
            raise ConfigError(f"--only: expected KEY=VALUE[,VALUE...], e.g. init.gamma=0.8, got {item!r}")
        if key not in spec.axis_keys:
            raise ConfigError(f"--only {key}: not an axis of sweep {spec.name}; its axis keys: "
                              f"{', '.join(spec.axis_keys) or '(none)'}")
        want.setdefault(key, []).extend(_typed(v.strip()) for v in split_top(vals))
    axes = []
    for ax in spec.axes:
        keep = list(ax.values)
        for i, k in enumerate(ax.keys):
            if k not in want:
                continue
            allowed = [v[i] for v in ax.values]
            for w in want[k]:
                if not any(_same(w, a) for a in allowed):
                    raise ConfigError(f"--only {k}={w!r}: not on the axis; its values: "
                                      f"{', '.join(dict.fromkeys(map(repr, allowed)))}")
            keep = [v for v in keep if any(_same(v[i], w) for w in want[k])]
        if not keep:
            raise ConfigError(f"--only: no value of the axis {', '.join(ax.keys)} matches all of "
                              f"{', '.join(k + '=' + ','.join(map(str, want[k])) for k in ax.keys if k in want)}")
        axes.append(Axis(ax.keys, tuple(keep)))
    return dataclasses.replace(spec, axes=tuple(axes))


def parse_set(value: Any) -> tuple[str | tuple[str, Any], ...]:
    """A spec's ``set``: a mapping, a KEY=VALUE string, or a list of strings / one-key mappings -> entries."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if isinstance(value, Mapping):
        value = [{k: v} for k, v in value.items()]
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"set: expected {SET_HELP}, got {value!r}")
    out: list[str | tuple[str, Any]] = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            if "=" not in item or not item.split("=", 1)[0].strip():
                raise ConfigError(f"set[{i}]: expected KEY=VALUE, e.g. init.gamma=0.8, got {item!r}")
            out.append(item)
        elif isinstance(item, Mapping) and len(item) == 1:
            (k, v), = item.items()
            if not isinstance(k, str) or not k.strip():
                raise ConfigError(f"set[{i}]: keys must be dotted config keys such as 'model.d_model', got {k!r}")
            out.append((k, v))
        else:
            raise ConfigError(f"set[{i}]: expected {SET_HELP}, got {item!r}")
    return tuple(out)


def apply_set(base: Mapping[str, Any], entries: Sequence[str | tuple[str, Any]]) -> dict[str, Any]:
    """``base`` with the ``set`` entries applied in order (returns a copy)."""
    out = copy.deepcopy(dict(base))
    for e in entries:
        if isinstance(e, str):
            out = apply_overrides(out, [e])
        else:
            set_dotted(out, e[0], e[1])
    return out


def sweep_from_dict(data: Mapping[str, Any], spec_dir: str | Path | None = None) -> SweepSpec:
    """Mapping -> :class:`SweepSpec`; a relative ``base`` path is looked up next to ``spec_dir`` first."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"sweep spec: top level must be a mapping, got {type(data).__name__}")
    for k in data:
        if k not in SPEC_KEYS:
            raise ConfigError(f"{k}: unknown sweep key; allowed: {', '.join(SPEC_KEYS)}")
    if "name" not in data:
        raise ConfigError("name: the sweep spec needs a name")
    sets = parse_set(data.get("set"))
    axes_map = data.get("axes") or {}
    if not isinstance(axes_map, Mapping):
        raise ConfigError(f"axes: expected a mapping of dotted key -> list of values, got {axes_map!r}")
    zips = data.get("zip") or []
    if not isinstance(zips, (list, tuple)):
        raise ConfigError(f"zip: expected a list of mappings, got {zips!r}")
    axes = tuple(_axis(k, v) for k, v in axes_map.items()) + tuple(_zip_axis(g) for g in zips)
    agg = data.get("aggregate")
    if agg is not None and not isinstance(agg, Mapping):
        raise ConfigError(f"aggregate: expected a mapping, got {agg!r}")
    return SweepSpec(name=data["name"], base=_resolve_base(data.get("base"), Path(spec_dir) if spec_dir else None),
                     set=sets, axes=axes, aggregate=AggregateOptions.from_dict(agg),
                     captions=_captions(data.get("captions")))


def _captions(value: Any) -> dict[str, Any]:
    """A spec's ``captions``: a mapping of figure kind -> label (``rows``: a mapping of ``KEY=VALUE`` -> label)."""
    if value is None:
        return {}
    ok = isinstance(value, Mapping) and all(isinstance(v, str) or (k == "rows" and isinstance(v, Mapping))
                                            for k, v in value.items())
    if not ok:
        raise ConfigError(f"captions: expected a mapping of figure kind -> label (rows: KEY=VALUE -> label), "
                          f"got {value!r}")
    return copy.deepcopy(dict(value))


def load_sweep(spec: "SweepSpec | Mapping[str, Any] | str | Path") -> SweepSpec:
    """A :class:`SweepSpec`, a mapping, a YAML file path or a preset's name (:mod:`anchorlab.sweep.presets`)
    -> :class:`SweepSpec`."""
    if isinstance(spec, SweepSpec):
        return spec
    if isinstance(spec, Mapping):
        return sweep_from_dict(spec)
    path = Path(spec)
    if not path.is_file():
        path = resolve_sweep(spec)   # a preset name, e.g. fig2_cpu; ConfigError naming the choices if unknown
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: invalid YAML: {e}".splitlines()[0]) from None
    return sweep_from_dict(data or {}, spec_dir=path.parent)


# ------------------------------------------------------------------ expansion
def get_dotted(cfg: Any, key: str) -> Any:
    """Read ``key`` back from a config (dataclass attributes, then dict entries)."""
    node = cfg
    for part in key.split("."):
        if isinstance(node, Mapping):
            if part in node:
                node = node[part]
            else:
                try:
                    node = node[int(part)]
                except (ValueError, KeyError):
                    raise ConfigError(f"{key}: no entry {part!r}") from None
        else:
            if not hasattr(node, part):
                raise ConfigError(f"{key}: unknown key {part!r}")
            node = getattr(node, part)
    return node


def expand(spec: "SweepSpec | Mapping[str, Any] | str | Path") -> list[RunSpec]:
    """All runs of a sweep, in axis order (the first axis varies slowest), duplicates collapsed."""
    spec = load_sweep(spec)
    base = apply_set(spec.base, spec.set)
    base["name"] = spec.name
    runs: dict[str, RunSpec] = {}
    n = 0
    for combo in itertools.product(*(ax.values for ax in spec.axes)):
        n += 1
        data = copy.deepcopy(base)
        for ax, vals in zip(spec.axes, combo):
            for k, v in zip(ax.keys, vals):
                set_dotted(data, k, v)
        cfg = experiment_from_dict(data)
        rid = cfg.run_id()
        if rid not in runs:
            runs[rid] = RunSpec(rid, cfg, {k: get_dotted(cfg, k) for k in spec.axis_keys})
    if n != len(runs):
        log.info("sweep %s: %d combinations collapse to %d distinct configs", spec.name, n, len(runs))
    return list(runs.values())


def runs_frame(runs: Sequence[RunSpec]) -> pd.DataFrame:
    """Runs -> DataFrame with ``run_id``, one column per axis key, and each run's peak learning rate."""
    import pandas as pd

    return pd.DataFrame([{"run_id": r.run_id, **r.values, "peak_lr": r.config.optim.peak} for r in runs])
