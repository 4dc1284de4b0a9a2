"""Frozen, typed experiment configuration.

Every section is a frozen dataclass. Values are validated in ``__post_init__``;
building a config from a mapping (YAML, ``--set`` overrides) goes through
:func:`from_dict`, which rejects unknown keys and wrong types with one line
naming the dotted field and what is allowed. Errors are :class:`ConfigError`.

Choices where the papers are vague are documented on the field and in
``docs/choices.md``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the field."""


def _fail(path: str, msg: str) -> None:
    raise ConfigError(f"{path}: {msg}")


def _check_range(path: str, value: float, lo: float | None = None, hi: float | None = None,
                 lo_open: bool = False) -> None:
    if lo is not None and (value <= lo if lo_open else value < lo):
        _fail(path, f"must be {'>' if lo_open else '>='} {lo}, got {value!r}")
    if hi is not None and value > hi:
        _fail(path, f"must be <= {hi}, got {value!r}")


def _check_choice(path: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        _fail(path, f"must be one of {', '.join(repr(a) for a in allowed)}, got {value!r}")


# --------------------------------------------------------------------------- task
ANCHOR_PRESETS = ("neurips", "journal", "complexity", "custom")
PAIR_RULE_HELP = ("'inferential', 'held_out', or 'shift:<int>' (fixed target key+int, "
                  "e.g. 'shift:-6')")


def parse_pair(path: str, key: str) -> tuple[int, int]:
    """'3,4' -> (3, 4)."""
    try:
        a, b = (int(s) for s in str(key).replace(" ", "").split(","))
    except ValueError:
        _fail(path, f"pair key must look like 'a,b' with integer anchors, got {key!r}")
    return a, b


def parse_rule(path: str, rule: str) -> tuple[str, int | None]:
    """'shift:-6' -> ('shift', -6); 'inferential' -> ('inferential', None)."""
    rule = str(rule).strip()
    if rule in ("inferential", "held_out"):
        return rule, None
    if rule.startswith("shift:"):
        try:
            return "shift", int(rule.split(":", 1)[1])
        except ValueError:
            pass
    _fail(path, f"must be {PAIR_RULE_HELP}, got {rule!r}")
    raise AssertionError  # unreachable


@dataclass(frozen=True)
class TaskConfig:
    """The anchor-function task (NeurIPS §3, journal §III-B and Appendix B).

    ``preset`` fills the per-pair rules; ``pair_rules`` entries override them.
    Values are the token ids ``value_min..value_max`` (inclusive); a sequence is
    ``seq_len`` input tokens with the key at a position in ``0..seq_len-3``
    followed by the two anchors. A key value ``x`` at position ``p`` is an
    ID-test key when ``x % split_mod == p`` (journal Appendix B).
    """

    name: str = "anchor"
    preset: str = "neurips"
    anchors: dict[int, int] = field(default_factory=lambda: {1: 5, 2: 1, 3: -2, 4: -8})
    value_min: int = 20
    value_max: int = 99
    seq_len: int = 9
    split_mod: int = 9
    pair_rules: dict[str, str] = field(default_factory=dict)
    # complexity preset: number of "noise groups" (NeurIPS §6 / App. A), and the
    # offset added to the inferential target of each such group (both orders).
    # The papers give no values; +4 reproduces (3,4) -> x-6 from §4.
    complexity_k: int = 0
    complexity_offset: int = 4
    n_train: int = 900_000
    n_eval_per_group: int = 500
    vocab_size: int = 201

    def __post_init__(self) -> None:
        p = "task"
        _check_choice(f"{p}.name", self.name, ("anchor",))
        _check_choice(f"{p}.preset", self.preset, ANCHOR_PRESETS)
        if not self.anchors:
            _fail(f"{p}.anchors", "must map at least one anchor token to an integer step")
        for a in self.anchors:
            if not isinstance(a, int) or isinstance(a, bool):
                _fail(f"{p}.anchors", f"keys must be integer anchor tokens, got {a!r}")
        _check_range(f"{p}.value_min", self.value_min, 0)
        if self.value_max < self.value_min:
            _fail(f"{p}.value_max", f"must be >= value_min ({self.value_min}), got {self.value_max}")
        for a in self.anchors:
            if self.value_min <= a <= self.value_max:
                _fail(f"{p}.anchors", f"anchor token {a} collides with values "
                      f"{self.value_min}..{self.value_max}")
        _check_range(f"{p}.seq_len", self.seq_len, 3)
        _check_range(f"{p}.split_mod", self.split_mod, 1)
        _check_range(f"{p}.complexity_k", self.complexity_k, 0, len(self.noise_groups_all))
        if self.preset != "complexity" and self.complexity_k:
            _fail(f"{p}.complexity_k", "is only used with preset 'complexity'")
        _check_range(f"{p}.n_train", self.n_train, 1)
        _check_range(f"{p}.n_eval_per_group", self.n_eval_per_group, 1)
        _check_range(f"{p}.vocab_size", self.vocab_size, 1)
        for k, r in self.pair_rules.items():
            a, b = parse_pair(f"{p}.pair_rules", k)
            if a not in self.anchors or b not in self.anchors:
                _fail(f"{p}.pair_rules.{k}", f"anchors must be in {sorted(self.anchors)}")
            parse_rule(f"{p}.pair_rules.{k}", r)
        rules = self.rules
        if all(kind == "held_out" for kind, _ in rules.values()):
            _fail(f"{p}.pair_rules", "every pair is held out: nothing to train on")
        lo, hi = self.target_range
        if lo < 0 or hi >= self.vocab_size:
            _fail(f"{p}.vocab_size", f"targets span {lo}..{hi} but the vocabulary is "
                  f"0..{self.vocab_size - 1}; raise vocab_size or narrow the values/steps "
                  "(targets are never wrapped)")
        if max(self.anchors) >= self.vocab_size:
            _fail(f"{p}.vocab_size", f"must exceed the largest anchor token {max(self.anchors)}")

    # ---- derived
    @property
    def pairs(self) -> list[tuple[int, int]]:
        an = sorted(self.anchors)
        return [(a, b) for a in an for b in an]

    @property
    def noise_groups_all(self) -> list[tuple[tuple[int, int], tuple[int, int]]]:
        """Symmetric groups {(a,b),(b,a)}, a<b, in the papers' order."""
        an = sorted(self.anchors)
        return [((a, b), (b, a)) for i, a in enumerate(an) for b in an[i + 1:]]

    @property
    def rules(self) -> dict[tuple[int, int], tuple[str, int | None]]:
        """Full rule per pair: ('inferential'|'held_out'|'shift', shift or None)."""
        rules: dict[tuple[int, int], tuple[str, int | None]] = {
            pr: ("inferential", None) for pr in self.pairs}
        an = sorted(self.anchors)
        if self.preset == "neurips" and len(an) >= 4:
            a3, a4 = an[2], an[3]
            rules[(a3, a4)] = ("shift", self.anchors[a3] + self.anchors[a4] + 4)
            rules[(a4, a3)] = ("held_out", None)
        elif self.preset == "journal" and len(an) >= 4:
            rules[(an[2], an[3])] = ("held_out", None)
            rules[(an[3], an[2])] = ("held_out", None)
        elif self.preset == "complexity":
            for g in self.noise_groups_all[: self.complexity_k]:
                for a, b in g:
                    rules[(a, b)] = ("shift", self.anchors[a] + self.anchors[b]
                                     + self.complexity_offset)
        for k, r in self.pair_rules.items():
            rules[parse_pair("task.pair_rules", k)] = parse_rule(f"task.pair_rules.{k}", r)
        return rules

    @property
    def target_range(self) -> tuple[int, int]:
        shifts = []
        for (a, b), (kind, s) in self.rules.items():
            shifts.append(self.anchors[a] + self.anchors[b])
            if kind == "shift":
                shifts.append(s)
        return self.value_min + min(shifts), self.value_max + max(shifts)


# -------------------------------------------------------------------------- model
ARCHS = ("neurips", "gpt2")


@dataclass(frozen=True)
class ModelConfig:
    """Decoder-only transformer.

    ``arch='neurips'``: post-LN as NeurIPS eq. (4)-(7); ``arch='gpt2'``: pre-LN
    with a final LayerNorm (journal). ``d_head`` is d_k = d_v per head.
    """

    arch: str = "neurips"
    n_layers: int = 2
    d_model: int = 400
    n_heads: int = 1
    d_head: int = 200
    d_ff: int = 1200
    activation: str = "relu"
    max_len: int = 9
    vocab_size: int = 201
    ln_eps: float = 1e-5

    def __post_init__(self) -> None:
        p = "model"
        _check_choice(f"{p}.arch", self.arch, ARCHS)
        _check_choice(f"{p}.activation", self.activation, ("relu", "gelu"))
        for name in ("n_layers", "d_model", "n_heads", "d_head", "d_ff", "max_len", "vocab_size"):
            _check_range(f"{p}.{name}", getattr(self, name), 1)
        _check_range(f"{p}.ln_eps", self.ln_eps, 0.0, lo_open=True)


# --------------------------------------------------------------------------- init
INIT_ROLES = ("embed", "pos", "qk", "vo", "mlp", "readout")


@dataclass(frozen=True)
class InitConfig:
    """Init rate: every weight ~ D(0, std = scale * fan_in ** -gamma).

    ``role_gammas`` overrides gamma for a role group (embed, pos, qk, vo, mlp,
    readout). ``fan_in='true'`` uses each matrix's real input dimension (NeurIPS
    text; the embedding's input is the one-hot vocabulary); ``'d_model'`` uses
    d_model for every matrix (journal code). ``residual_scale`` divides the std
    of the attention output and second MLP matrices by sqrt(2 * n_layers)
    (GPT-2 / journal code).
    """

    gamma: float = 0.5
    scale: float = 1.0
    role_gammas: dict[str, float] = field(default_factory=dict)
    fan_in: str = "true"
    distribution: str = "normal"
    bias: str = "zero"
    residual_scale: bool = False

    def __post_init__(self) -> None:
        p = "init"
        _check_range(f"{p}.gamma", self.gamma, -1.0, 4.0)
        _check_range(f"{p}.scale", self.scale, 0.0, lo_open=True)
        for k, v in self.role_gammas.items():
            _check_choice(f"{p}.role_gammas", k, INIT_ROLES)
            _check_range(f"{p}.role_gammas.{k}", v, -1.0, 4.0)
        _check_choice(f"{p}.fan_in", self.fan_in, ("true", "d_model"))
        _check_choice(f"{p}.distribution", self.distribution, ("normal", "uniform"))
        _check_choice(f"{p}.bias", self.bias, ("zero", "gamma"))

    def gamma_for(self, group: str) -> float:
        return float(self.role_gammas.get(group, self.gamma))


# -------------------------------------------------------------------------- optim
@dataclass(frozen=True)
class OptimConfig:
    """AdamW with the papers' warmup-then-cosine schedule, stepped per batch.

    lr rises linearly from ``lr`` to ``lr * warmup_multiplier`` over
    ``warmup_epochs``, then follows a cosine from that peak down to ``min_lr``
    over ``cosine_epochs`` (and stays at ``min_lr`` after). Weight decay applies
    to matrices (embeddings included, as in the papers' code) but not to biases
    or LayerNorm parameters unless ``decay_norm_and_bias``.
    """

    lr: float = 1e-5
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.01
    decay_norm_and_bias: bool = False
    warmup_epochs: float = 10.0
    warmup_multiplier: float = 25.0
    cosine_epochs: float = 200.0
    min_lr: float = 1e-5
    clip_norm: float = 1.0

    def __post_init__(self) -> None:
        p = "optim"
        _check_range(f"{p}.lr", self.lr, 0.0, lo_open=True)
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            _fail(f"{p}.betas", f"must be two numbers in [0, 1), got {self.betas!r}")
        _check_range(f"{p}.eps", self.eps, 0.0, lo_open=True)
        _check_range(f"{p}.weight_decay", self.weight_decay, 0.0)
        _check_range(f"{p}.warmup_epochs", self.warmup_epochs, 0.0)
        _check_range(f"{p}.warmup_multiplier", self.warmup_multiplier, 0.0, lo_open=True)
        _check_range(f"{p}.cosine_epochs", self.cosine_epochs, 0.0)
        _check_range(f"{p}.min_lr", self.min_lr, 0.0)
        _check_range(f"{p}.clip_norm", self.clip_norm, 0.0)


# -------------------------------------------------------------------------- train
@dataclass(frozen=True)
class TrainConfig:
    """Loop settings. ``epochs`` may be fractional; ``max_steps`` (if > 0) caps it."""

    epochs: float = 210.0
    batch_size: int = 2048
    max_steps: int = 0
    eval_every: int = 0          # steps; 0 -> once per epoch
    checkpoint_every: int = 0    # steps; 0 -> at each eval
    data_seed: int = 0
    init_seed: int = 0
    device: str = "auto"
    dtype: str = "float32"
    threads: int = 0             # torch intra-op threads; 0 -> leave as is
    flush_denormal: bool = True
    compile: bool = False
    amp: str = "none"            # "none" | "bf16" (GPU)
    tf32: bool = False
    log_complexity: bool = False  # log stable rank / condensation / embedding order at each eval

    def __post_init__(self) -> None:
        p = "train"
        _check_range(f"{p}.epochs", self.epochs, 0.0, lo_open=True)
        _check_range(f"{p}.batch_size", self.batch_size, 1)
        for name in ("max_steps", "eval_every", "checkpoint_every", "threads"):
            _check_range(f"{p}.{name}", getattr(self, name), 0)
        for name in ("data_seed", "init_seed"):
            _check_range(f"{p}.{name}", getattr(self, name), 0)
        if not (self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:")):
            _fail(f"{p}.device", f"must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {self.device!r}")
        _check_choice(f"{p}.dtype", self.dtype, ("float32", "float64"))
        _check_choice(f"{p}.amp", self.amp, ("none", "bf16"))


@dataclass(frozen=True)
class ExperimentConfig:
    """A whole run: task, model, init, optim, train."""

    name: str = "run"
    task: TaskConfig = field(default_factory=TaskConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    init: InitConfig = field(default_factory=InitConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        if self.model.vocab_size != self.task.vocab_size:
            _fail("model.vocab_size", f"must equal task.vocab_size ({self.task.vocab_size}), "
                  f"got {self.model.vocab_size}")
        if self.model.max_len < self.task.seq_len:
            _fail("model.max_len", f"must be >= task.seq_len ({self.task.seq_len}), "
                  f"got {self.model.max_len}")

    # ---- identity
    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    def run_id(self) -> str:
        """Stable 12-hex hash of the full config (name excluded)."""
        d = self.to_dict()
        d.pop("name", None)
        blob = json.dumps(d, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


# ------------------------------------------------------------------ dict <-> dataclass
def to_dict(obj: Any) -> Any:
    """Dataclass -> plain dict/list/scalars (YAML/JSON safe; dict keys as str)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    return obj


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(path: str, value: Any, tp: Any) -> Any:
    """Check/convert ``value`` to the annotated type ``tp``; fail naming ``path``."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        errors = []
        for a in args:
            if a is type(None):
                if value is None:
                    return None
                continue
            try:
                return _coerce(path, value, a)
            except ConfigError as e:
                errors.append(str(e))
        _fail(path, f"expected {' or '.join(_type_name(a) for a in args)}, got {value!r}")
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            _fail(path, f"expected a mapping of {tp.__name__} fields, got {value!r}")
        return from_dict(tp, value, path)
    if tp is bool:
        if isinstance(value, bool):
            return value
        _fail(path, f"expected true or false, got {value!r}")
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            _fail(path, f"expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            if isinstance(value, str):
                try:
                    return float(value)  # YAML reads '1e-5' as a string
                except ValueError:
                    pass
            _fail(path, f"expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            _fail(path, f"expected a string, got {value!r}")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            _fail(path, f"expected a list of {len(args)} values, got {value!r}")
        return tuple(_coerce(f"{path}[{i}]", v, a) for i, (v, a) in enumerate(zip(value, args)))
    if origin is list:
        if not isinstance(value, (list, tuple)):
            _fail(path, f"expected a list, got {value!r}")
        return [_coerce(f"{path}[{i}]", v, args[0]) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, Mapping):
            _fail(path, f"expected a mapping, got {value!r}")
        kt, vt = args
        out = {}
        for k, v in value.items():
            if kt is int and isinstance(k, str):
                try:
                    k = int(k)
                except ValueError:
                    _fail(path, f"keys must be integers, got {k!r}")
            out[_coerce(f"{path}.{k}", k, kt)] = _coerce(f"{path}.{k}", v, vt)
        return out
    return value


def from_dict(cls: type, data: Mapping[str, Any], path: str = "") -> Any:
    """Build dataclass ``cls`` from a mapping; unknown keys and bad types fail."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for k, v in data.items():
        fp = f"{path}.{k}" if path else str(k)
        if k not in names:
            _fail(fp, f"unknown key; allowed: {', '.join(names)}")
        kwargs[k] = _coerce(fp, v, hints[k])
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except TypeError as e:  # pragma: no cover - defensive
        _fail(path or cls.__name__, str(e))


def _parse_scalar(text: str) -> Any:
    """'0.8' -> 0.8, 'true' -> True, '[1,2]' -> [1, 2], 'abc' -> 'abc' (YAML rules)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def apply_overrides(data: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Apply ``["init.gamma=0.8", ...]`` to a nested dict (copy)."""
    out = json.loads(json.dumps(data))
    for ov in overrides:
        if "=" not in ov:
            raise ConfigError(f"override {ov!r}: expected KEY=VALUE, e.g. init.gamma=0.8")
        key, text = ov.split("=", 1)
        parts = key.strip().split(".")
        node = out
        for part in parts[:-1]:
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                raise ConfigError(f"{key}: {part!r} is not a section")
            node = nxt
        node[parts[-1]] = _parse_scalar(text)
    return out


def experiment_from_dict(data: Mapping[str, Any], overrides: list[str] | tuple[str, ...] = ()) -> ExperimentConfig:
    data = apply_overrides(dict(data or {}), overrides)
    return from_dict(ExperimentConfig, data)


PRESET_DIR = Path(__file__).parent / "configs"


def resolve_config_path(spec: str | Path) -> Path:
    """A file path, or a preset name such as ``neurips/paper`` or ``demo/small``."""
    p = Path(spec)
    if p.exists():
        return p
    cand = PRESET_DIR / (str(spec) if str(spec).endswith(".yaml") else f"{spec}.yaml")
    if cand.exists():
        return cand
    presets = sorted(str(q.relative_to(PRESET_DIR).with_suffix("")) for q in PRESET_DIR.rglob("*.yaml"))
    raise ConfigError(f"config {str(spec)!r}: no such file or preset; presets: {', '.join(presets)}")


def load_yaml(path: str | Path) -> dict[str, Any]:
    path = resolve_config_path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: invalid YAML: {e}".splitlines()[0]) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    return data


def load_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> ExperimentConfig:
    """YAML file or preset name + dotted overrides -> validated ExperimentConfig."""
    return experiment_from_dict(load_yaml(path), overrides)


def dump_config(cfg: Any) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)
