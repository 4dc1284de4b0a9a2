"""The project's AdamW (foreach) makes the same update, to the bit, as torch's per-tensor loop."""

import contextlib

import torch

from anchorlab.config import experiment_from_dict
from anchorlab.tasks.base import build_task
from anchorlab.train.optim import make_optimizer
from anchorlab.train.run import init_model
from anchorlab.train.single import train_step


def test_foreach_adamw_matches_the_per_tensor_loop(tiny_overrides):
    cfg = experiment_from_dict({}, tiny_overrides + ["optim.weight_decay=0.1", "optim.decay=matrices"])
    task = build_task(cfg.task)
    data = task.train_data(0)
    finals = []
    for foreach in (True, False):
        model, _ = init_model(cfg)
        opt = make_optimizer(model, cfg.optim)
        assert opt.defaults["foreach"] is True and len(opt.param_groups) == 2
        for g in opt.param_groups:
            g["foreach"] = foreach
        losses = [train_step(model, model, opt, task, data.batch(torch.arange(i * 64, (i + 1) * 64)),
                             contextlib.nullcontext(), cfg.optim.clip_norm).item() for i in range(4)]
        finals.append((losses, model.state_dict()))
    (la, wa), (lb, wb) = finals
    assert la == lb and len(set(la)) == 4
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    w0 = init_model(cfg)[0].state_dict()
    assert not torch.equal(wa["embed.weight"], w0["embed.weight"])
