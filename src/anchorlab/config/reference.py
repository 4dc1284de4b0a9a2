"""The reference of every config field, generated from the config classes (``anchorlab config --reference``).

docs/config_reference.md is this text, committed; a test checks that the two
agree, so the reference cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import textwrap
import types
import typing
from typing import Any

from anchorlab.config.base import _hints
from anchorlab.config.experiment import InitConfig, OptimConfig, TrainConfig

HEADER = """\
# Config reference

Generated from the config classes by `anchorlab config --reference`; do not edit by hand.

A run's config is a YAML mapping with the sections below (every field optional: the defaults are
the NeurIPS paper's setting), read by `anchorlab train FILE` or a preset name such as `demo/small`
(`anchorlab config --list`). Any field can be overridden on the command line with
`--set section.field=value` (YAML values: `--set train.stop_when=[id_exact>=0.99]`), and
`anchorlab config PRESET --set ...` prints the resolved config with its run id and peak lr.
The run id hashes every field except `name` and those marked "not in the run id".
"""

_COMMENT = re.compile(r"^\s+(\w+)\s*:[^#]*#\s*(.+)$")
_FIELD = re.compile(r"^\s+(\w+)\s*:\s*\S")


def _type_name(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if tp is type(None):
        return "None"
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else _type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    return getattr(tp, "__name__", str(tp))


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        value = f.default_factory()  # type: ignore[misc]
    else:
        return "(required)"
    return f"`{json.dumps(value, default=str)}`"


def _comments(cls: type) -> dict[str, str]:
    """Field -> its note in the class body: the comment at the end of its line, else the comment lines right
    above it (the inline notes of the source)."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            src = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        above: list[str] = []
        for line in src.splitlines():
            if line.strip().startswith("#"):
                above.append(line.strip().lstrip("#").strip())
                continue
            m = _COMMENT.match(line)
            field = _FIELD.match(line)
            if m:
                out[m.group(1)] = m.group(2).strip()
            elif field and above:
                out[field.group(1)] = " ".join(above)
            above = []
    return out


def _doc(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    return textwrap.dedent(doc).strip()


def _section(title: str, cls: type, skip: tuple[str, ...] = ()) -> list[str]:
    lines = [f"## {title}", "", f"`{cls.__module__}.{cls.__qualname__}`", "", _doc(cls), "",
             "| field | type | default | note |", "|---|---|---|---|"]
    hints, notes = _hints(cls), _comments(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        note = notes.get(f.name, "")
        if f.metadata.get("identity") is False:
            note = (note + "; " if note else "") + "not in the run id"
        cells = [f"`{f.name}`", f"`{_type_name(hints[f.name])}`", _default(f), note]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    props = [(n, v) for n, v in vars(cls).items() if isinstance(v, property) and not n.startswith("_")]
    if props:
        lines += ["", "Derived (read-only properties):", ""]
        for n, v in props:
            doc = inspect.getdoc(v)
            lines.append(f"- `{n}`" + (f": {doc.splitlines()[0]}" if doc else ""))
    return lines + [""]


def config_reference() -> str:
    """Markdown: every section's fields with type, default and note, from the classes themselves."""
    from anchorlab.registry import MODELS, TASKS, load

    lines = [HEADER, "## name", "", "`name` (`str`, default `\"run\"`): a label for the run's directory "
             "and reports; not in the run id.", ""]
    for name, entry in TASKS.items():
        lines += _section(f"task (task.name: {name})", load(entry.config), skip=("name",))
    by_cls: dict[str, list[str]] = {}
    for arch, entry in MODELS.items():
        by_cls.setdefault(entry.config, []).append(arch)
    for ref, archs in by_cls.items():
        lines += _section(f"model (model.arch: {', '.join(archs)})", load(ref))
    for title, cls in (("init", InitConfig), ("optim", OptimConfig), ("train", TrainConfig)):
        lines += _section(title, cls)
    return "\n".join(lines).rstrip() + "\n"
