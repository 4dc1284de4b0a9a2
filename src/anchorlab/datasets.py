"""A small download cache for public benchmark files, verified by sha256.

:func:`fetch` returns a local path for a file: from ``local_dir`` when it holds
the file (verified), else from the cache (``~/.cache/anchorlab`` or the
``ANCHORLAB_CACHE`` directory), else downloaded with :mod:`urllib`, verified,
and written atomically into the cache. :data:`REGISTRY` names the files the
task loaders know (SCAN, COGS); :func:`fetch_known` fetches one by name.

A registry name is also the file's path below a data directory, so a local
copy laid out as ``<data_dir>/scan/tasks.txt``, ``<data_dir>/cogs/varfree/
gen.tsv`` ... is used without any network access. Loaders default their data
directory to the ``ANCHORLAB_DATA_DIR`` environment variable when it is set.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import os
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from anchorlab.config import ConfigError
from anchorlab.io import atomic_write

log = logging.getLogger(__name__)

CACHE_ENV = "ANCHORLAB_CACHE"
DATA_ENV = "ANCHORLAB_DATA_DIR"
DEFAULT_CACHE = Path("~/.cache/anchorlab")

Transform = Callable[[bytes], bytes]


class ChecksumError(ConfigError):
    """A file's sha256 differs from the expected one; the message names the file (one line in the CLI)."""


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def default_cache_dir() -> Path:
    """``$ANCHORLAB_CACHE`` if set, else ``~/.cache/anchorlab``."""
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE).expanduser()


def default_data_dir(data_dir: str | Path | None = None) -> Path | None:
    """``data_dir`` if given, else ``$ANCHORLAB_DATA_DIR`` if set, else None."""
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = os.environ.get(DATA_ENV)
    return Path(env).expanduser() if env else None


def _check(path_label: str, digest: str, sha256: str | None) -> None:
    if sha256 is not None and digest != sha256.lower():
        raise ChecksumError(f"{path_label}: sha256 mismatch (expected {sha256}, got {digest}); "
                            "the file is corrupt or not the pinned version")


class DownloadError(ConfigError):
    """A data file could not be downloaded (offline, blocked, gone); the message says what to do instead."""


_NO_DOWNLOADS: contextvars.ContextVar[bool] = contextvars.ContextVar("anchorlab_no_downloads", default=False)


@contextlib.contextmanager
def no_downloads() -> Iterator[None]:
    """Within the block a file that is not local fails with DownloadError instead of being downloaded
    (listings and estimates must not fetch data)."""
    token = _NO_DOWNLOADS.set(True)
    try:
        yield
    finally:
        _NO_DOWNLOADS.reset(token)


def _download(url: str, timeout: float, filename: str = "") -> bytes:
    if _NO_DOWNLOADS.get():
        raise DownloadError(f"data file {filename or url}: not here, and not downloaded now")
    log.info("downloading %s", url)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 (pinned https/file URLs)
            return resp.read()
    except (OSError, ValueError) as e:  # URLError, HTTPError and timeouts are OSErrors
        reason = getattr(e, "reason", None) or e
        raise DownloadError(f"data file {filename or url}: could not download {url} ({reason}); put the file "
                            "under a directory and pass task.data_dir=DIR (or set ANCHORLAB_DATA_DIR=DIR)") from None


def fetch(url: str, sha256: str | None, cache_dir: str | Path | None = None,
          local_dir: str | Path | None = None, filename: str | None = None,
          transform: Transform | None = None, timeout: float = 60.0) -> Path:
    """Return a verified local path for the file at ``url``.

    Order: ``local_dir/filename`` if it exists (verified, never copied);
    else ``cache_dir/filename`` if it exists (verified; re-downloaded once if
    it fails); else download, optionally apply ``transform`` (bytes -> bytes,
    e.g. keep some rows of a larger upstream file), verify, and write
    atomically into the cache. ``filename`` is a relative path (default: the
    URL's last component). ``sha256=None`` means unknown: the file is used
    unverified with a warning. Raises :class:`ChecksumError` naming the file
    on a mismatch; nothing is left in the cache then.
    """
    if not url:
        raise ConfigError("fetch.url: must be a non-empty URL")
    filename = filename or url.rstrip("/").rsplit("/", 1)[-1]
    if Path(filename).is_absolute() or ".." in Path(filename).parts:
        raise ConfigError(f"fetch.filename: must be a relative path inside the cache, got {filename!r}")
    if sha256 is None:
        log.warning("%s: no sha256 is known; using it unverified", filename)

    if local_dir is not None:
        local = Path(local_dir).expanduser() / filename
        if local.is_file():
            _check(str(local), sha256_file(local), sha256)
            return local
        log.info("%s not in %s; falling back to the cache", filename, local_dir)

    target = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    target = target / filename
    if target.is_file():
        try:
            _check(str(target), sha256_file(target), sha256)
            return target
        except ChecksumError as e:
            log.warning("%s; downloading it again", e)

    def write(tmp: Path) -> None:
        data = _download(url, timeout, filename)
        if transform is not None:
            data = transform(data)
        _check(f"{filename} (from {url})", hashlib.sha256(data).hexdigest(), sha256)
        tmp.write_bytes(data)

    return atomic_write(target, write)


