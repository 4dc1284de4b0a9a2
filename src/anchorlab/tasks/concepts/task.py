"""The concept-graph diffusion task (journal §VII, Fig. 6) on the Task protocol.

A conditional DDPM (``model.arch: concept_unet``) learns to draw the training
nodes (000, 100, 001, 111 by default; bit order ``<shape><size><color>``, see
:mod:`.render`) from their concept vectors; evaluation asks it for every
node, the unseen 010 (small red circle) and 011 (small blue circle) included.

Metrics (``<node>`` is one of 000 ... 111):

* ``denoise_loss_<node>``: the noise-prediction MSE on ``n_denoise`` fixed
  renders of the node with fixed noise and time steps, conditioned on the
  node's canonical concept vector; ``id_denoise_loss`` / ``ood_denoise_loss``
  average the training / unseen nodes;
* with ``n_samples > 0``: ``n_samples`` images per node are generated through
  the scheduler and judged by the concept classifier (:mod:`.classifier`):
  ``shape_acc_<node>``, ``size_acc_<node>``, ``color_acc_<node>`` (fraction
  with that concept right) and ``all_acc_<node>`` (all three right);
  ``object_rate_<node>`` the fraction the classifier judges to hold an
  object at all (with ``task.reject_no_object``, the default, the others
  count a no-object sample as wrong on every concept);
  ``id_all_acc`` / ``ood_all_acc`` average them over training / unseen nodes
  and ``ood_shape_acc`` the shape accuracy over every unseen node;
  ``all_acc_010_011`` is the headline: the fraction of samples of the
  journal's two unseen nodes 010 and 011 with all three concepts right (a
  small circle of the right colour); ``shape_acc_010_011``,
  ``size_acc_010_011`` and ``color_acc_010_011`` stand beside it (shape alone
  counts any circle, large ones included).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch

from anchorlab.tasks.base import EvalResult, Forward, Task
from anchorlab.tasks.concepts.classifier import ClassifierSpec, load_or_train, predict
from anchorlab.tasks.concepts.config import SIZE_CODES, ConceptsTaskConfig
from anchorlab.tasks.concepts.diffusion import DiffusionData, make_scheduler, noised, sample
from anchorlab.tasks.concepts.render import BITS, LARGE, NODES, COLORS, Renders, canonical_radius, describe, node_bits, render_nodes

log = logging.getLogger(__name__)
TRAIN_STREAM, DENOISE_STREAM = 0, 1


def encode(cfg: ConceptsTaskConfig, bits: np.ndarray, rgb: np.ndarray | None = None,
           radius: np.ndarray | None = None) -> torch.Tensor:
    """(N, 3) bits (and, for ``attributes``, the drawn colour and radius; canonical when None) -> (N, D) floats.

    ``attributes``: [shape one-hot (2), radius / large radius x the ``size_code`` scale (1), RGB (3)];
    ``onehot``: [shape one-hot, size one-hot, color one-hot].
    """
    bits = np.asarray(bits, dtype=np.int64).reshape(-1, 3)
    eye = np.eye(2, dtype=np.float32)
    if cfg.condition == "onehot":
        return torch.from_numpy(np.concatenate([eye[bits[:, i]] for i in range(3)], axis=1))
    rgb = COLORS[bits[:, 2]] if rgb is None else rgb
    radius = canonical_radius(bits[:, 1]) if radius is None else radius
    size = (np.asarray(radius, dtype=np.float32) / LARGE * SIZE_CODES[cfg.size_code])[:, None]
    return torch.from_numpy(np.concatenate([eye[bits[:, 0]], size, np.asarray(rgb, np.float32)], axis=1))


def node_conditions(cfg: ConceptsTaskConfig, nodes: tuple[str, ...], n: int) -> torch.Tensor:
    """(len(nodes) * n, D): each node's canonical concept vector, ``n`` times, node by node."""
    bits = np.repeat(np.array([node_bits(x) for x in nodes]), n, axis=0)
    return encode(cfg, bits)


def classifier_spec(cfg: ConceptsTaskConfig) -> ClassifierSpec:
    return ClassifierSpec(resolution=cfg.resolution, jitter=cfg.jitter)


@dataclass
class ConceptsEval:
    """What evaluation needs, built once per run: the classifier and the fixed denoising set."""

    classifier: torch.nn.Module
    x0: torch.Tensor        # (8 * n_denoise, 3, H, W), node by node in NODES order
    cond: torch.Tensor      # canonical conditions of those rows
    noise: torch.Tensor
    t: torch.Tensor


