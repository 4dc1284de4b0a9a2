"""The config machinery: frozen dataclasses <-> mappings, with one-line errors.

Every config section is a frozen dataclass whose ``__post_init__`` validates
its own fields with :func:`check_range` / :func:`check_choice`. Building a
section from a mapping (YAML, ``--set`` overrides, analysis ``--option``s)
goes through :func:`from_dict`, which rejects unknown keys and wrong types
with one line naming the dotted field and what is allowed.

A field annotated ``Annotated[Base, Select(key, registry)]`` is polymorphic:
the value of ``key`` in its mapping (e.g. ``task.name``) picks the concrete
dataclass from ``registry`` (see :mod:`anchorlab.registry`).

A field with ``metadata={"identity": False}`` (e.g. a data directory) is left
out of :func:`identity_dict`, the mapping a run id is hashed from; one with
``metadata={"identity": "unless_default"}`` is left out while it holds its
default, so adding such a field keeps the run ids of existing configs. ``metadata["identity_when"]``, a
predicate of the section, leaves a field out wherever it does not change what trains (e.g. a bf16-only
setting in a float32 run).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
import math
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the field."""


def fail(path: str, msg: str) -> typing.NoReturn:
    raise ConfigError(f"{path}: {msg}")


def check_range(path: str, value: float, lo: float | None = None, hi: float | None = None,
                lo_open: bool = False, hi_open: bool = False) -> None:
    """``value`` is a finite number within the bounds (NaN and infinities always fail)."""
    if isinstance(value, float) and not math.isfinite(value):
        fail(path, f"must be a finite number, got {value!r}")
    if lo is not None and (value <= lo if lo_open else value < lo):
        fail(path, f"must be {'>' if lo_open else '>='} {lo}, got {value!r}")
    if hi is not None and (value >= hi if hi_open else value > hi):
        fail(path, f"must be {'<' if hi_open else '<='} {hi}, got {value!r}")


