"""Token streams of a language-modelling config: tokenizer, packed rows, cache and data manifest.

:func:`lm_data` turns ``(task config, data seed)`` into an :class:`LMData`:
the tokenizer (trained on the training stream, or the user's files), the
training and validation token streams (documents separated by
``<|endoftext|>``, capped at ``train_tokens`` / ``val_tokens``) as flat
memory-mapped arrays, and a manifest (sources with sizes and sha256, what
each split took per source, the tokenizer's sha256). Everything is built once
into ``$ANCHORLAB_CACHE/lm/<key>/`` (atomically, a directory rename) and
reused by every run with the same data; the key covers the config's data
fields, the seed, where the files are and what they hold (local sources:
their content digest; shards: names, sizes and times).

The validation stream does not depend on the data seed (a fixed order), so
runs that differ only in init or optimizer share it token for token.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from anchorlab.config.base import ConfigError
from anchorlab.datasets import default_cache_dir
from anchorlab.tasks.lm.config import LMTaskConfig
from anchorlab.tasks.lm.corpus import (Doc, MixLog, ShardLog, local_docs, local_files, mix_stream, shard_files, slimpajama_docs,
                     tree_digest)
from anchorlab.tasks.lm.tokenizer import encode_docs, eos_id, load_files, save, train_bpe

log = logging.getLogger(__name__)
VAL_SEED = 20_250_715   # validation order: fixed for every data seed
FORMAT = 1              # bump when the cache layout changes
ENCODE_CHUNK = 64       # documents per encode_batch call


@dataclass
class LMData:
    """What a run reads: tokenizer, flat token streams (uint16/uint32 memmaps), manifest, where it is cached."""

    tokenizer: Any
    train: np.ndarray
    val: np.ndarray
    manifest: dict[str, Any]
    path: Path


class PackedRows:
    """Rows of ``seq_len + 1`` consecutive tokens of a flat stream, row i starting at token ``i * seq_len``.

    ``batch(idx)`` -> ``{"tokens": (B, seq_len + 1) int64}`` on the device of
    :meth:`to` (the stream itself stays a CPU memmap).
    """

    def __init__(self, tokens: np.ndarray, seq_len: int, device: torch.device | str = "cpu") -> None:
        self.tokens, self.seq_len, self.device = tokens, seq_len, torch.device(device)
        self._offsets = np.arange(seq_len + 1)

    def __len__(self) -> int:
        return max((len(self.tokens) - 1) // self.seq_len, 0)

    def to(self, device: torch.device | str) -> "PackedRows":
        return PackedRows(self.tokens, self.seq_len, device)

    def batch(self, idx: torch.Tensor) -> dict[str, torch.Tensor]:
        pos = idx.detach().cpu().numpy()[:, None] * self.seq_len + self._offsets
        return {"tokens": torch.from_numpy(self.tokens[pos].astype(np.int64)).to(self.device)}


# ------------------------------------------------------------------ streams
def source_info(cfg: LMTaskConfig) -> dict[str, dict[str, Any]]:
    """Per source: where it is and a fingerprint of its content (local: bytes + sha256 of its files)."""
    out: dict[str, dict[str, Any]] = {}
    if cfg.corpus == "local":
        for s in cfg.sources:
            base, rels = local_files(s, cfg.roots.get(s))
            size, sha = tree_digest(base, rels)
            out[s] = {"root": str(base), "files": len(rels), "bytes": size, "sha256": sha,
                      "sha256_of": "lines 'relpath NUL sha256(file) LF' in path order"}
        return out
    for split in ("train", "val"):
        files, _ = shard_files(cfg.data_dir, split)
        for f in files:
            st = f.stat()
            out.setdefault("shards", {})[str(f)] = {"size": st.st_size, "mtime": int(st.st_mtime)}
    return out


def documents(cfg: LMTaskConfig, split: str, seed: int, mix_log: MixLog, shard_log: ShardLog) -> Iterator[Doc]:
    """The mixed document stream of a split (see :mod:`.corpus`)."""
    w = cfg.sources
    if cfg.corpus == "slimpajama":
        if cfg.mix_by == "natural":
            yield from slimpajama_docs(cfg.data_dir, tuple(w), split, cfg.val_fraction, seed, shard_log)
            return
        streams = {s: slimpajama_docs(cfg.data_dir, (s,), split, cfg.val_fraction, seed, shard_log) for s in w}
        yield from mix_stream(streams, w, mix_log)
        return
    files = {s: local_files(s, cfg.roots.get(s)) for s in w}
    if cfg.mix_by == "natural":   # every file of every source, one seeded order
        pool = [d for s in w for d in local_docs(s, *files[s], split, cfg.val_fraction, seed)]
        yield from (pool[i] for i in np.random.default_rng(seed).permutation(len(pool)))
        return
    streams = {s: local_docs(s, *files[s], split, cfg.val_fraction, seed) for s in w}
    yield from mix_stream(streams, w, mix_log)


def _text_prefix(cfg: LMTaskConfig, seed: int) -> Iterator[str]:
    """The training stream's text up to ``tokenizer_train_mb`` MB (what the BPE is trained on)."""
    budget, n = cfg.tokenizer_train_mb * 1e6, 0
    for _, _, text in documents(cfg, "train", seed, MixLog(), ShardLog()):
        if n >= budget:
            return
        n += len(text.encode("utf-8"))
        yield text


