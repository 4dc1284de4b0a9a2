"""``task.name: lm``: next-token prediction on packed sequences of real text (journal Fig. 7D).

Training rows are ``seq_len + 1`` consecutive tokens of the training stream
(documents joined by ``<|endoftext|>``); the loss is the mean next-token cross
entropy over the ``seq_len`` targets of each row. Evaluation: the mean
cross entropy over every target of the fixed validation stream
(``val_loss``, nats per token) and ``val_ppl = exp(val_loss)``. The run
directory gets the tokenizer (``tokenizer.json``) and what was read
(``data_manifest.json``: sources, sizes, sha256, tokens per split).
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import torch
import torch.nn.functional as F

from anchorlab.io import write_json
from anchorlab.tasks.base import EvalResult, Forward, Task
from anchorlab.tasks.lm.config import LMTaskConfig
from anchorlab.tasks.lm.data import LMData, PackedRows, lm_data


def next_token_loss(fwd: Forward, tokens: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Cross entropy of predicting ``tokens[:, 1:]`` from ``tokens[:, :-1]``; tokens (B, T + 1) int64."""
    logits = fwd(tokens[:, :-1])                                        # (B, T, V)
    if logits.dtype not in (torch.float32, torch.float64):               # bf16 autocast: the loss in float32
        logits = logits.float()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1), reduction=reduction)


@torch.no_grad()
def perplexity(model: torch.nn.Module, rows: PackedRows, batch_size: int = 32,
               device: torch.device | str = "cpu") -> tuple[float, float, int]:
    """(mean NLL in nats per token, perplexity = exp(NLL), tokens scored) over every row, in eval mode."""
    was_training = model.training
    model.eval()
    rows = rows.to(device)
    total, count = 0.0, 0
    try:
        for s in range(0, len(rows), batch_size):
            b = rows.batch(torch.arange(s, min(s + batch_size, len(rows))))["tokens"]
            total += float(next_token_loss(model, b, reduction="sum"))
            count += b[:, 1:].numel()
    finally:
        model.train(was_training)
    nll = total / count if count else math.nan
    return nll, math.exp(nll) if count else math.nan, count


class LMTask(Task):
    """The Task protocol for language modelling (see the module docstring)."""

    name = "lm"
    headline = ("train_loss", "val_loss", "val_ppl")
    # Hugging Face models are not vmap-able under functional_call; runs train one by one.
    stackable = False

    def __init__(self, cfg: LMTaskConfig) -> None:
        self.cfg = cfg
        self._data: dict[int, LMData] = {}

    def data(self, seed: int) -> LMData:
        """Tokenizer, token streams and manifest of a data seed (built once into the cache)."""
        if seed not in self._data:
            self._data[seed] = lm_data(self.cfg, seed)
        return self._data[seed]

    def dims(self) -> dict[str, int]:
        return self.cfg.dims()

    def train_data(self, seed: int) -> PackedRows:
        return PackedRows(self.data(seed).train, self.cfg.seq_len)

    def eval_data(self, seed: int) -> PackedRows:
        return PackedRows(self.data(seed).val, self.cfg.seq_len)

    def loss(self, fwd: Forward, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return next_token_loss(fwd, batch["tokens"])

    def evaluate(self, model: torch.nn.Module, eval_data: PackedRows,
                 device: torch.device | str = "cpu") -> EvalResult:
        nll, ppl, _ = perplexity(model, eval_data, self.cfg.eval_batch_size, device)
        return EvalResult({"val_loss": nll, "val_ppl": ppl})

    def write_run_files(self, run_dir: str | Path, seed: int) -> None:
        """Save the tokenizer and the data manifest with the run."""
        d = self.data(seed)
        shutil.copyfile(d.path / "tokenizer.json", Path(run_dir) / "tokenizer.json")
        write_json(Path(run_dir) / "data_manifest.json", {**d.manifest, "cache": str(d.path)})
