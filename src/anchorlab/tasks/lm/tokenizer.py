"""Tokenizers for language modelling (``tokenizers`` library; the ``lm`` extra).

* ``task.tokenizer: bpe`` -- a byte-level BPE (GPT-2's scheme: bytes mapped to
  printable characters, no unknown tokens) trained on the training split with
  ``vocab_size`` tokens, ``<|endoftext|>`` = id 0 separating documents.
  Training is deterministic for the same text in the same order.
* ``task.tokenizer: files`` -- a tokenizer the user has on disk in
  ``task.tokenizer_dir``: a ``tokenizer.json``, or GPT-2's own ``vocab.json`` +
  ``merges.txt``; the document separator is ``<|endoftext|>`` (GPT-2's 50256).

Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from anchorlab.config.base import ConfigError
from anchorlab.extras import require

EOS = "<|endoftext|>"


def train_bpe(texts: Iterable[str], vocab_size: int) -> Any:
    """A byte-level BPE ``tokenizers.Tokenizer`` trained on ``texts`` (``EOS`` is id 0)."""
    tk = require("tokenizers", "task.tokenizer 'bpe'")
    tok = tk.Tokenizer(tk.models.BPE())
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk.decoders.ByteLevel()
    trainer = tk.trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS], show_progress=False,
                                     initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return tok


def load_files(tokenizer_dir: str | Path | None) -> Any:
    """A tokenizer from ``tokenizer.json``, or from GPT-2's ``vocab.json`` + ``merges.txt``, in a directory."""
    tk = require("tokenizers", "task.tokenizer 'files'")
    if tokenizer_dir is None:
        raise ConfigError("task.tokenizer_dir: 'files' needs the directory with tokenizer.json or GPT-2's "
                          "vocab.json + merges.txt")
    d = Path(tokenizer_dir).expanduser()
    if (d / "tokenizer.json").is_file():
        tok = tk.Tokenizer.from_file(str(d / "tokenizer.json"))
    elif (d / "vocab.json").is_file() and (d / "merges.txt").is_file():
        tok = tk.Tokenizer(tk.models.BPE.from_file(str(d / "vocab.json"), str(d / "merges.txt")))
        tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = tk.decoders.ByteLevel()
    else:
        raise ConfigError(f"task.tokenizer_dir: {d} holds neither tokenizer.json nor vocab.json + merges.txt")
    if tok.token_to_id(EOS) is None:
        raise ConfigError(f"task.tokenizer_dir: the tokenizer in {d} has no {EOS!r} token to separate documents")
    return tok


def eos_id(tok: Any) -> int:
    return int(tok.token_to_id(EOS))


def save(tok: Any, path: str | Path) -> str:
    """Write ``tokenizer.json``; return its sha256 (the file's bytes, as the run directory keeps them)."""
    tok.save(str(path))
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def encode_docs(tok: Any, texts: list[str]) -> list[list[int]]:
    """Token ids of each text (no special tokens added)."""
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