def write_tokens(path: Path, docs: Iterator[Doc], tok: Any, cap: int, dtype: np.dtype) -> dict[str, dict[str, int]]:
    """Encode documents (each followed by EOS) into a flat binary file, at most ``cap`` tokens (0 = all).

    Returns what was written per source: documents, UTF-8 bytes and tokens
    (the document cut by the cap counts as written).
    """
    eos, n = eos_id(tok), 0
    used: dict[str, dict[str, int]] = {}
    with open(path, "wb") as f:
        chunk: list[Doc] = []

        def flush() -> bool:
            nonlocal n
            for (source, _, text), ids in zip(chunk, encode_docs(tok, [d[2] for d in chunk])):
                arr = np.asarray(ids + [eos], dtype=dtype)
                if cap and n + len(arr) >= cap:
                    arr = arr[:cap - n]
                u = used.setdefault(source, {"documents": 0, "bytes": 0, "tokens": 0})
                u["documents"] += 1
                u["bytes"] += len(text.encode("utf-8"))
                u["tokens"] += len(arr)
                f.write(arr.tobytes())
                n += len(arr)
                if cap and n >= cap:
                    return True
            chunk.clear()
            return False

        for doc in docs:
            chunk.append(doc)
            if len(chunk) >= ENCODE_CHUNK and flush():
                return used
        if chunk:
            flush()
    return used


# ------------------------------------------------------------------ build / cache
def data_key(cfg: LMTaskConfig, seed: int, sources: dict[str, Any]) -> str:
    """Cache key: data fields of the config, seed, file locations and content fingerprints, format."""
    from anchorlab.config.base import to_dict

    d = {k: v for k, v in to_dict(cfg).items() if k not in ("eval_batch_size", "name")}
    blob = json.dumps({"cfg": d, "seed": seed, "sources": sources, "format": FORMAT}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def lm_data(cfg: LMTaskConfig, seed: int, cache_dir: str | Path | None = None) -> LMData:
    """The data of ``(cfg, seed)``, built into the cache once (see the module docstring)."""
    sources = source_info(cfg)
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir() / "lm"
    path = root / data_key(cfg, seed, sources)
    if not (path / "manifest.json").exists():
        _build(cfg, seed, sources, path)
    return _load(path)


def _load(path: Path) -> LMData:
    from anchorlab.extras import require

    tk = require("tokenizers", "task 'lm'")
    man = json.loads((path / "manifest.json").read_text())
    dt = np.dtype(man["dtype"])
    arrays = [np.memmap(path / f"{s}.bin", dtype=dt, mode="r") if man["splits"][s]["tokens"] else np.zeros(0, dt)
              for s in ("train", "val")]
    return LMData(tk.Tokenizer.from_file(str(path / "tokenizer.json")), arrays[0], arrays[1], man, path)


def _build(cfg: LMTaskConfig, seed: int, sources: dict[str, Any], path: Path) -> None:
    import tokenizers

    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    log.info("lm data: building %s", path)
    if cfg.tokenizer == "bpe":
        tok = train_bpe(_text_prefix(cfg, seed), cfg.vocab_size)
        tok_info = {"kind": "bpe", "trained_on": f"first {cfg.tokenizer_train_mb} MB of the training stream"}
    else:
        tok = load_files(cfg.tokenizer_dir)
        tok_info = {"kind": "files", "dir": str(cfg.tokenizer_dir)}
    tok_sha = save(tok, tmp / "tokenizer.json")
    vocab = int(tok.get_vocab_size())
    dtype = np.dtype(np.uint16 if vocab <= 1 << 16 else np.uint32)
    splits = {}
    for split, s, cap in (("train", seed, cfg.train_tokens), ("val", VAL_SEED, cfg.val_tokens)):
        mlog, slog = MixLog(), ShardLog()
        used = write_tokens(tmp / f"{split}.bin", documents(cfg, split, s, mlog, slog), tok, cap, dtype)
        n = sum(u["tokens"] for u in used.values())
        splits[split] = {"tokens": n, "rows": max((n - 1) // cfg.seq_len, 0), "per_source": used,
                         "sources_exhausted": mlog.exhausted, "order_seed": s,
                         **({"shards": slog.shards} if slog.shards else {})}
    man = {"corpus": cfg.corpus, "mix": cfg.sources, "mix_by": cfg.mix_by, "seed": seed, "seq_len": cfg.seq_len,
           "dtype": dtype.name, "sources": sources, "splits": splits,
           "tokenizer": {**tok_info, "vocab_size": vocab, "sha256": tok_sha},
           "versions": {"tokenizers": tokenizers.__version__, "format": FORMAT}}
    for split, field_ in (("train", "train_tokens"), ("val", "val_tokens")):
        if not splits[split]["rows"]:
            shutil.rmtree(tmp, ignore_errors=True)
            raise ConfigError(f"task.{field_}: the {split} stream gave {splits[split]['tokens']} tokens, fewer "
                              f"than one row of task.seq_len+1={cfg.seq_len + 1} (a bigger cap or more text)")
    (tmp / "manifest.json").write_text(json.dumps(man, indent=1, sort_keys=True))
    try:
        os.replace(tmp, path)
    except OSError:  # another process built the same data first
        shutil.rmtree(tmp, ignore_errors=True)
