"""The sections of a run's config and the whole :class:`ExperimentConfig`.

``task`` is polymorphic: ``task.name`` picks the task family's own config
class (it lives beside its task, e.g. :class:`anchorlab.tasks.anchor.config.AnchorTaskConfig`);
``model.arch`` likewise picks the model family's config (the transformer's is
:class:`ModelConfig`). The other sections are shared by every task. Choices
where the papers are vague are documented on the field and in ``docs/choices.md``.

The module runs over 400 lines: every section's fields sit here with the notes the config reference
(docs/config_reference.md) reads from their comments, so a field and its documentation stay one edit.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

from anchorlab.config.base import (ConfigError, Select, apply_overrides, check_choice, check_range, coerce, config_hash, fail,
                   from_dict, load_yaml, to_dict)
from anchorlab.config.process_settings import PROCESS_SETTINGS, process_settings
from anchorlab.config.precision_rules import BF16_PATHS, auto_bf16_path, matmul_amp  # noqa: F401 -- re-exported
from anchorlab.config.stop_rule import STOP_RULE, parse_stop_rule  # noqa: F401 -- re-exported


def _tasks() -> dict:
    from anchorlab.registry import TASKS
    return TASKS


def _models() -> dict:
    from anchorlab.registry import MODELS
    return MODELS


# --------------------------------------------------------------------------- task
@dataclass(frozen=True)
class TaskConfig:
    """Base of every task family's config. ``name`` selects the family (see :mod:`anchorlab.registry`).

    A family's config subclasses this, validates its fields in ``__post_init__``
    and may override :meth:`dims` and :meth:`check_model`.
    """

    name: str = "anchor"

    def dims(self) -> dict[str, int]:
        """``{"vocab_size": ..., "max_len": ...}`` the model needs (may read the task's data files)."""
        raise NotImplementedError

    def check_model(self, model: Any) -> None:
        """Cheap consistency checks of a model config against this task (no data reads)."""


def _default_task() -> TaskConfig:
    from anchorlab.registry import TASKS, load
    return load(TASKS["anchor"].config)()


# -------------------------------------------------------------------------- model
ARCHS = ("neurips", "gpt2")


@dataclass(frozen=True)
class ModelConfig:
    """Decoder-only transformer.

    ``arch='neurips'``: post-LN as NeurIPS eq. (4)-(7); ``arch='gpt2'``: pre-LN
    with a final LayerNorm (journal). ``d_head`` is d_k = d_v per head.
    ``vocab_size`` and ``max_len`` are filled from the task when a config
    leaves them out.

    ``attn_norm`` (``gpt2`` only): which attention inputs the pre-LN normalizes:
    ``"qkv"`` (textbook GPT-2: queries, keys and values read LN(x)) or ``"q"``
    (the authors' journal block: only the query input is normalized, keys and
    values read the raw residual; code_for_anchor_func/model/GPT2_init_for_diff_part_prenorm.py).
    """

    native_bf16: ClassVar[bool] = True   # train.bf16_path 'auto' -> 'native' (model/bf16.py covers every arch)

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
    attn_norm: str = "qkv"

    def __post_init__(self) -> None:
        p = "model"
        check_choice(f"{p}.arch", self.arch, ARCHS)
        check_choice(f"{p}.activation", self.activation, ("relu", "gelu"))
        check_choice(f"{p}.attn_norm", self.attn_norm, ("qkv", "q"))
        if self.attn_norm == "q" and self.arch != "gpt2":
            fail(f"{p}.attn_norm", f"'q' (normalize only the query input) needs the pre-LN arch 'gpt2', got arch "
                 f"{self.arch!r}")
        for name in ("n_layers", "d_model", "n_heads", "d_head", "d_ff", "max_len", "vocab_size"):
            check_range(f"{p}.{name}", getattr(self, name), 1)
        check_range(f"{p}.ln_eps", self.ln_eps, 0.0, lo_open=True)


# --------------------------------------------------------------------------- init
INIT_ROLES = ("embed", "pos", "qk", "vo", "mlp", "readout")


@dataclass(frozen=True)
class InitConfig:
    """Init rate: every weight ~ D(0, std = scale * fan_in ** -gamma).

    ``role_gammas`` overrides gamma for a role group (embed, pos, qk, vo, mlp,
    readout). ``fan_in='true'`` uses each matrix's real input dimension (NeurIPS
    text); ``'d_model'`` uses d_model for every matrix (journal code).
    ``embed_fan_in`` is the convention of the token and position embeddings
    under ``fan_in='true'``: ``'num_embeddings'`` (the width of the one-hot input
    the table multiplies, NeurIPS eq. 4: 201 for tokens, ``max_len`` for
    positions) or ``'d_model'`` (the authors' NeurIPS model, which reads
    ``weight.size(1)``). ``residual_scale`` divides the std of the attention
    output and second MLP matrices by sqrt(2 * n_layers) (GPT-2 / journal code).
    ``bias``: ``'zero'``, ``'gamma'`` (drawn like their weight), ``'pytorch'``
    (PyTorch's default U(-1/sqrt(fan_in), 1/sqrt(fan_in)), drawn from the init
    seed; the authors' journal model keeps it) or ``'pytorch_ref'`` (the same with
    the fan-in read at ``ref_width``, so a narrow model's biases match the wide
    one's as its weights do).
    ``scheme``: ``'rate'`` applies the init rate; ``'framework_default'`` keeps
    the init the model's own constructors draw (PyTorch's / diffusers'
    defaults), seeded with the init seed: the reference point of a sweep
    (journal Fig. 6B's "default"); the other fields are then not used.
    ``embed_std``: when set, the token and position embeddings are drawn
    N(0, embed_std) (uniform with that std under ``distribution: uniform``)
    whatever gamma, fan-in or ``role_gammas`` say: the authors' GPT-2 keeps its
    embeddings at N(0, 0.02) and scales only the Linear / Conv1D weights
    (fig_code/fig7/gpt2_origin_init.py, ``_init_weights``); None (default)
    draws them with the init rate like every other weight.
    """

    gamma: float = 0.5
    scale: float = 1.0
    role_gammas: dict[str, float] = field(default_factory=dict)
    fan_in: str = "true"
    embed_fan_in: str = "num_embeddings"
    distribution: str = "normal"
    bias: str = "zero"
    residual_scale: bool = False
    scheme: str = "rate"
    # not hashed while None, so the run ids of configs without it stay as they were
    ref_width: int | None = field(default=None, metadata={"identity": "unless_default"})
    embed_std: float | None = field(default=None, metadata={"identity": "unless_default"})

    def __post_init__(self) -> None:
        p = "init"
        check_choice(f"{p}.scheme", self.scheme, ("rate", "framework_default"))
        check_range(f"{p}.gamma", self.gamma, 0.0, 4.0)
        check_range(f"{p}.scale", self.scale, 0.0, lo_open=True)
        for k, v in self.role_gammas.items():
            check_choice(f"{p}.role_gammas", k, INIT_ROLES)
            check_range(f"{p}.role_gammas.{k}", v, 0.0, 4.0)
        check_choice(f"{p}.fan_in", self.fan_in, ("true", "d_model"))
        check_choice(f"{p}.embed_fan_in", self.embed_fan_in, ("num_embeddings", "d_model"))
        check_choice(f"{p}.distribution", self.distribution, ("normal", "uniform"))
        check_choice(f"{p}.bias", self.bias, ("zero", "gamma", "pytorch", "pytorch_ref"))
        if self.ref_width is not None:
            if isinstance(self.ref_width, bool) or not isinstance(self.ref_width, int):
                fail(f"{p}.ref_width", f"must be a positive integer width (e.g. 400, the paper's d_model) or null, "
                     f"got {self.ref_width!r}")
            check_range(f"{p}.ref_width", self.ref_width, 1)
        if self.embed_std is not None:
            check_range(f"{p}.embed_std", self.embed_std, 0.0, lo_open=True)

    def gamma_for(self, group: str) -> float:
        return float(self.role_gammas.get(group, self.gamma))


# -------------------------------------------------------------------------- optim
@dataclass(frozen=True)
class OptimConfig:
    """AdamW with the papers' warmup-then-cosine schedule, stepped per batch.

    lr rises linearly from ``lr`` to the peak over ``warmup_epochs``, then
    follows a cosine from the peak down to ``min_lr`` over ``cosine_epochs``
    (and stays at ``min_lr`` after). The peak is ``peak_lr`` when given (the
    papers' "learning rate": the authors fix the start lr and vary the
    multiplier, code_for_anchor_func/script.py), else ``lr * warmup_multiplier``.

    ``decay``: ``'all'`` decays every parameter, LayerNorm and biases included
    (the authors' ``AdamW(model.parameters())``,
    code_for_anchor_func/model/choose_optimizer.py); ``'matrices'`` decays
    weight matrices and embeddings only (the textbook choice).

    ``fused``: torch's fused AdamW kernel (one pass per parameter tensor) instead of the ``foreach``
    update: the same algorithm in another order of floating-point operations, so not the bits of a
    recorded run; opt-in for new studies, in the run id when on, refused by a stack (docs/engine.md).
    """

    lr: float = 1e-5
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.01
    decay: str = "matrices"
    warmup_epochs: float = 10.0
    warmup_multiplier: float = 25.0
    cosine_epochs: float = 200.0
    min_lr: float = 1e-5
    clip_norm: float = 1.0
    peak_lr: float | None = None
    # torch's fused AdamW kernel instead of foreach (opt-in: other bits; docs/engine.md)
    fused: bool = field(default=False, metadata={"identity": "unless_default"})

    def __post_init__(self) -> None:
        p = "optim"
        check_range(f"{p}.lr", self.lr, 0.0, lo_open=True)
        check_choice(f"{p}.decay", self.decay, ("all", "matrices"))
        if self.peak_lr is not None:
            check_range(f"{p}.peak_lr", self.peak_lr, self.lr)
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            fail(f"{p}.betas", f"must be two numbers in [0, 1), got {self.betas!r}")
        check_range(f"{p}.eps", self.eps, 0.0, lo_open=True)
        check_range(f"{p}.weight_decay", self.weight_decay, 0.0)
        check_range(f"{p}.warmup_epochs", self.warmup_epochs, 0.0)
        check_range(f"{p}.warmup_multiplier", self.warmup_multiplier, 0.0, lo_open=True)
        check_range(f"{p}.cosine_epochs", self.cosine_epochs, 0.0)
        check_range(f"{p}.min_lr", self.min_lr, 0.0)
        check_range(f"{p}.clip_norm", self.clip_norm, 0.0)

    @property
    def peak(self) -> float:
        """The learning rate at the end of the warmup."""
        return self.peak_lr if self.peak_lr is not None else self.lr * self.warmup_multiplier


# -------------------------------------------------------------------------- train
@dataclass(frozen=True)
class TrainConfig:
    """Loop settings. ``epochs`` may be fractional; ``max_steps`` (if > 0) caps it.

    ``stop_when``: early stopping. The run ends (status ``stopped_early``) at
    the first evaluation where every rule holds, e.g. ``["id_exact>=0.99"]``
    or ``["train_loss<=0.05", "min_pair_train_acc>=0.6"]``; ``epochs`` /
    ``max_steps`` then act as the cap.
    """

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
    # CPU: glibc keeps freed memory so activations stop page-faulting each step; speed only (train/allocator.py).
    # Process-wide and never undone. None: on under the command line, off for a library call (process_settings)
    malloc_retain: bool | None = field(default=None, metadata={"identity": False})
    # single loop: clip and AdamW over one flat buffer per group, the same bits (train/flat.py); re-seats the
    # model's parameters. None: on under the command line, off for a library call
    flat_params: bool | None = field(default=None, metadata={"identity": False})
    compile: bool = False
    amp: str = "none"            # "none" | "bf16" | "auto" (bf16 on a CPU with bf16 matrix units; train/precision.py)
    # "auto" (native for the anchorlab Transformer in float32 without compile, else autocast;
    # config/precision_rules.py) | "native" (bf16 activations between ops; docs/engine.md) | "autocast"
    # (torch.autocast, every committed bf16 study). Resolved when the whole config is built, so a saved config
    # names the path that ran; in the run id only for a bf16 run on the native path (docs/choices.md)
    bf16_path: str = field(default="auto", metadata={
        "identity_when": lambda c: c.amp != "none" and c.bf16_path == "native"})
    # the forward's W.T on the native path: "auto" (a bf16 copy on a CPU with AMX, else the view of W's bf16 copy)
    # | "copy" | "view"; speed only (model/bf16.py, WeightCache; docs/engine.md, "Weight layout")
    bf16_wt: str = field(default="auto", metadata={"identity": False})
    tf32: bool = False
    log_complexity: bool = False  # log stable rank / condensation / embedding order at each eval
    # log the early predictors of the anchor task (papers/analysis/predictors) at each eval
    log_predictors: bool = field(default=False, metadata={"identity": False})
    # the predictors are logged only at evaluations up to this fraction of the total steps (the one nearest to it included) and at
    # the last step (each call costs about one evaluation); 1.0 -> every evaluation
    predictors_until: float = field(default=1.0, metadata={"identity": False})
    stop_when: tuple[str, ...] = ()
    # experiment tracking (anchorlab.tracking): none | mlflow | tensorboard
    tracking: str = field(default="none", metadata={"identity": False})

    def __post_init__(self) -> None:
        p = "train"
        check_range(f"{p}.epochs", self.epochs, 0.0, lo_open=True)
        check_range(f"{p}.batch_size", self.batch_size, 1)
        for name in ("max_steps", "eval_every", "checkpoint_every", "threads"):
            check_range(f"{p}.{name}", getattr(self, name), 0)
        for name in ("data_seed", "init_seed"):
            check_range(f"{p}.{name}", getattr(self, name), 0)
        if not (self.device in ("auto", "cpu", "cuda") or re.fullmatch(r"cuda:\d+", self.device)):
            fail(f"{p}.device", f"must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {self.device!r}")
        check_choice(f"{p}.dtype", self.dtype, ("float32", "float64"))
        check_choice(f"{p}.amp", self.amp, ("none", "bf16", "auto"))
        check_choice(f"{p}.bf16_path", self.bf16_path, BF16_PATHS)
        check_choice(f"{p}.bf16_wt", self.bf16_wt, ("auto", "copy", "view"))
        if self.bf16_path == "native" and self.dtype != "float32" and self.amp != "none":
            fail(f"{p}.bf16_path", f"'native' needs train.dtype 'float32', got {self.dtype!r}; use 'autocast' or "
                 "'auto'")
        check_range(f"{p}.predictors_until", self.predictors_until, 0.0, 1.0)
        for i, r in enumerate(self.stop_when):
            parse_stop_rule(f"{p}.stop_when[{i}]", r)
        check_choice(f"{p}.tracking", self.tracking, ("none", "mlflow", "tensorboard"))

    def plan(self, n_train: int) -> tuple[int, int, int]:
        """(steps_per_epoch, total_steps, eval_every) for ``n_train`` training rows; the last partial batch is dropped."""
        spe = max(n_train // self.batch_size, 1)
        total = max(int(round(self.epochs * spe)), 1)
        if self.max_steps:
            total = min(total, self.max_steps)
        return spe, total, self.eval_every or spe

    @property
    def stop_rules(self) -> list[tuple[str, str, float]]:
        return [parse_stop_rule(f"train.stop_when[{i}]", r) for i, r in enumerate(self.stop_when)]


# --------------------------------------------------------------------------- run
@dataclass(frozen=True)
class ExperimentConfig:
    """A whole run: task, model, init, optim, train."""

    name: str = "run"
    task: Annotated[TaskConfig, Select("name", _tasks, "anchor")] = field(default_factory=_default_task)
    model: Annotated[ModelConfig, Select("arch", _models, "neurips")] = field(default_factory=ModelConfig)
    init: InitConfig = field(default_factory=InitConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        self.task.check_model(self.model)
        if self.train.bf16_path == "auto":   # resolved here, once: the saved config and the run id name the path
            path = auto_bf16_path(self.model, self.train)
            object.__setattr__(self, "train", dataclasses.replace(self.train, bf16_path=path))
        unset = {k: process_settings() for k in PROCESS_SETTINGS if getattr(self.train, k) is None}
        if unset:   # resolved here, once: the saved config names what ran
            object.__setattr__(self, "train", dataclasses.replace(self.train, **unset))

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    def planned_steps(self) -> int | None:
        """The steps this config plans, read without data: ``train.plan`` of the task's stated size
        (``n_train`` or ``train_size``), else ``train.max_steps``; None where they depend on data files."""
        n_train = getattr(self.task, "n_train", 0) or getattr(self.task, "train_size", 0)
        return self.train.plan(n_train)[1] if n_train else (self.train.max_steps or None)

    def run_id(self) -> str:
        """Stable 12-hex hash of the config (``name`` and fields marked not-identity excluded)."""
        d = {k: v for k, v in vars(self).items() if k != "name"}
        return config_hash(d)


AUTO = ("auto", None)
DERIVED_MODEL_FIELDS = ("vocab_size", "max_len")


def experiment_from_dict(data: dict[str, Any] | None, overrides: list[str] | tuple[str, ...] = ()) -> ExperimentConfig:
    """Mapping (+ dotted overrides) -> validated :class:`ExperimentConfig`.

    Task errors are reported first. ``model.vocab_size`` / ``model.max_len``
    left out (or ``auto``) are filled from ``task.dims()`` (which may read the
    task's data files once per process).
    """
    if overrides:
        d = apply_overrides(dict(data or {}), list(overrides))
    else:  # building copies every value; only the model mapping is written to (derived sizes)
        d = dict(data or {})
        if isinstance(d.get("model"), dict):
            d["model"] = dict(d["model"])
    task = coerce("task", d.get("task") or {}, _hint("task"))
    d["task"] = task
    model = d.setdefault("model", {})
    if isinstance(model, dict):
        missing = [k for k in DERIVED_MODEL_FIELDS if model.get(k, "auto") in AUTO]
        if missing:
            dims = _task_dims(task)
            for k in missing:
                if k in dims:   # an image model's task derives none
                    model[k] = dims[k]
    return from_dict(ExperimentConfig, d)


def _task_dims(task: TaskConfig) -> dict[str, int]:
    """``task.dims()``, once per process for equal task configs (a sweep builds many configs of one task)."""
    try:
        return dict(_cached_dims(task, os.environ.get("ANCHORLAB_DATA_DIR")))
    except TypeError:  # a field that cannot be hashed (a mapping): no cache
        return task.dims()


@functools.lru_cache(maxsize=64)
def _cached_dims(task: TaskConfig, data_dir_env: str | None) -> dict[str, int]:
    return task.dims()   # data_dir_env: part of the key only (where task.data_dir None reads from)


@functools.lru_cache(maxsize=None)
def _hint(name: str) -> Any:
    import typing
    return typing.get_type_hints(ExperimentConfig, include_extras=True)[name]


def load_config(path: str, overrides: list[str] | tuple[str, ...] = ()) -> ExperimentConfig:
    """YAML file or preset name (``neurips/paper``, ``scan/cpu``, ...) + dotted overrides -> config."""
    return experiment_from_dict(load_yaml(path), overrides)


__all__ = ["TaskConfig", "ModelConfig", "InitConfig", "OptimConfig", "TrainConfig", "ExperimentConfig",
           "experiment_from_dict", "load_config", "parse_stop_rule", "ConfigError", "INIT_ROLES", "ARCHS"]
