"""Documents for language modelling: local offline corpora and SlimPajama shards, split, mixed, streamed.

A *source* is a named stream of documents ``(source, doc_id, text)``:

* local sources (``task.corpus: local``), real text present on the machine:
  ``python_stdlib`` -- the ``.py`` files of the running Python's standard
  library (tests, ``site-packages`` excluded); ``python_docs`` -- the
  reStructuredText sources (``_sources/**/*.txt``) of Python's documentation
  as Debian's ``python3.X-doc`` installs it (``apt-get install python3.11-doc``);
  ``task.roots`` points either at another directory.
* SlimPajama (``task.corpus: slimpajama``): ``.jsonl.zst`` (or ``.jsonl``)
  shards under ``task.data_dir``, one JSON document per line with ``text``
  and ``meta.redpajama_set_name``; a source is a set name (``RedPajamaGithub``,
  or just ``github``). Shards under ``train/`` and ``validation/`` give the
  splits; a flat directory is split by document as below.

Splits: a document is held out for validation when the hash of its id falls
below ``val_fraction`` (independent of seeds, so every run validates on the
same documents). Order: per split and seed, a source's files (shards) are
shuffled with the seed and read in that order, streamed. Mixing
(:func:`mix_stream`): ``mix_by='bytes'`` takes the next document from the
source furthest below its share of the bytes so far (``task.mix`` weights, so
the byte shares match the weights); ``'natural'`` keeps the documents of the
chosen sources in stream order (what filtering a corpus by set name gives).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import sysconfig
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from anchorlab.config.base import ConfigError

log = logging.getLogger(__name__)

Doc = tuple[str, str, str]  # (source, doc id, text)
LOCAL_SOURCES = ("python_stdlib", "python_docs")
SLIMPAJAMA_SETS = ("RedPajamaCommonCrawl", "RedPajamaC4", "RedPajamaGithub", "RedPajamaBook", "RedPajamaArXiv",
                   "RedPajamaWikipedia", "RedPajamaStackExchange")
READ_BUFFER = 1 << 20   # bytes read from a shard file at a time
SKIP_DIRS = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"}


def set_name(name: str) -> str:
    """``'github'`` / ``'GitHub'`` / ``'RedPajamaGithub'`` -> ``'RedPajamaGithub'`` (ConfigError if unknown)."""
    key = name.lower().removeprefix("redpajama")
    for s in SLIMPAJAMA_SETS:
        if s.lower().removeprefix("redpajama") == key:
            return s
    raise ConfigError(f"task.mix: SlimPajama set names are {', '.join(SLIMPAJAMA_SETS)} (or without the "
                      f"'RedPajama' prefix), got {name!r}")


def held_out(doc_id: str, val_fraction: float) -> bool:
    """Whether a document is in the validation split (a hash of its id, the same on every machine and seed)."""
    h = int.from_bytes(hashlib.sha1(doc_id.encode()).digest()[:8], "big") / 2.0**64
    return h < val_fraction


# ------------------------------------------------------------------ local sources
def default_root(source: str) -> Path:
    """Where a local source lives on this machine (the running Python's stdlib; Debian's python3.X-doc)."""
    import sys

    if source == "python_stdlib":
        return Path(sysconfig.get_paths()["stdlib"])
    v = f"{sys.version_info.major}.{sys.version_info.minor}"
    for cand in (f"/usr/share/doc/python{v}/html/_sources", "/usr/share/doc/python3-doc/html/_sources",
                 f"/usr/share/doc/python{v}-doc/html/_sources"):
        if Path(cand).is_dir():
            return Path(cand)
    return Path(f"/usr/share/doc/python{v}/html/_sources")


def local_files(source: str, root: str | Path | None = None) -> tuple[Path, list[str]]:
    """(root, sorted relative paths) of a local source; ConfigError naming how to get it if absent."""
    if source not in LOCAL_SOURCES:
        raise ConfigError(f"task.mix: local sources are {', '.join(LOCAL_SOURCES)}, got {source!r}")
    base = Path(root).expanduser() if root else default_root(source)
    pattern = "*.py" if source == "python_stdlib" else "*.txt"
    if not base.is_dir():
        hint = ("install Python's documentation (apt-get install python3.11-doc) or set task.roots.python_docs"
                if source == "python_docs" else "set task.roots.python_stdlib")
        raise ConfigError(f"task.mix: source {source!r} not found at {base}; {hint}")
    rels = sorted(str(p.relative_to(base)) for p in base.rglob(pattern)
                  if p.is_file() and not SKIP_DIRS.intersection(p.relative_to(base).parts[:-1]))
    if not rels:
        raise ConfigError(f"task.mix: source {source!r} has no {pattern} files under {base}")
    return base, rels


def tree_digest(base: Path, rels: list[str]) -> tuple[int, str]:
    """(total bytes, sha256 over ``relpath NUL sha256(file) LF`` lines in path order) of a source's files."""
    h, total = hashlib.sha256(), 0
    for r in rels:
        data = (base / r).read_bytes()
        total += len(data)
        h.update(f"{r}\0{hashlib.sha256(data).hexdigest()}\n".encode())
    return total, h.hexdigest()


