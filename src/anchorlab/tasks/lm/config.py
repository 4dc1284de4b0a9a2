"""The config section of ``task.name: lm`` (language modelling on real text, journal Fig. 7D)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from anchorlab.config.base import check_choice, check_range, fail
from anchorlab.config.experiment import TaskConfig
from anchorlab.tasks.lm.corpus import LOCAL_SOURCES, set_name


@dataclass(frozen=True)
class LMTaskConfig(TaskConfig):
    """Next-token prediction on packed fixed-length sequences of a text corpus.

    ``corpus``: ``local`` (offline text on this machine: ``python_stdlib``,
    ``python_docs``) or ``slimpajama`` (shards in ``data_dir``; ``mix`` keys are
    set names such as ``RedPajamaGithub`` / ``github``). ``mix``: source ->
    weight; ``mix_by``: ``bytes`` (each source's share of the text follows its
    weight) or ``natural`` (the chosen sources' documents as the stream has
    them; weights ignored). ``seq_len``: tokens per training sequence (rows of
    ``seq_len + 1`` tokens, consecutive rows overlapping by one, so every token
    after the first is a target once). ``train_tokens`` caps the training
    stream (0 = all of it), ``val_tokens`` the validation stream (0 = all).
    ``val_fraction``: share of documents held out for validation where the
    corpus has no validation split. ``tokenizer``: ``bpe`` (byte-level BPE of
    ``vocab_size`` tokens trained on the first ``tokenizer_train_mb`` MB of the
    training stream) or ``files`` (``tokenizer_dir``: tokenizer.json, or GPT-2's
    vocab.json + merges.txt). ``data_dir``, ``roots`` (local source
    directories) and ``tokenizer_dir`` say where files are and stay out of the
    run id; ``data_manifest.json`` in each run records what was read (sizes,
    sha256).
    """

    name: str = "lm"
    corpus: str = "local"
    mix: dict[str, float] = field(default_factory=lambda: {"python_stdlib": 1.0})
    mix_by: str = "bytes"
    seq_len: int = 128
    train_tokens: int = 0
    val_tokens: int = 65536
    val_fraction: float = 0.05
    tokenizer: str = "bpe"
    vocab_size: int = 4096
    tokenizer_train_mb: float = 64.0
    eval_batch_size: int = 32
    data_dir: str | None = field(default=None, metadata={"identity": False})
    roots: dict[str, str] = field(default_factory=dict, metadata={"identity": False})
    tokenizer_dir: str | None = field(default=None, metadata={"identity": False})

    def __post_init__(self) -> None:
        p = "task"
        check_choice(f"{p}.corpus", self.corpus, ("local", "slimpajama"))
        check_choice(f"{p}.mix_by", self.mix_by, ("bytes", "natural"))
        if not self.mix:
            fail(f"{p}.mix", "needs at least one source with a weight")
        for k, w in self.mix.items():
            if self.corpus == "local":
                check_choice(f"{p}.mix", k, LOCAL_SOURCES)
            else:
                set_name(k)
            check_range(f"{p}.mix.{k}", w, 0.0, lo_open=True)
        if self.corpus == "slimpajama" and len({set_name(k) for k in self.mix}) != len(self.mix):
            fail(f"{p}.mix", f"names the same SlimPajama set twice: {sorted(self.mix)}")
        for k in self.roots:
            check_choice(f"{p}.roots", k, LOCAL_SOURCES)
        check_range(f"{p}.seq_len", self.seq_len, 2)
        for n in ("train_tokens", "val_tokens"):
            check_range(f"{p}.{n}", getattr(self, n), 0)
        check_range(f"{p}.val_fraction", self.val_fraction, 0.0, 0.5, lo_open=True)
        check_choice(f"{p}.tokenizer", self.tokenizer, ("bpe", "files"))
        check_range(f"{p}.vocab_size", self.vocab_size, 257)
        check_range(f"{p}.tokenizer_train_mb", self.tokenizer_train_mb, 0.0, lo_open=True)
        check_range(f"{p}.eval_batch_size", self.eval_batch_size, 1)

    @property
    def sources(self) -> dict[str, float]:
        """Canonical source names -> weights (SlimPajama set names spelled as in ``meta.redpajama_set_name``)."""
        if self.corpus == "slimpajama":
            return {set_name(k): float(w) for k, w in self.mix.items()}
        return {k: float(w) for k, w in self.mix.items()}

    @property
    def n_train(self) -> int:
        """Training rows when ``train_tokens`` fixes them (0: known only after reading the data); for estimates."""
        return max((self.train_tokens - 1) // self.seq_len, 0) if self.train_tokens else 0

    @property
    def composition(self) -> str:
        """A short label of the mix, e.g. ``python_stdlib+python_docs`` (figure legends, tables)."""
        return "+".join(self.sources)

    def dims(self) -> dict[str, int]:
        """vocab_size (``bpe``: the configured size; ``files``: read from the tokenizer) and max_len = seq_len."""
        if self.tokenizer == "files":
            from anchorlab.tasks.lm.tokenizer import load_files

            vocab = int(load_files(self.tokenizer_dir).get_vocab_size())
        else:
            vocab = self.vocab_size
        return {"vocab_size": vocab, "max_len": self.seq_len}

    def check_model(self, model: Any) -> None:
        if getattr(model, "max_len", self.seq_len) < self.seq_len:
            fail("model.max_len", f"must be >= task.seq_len={self.seq_len}, got {model.max_len}")
        if self.tokenizer == "bpe" and getattr(model, "vocab_size", self.vocab_size) < self.vocab_size:
            fail("model.vocab_size", f"must be >= task.vocab_size={self.vocab_size}, got {model.vocab_size}")
