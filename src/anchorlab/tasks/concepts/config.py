"""The concept-graph diffusion task's config (journal §VII, Fig. 6; Okawa et al., NeurIPS 2023).

Selected by ``task.name: concepts``; the task is
:class:`anchorlab.tasks.concepts.task.ConceptsTask`, the model ``model.arch:
concept_unet`` (:mod:`anchorlab.model.unet`). Bit order of a node:
``<shape><size><color>`` (:mod:`.render`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from anchorlab.config.base import check_choice, check_range, fail
from anchorlab.config.experiment import TaskConfig
from anchorlab.tasks.concepts.render import NODES, Jitter

CONDITIONS = ("attributes", "onehot")
SIZE_CODES = {"relative": 1.0, "authors": 2.6}   # the size entry of a large shape (small: x 1.6 / 2.6)
CONCEPT_DIMS = {"attributes": (2, 1, 3), "onehot": (2, 2, 2)}


@dataclass(frozen=True)
class ConceptsTaskConfig(TaskConfig):
    """Conditional DDPM on single-shape renders; the generator is trained on ``train_nodes`` only.

    Data: ``per_node`` renders of each training node (the authors take 280 per
    node, fig_code/fig6/load_dataset.py) at ``resolution`` x ``resolution``,
    jittered by ``position_jitter`` / ``size_jitter`` / ``shade_jitter``.

    ``condition``: the concept vector the U-Net is conditioned on, per concept
    in bit order: ``'attributes'`` (the authors' labels: shape one-hot, the
    drawn size relative to a large shape, the drawn RGB colour; the canonical
    values when generating) or ``'onehot'`` (a one-hot of each bit).
    ``size_code`` (``attributes`` only): the scale of the size entry.
    ``'relative'`` (default, ours): the drawn radius / the large radius, so
    1.0 for a large shape and 0.615 for a small one; ``'authors'``: the
    authors' Blender size, 2.6 x that (2.6 large, 1.6 small: their test
    labels, fig_code/fig6/load_dataset.py; their training labels read the
    rendered size, 2.6-2.7), the same ratio at a contrast 2.6x larger.

    Diffusion: diffusers' DDPMScheduler with ``timesteps`` training steps and
    a ``beta_schedule`` from ``beta_start`` to ``beta_end`` (the authors: 500,
    linear, 1e-4 to 0.02), no clipping of the predicted image. Sampling:
    ``sampler`` (``'ddpm'``, or ``'ddim'`` with eta 0) over ``sample_steps``
    steps (0: all ``timesteps``), ``n_samples`` images per node from the
    noise seed ``sample_seed``; 0 samples turns the generation metrics off.
    ``n_denoise`` fixed renders per node give the held-out denoising loss.

    The concept classifier (the evaluator) is cached in ``classifier_dir``
    (default ``$ANCHORLAB_CACHE/concepts``; not part of the run id). With
    ``reject_no_object`` (default) a sample the classifier judges to hold no
    object (noise) counts as wrong on every concept; off, its shape / size /
    colour logits are read as they are (pure noise then reads as a circle).
    Evaluation only: not part of the run id.
    """

    name: str = "concepts"
    resolution: int = 32
    train_nodes: tuple[str, ...] = ("000", "100", "001", "111")
    per_node: int = 280
    condition: str = "attributes"
    size_code: str = "relative"
    position_jitter: float = 0.06
    size_jitter: float = 0.05
    shade_jitter: float = 0.08
    timesteps: int = 500
    beta_start: float = 1e-4
    beta_end: float = 0.02
    beta_schedule: str = "linear"
    sampler: str = "ddpm"
    sample_steps: int = 0
    n_samples: int = 64
    sample_seed: int = 0
    n_denoise: int = 64
    classifier_dir: str = field(default="", metadata={"identity": False})
    reject_no_object: bool = field(default=True, metadata={"identity": False})

    def __post_init__(self) -> None:
        p = "task"
        check_range(f"{p}.resolution", self.resolution, 8, 512)
        if not self.train_nodes:
            fail(f"{p}.train_nodes", "needs at least one node")
        for i, n in enumerate(self.train_nodes):
            check_choice(f"{p}.train_nodes[{i}]", n, NODES)
        if len(set(self.train_nodes)) != len(self.train_nodes):
            fail(f"{p}.train_nodes", f"lists a node twice: {list(self.train_nodes)}")
        check_range(f"{p}.per_node", self.per_node, 1)
        check_choice(f"{p}.condition", self.condition, CONDITIONS)
        check_choice(f"{p}.size_code", self.size_code, tuple(SIZE_CODES))
        if self.size_code != "relative" and self.condition != "attributes":
            fail(f"{p}.size_code", f"only used with task.condition='attributes', got condition {self.condition!r}")
        check_range(f"{p}.position_jitter", self.position_jitter, 0.0, 0.1)
        check_range(f"{p}.size_jitter", self.size_jitter, 0.0, 0.2)
        check_range(f"{p}.shade_jitter", self.shade_jitter, 0.0, 0.1)
        check_range(f"{p}.timesteps", self.timesteps, 2, 10000)
        check_range(f"{p}.beta_start", self.beta_start, 0.0, 1.0, lo_open=True, hi_open=True)
        check_range(f"{p}.beta_end", self.beta_end, self.beta_start, 1.0, hi_open=True)
        check_choice(f"{p}.beta_schedule", self.beta_schedule, ("linear", "scaled_linear", "squaredcos_cap_v2"))
        check_choice(f"{p}.sampler", self.sampler, ("ddpm", "ddim"))
        check_range(f"{p}.sample_steps", self.sample_steps, 0, self.timesteps)
        check_range(f"{p}.n_samples", self.n_samples, 0)
        check_range(f"{p}.sample_seed", self.sample_seed, 0)
        check_range(f"{p}.n_denoise", self.n_denoise, 1)

    @property
    def jitter(self) -> Jitter:
        return Jitter(self.position_jitter, self.size_jitter, self.shade_jitter)

    @property
    def concept_dims(self) -> tuple[int, ...]:
        return CONCEPT_DIMS[self.condition]

    @property
    def test_nodes(self) -> tuple[str, ...]:
        """The nodes never trained on (010 and 011 in the paper's split)."""
        return tuple(n for n in NODES if n not in self.train_nodes)

    def dims(self) -> dict[str, int]:
        return {}   # an image model has no vocabulary or sequence length

    def check_model(self, model: Any) -> None:
        arch = getattr(model, "arch", None)
        if arch != "concept_unet":
            fail("model.arch", f"the concepts task needs 'concept_unet', got {arch!r}")
        if tuple(model.concept_dims) != self.concept_dims:
            fail("model.concept_dims", f"task.condition={self.condition!r} gives {list(self.concept_dims)}, "
                 f"got {list(model.concept_dims)}")
        if model.in_channels != 3:
            fail("model.in_channels", f"the renders are RGB (3 channels), got {model.in_channels}")
        if self.resolution % model.downsample_factor:
            fail("task.resolution", f"must be a multiple of {model.downsample_factor} ({len(model.channels) - 1} "
                 f"down-sampling stages of model.channels), got {self.resolution}")
