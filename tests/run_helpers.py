"""Helpers the training tests share."""

from pathlib import Path


def train_stop_resume(cfg, root: Path, stop_after_step: int = 16):
    """``cfg`` trained in full into ``root/full``, and again into ``root/resumed``, stopped after
    ``stop_after_step`` and resumed: -> (full, stopped, resumed) final records."""
    from anchorlab.train import train

    full = train(cfg, root / "full").final
    part = train(cfg, root / "resumed", stop_after_step=stop_after_step).final
    return full, part, train(cfg, root / "resumed").final


def assert_stack_matches_singles(cfgs, tmp_path: Path, path: str, rel: float = 1e-3):
    """Each of ``cfgs`` trained alone and all of them stacked (``train_stack``): the same precision path
    (``path``), losses within ``rel`` step by step, float32 weights that moved from their init and whose
    distance from the single run's is under a tenth of that move. -> the stacked runs' final records."""
    import pytest
    import torch
    from safetensors.torch import load_file

    from anchorlab.train import train
    from anchorlab.train.run import init_model
    from anchorlab.train.stacked import train_stack

    singles = [train(c, tmp_path / f"single{i}").final for i, c in enumerate(cfgs)]
    stacked = train_stack(cfgs, [tmp_path / f"stack{i}" for i in range(len(cfgs))])
    for i, (a, b) in enumerate(zip(singles, stacked)):
        assert b["precision"]["path"] == path and b["status"] == "finished"
        la, lb = ([h["train_loss"] for h in r["history"][1:]] for r in (a, b))
        assert len(lb) == len(la) > 1 and lb == pytest.approx(la, rel=rel)
        wa = load_file(tmp_path / f"single{i}" / "model.safetensors")
        wb = load_file(tmp_path / f"stack{i}" / "model.safetensors")
        w0 = init_model(cfgs[i])[0].state_dict()
        diff = sum(((wb[k] - wa[k]) ** 2).sum() for k in wa) ** 0.5
        moved = sum(((wa[k] - w0[k]) ** 2).sum() for k in wa) ** 0.5
        assert all(wb[k].dtype == torch.float32 for k in wb)
        assert moved > 0.1 and diff < 0.1 * moved, (i, float(diff), float(moved))
    return stacked
