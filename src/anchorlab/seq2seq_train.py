"""Training decoder-only transformers on SCAN and COGS (journal Fig. 7A,B).

A run mirrors the anchor-task loop (:mod:`anchorlab.train.loop`): the same run
directory (config.yaml, param_table.csv, metrics.jsonl, checkpoint.pt,
model.safetensors, final.json with the same keys) and the same resume
guarantee. Pairs become rows ``[input] <sep> [output] <eos>`` (see
:mod:`anchorlab.tasks.seq2seq`); the loss covers output tokens and ``<eos>``
only.

Evaluation sets:

* SCAN ``addprim_turn_left`` has only train and test files: ``id`` is the
  training subset the model saw (fit), ``ood`` is the test file (every command
  with "turn left" in a composition).
* COGS: ``id`` is ``test.tsv`` (in-distribution), ``ood`` is ``gen.tsv`` (21
  generalization types), with per-type and per-class (structural / lexical)
  exact match.

Metrics (every ``train.eval_every`` steps and at the end): ``id_exact``,
``ood_exact`` (greedy decoding, whole output equal), ``id_token_acc``,
``ood_token_acc`` (teacher forced), ``ood_exact/<type>``,
``ood_exact/structural``, ``ood_exact/lexical`` (COGS) and ``train_loss``.

Derived sizes: the vocabulary is built from the whole training file (inputs
and outputs; unseen words map to ``<unk>``), so it does not change with
``task.train_size``; ``model.vocab_size`` and ``model.max_len`` are filled in
from the data when a config leaves them out, and an explicit value that is too
small fails with :class:`~anchorlab.config.ConfigError` naming the field.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
import torch

from .config import (ConfigError, InitConfig, ModelConfig, OptimConfig, TrainConfig, _check_choice,
                     _check_range, apply_overrides, dump_config, from_dict, load_yaml, to_dict)
from .io import write_text
from .model.transformer import Transformer
from .tasks.seq2seq import (EncodedPairs, Vocab, encode_pairs, exact_match, greedy_decode, prompt_batches,
                            masked_lm_loss)
from .train.fit import fit
from .train.loop import finalize, numerics, pick_device

log = logging.getLogger(__name__)

DATASETS = ("scan", "cogs")
EVAL_SEED = 20_240_601  # fixed: every run evaluates the same capped subsets


# --------------------------------------------------------------------------- config
@dataclass(frozen=True)
class Seq2SeqTaskConfig:
    """Which seq2seq benchmark, how much of its training data, how to evaluate.

    ``train_size``: a random subset of the training file of this size, drawn
    with ``train.data_seed`` (0 = all) — the training-set-size axis of journal
    Fig. 7A,B. For COGS with ``keep_primitives`` the subset always holds the
    ``primitive`` and ``exposure_example_*`` rows (195 rows; the only rows that
    show the words the lexical generalization types test) and fills the rest
    from ``in_distribution`` rows. ``eval_max`` caps the evaluated examples per
    set (0 = all); capped sets are drawn with a fixed seed, stratified by row
    type, so every run sees the same examples. ``max_new_tokens`` bounds greedy
    decoding (0 = longest target in the data + 1). ``data_dir`` is where the
    files are (None: ``$ANCHORLAB_DATA_DIR`` or the download cache); it is not
    part of the run id.
    """

    dataset: str = "scan"
    split: str = "addprim_turn_left"
    fmt: str = "varfree"
    train_size: int = 0
    keep_primitives: bool = True
    data_dir: str | None = None
    eval_max: int = 0
    max_new_tokens: int = 0
    eval_batch_size: int = 256

    def __post_init__(self) -> None:
        from .tasks.cogs import FORMATS
        from .tasks.scan import SPLIT_FILES

        p = "task"
        _check_choice(f"{p}.dataset", self.dataset, DATASETS)
        _check_choice(f"{p}.split", self.split, tuple(SPLIT_FILES))
        _check_choice(f"{p}.fmt", self.fmt, FORMATS)
        for name in ("train_size", "eval_max", "max_new_tokens"):
            _check_range(f"{p}.{name}", getattr(self, name), 0)
        _check_range(f"{p}.eval_batch_size", self.eval_batch_size, 1)


@dataclass(frozen=True)
class Seq2SeqExperimentConfig:
    """A whole seq2seq run: task, model, init, optim, train (the last four as in the anchor runs)."""

    name: str = "seq2seq"
    task: Seq2SeqTaskConfig = field(default_factory=Seq2SeqTaskConfig)
    model: ModelConfig = field(default_factory=lambda: ModelConfig(arch="gpt2", activation="gelu"))
    init: InitConfig = field(default_factory=InitConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    def run_id(self) -> str:
        """Stable 12-hex hash of the config (``name`` and ``task.data_dir`` excluded)."""
        d = self.to_dict()
        d.pop("name", None)
        d["task"].pop("data_dir", None)
        blob = json.dumps(d, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


AUTO_MODEL_FIELDS = ("vocab_size", "max_len")


def seq2seq_from_dict(data: Mapping[str, Any] | None, overrides: Sequence[str] = (),
                      derive: bool = True) -> Seq2SeqExperimentConfig:
    """Mapping (+ dotted overrides) -> validated config.

    With ``derive`` (default), ``model.vocab_size`` / ``model.max_len`` left out
    (or set to ``auto``) are filled from the data, and explicit ones are
    checked against it; this reads the data files (cached per process).
    """
    d = apply_overrides(dict(data or {}), list(overrides))
    model = d.setdefault("model", {})
    if not isinstance(model, dict):
        raise ConfigError(f"model: expected a mapping of ModelConfig fields, got {model!r}")
    task = from_dict(Seq2SeqTaskConfig, d.get("task") or {}, "task")  # task errors first
    missing = [k for k in AUTO_MODEL_FIELDS if model.get(k, "auto") in ("auto", None)]
    if missing and not derive:
        raise ConfigError(f"model.{missing[0]}: must be set when derive=False")
    if derive:
        dims = data_dims(task)
        for k in missing:
            model[k] = dims[k]
    cfg = from_dict(Seq2SeqExperimentConfig, d)
    if derive:
        check_dims(cfg.model, dims)
    return cfg


def load_seq2seq_config(path_or_preset: str | Path, overrides: Sequence[str] = ()) -> Seq2SeqExperimentConfig:
    """YAML file or preset name (``scan/cpu``, ``cogs/paper``, ...) + overrides -> config."""
    return seq2seq_from_dict(load_yaml(path_or_preset), overrides)


def check_dims(model: ModelConfig, dims: Mapping[str, int]) -> None:
    """Raise ConfigError naming ``model.vocab_size`` / ``model.max_len`` if smaller than the data needs."""
    if model.vocab_size < dims["vocab_size"]:
        raise ConfigError(f"model.vocab_size: the data needs {dims['vocab_size']} tokens, got "
                          f"{model.vocab_size}; leave it out to derive it")
    if model.max_len < dims["max_len"]:
        raise ConfigError(f"model.max_len: the data needs {dims['max_len']} positions (longest row, "
                          f"or longest prompt + task.max_new_tokens - 1), got {model.max_len}; "
                          "leave it out to derive it")


# ----------------------------------------------------------------------------- data
Row = tuple[str, str, str]  # (input, output, type); type "" where a dataset has none


@functools.lru_cache(maxsize=8)
def _raw(dataset: str, split: str, fmt: str, data_dir: str | None) -> dict[str, tuple[Row, ...]]:
    """The files as rows: {"train", "test", ["gen"]} (read once per process)."""
    if dataset == "scan":
        from .tasks.scan import load_scan_split

        s = load_scan_split(split, data_dir)
        return {k: tuple((a, b, "") for a, b in v) for k, v in s.items()}
    from .tasks.cogs import load_cogs

    c = load_cogs(fmt, data_dir)
    return {k: tuple((r.sentence, r.lf, r.type) for r in c[k]) for k in ("train", "test", "gen") if k in c}


def raw_splits(task: Seq2SeqTaskConfig) -> dict[str, tuple[Row, ...]]:
    return _raw(task.dataset, task.split, task.fmt, task.data_dir)


def _eval_files(task: Seq2SeqTaskConfig) -> dict[str, str]:
    """Eval set -> file split it comes from ("train" means the training subset)."""
    return {"id": "train", "ood": "test"} if task.dataset == "scan" else {"id": "test", "ood": "gen"}


def data_dims(task: Seq2SeqTaskConfig) -> dict[str, int]:
    """Sizes the data needs: vocab_size, max_len, max_new_tokens (independent of seeds and caps)."""
    raw = raw_splits(task)
    vocab = Vocab.from_pairs((a, b) for a, b, _ in raw["train"])
    lens = lambda rows, f: max((f(r) for r in rows), default=0)  # noqa: E731
    all_rows = [r for rows in raw.values() for r in rows]
    out_len = lambda r: len(r[1].split())  # noqa: E731
    max_new = task.max_new_tokens or lens(all_rows, out_len) + 1
    eval_rows = [r for name in _eval_files(task).values() if name in raw for r in raw[name]]
    prompt = lens(eval_rows, lambda r: len(r[0].split()) + 1)
    full = lens(all_rows, lambda r: len(r[0].split()) + len(r[1].split()) + 2)
    return {"vocab_size": len(vocab), "max_len": max(full, prompt + max_new - 1), "max_new_tokens": max_new}


@dataclass
class EvalSet:
    """Pairs to evaluate, their row types (COGS) and their teacher-forcing encoding."""

    pairs: list[tuple[str, str]]
    types: list[str]
    encoded: EncodedPairs


@dataclass
class Seq2SeqData:
    """Everything a run needs from the data; ``train.tokens`` is (N, T_train) right-padded."""

    vocab: Vocab
    train_pairs: list[tuple[str, str]]
    train: EncodedPairs
    row_len: torch.Tensor  # (N,) tokens in each training row (prompt + output + <eos>)
    eval_sets: dict[str, EvalSet]
    max_new_tokens: int

    def dims(self) -> dict[str, int]:
        """vocab_size and max_len these data need (rows, and decoding up to max_new_tokens)."""
        need = [int(self.row_len.max())]
        for es in self.eval_sets.values():
            if len(es.pairs):
                need += [es.encoded.tokens.shape[1],
                         int(es.encoded.prompt_len.max()) + self.max_new_tokens - 1]
        return {"vocab_size": len(self.vocab), "max_len": max(need)}


def _subset(rows: Sequence[Row], size: int, rng: np.random.Generator, keep_types: bool) -> list[Row]:
    if size == 0:
        return list(rows)
    if size > len(rows):
        raise ConfigError(f"task.train_size: at most {len(rows)} (the training file), got {size}")
    keep = [i for i, r in enumerate(rows) if keep_types and r[2] and r[2] != "in_distribution"]
    if len(keep) > size:
        raise ConfigError(f"task.train_size: must be >= {len(keep)} to hold the primitive/exposure "
                          f"rows (or set task.keep_primitives=false), got {size}")
    kept = set(keep)
    rest = np.array([i for i in range(len(rows)) if i not in kept])
    chosen = keep + rest[rng.permutation(len(rest))[:size - len(keep)]].tolist()
    return [rows[i] for i in sorted(chosen)]


def _cap(rows: Sequence[Row], cap: int) -> list[Row]:
    """At most ``cap`` rows, fixed seed, round-robin over row types (all rows if cap is 0)."""
    if cap == 0 or cap >= len(rows):
        return list(rows)
    rng = np.random.default_rng(EVAL_SEED)
    by_type: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_type.setdefault(r[2], []).append(i)
    queues = [[idx[j] for j in rng.permutation(len(idx))] for _, idx in sorted(by_type.items())]
    chosen: list[int] = []
    depth = 0
    while len(chosen) < cap:
        chosen += [q[depth] for q in queues if depth < len(q)][:cap - len(chosen)]
        depth += 1
    return [rows[i] for i in sorted(chosen)]


def prepare_data(task: Seq2SeqTaskConfig, data_seed: int) -> Seq2SeqData:
    """Vocabulary, training subset (seeded by ``data_seed``) and capped eval sets."""
    raw = raw_splits(task)
    dims = data_dims(task)
    vocab = Vocab.from_pairs((a, b) for a, b, _ in raw["train"])
    train_rows = _subset(raw["train"], task.train_size, np.random.default_rng(data_seed),
                         task.keep_primitives and task.dataset == "cogs")
    train_pairs = [(a, b) for a, b, _ in train_rows]
    enc = encode_pairs(train_pairs, vocab)
    row_len = torch.tensor([len(a.split()) + len(b.split()) + 2 for a, b in train_pairs])
    evals = {}
    for name, source in _eval_files(task).items():
        if source not in raw:
            log.warning("%s: no %s split in the data; skipping the %s metrics", task.dataset, source, name)
            continue
        rows = _cap(train_rows if source == "train" else raw[source], task.eval_max)
        pairs = [(a, b) for a, b, _ in rows]
        evals[name] = EvalSet(pairs, [t for _, _, t in rows], encode_pairs(pairs, vocab, max_len=None))
    log.info("%s: %d training pairs, eval sets %s, vocab %d", task.dataset, len(train_pairs),
             {k: len(v.pairs) for k, v in evals.items()}, len(vocab))
    return Seq2SeqData(vocab, train_pairs, enc, row_len, evals, dims["max_new_tokens"])


# ------------------------------------------------------------ incremental decoding
def _attend(attn: torch.nn.Module, x: torch.Tensor, cache: list[torch.Tensor] | None,
            blocked: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """``attn`` on new positions x (B, t, d) with keys/values cached (B, H, S_old, d_head).

    ``blocked`` (B, t, S) is True where a query may not read a key.
    """
    q, k, v = attn._split(attn.W_Q(x)), attn._split(attn.W_K(x)), attn._split(attn.W_V(x))
    if cache is not None:
        k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
    scores = q @ k.transpose(-1, -2) / math.sqrt(attn.d_head)             # (B, H, t, S)
    scores = scores.masked_fill(blocked[:, None], float("-inf"))
    z = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)
    return attn.W_O(z), [k, v]


def _forward_cached(model: Transformer, tokens: torch.Tensor, pos: torch.Tensor, blocked: torch.Tensor,
                    caches: list[list[torch.Tensor] | None]) -> torch.Tensor:
    """Logits (B, V) at the last of ``tokens`` (B, t) whose positions are ``pos`` (B, t).

    Same computation as ``Transformer.forward`` (both archs), without hooks;
    ``blocked`` (B, t, S) masks keys; ``caches`` (one per layer) grow in place.
    """
    x = model.embed(tokens) + model.pos_embed(pos)
    for i, blk in enumerate(model.blocks):
        if blk.pre_ln:
            a, caches[i] = _attend(blk.attn, blk.ln_attn(x), caches[i], blocked)
            x = x + a
            x = x + blk.mlp(blk.ln_mlp(x))
        else:
            a, caches[i] = _attend(blk.attn, x, caches[i], blocked)
            x = blk.ln_attn(x + a)
            x = blk.ln_mlp(blk.mlp(x) + x)
    if model.ln_final is not None:
        x = model.ln_final(x)
    return model.readout(x[:, -1])


@torch.no_grad()
def cached_greedy_decode(model: Transformer, prompts: Sequence[str], vocab: Vocab, max_new_tokens: int,
                         batch_size: int = 256, device: torch.device | str | None = None) -> list[str]:
    """Greedy decoding with a key/value cache; same results as :func:`greedy_decode`.

    Prompts (``[tokens] <sep>``) are batched by length and left-padded: each
    row's positions still start at 0 after its pads (as in training), and no
    real token attends to a pad (a pad attends only to itself, which keeps its
    garbage finite), so a row's result equals decoding it alone. All rows of
    a batch then advance in lockstep, one position per new token. Hook points
    do not fire.
    """
    encoded, batches = prompt_batches(prompts, vocab, max_new_tokens, batch_size)
    results = [""] * len(encoded)
    for idx in batches:
        B, P = len(idx), len(encoded[idx[-1]])
        lens = torch.tensor([len(encoded[i]) for i in idx], device=device)           # (B,)
        tok = torch.full((B, P), vocab.pad_id, dtype=torch.long, device=device)
        for r, i in enumerate(idx):
            tok[r, P - len(encoded[i]):] = torch.tensor(encoded[i], dtype=torch.long)
        col = torch.arange(P, device=device)
        pad = col[None, :] < (P - lens)[:, None]                                     # (B, P) left pads
        pos = (col[None, :] - (P - lens)[:, None]).clamp(min=0)                      # (B, P)
        future = col[None, :] > col[:, None]                                         # (P, P)
        blocked = future[None] | (pad[:, None, :] & ~torch.eye(P, dtype=torch.bool, device=device))
        caches: list[list[torch.Tensor] | None] = [None] * len(model.blocks)
        out = torch.zeros(B, max_new_tokens, dtype=torch.long, device=device)
        done = torch.zeros(B, dtype=torch.bool, device=device)
        n = torch.zeros(B, dtype=torch.long, device=device)  # tokens kept per row
        for step in range(max_new_tokens):
            logits = _forward_cached(model, tok, pos, blocked, caches)
            nxt = logits[:, :len(vocab)].argmax(-1)  # (B,); ids past the vocab never win
            done |= nxt == vocab.eos_id
            out[:, step] = nxt
            n += (~done).long()
            if bool(done.all()):
                break
            tok, pos = nxt[:, None], (lens + step)[:, None]
            pad = torch.cat([pad, torch.zeros(B, 1, dtype=torch.bool, device=device)], dim=1)
            blocked = pad[:, None, :]                                                # (B, 1, S)
        for r, i in enumerate(idx):
            results[i] = vocab.decode(out[r, :int(n[r])].tolist())
    return results


def data_from_pairs(train_pairs: Sequence[tuple[str, str]],
                    eval_pairs: Mapping[str, Sequence[tuple[str, str]]] | None = None,
                    max_new_tokens: int = 0) -> Seq2SeqData:
    """A :class:`Seq2SeqData` from in-memory pairs (synthetic tasks, tests).

    The vocabulary comes from ``train_pairs``; ``eval_pairs`` maps set names
    (e.g. "id", "ood") to pairs; ``max_new_tokens`` 0 = longest target + 1.
    """
    vocab = Vocab.from_pairs(train_pairs)
    evals = {k: EvalSet(list(v), [""] * len(v), encode_pairs(v, vocab)) for k, v in (eval_pairs or {}).items()}
    every = list(train_pairs) + [p for v in (eval_pairs or {}).values() for p in v]
    max_new = max_new_tokens or max(len(b.split()) for _, b in every) + 1
    return Seq2SeqData(vocab, list(train_pairs), encode_pairs(train_pairs, vocab),
                       torch.tensor([len(a.split()) + len(b.split()) + 2 for a, b in train_pairs]),
                       evals, max_new)


# ------------------------------------------------------------------------ evaluation
def _batches_by_length(lengths: torch.Tensor, batch_size: int) -> list[torch.Tensor]:
    order = torch.argsort(lengths, stable=True)
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


@torch.no_grad()
def teacher_forced_accuracy(model: torch.nn.Module, enc: EncodedPairs, batch_size: int = 256,
                            device: torch.device | str = "cpu", vocab_size: int | None = None) -> float:
    """Fraction of loss-mask positions (output tokens and <eos>) predicted right, teacher forced.

    enc.tokens (N, T); rows are run in batches of similar length, trimmed to
    their longest row. ``vocab_size`` restricts the argmax to real tokens.
    """
    lengths = (enc.tokens != 0).sum(1)
    correct = total = 0
    for idx in _batches_by_length(lengths, batch_size):
        T = int(lengths[idx].max())
        tok = enc.tokens[idx, :T].to(device)
        m = enc.loss_mask[idx, :T].to(device)[:, :-1]
        pred = model(tok)[:, :-1, :vocab_size].argmax(-1)
        correct += int(((pred == tok[:, 1:]) & m).sum())
        total += int(m.sum())
    return correct / total if total else float("nan")


@torch.no_grad()
def evaluate_seq2seq(model: Transformer, data: Seq2SeqData, batch_size: int = 256,
                     device: torch.device | str = "cpu", cached: bool = True
                     ) -> tuple[dict[str, float], dict[str, list[str]]]:
    """Metrics of every eval set, and the decoded predictions per set.

    ``cached`` decodes with :func:`cached_greedy_decode`, else with the
    reference :func:`~anchorlab.tasks.seq2seq.greedy_decode` (hooks fire).
    """
    from .tasks.cogs import cogs_accuracy

    was_training = model.training
    model.eval()
    metrics: dict[str, float] = {}
    preds: dict[str, list[str]] = {}
    for name, es in data.eval_sets.items():
        metrics[f"{name}_token_acc"] = teacher_forced_accuracy(model, es.encoded, batch_size, device,
                                                               len(data.vocab))
        V = len(data.vocab)
        fn = model if cached else (lambda t: model(t)[..., :V])  # noqa: E731 (ids past the vocab never win)
        decode = cached_greedy_decode if cached else greedy_decode
        out = decode(fn, [a for a, _ in es.pairs], data.vocab, data.max_new_tokens,
                            batch_size=batch_size, device=device)
        preds[name] = out
        metrics[f"{name}_exact"] = exact_match(out, [b for _, b in es.pairs])
        if name == "ood" and any(es.types):
            from .tasks.cogs import CogsRecord

            table = cogs_accuracy([CogsRecord(a, b, t) for (a, b), t in zip(es.pairs, es.types)], out)
            for level in ("class", "type"):
                for _, r in table[table.level == level].iterrows():
                    metrics[f"ood_exact/{r.group}"] = float(r.accuracy)
    model.train(was_training)
    return metrics, preds


# -------------------------------------------------------------------------- training
def _config_from_yaml(path: Path) -> Seq2SeqExperimentConfig:
    import yaml

    return seq2seq_from_dict(yaml.safe_load(path.read_text()), derive=False)


def _check_dir(run_dir: Path, cfg: Seq2SeqExperimentConfig) -> None:
    p = run_dir / "config.yaml"
    if p.exists():
        old = _config_from_yaml(p)
        if old.run_id() != cfg.run_id():
            raise ConfigError(f"out_dir {run_dir}: holds a different run ({old.run_id()} != "
                              f"{cfg.run_id()}); use another directory")


def run_seq2seq(cfg: Seq2SeqExperimentConfig, out_dir: str | Path, *, progress: bool = False,
                stop_after_step: int | None = None, data: Seq2SeqData | None = None) -> dict[str, Any]:
    """Train one model; write the run directory; return the final.json dict.

    Re-running on the same directory resumes from the checkpoint (same numbers
    as an uninterrupted run). ``stop_after_step`` ends the loop after the
    checkpoint at that step without writing final.json (to test resume).
    ``data`` (see :func:`data_from_pairs`) replaces the data named by
    ``cfg.task``; the run id then does not describe the data — use a fresh
    directory per data set.
    """
    run_dir = Path(out_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    _check_dir(run_dir, cfg)
    write_text(run_dir / "config.yaml", dump_config(cfg))
    device = pick_device(cfg.train.device)
    with numerics(cfg, device):
        return _train(cfg, run_dir, device, progress, stop_after_step, data)


def _train(cfg: Seq2SeqExperimentConfig, run_dir: Path, device: torch.device, progress: bool,
           stop_after_step: int | None, data: Seq2SeqData | None) -> dict[str, Any]:
    if data is None:
        check_dims(cfg.model, data_dims(cfg.task))
        data = prepare_data(cfg.task, cfg.train.data_seed)
    else:
        check_dims(cfg.model, data.dims())
    tokens, mask = data.train.tokens.to(device), data.train.loss_mask.to(device)
    row_len = data.row_len.to(device)

    def batch_loss(fwd, idx: torch.Tensor) -> torch.Tensor:
        T = int(row_len[idx].max())  # trim the batch to its longest row
        return masked_lm_loss(fwd(tokens[idx, :T]), tokens[idx, :T], mask[idx, :T])  # outputs only

    def evaluate(model: torch.nn.Module) -> dict[str, float]:
        te = time.perf_counter()
        metrics, _ = evaluate_seq2seq(model, data, cfg.task.eval_batch_size, device)
        log.info("%s: id %.3f ood %.3f (eval %.1fs)", cfg.name, metrics.get("id_exact", math.nan),
                 metrics.get("ood_exact", math.nan), time.perf_counter() - te)
        return {**metrics, "eval_seconds": time.perf_counter() - te}

    r = fit(cfg, run_dir, device, n_train=len(data.train), batch_loss=batch_loss, evaluate=evaluate,
            progress=progress, stop_after_step=stop_after_step, postfix=("id_exact", "ood_exact"))
    if r.status == "interrupted":
        return {"status": "interrupted", "step": r.step}
    history = [{k: v for k, v in h.items() if k != "eval_seconds"} for h in r.history]
    return finalize(cfg, run_dir, history, r.status, r.wall_seconds, r.step)


def final_table(finals: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per run: dataset, train_size, gamma, weight decay, final metrics, wall seconds."""
    rows = []
    for f in finals:
        c = f["config"]
        rows.append({"run_id": f["run_id"], "name": f.get("name"), "dataset": c["task"]["dataset"],
                     "train_size": c["task"]["train_size"], "gamma": c["init"]["gamma"],
                     "weight_decay": c["optim"]["weight_decay"], "status": f["status"],
                     "steps": f.get("steps"), **f["final"], "wall_seconds": f["wall_seconds"]})
    return pd.DataFrame(rows)