class ConceptsTask(Task):
    """See the module docstring."""

    name: ClassVar[str] = "concepts"
    headline: ClassVar[tuple[str, ...]] = ("all_acc_010_011", "shape_acc_010_011", "size_acc_010_011",
                                           "color_acc_010_011", "id_all_acc", "ood_denoise_loss")
    stackable: ClassVar[bool] = False

    def __init__(self, cfg: ConceptsTaskConfig) -> None:
        self.cfg = cfg
        self._scheduler = None

    @property
    def scheduler(self):
        """diffusers' DDPMScheduler of the task (built on first use: needs the ``diffusion`` extra)."""
        if self._scheduler is None:
            self._scheduler = make_scheduler(self.cfg)
        return self._scheduler

    def dims(self) -> dict[str, int]:
        return self.cfg.dims()

    def train_renders(self, seed: int) -> Renders:
        c = self.cfg
        return render_nodes(c.train_nodes, c.per_node, c.resolution, [seed, TRAIN_STREAM], c.jitter)

    def train_data(self, seed: int) -> DiffusionData:
        r = self.train_renders(seed)
        cond = encode(self.cfg, r.bits, r.rgb, r.radius)
        return DiffusionData(torch.from_numpy(r.images), cond, seed, self.cfg.timesteps)

    def eval_data(self, seed: int) -> ConceptsEval:
        c = self.cfg
        clf, info = load_or_train(classifier_spec(c), c.classifier_dir or None)
        log.info("concept classifier held-out accuracy: %s", info.get("heldout_acc"))
        r = render_nodes(NODES, c.n_denoise, c.resolution, [seed, DENOISE_STREAM], c.jitter)
        g = torch.Generator().manual_seed(seed + 1)
        x0 = torch.from_numpy(r.images)
        noise = torch.randn(x0.shape, generator=g)
        t = torch.randint(0, c.timesteps, (len(x0),), generator=g)
        return ConceptsEval(clf, x0, encode(c, r.bits), noise, t)

    def loss(self, fwd: Forward, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        x_t = noised(self.scheduler, batch["x0"], batch["noise"], batch["t"])
        return torch.nn.functional.mse_loss(fwd(x_t, batch["t"], batch["cond"]), batch["noise"])

    def generate(self, model: torch.nn.Module, nodes: tuple[str, ...], n: int, device: Any = "cpu",
                 seed: int | None = None) -> torch.Tensor:
        """(len(nodes), n, 3, H, W) samples of each node (CPU tensor)."""
        c = self.cfg
        cond = node_conditions(c, nodes, n)
        x = sample(model, cond, (3, c.resolution, c.resolution), c, c.sample_seed if seed is None else seed, device)
        return x.reshape(len(nodes), n, *x.shape[1:])

    @torch.no_grad()
    def denoise_losses(self, model: torch.nn.Module, ev: ConceptsEval, device: Any) -> dict[str, float]:
        was = model.training
        model.eval()
        try:
            out, n = {}, self.cfg.n_denoise
            for k, node in enumerate(NODES):
                sl = slice(k * n, (k + 1) * n)
                x0, noise, t = ev.x0[sl].to(device), ev.noise[sl].to(device), ev.t[sl].to(device)
                pred = model(noised(self.scheduler, x0, noise, t), t, ev.cond[sl].to(device))
                out[node] = float(torch.nn.functional.mse_loss(pred, noise))
        finally:
            model.train(was)
        return out

    def evaluate(self, model: torch.nn.Module, eval_data: ConceptsEval, device: Any = "cpu") -> EvalResult:
        c = self.cfg
        test = c.test_nodes
        dl = self.denoise_losses(model, eval_data, device)
        m: dict[str, float] = {f"denoise_loss_{k}": v for k, v in dl.items()}
        m["id_denoise_loss"] = float(np.mean([dl[k] for k in c.train_nodes]))
        m["ood_denoise_loss"] = float(np.mean([dl[k] for k in test])) if test else float("nan")
        rows = []
        if c.n_samples:
            imgs = self.generate(model, NODES, c.n_samples, device)
            for k, node in enumerate(NODES):
                pred = predict(eval_data.classifier, imgs[k]).numpy()
                is_object = pred[:, 3] == 1 if c.reject_no_object else np.ones(len(pred), dtype=bool)
                right = (pred[:, :3] == np.array(node_bits(node))[None]) & is_object[:, None]
                row = {"node": node, "description": describe(node),
                       "split": "train" if node in c.train_nodes else "unseen", "n": len(pred),
                       "denoise_loss": dl[node], "object_rate": float(pred[:, 3].mean())}
                for i, concept in enumerate(BITS):
                    row[f"{concept}_acc"] = float(right[:, i].mean())
                row["all_acc"] = float(right.all(axis=1).mean())
                rows.append(row)
                for key in ("shape", "size", "color", "all"):
                    m[f"{key}_acc_{node}"] = row[f"{key}_acc"]
                m[f"object_rate_{node}"] = row["object_rate"]
            m["id_all_acc"] = float(np.mean([m[f"all_acc_{k}"] for k in c.train_nodes]))
            m["ood_all_acc"] = float(np.mean([m[f"all_acc_{k}"] for k in test])) if test else float("nan")
            m["ood_shape_acc"] = float(np.mean([m[f"shape_acc_{k}"] for k in test])) if test else float("nan")
            for key in ("all", "shape", "size", "color"):
                m[f"{key}_acc_010_011"] = float(np.mean([m[f"{key}_acc_010"], m[f"{key}_acc_011"]]))
        tables = {"per_node": pd.DataFrame(rows)} if rows else {}
        return EvalResult(m, tables)