def local_docs(source: str, base: Path, rels: list[str], split: str, val_fraction: float,
               seed: int) -> Iterator[Doc]:
    """The documents (files) of one split of a local source, in an order shuffled with ``seed``."""
    mine = [r for r in rels if held_out(f"{source}/{r}", val_fraction) == (split == "val")]
    order = np.random.default_rng([seed, _stable(source)]).permutation(len(mine))
    for i in order:
        yield source, mine[i], (base / mine[i]).read_text(encoding="utf-8", errors="replace")


def _stable(text: str) -> int:
    return int.from_bytes(hashlib.sha1(text.encode()).digest()[:4], "big")


# ------------------------------------------------------------------ SlimPajama
@dataclass
class ShardLog:
    """What the streams read from each shard: bytes read and, where every byte was read, the file's sha256."""

    shards: dict[str, dict[str, Any]] = field(default_factory=dict)


class _HashingFile(io.RawIOBase):
    def __init__(self, f: Any) -> None:
        self.f, self.h, self.n = f, hashlib.sha256(), 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = self.f.readinto(b)
        if n:
            self.h.update(memoryview(b)[:n])
            self.n += n
        return n


def shard_files(data_dir: str | Path | None, split: str) -> tuple[list[Path], bool]:
    """(sorted shard paths of a split, whether the directory has its own train/validation folders)."""
    if data_dir is None:
        raise ConfigError("task.data_dir: SlimPajama needs the directory holding its .jsonl.zst shards")
    base = Path(data_dir).expanduser()
    if not base.is_dir():
        raise ConfigError(f"task.data_dir: no such directory {base}")
    has_splits = (base / "train").is_dir() and (base / "validation").is_dir()
    root = base / ("train" if split == "train" else "validation") if has_splits else base
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name.endswith((".jsonl.zst", ".jsonl")))
    if not files:
        raise ConfigError(f"task.data_dir: no .jsonl.zst or .jsonl shards under {root}")
    return files, has_splits


def read_shard(path: Path, log_to: ShardLog | None = None) -> Iterator[dict[str, Any]]:
    """The JSON records of one shard, streamed (zstd-decompressed when it ends in .zst)."""
    with open(path, "rb") as raw:
        hf = _HashingFile(raw)
        if path.name.endswith(".zst"):
            from anchorlab.extras import require

            zstd = require("zstandard", "SlimPajama .jsonl.zst shards")
            stream: Any = zstd.ZstdDecompressor().stream_reader(io.BufferedReader(hf, READ_BUFFER),
                                                                       read_size=READ_BUFFER)
        else:
            stream = io.BufferedReader(hf, READ_BUFFER)
        text = io.TextIOWrapper(stream, encoding="utf-8")
        try:
            for line in text:
                if line.strip():
                    yield json.loads(line)
        finally:
            if log_to is not None:
                entry = {"bytes_read": hf.n, "size": path.stat().st_size}
                if hf.n == entry["size"]:      # every byte went through the hash
                    entry["sha256"] = hf.h.hexdigest()
                log_to.shards[str(path)] = entry


def slimpajama_docs(data_dir: str | Path | None, sets: tuple[str, ...], split: str, val_fraction: float,
                    seed: int, log_to: ShardLog | None = None) -> Iterator[Doc]:
    """Documents of the given sets (canonical names) in one split; shards in a seeded order, streamed."""
    files, has_splits = shard_files(data_dir, split)
    base = Path(data_dir).expanduser()
    wanted = set(sets)
    for i in np.random.default_rng([seed, _stable("/".join(sorted(sets)))]).permutation(len(files)):
        path = files[i]
        rel = str(path.relative_to(base))
        for n, rec in enumerate(read_shard(path, log_to)):
            name = (rec.get("meta") or {}).get("redpajama_set_name")
            if name not in wanted:
                continue
            doc_id = f"{rel}:{n}"
            if not has_splits and held_out(doc_id, val_fraction) != (split == "val"):
                continue
            yield name, doc_id, rec.get("text") or ""


# ------------------------------------------------------------------ mixing
@dataclass
class MixLog:
    """Sources that ran out while a mixed stream was read."""

    exhausted: list[str] = field(default_factory=list)


def mix_stream(streams: Mapping[str, Iterator[Doc]], weights: Mapping[str, float],
               log_to: MixLog | None = None) -> Iterator[Doc]:
    """Interleave per-source document streams so each source's share of the bytes follows ``weights``.

    The next document comes from the source with the largest deficit
    ``w_s * total - bytes_s`` (ties: the order of ``weights``); a source that
    runs out is dropped and the others go on (recorded in ``log_to``).
    Deterministic given the streams.
    """
    log_to = log_to if log_to is not None else MixLog()
    live = {s: iter(streams[s]) for s in weights if weights[s] > 0}
    total_w = sum(weights[s] for s in live)
    taken = {s: 0 for s in live}
    total = 0
    while live:
        s = max(live, key=lambda k: weights[k] / total_w * total - taken[k])
        try:
            doc = next(live[s])
        except StopIteration:
            log.debug("source %s ran out; the mix goes on without it", s)
            log_to.exhausted.append(s)
            del live[s]
            continue
        n = len(doc[2].encode("utf-8"))
        taken[s] += n
        total += n
        yield doc
