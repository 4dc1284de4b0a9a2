"""The concept classifier: the evaluator that judges a generated image's shape, size and colour.

A small CNN trained once on renders of all 8 nodes (never on the generator's
outputs; the generator never sees it), with Gaussian noise of a random level
(up to ``noise``) added to each training image so imperfect samples are still
judged by their shape rather than their texture. A fourth output says whether
the image holds an object at all: trained on the renders (object) against
no-object images (Gaussian noise of random mean and spread, clamped to [0, 1];
dark blanks included), so a generator's noise-like sample is not read as a
circle or a triangle (the shape logit of pure noise is meaningless). It is cached by its spec
(resolution, renderer jitter, training settings, :data:`VERSION`) as
``concept-classifier-<hash>.safetensors`` plus a JSON with its held-out
accuracy, under ``task.classifier_dir`` or ``$ANCHORLAB_CACHE/concepts``; a
file lock makes concurrent runs train it once.

``ConceptClassifier(images (B, 3, H, W)) -> logits (B, 4)``: one per bit
(shape, size, color) and one for "an object is there"; each is 1 where its
logit is > 0.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from anchorlab.io import atomic_write, write_json
from anchorlab.tasks.concepts.render import NODES, Jitter, render_nodes

log = logging.getLogger(__name__)
VERSION = 2
OUTPUTS = ("shape", "size", "color", "object")


@dataclass(frozen=True)
class ClassifierSpec:
    """How the evaluator is trained: ``per_node`` renders of each of the 8 nodes (seed ``seed``; the held-out
    set uses ``seed + 1``), ``steps`` Adam steps of ``batch`` at ``lr``, noise level ~ U(0, ``noise``); a
    fraction ``negatives`` of each batch is no-object images (:func:`no_object_images`)."""

    resolution: int = 32
    jitter: Jitter = Jitter()
    per_node: int = 400
    heldout_per_node: int = 250
    steps: int = 500
    batch: int = 128
    lr: float = 2e-3
    noise: float = 0.15
    negatives: float = 0.25
    seed: int = 1_000_003

    def key(self) -> str:
        blob = json.dumps({"version": VERSION, **dataclasses.asdict(self)}, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


class ConceptClassifier(nn.Module):
    """Three conv stages (3x3 conv, GELU, 2x2 max-pool), a 4x4 adaptive average pool and a linear read-out."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        c = (3, width, 2 * width, 4 * width)
        layers: list[nn.Module] = []
        for a, b in zip(c[:-1], c[1:]):
            layers += [nn.Conv2d(a, b, 3, padding=1), nn.GELU(), nn.MaxPool2d(2)]
        self.features = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(4), nn.Flatten())
        self.head = nn.Linear(4 * width * 16, len(OUTPUTS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def no_object_images(n: int, resolution: int, gen: torch.Generator) -> torch.Tensor:
    """(n, 3, H, W) images with no shape: clamp(mu + sigma * N(0, 1), 0, 1) per image, mu ~ U(-0.5, 0.5),
    sigma ~ U(0.05, 1.0) (from near-black blanks to full-range noise, like an untrained generator's samples)."""
    mu = torch.rand(n, 1, 1, 1, generator=gen) - 0.5
    sigma = 0.05 + 0.95 * torch.rand(n, 1, 1, 1, generator=gen)
    return (mu + sigma * torch.randn(n, 3, resolution, resolution, generator=gen)).clamp(0, 1)


def _data(spec: ClassifierSpec, per_node: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    r = render_nodes(NODES, per_node, spec.resolution, seed, spec.jitter)
    return torch.from_numpy(r.images), torch.from_numpy(r.bits).float()


@torch.no_grad()
def predict(model: nn.Module, images: torch.Tensor, batch: int = 256) -> torch.Tensor:
    """(N, 3, H, W) images (clamped to [0, 1]) -> (N, 4) int64: bits (shape, size, color), then 1 if an object."""
    model.eval()
    out = []
    for s in range(0, len(images), batch):
        x = images[s:s + batch].float().clamp(0, 1)
        out.append((model(x) > 0).long().cpu())
    return torch.cat(out) if out else torch.zeros(0, len(OUTPUTS), dtype=torch.long)


def train_classifier(spec: ClassifierSpec) -> tuple[ConceptClassifier, dict]:
    """Train the evaluator; return it and ``{"heldout_acc": {shape, size, color, all, object, no_object},
    "seconds", "steps"}`` (``object``: renders judged objects; ``no_object``: no-object images judged empty)."""
    t0 = time.perf_counter()
    gen = torch.Generator().manual_seed(spec.seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        model = ConceptClassifier()
    x, y = _data(spec, spec.per_node, spec.seed)
    opt = torch.optim.Adam(model.parameters(), lr=spec.lr)
    bce = nn.functional.binary_cross_entropy_with_logits
    n_neg = int(round(spec.negatives * spec.batch))
    n_pos = spec.batch - n_neg
    is_object = torch.cat([torch.ones(n_pos), torch.zeros(n_neg)])
    model.train()
    for step in range(spec.steps):
        idx = torch.randint(0, len(x), (n_pos,), generator=gen)
        level = torch.rand(n_pos, 1, 1, 1, generator=gen) * spec.noise
        xb = torch.cat([x[idx] + level * torch.randn(x[idx].shape, generator=gen),
                        no_object_images(n_neg, spec.resolution, gen)])
        lr = spec.lr * 0.5 * (1 + np.cos(np.pi * step / spec.steps))
        for g in opt.param_groups:
            g["lr"] = lr
        logits = model(xb)
        loss = bce(logits[:n_pos, :3], y[idx]) + bce(logits[:, 3], is_object)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    xh, yh = _data(spec, spec.heldout_per_node, spec.seed + 1)
    pred = predict(model, xh)
    right = (pred[:, :3] == yh.long()).float()
    acc = {name: float(right[:, i].mean()) for i, name in enumerate(("shape", "size", "color"))}
    acc["all"] = float(right.all(dim=1).float().mean())
    acc["object"] = float(pred[:, 3].float().mean())
    empty = no_object_images(len(xh), spec.resolution, torch.Generator().manual_seed(spec.seed + 2))
    acc["no_object"] = float(1 - predict(model, empty)[:, 3].float().mean())
    info = {"heldout_acc": acc, "seconds": time.perf_counter() - t0, "steps": spec.steps,
            "spec": dataclasses.asdict(spec), "version": VERSION}
    log.info("concept classifier: held-out accuracy %s in %.1f s", acc, info["seconds"])
    return model.eval(), info


def default_dir() -> Path:
    from anchorlab.datasets import default_cache_dir
    return default_cache_dir() / "concepts"


def load_or_train(spec: ClassifierSpec, directory: str | Path | None = None) -> tuple[ConceptClassifier, dict]:
    """The cached evaluator for ``spec`` (trained and saved on first use; concurrent callers wait for one)."""
    from safetensors.torch import load_file, save_file

    d = Path(directory).expanduser() if directory else default_dir()
    d.mkdir(parents=True, exist_ok=True)
    stem = d / f"concept-classifier-{spec.key()}"
    weights, meta = stem.with_suffix(".safetensors"), stem.with_suffix(".json")
    with open(stem.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if weights.exists() and meta.exists():
            model = ConceptClassifier()
            model.load_state_dict(load_file(str(weights)))
            return model.eval(), json.loads(meta.read_text())
        model, info = train_classifier(spec)
        atomic_write(weights, lambda p: save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(p)))
        write_json(meta, info)
        return model, info
