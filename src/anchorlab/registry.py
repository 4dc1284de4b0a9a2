"""Where names in a config meet code: task families, model architectures, training callbacks.

``task.name`` picks a task family and ``model.arch`` a model family. Each entry
names its config dataclass and its implementation as ``"module:attribute"``
strings, imported only when used, so reading a config never imports a task's
heavy dependencies and no module imports the task packages at import time.
:data:`CALLBACKS` names the callbacks a config switches on (``train.log_complexity``, ``train.log_predictors``)
the same way, so the training loop never imports the analyses that implement them.

A new task family adds one line to :data:`TASKS` (or calls :func:`register_task`
from its own package, e.g. in a plugin); see docs/architecture.md, "Add a task".
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Entry:
    """``config``: the frozen dataclass of the section; ``impl``: the task class or model builder."""

    config: str
    impl: str


TASKS: dict[str, Entry] = {
    "anchor": Entry("anchorlab.tasks.anchor.config:AnchorTaskConfig", "anchorlab.tasks.anchor.task:AnchorTask"),
    "scan": Entry("anchorlab.tasks.seq2seq.scan:ScanTaskConfig", "anchorlab.tasks.seq2seq.scan:ScanTask"),
    "pairs": Entry("anchorlab.tasks.seq2seq.task:PairsTaskConfig", "anchorlab.tasks.seq2seq.task:PairsTask"),
    "cogs": Entry("anchorlab.tasks.seq2seq.cogs:CogsTaskConfig", "anchorlab.tasks.seq2seq.cogs:CogsTask"),
    "addition": Entry("anchorlab.tasks.seq2seq.addition:AdditionTaskConfig",
                      "anchorlab.tasks.seq2seq.addition:AdditionTask"),
    "prontoqa": Entry("anchorlab.tasks.prontoqa.task:ProntoQATaskConfig", "anchorlab.tasks.prontoqa.task:ProntoQATask"),
    "lm": Entry("anchorlab.tasks.lm.config:LMTaskConfig", "anchorlab.tasks.lm.task:LMTask"),
    "concepts": Entry("anchorlab.tasks.concepts.config:ConceptsTaskConfig",
                      "anchorlab.tasks.concepts.task:ConceptsTask"),
}

MODELS: dict[str, Entry] = {
    "neurips": Entry("anchorlab.config.experiment:ModelConfig", "anchorlab.model.transformer:build_model"),
    "gpt2": Entry("anchorlab.config.experiment:ModelConfig", "anchorlab.model.transformer:build_model"),
    "hf_gpt2": Entry("anchorlab.model.hf_gpt2_config:HFGPT2Config", "anchorlab.model.hf_gpt2:build_hf_gpt2"),
    "concept_unet": Entry("anchorlab.model.unet_config:ConceptUNetConfig", "anchorlab.model.unet:build_unet"),
}


# name -> "module:attribute" of a callable class; the run lifecycle builds it with no arguments and calls
# the instance as cb(step, model) -> {metric: value} at each evaluation.
CALLBACKS: dict[str, str] = {
    "complexity": "anchorlab.analysis.spectra:ComplexityCallback",   # train.log_complexity
    # train.log_predictors; built as cls(task, train_data, eval_data) since its features read the run's data
    "predictors": "anchorlab.papers.analysis.predictors:PredictorCallback",
}


def register_task(name: str, config: str, impl: str) -> None:
    """Make ``task.name: <name>`` resolve to ``config`` / ``impl`` ("module:attribute" each)."""
    TASKS[name] = Entry(config, impl)


def register_callback(name: str, impl: str) -> None:
    """Make :data:`CALLBACKS` name ``name`` resolve to ``impl`` ("module:attribute" of a callable class)."""
    CALLBACKS[name] = impl


def register_model(arch: str, config: str, impl: str) -> None:
    """Make ``model.arch: <arch>`` resolve to ``config`` / ``impl`` (a builder ``fn(model_cfg) -> nn.Module``)."""
    MODELS[arch] = Entry(config, impl)


def load(ref: str) -> Any:
    """``"package.module:attr"`` -> the attribute."""
    mod, _, attr = ref.partition(":")
    return getattr(importlib.import_module(mod), attr)


def lazy_attribute(api: dict[str, str], namespace: dict[str, Any], module: str, name: str) -> Any:
    """A package's ``__getattr__``: ``name`` of ``api`` ("module:attr" each) imported on first use and kept in
    ``namespace`` (the package's globals); AttributeError for any other name."""
    if name in api:
        namespace[name] = load(api[name])
        return namespace[name]
    raise AttributeError(f"module {module!r} has no attribute {name!r}")
