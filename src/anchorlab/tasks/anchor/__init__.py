"""The anchor-function task: config, data, generation and evaluation."""

from .config import AnchorTaskConfig
from .data import SPLITS, AnchorData, pair_label
from .task import AnchorTask

__all__ = ["AnchorTaskConfig", "AnchorData", "AnchorTask", "SPLITS", "pair_label"]