# --------------------------------------------------------------------------- registry
SCAN_COMMIT = "c4b756cbc010d75c912f16c42c8f15dc6b7e6c8f"
COGS_COMMIT = "165a7b669eade971fa47bf568a2e51925360fed8"
# The variable-free COGS files (Qiu et al. 2022) as shipped in the SLOG repository
# (Li et al. 2023). Its train/dev/test files also hold SLOG's own rows; keeping
# COGS's row types gives the reference copies (see _keep_cogs_rows).
SLOG_DATA_COMMIT = "ee5aec196636f203625a9198d5f00f340eba3abf"
SLOG_GEN_COMMIT = "232c5bad32155e2ae9c1e3d16d1880bdf1556b85"

_SCAN_RAW = f"https://raw.githubusercontent.com/brendenlake/SCAN/{SCAN_COMMIT}"
_COGS_RAW = f"https://raw.githubusercontent.com/najoungkim/COGS/{COGS_COMMIT}"
_SLOG_RAW = "https://raw.githubusercontent.com/bingzhilee/SLOG"

COGS_ROW_TYPES_PREFIXES = ("in_distribution", "primitive", "exposure_example_")


def _keep_cogs_rows(data: bytes) -> bytes:
    """Keep the TSV rows whose third column is a COGS row type (drop SLOG's additions)."""
    keep = []
    for line in data.decode("utf-8").splitlines(keepends=True):
        parts = line.rstrip("\n").split("\t")
        if len(parts) == 3 and parts[2].startswith(COGS_ROW_TYPES_PREFIXES):
            keep.append(line)
    return "".join(keep).encode("utf-8")


@dataclass(frozen=True)
class DataFile:
    """One known file: ``name`` is its relative path in a data directory or the cache.

    ``sha256`` is that of the stored file (after ``transform``, if any); None
    where no checksum is known.
    """

    name: str
    url: str
    sha256: str | None
    transform: Transform | None = None
    note: str = ""


REGISTRY: dict[str, DataFile] = {f.name: f for f in (
    DataFile("scan/tasks.txt", f"{_SCAN_RAW}/tasks.txt",
             "d824c7d9e9149ba497e25f701981dac79954e04bf670d22e5c209f076ac6c89f",
             note="all 20,910 SCAN commands"),
    DataFile("scan/tasks_train_addprim_turn_left.txt",
             f"{_SCAN_RAW}/add_prim_split/tasks_train_addprim_turn_left.txt",
             "1b3fed86055dd7689d217f1b90cc8960aeb1cf200f4f209dc47935761b05304c"),
    DataFile("scan/tasks_test_addprim_turn_left.txt",
             f"{_SCAN_RAW}/add_prim_split/tasks_test_addprim_turn_left.txt",
             "15a82c2d25ac7c3c1fff7e18051fb085974ef3617de895c520d02144396a10e2"),
    DataFile("cogs/original/train.tsv", f"{_COGS_RAW}/data/train.tsv",
             "220b3804b562c0156ee986eff1bdd15c27e52142549362a64f57baf86e304c78"),
    DataFile("cogs/original/dev.tsv", f"{_COGS_RAW}/data/dev.tsv",
             "ab66388a309c7ac1ad210c781a6a0ce12281a9ef24619a12422a752cef61bc21"),
    DataFile("cogs/original/test.tsv", f"{_COGS_RAW}/data/test.tsv",
             "68f8e51e9f6d9cd22d64efe68dd21d7ea5ba327e9a2359481030161aea757035"),
    DataFile("cogs/original/gen.tsv", f"{_COGS_RAW}/data/gen.tsv", None,
             note="official generalization set; no checksum known here"),
    DataFile("cogs/varfree/train.tsv", f"{_SLOG_RAW}/{SLOG_DATA_COMMIT}/data/varfree_LF/train.tsv",
             "b674054f5b7224e599d83cb89552d81d940d5913d23c73fc769c6a82d763f40b",
             transform=_keep_cogs_rows, note="SLOG's file filtered to COGS row types"),
    DataFile("cogs/varfree/dev.tsv", f"{_SLOG_RAW}/{SLOG_DATA_COMMIT}/data/varfree_LF/dev.tsv",
             "53ed3d27df1f6ccb0dae97743e202b6446a1d8f2a3c364e3ffcf43c6d9ca3bd2",
             transform=_keep_cogs_rows, note="SLOG's file filtered to COGS row types"),
    DataFile("cogs/varfree/test.tsv", f"{_SLOG_RAW}/{SLOG_DATA_COMMIT}/data/varfree_LF/test.tsv",
             "1ac9740a793ae9e9df80b60ca20f3f54f222af6a9f8f2ba3afea8b3c443c0939",
             transform=_keep_cogs_rows, note="SLOG's file filtered to COGS row types"),
    DataFile("cogs/varfree/gen.tsv",
             f"{_SLOG_RAW}/{SLOG_GEN_COMMIT}/generation_scripts/varfree2cogs_converter/"
             "cogs_two_formats/gen_varfree_lf.tsv",
             "d1028ee1cba97aea1755d19601014e00c44d227014df8081a5c2765787cacd73",
             note="COGS generalization set, variable-free LFs (21 types x 1,000)"),
)}


def fetch_known(name: str, data_dir: str | Path | None = None,
                cache_dir: str | Path | None = None) -> Path:
    """Fetch a :data:`REGISTRY` file by name (e.g. ``"scan/tasks.txt"``).

    ``data_dir`` (default ``$ANCHORLAB_DATA_DIR``) is tried first, then the
    cache, then the network.
    """
    if name not in REGISTRY:
        raise ConfigError(f"dataset name: must be one of {', '.join(sorted(REGISTRY))}, got {name!r}")
    f = REGISTRY[name]
    return fetch(f.url, f.sha256, cache_dir=cache_dir, local_dir=default_data_dir(data_dir),
                 filename=f.name, transform=f.transform)
