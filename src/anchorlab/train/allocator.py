"""Keep freed CPU memory in the process (glibc), so each step's activations do not page-fault afresh.

PyTorch's CPU tensors come from ``malloc``. glibc serves blocks above its mmap
threshold (128 KiB, adapting up to 32 MiB) with fresh ``mmap`` pages and gives
them back on ``free``, so a training step that allocates the same large
activations every step pays a page fault per 4 KiB page, every step. In a VM
those faults are expensive, a large part of an elementwise op's time on a big
activation (measured once: notes/2026-12-code-measurements.md).

:func:`retain_freed_memory` raises glibc's mmap and trim thresholds with
``mallopt`` so freed blocks are reused. It is process-wide and cannot be undone
(glibc has no getter); the cost is that the process keeps its peak heap instead
of returning it to the OS. ``train.malloc_retain`` (default on, CPU only)
switches it; elsewhere than glibc/Linux it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import sys

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 30          # blocks up to 1 GiB come from the heap
TRIM_THRESHOLD = (1 << 31) - 1    # keep up to ~2 GiB of free heap before trimming


@functools.lru_cache(maxsize=1)
def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "gnu_get_libc_version") else None
    except OSError:
        return None


_done = False


def retain_freed_memory() -> bool:
    """Raise glibc's mmap / trim thresholds once per process; True where it took effect."""
    global _done
    if _done:
        return True
    libc = _libc()
    if libc is None:
        return False
    ok = bool(libc.mallopt(M_MMAP_THRESHOLD, ctypes.c_int(MMAP_THRESHOLD))) and \
        bool(libc.mallopt(M_TRIM_THRESHOLD, ctypes.c_int(TRIM_THRESHOLD)))
    _done = ok
    if not ok:
        log.info("mallopt refused the thresholds; CPU activations keep page-faulting each step")
    return ok


__all__ = ["retain_freed_memory"]
