"""DDPM pieces of the concepts task, on diffusers' schedulers: training batches with their noise, and sampling.

``DiffusionData.batch(idx)`` returns ``x0`` (B, 3, H, W), ``cond`` (B, D) and
the batch's ``noise`` (B, 3, H, W) and time steps ``t`` (B,), drawn from a
generator seeded by the data seed and the batch's row indices: the noise is a
function of the data order (itself a function of the data seed and epoch),
so a resumed run draws exactly the noise an uninterrupted one would.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import torch

from anchorlab.model.unet import require_diffusers


def make_scheduler(cfg, sampler: str = "ddpm"):
    """diffusers' DDPMScheduler (or DDIMScheduler, eta 0 when stepping) for a task config; no clipping."""
    d = require_diffusers()
    kw = dict(num_train_timesteps=cfg.timesteps, beta_start=cfg.beta_start, beta_end=cfg.beta_end,
              beta_schedule=cfg.beta_schedule, clip_sample=False)
    return d.DDPMScheduler(**kw) if sampler == "ddpm" else d.DDIMScheduler(**kw)


def batch_generator(seed: int, idx: torch.Tensor) -> torch.Generator:
    """A CPU generator seeded by ``seed`` and the row indices of a batch."""
    h = hashlib.blake2b(np.int64(seed).tobytes() + idx.detach().cpu().numpy().astype(np.int64).tobytes(),
                        digest_size=8)
    return torch.Generator().manual_seed(int.from_bytes(h.digest(), "little") & (2**63 - 1))


@dataclass
class DiffusionData:
    """Training rows (images, conditions) and the rule that draws each batch's noise and time steps."""

    x0: torch.Tensor       # (N, 3, H, W) in [0, 1]
    cond: torch.Tensor     # (N, D)
    seed: int
    timesteps: int

    def __len__(self) -> int:
        return int(self.x0.shape[0])

    def to(self, device: torch.device | str) -> "DiffusionData":
        return DiffusionData(self.x0.to(device), self.cond.to(device), self.seed, self.timesteps)

    def batch(self, idx: torch.Tensor) -> dict[str, torch.Tensor]:
        g = batch_generator(self.seed, idx)
        x0 = self.x0[idx]
        noise = torch.randn(x0.shape, generator=g).to(x0.device)
        t = torch.randint(0, self.timesteps, (len(idx),), generator=g).to(x0.device)
        return {"x0": x0, "cond": self.cond[idx], "noise": noise, "t": t}


def noised(scheduler, x0: torch.Tensor, noise: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) noise (the scheduler's forward process)."""
    return scheduler.add_noise(x0, noise, t)


@torch.no_grad()
def sample(model: torch.nn.Module, cond: torch.Tensor, shape: tuple[int, int, int], cfg, seed: int,
           device: torch.device | str = "cpu", batch: int = 64) -> torch.Tensor:
    """Generate one image per row of ``cond`` (N, D) -> (N, C, H, W) on the CPU, through the scheduler.

    The start noise and DDPM's step noise come from a CPU generator seeded with
    ``seed``, so the samples do not depend on the device. ``cfg``: the task
    config (scheduler, ``sampler``, ``sample_steps``).
    """
    was_training = model.training
    model.eval()
    sched = make_scheduler(cfg, cfg.sampler)
    sched.set_timesteps(cfg.sample_steps or cfg.timesteps)
    gen = torch.Generator().manual_seed(seed)
    out = []
    try:
        for s in range(0, len(cond), batch):
            c = cond[s:s + batch].to(device)
            x = torch.randn((len(c), *shape), generator=gen).to(device)
            for t in sched.timesteps:
                eps = model(x, t.expand(len(c)).to(device), c)
                if cfg.sampler == "ddpm":   # diffusers draws the step's noise from the CPU generator
                    x = sched.step(eps, t, x, generator=gen).prev_sample
                else:
                    x = sched.step(eps, t, x, eta=0.0).prev_sample
            out.append(x.float().cpu())
    finally:
        model.train(was_training)
    return torch.cat(out) if out else torch.zeros((0, *shape))