def check_choice(path: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        fail(path, f"must be one of {', '.join(repr(a) for a in allowed)}, got {value!r}")


@dataclass(frozen=True)
class Select:
    """Marker for a polymorphic section: ``key`` in the mapping picks the class.

    ``registry()`` returns ``{key value: "module:Class"}``; ``default`` is used
    when the mapping has no ``key``.
    """

    key: str
    registry: Callable[[], Mapping[str, Any]]
    default: str

    def resolve(self, path: str, value: Mapping[str, Any]) -> type:
        from anchorlab.registry import load

        name = value.get(self.key, self.default)
        reg = self.registry()
        if not isinstance(name, str) or name not in reg:
            fail(f"{path}.{self.key}", f"must be one of {', '.join(repr(k) for k in reg)}, got {name!r}")
        entry = reg[name]
        return load(entry.config if hasattr(entry, "config") else entry)


# ------------------------------------------------------------------ dataclass <-> mapping
def to_dict(obj: Any) -> Any:
    """Dataclass -> plain dict/list/scalars (YAML/JSON safe; dict keys as str)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    return obj


def _in_identity(obj: Any, f: dataclasses.Field) -> bool:
    mode = f.metadata.get("identity", True)
    when = f.metadata.get("identity_when")
    if when is not None and not when(obj):
        return False
    if mode == "unless_default":
        return getattr(obj, f.name) != f.default
    return bool(mode)


def identity_dict(obj: Any) -> Any:
    """Like :func:`to_dict`, without fields marked ``metadata={"identity": False}`` (nor those marked
    ``"unless_default"`` while at their default)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: identity_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if _in_identity(obj, f)}
    if isinstance(obj, dict):
        return {str(k): identity_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [identity_dict(v) for v in obj]
    return obj


def config_hash(obj: Any) -> str:
    """Stable 12-hex hash of a config's identity mapping."""
    ident = {str(k): _section_identity(v) for k, v in obj.items()} if isinstance(obj, dict) else identity_dict(obj)
    blob = json.dumps(ident, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


_IDENTITIES: dict[int, tuple[Any, Any]] = {}


def _section_identity(obj: Any) -> Any:
    """``identity_dict`` of a config section, kept for the sections :func:`_section` shares between configs
    (read-only: only hashed). The entry holds the section itself, so its id cannot be reused meanwhile."""
    if not dataclasses.is_dataclass(obj):
        return identity_dict(obj)
    hit = _IDENTITIES.get(id(obj))
    if hit is None or hit[0] is not obj:
        if len(_IDENTITIES) >= _SECTIONS_MAX:
            _IDENTITIES.clear()
        hit = _IDENTITIES[id(obj)] = (obj, identity_dict(obj))
    return hit[1]


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def coerce(path: str, value: Any, tp: Any) -> Any:
    """Check/convert ``value`` to the annotated type ``tp``; fail naming ``path``."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return _annotated(path, value, tp, args)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        return _union(path, value, args)
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            fail(path, f"expected a mapping of {tp.__name__} fields, got {value!r}")
        return _section(tp, value, path)
    if tp in _SCALARS:
        return _SCALARS[tp](path, value)
    if origin in (tuple, list, dict):
        return _container(path, value, origin, args)
    return value


def _annotated(path: str, value: Any, tp: Any, args: tuple) -> Any:
    """An ``Annotated`` field: a :class:`Select` picks its section class from the value, else its base type."""
    select = next((a for a in tp.__metadata__ if isinstance(a, Select)), None)
    if select is None:
        return coerce(path, value, args[0])
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return value
    if not isinstance(value, Mapping):
        fail(path, f"expected a mapping, got {value!r}")
    return _section(select.resolve(path, value), value, path)


def _union(path: str, value: Any, args: tuple) -> Any:
    """The first member type that takes ``value`` (None only for ``None``)."""
    for a in args:
        if a is type(None):
            if value is None:
                return None
            continue
        try:
            return coerce(path, value, a)
        except ConfigError:
            pass
    fail(path, f"expected {' or '.join(_type_name(a) for a in args)}, got {value!r}")


def _bool(path: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    fail(path, f"expected true or false, got {value!r}")


def _int(path: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        fail(path, f"expected an integer, got {value!r}")
    return value


def _float(path: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, str):
            try:
                value = float(value)  # YAML reads '1e-5' as a string
            except ValueError:
                fail(path, f"expected a number, got {value!r}")
        else:
            fail(path, f"expected a number, got {value!r}")
    if not math.isfinite(value):
        fail(path, f"must be a finite number, got {value!r}")
    return float(value)


def _str(path: str, value: Any) -> str:
    if not isinstance(value, str):
        fail(path, f"expected a string, got {value!r}")
    return value


_SCALARS = {bool: _bool, int: _int, float: _float, str: _str}


def _container(path: str, value: Any, origin: type, args: tuple) -> Any:
    """A tuple (fixed or ``...``), list or dict field, each element coerced to its type."""
    if origin is dict:
        if not isinstance(value, Mapping):
            fail(path, f"expected a mapping, got {value!r}")
        kt, vt = args
        out = {}
        for k, v in value.items():
            if kt is int and isinstance(k, str):
                try:
                    k = int(k)
                except ValueError:
                    fail(path, f"keys must be integers, got {k!r}")
            out[coerce(f"{path}.{k}", k, kt)] = coerce(f"{path}.{k}", v, vt)
        return out
    if not isinstance(value, (list, tuple)):
        fail(path, f"expected a list, got {value!r}")
    if origin is list:
        return [coerce(f"{path}[{i}]", v, args[0]) for i, v in enumerate(value)]
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(coerce(f"{path}[{i}]", v, args[0]) for i, v in enumerate(value))
    if len(value) != len(args):
        fail(path, f"expected a list of {len(args)} values, got {value!r}")
    return tuple(coerce(f"{path}[{i}]", v, a) for i, (v, a) in enumerate(zip(value, args)))

_SECTIONS: dict[tuple[type, str, str], Any] = {}
_SECTIONS_MAX = 4096


def _section(cls: type, value: Mapping[str, Any], path: str) -> Any:
    """``from_dict(cls, value, path)``, built once per process for equal mappings.

    Sections are frozen and validated only from their fields, so equal
    mappings give equal sections: a sweep's runs share every section its axes
    leave alone instead of validating it again per run (``repr`` tells 1 from
    1.0 and True, so only identical YAML values share).
    """
    key = (cls, path, repr(value))
    hit = _SECTIONS.get(key)
    if hit is None:
        if len(_SECTIONS) >= _SECTIONS_MAX:
            _SECTIONS.clear()
        hit = _SECTIONS[key] = from_dict(cls, value, path)
    return hit


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    """A config class's resolved field types (resolving them is most of the cost of building a config)."""
    return typing.get_type_hints(cls, include_extras=True)


def from_dict(cls: type, data: Mapping[str, Any], path: str = "") -> Any:
    """Build dataclass ``cls`` from a mapping; unknown keys and bad types fail naming the field."""
    if not isinstance(data, Mapping):
        fail(path or cls.__name__, f"expected a mapping of {cls.__name__} fields, got {data!r}")
    hints = _hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for k, v in data.items():
        fp = f"{path}.{k}" if path else str(k)
        if k not in names:
            fail(fp, f"unknown key; allowed: {', '.join(names)}")
        kwargs[k] = coerce(fp, v, hints[k])
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except TypeError as e:  # pragma: no cover - defensive
        fail(path or cls.__name__, str(e))


# ------------------------------------------------------------------ overrides
def parse_scalar(text: str) -> Any:
    """'0.8' -> 0.8, 'true' -> True, '[1,2]' -> [1, 2], 'abc' -> 'abc' (YAML rules)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    """``data['init']['gamma'] = value`` for ``key='init.gamma'`` (creating sections)."""
    parts = key.strip().split(".")
    node = data
    for i, part in enumerate(parts[:-1]):
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        if not isinstance(nxt, dict):
            raise ConfigError(f"{key}: {'.'.join(parts[:i + 1])!r} is a value, not a section")
        node = nxt
    node[parts[-1]] = copy.deepcopy(value)


def apply_overrides(data: Mapping[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Apply ``["init.gamma=0.8", ...]`` to a nested mapping (returns a copy)."""
    out = copy.deepcopy(dict(data or {}))
    for ov in overrides:
        if not isinstance(ov, str) or "=" not in ov:
            raise ConfigError(f"override {ov!r}: expected KEY=VALUE, e.g. init.gamma=0.8")
        key, text = ov.split("=", 1)
        if not key.strip():
            raise ConfigError(f"override {ov!r}: empty key")
        set_dotted(out, key, parse_scalar(text))
    return out


def options_from_strings(cls: type, options: Mapping[str, Any] | list[str] | tuple[str, ...] = ()) -> Any:
    """An options dataclass from ``["key=value", ...]`` (YAML values) or a mapping."""
    data = apply_overrides({}, list(options)) if isinstance(options, (list, tuple)) else dict(options)
    return from_dict(cls, {k.replace("-", "_"): v for k, v in data.items()})


# ------------------------------------------------------------------ files
PRESET_DIR = Path(__file__).resolve().parent.parent / "configs"


def preset_names() -> list[str]:
    return sorted(str(q.relative_to(PRESET_DIR).with_suffix("")) for q in PRESET_DIR.rglob("*.yaml"))


def preset_summary(path: str | Path) -> str:
    """A preset's one-line description: the first comment line of its YAML file ("" when it opens with none)."""
    for line in Path(path).read_text().splitlines():
        if line.strip():
            return line.lstrip("#").strip() if line.lstrip().startswith("#") else ""
    return ""


def resolve_named(spec: str | Path, folder: Path, what: str) -> Path:
    """A YAML file path, or the name of a bundled YAML under ``folder`` (``.yaml`` optional)."""
    p = Path(spec)
    if p.is_file():
        return p
    cand = folder / (str(spec) if str(spec).endswith(".yaml") else f"{spec}.yaml")
    if cand.is_file():
        return cand
    names = sorted(str(q.relative_to(folder).with_suffix("")) for q in folder.rglob("*.yaml"))
    raise ConfigError(f"{what} {str(spec)!r}: no such file or preset; presets: {', '.join(names)}")


def resolve_config_path(spec: str | Path) -> Path:
    """A file path, or a preset name such as ``neurips/paper`` or ``demo/small``."""
    return resolve_named(spec, PRESET_DIR, "config")


def load_yaml(path: str | Path) -> dict[str, Any]:
    path = resolve_config_path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or (str(e).splitlines() or ["unreadable"])[0]
        raise ConfigError(f"{path}: invalid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    return data


def dump_config(cfg: Any) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)
