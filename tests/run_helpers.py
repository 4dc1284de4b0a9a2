"""Helpers the training tests share."""

from pathlib import Path


def train_stop_resume(cfg, root: Path, stop_after_step: int = 16):
    """``cfg`` trained in full into ``root/full``, and again into ``root/resumed``, stopped after
    ``stop_after_step`` and resumed: -> (full, stopped, resumed) final records."""
    from anchorlab.train import train

    full = train(cfg, root / "full").final
    part = train(cfg, root / "resumed", stop_after_step=stop_after_step).final
    return full, part, train(cfg, root / "resumed").final
