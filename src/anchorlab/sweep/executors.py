"""Where sweep runs execute, behind one ``concurrent.futures``-style interface.

Every executor has ``submit(fn, *args, **kwargs) -> Future``, ``shutdown(wait=True,
cancel_futures=False)`` and ``max_workers`` (how many runs it executes at once;
the sweep runner keeps that many in flight).

* :class:`InProcessExecutor` runs ``fn`` inside ``submit`` (debugging, tests).
* :class:`LocalPoolExecutor` is a :class:`~concurrent.futures.ProcessPoolExecutor`
  (``spawn`` or ``forkserver``) whose workers set ``torch.set_num_threads(1)``:
  more threads per process run slower on a shared CPU (measured once:
  notes/2026-12-code-measurements.md). Its workers
  exit within a second of the sweep process dying (:func:`watch_parent`).
* :class:`RayExecutor` uses Ray Core (``ray.remote(fn).remote(...).future()``),
  imported only when built. On a cluster, start Ray there (``ray start --head``
  / ``ray start --address=HEAD:6379``) and pass ``address="auto"`` or
  ``address="ray://HEAD:10001"``; it calls ``ray.init(address=...)`` unless Ray
  is already initialised. The run function must be importable on the workers
  (install anchorlab there) and ``out_dir`` must be on a shared filesystem.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, Callable, Protocol

from anchorlab.config import ConfigError

log = logging.getLogger(__name__)


class Executor(Protocol):
    max_workers: int

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future: ...

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None: ...


class InProcessExecutor:
    """Runs each job immediately in the calling process; returns a finished Future."""

    max_workers = 1

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        fut: Future = Future()
        fut.set_running_or_notify_cancel()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - delivered through the future, like a pool
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            fut.set_exception(e)
        return fut

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        return None

    def __enter__(self) -> "InProcessExecutor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


PARENT_POLL_S = 1.0


def watch_parent(poll_s: float = PARENT_POLL_S) -> threading.Thread:
    """Exit this process soon after its parent dies.

    A pool worker whose sweep process is killed on its own (SIGTERM/SIGKILL to that
    pid only) is re-parented and would train on unseen; a resumed sweep would then
    start the same run beside it, two writers on one checkpoint. The run's last
    checkpoint stays, so the resume loses at most one checkpoint interval.
    """
    parent = os.getppid()

    def loop() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                os._exit(1)

    t = threading.Thread(target=loop, name="anchorlab-parent-watch", daemon=True)
    t.start()
    return t


def init_worker(torch_threads: int | None, parent_poll_s: float | None = PARENT_POLL_S) -> None:
    """Process-pool initializer: exit with the parent (unless ``parent_poll_s`` is None),
    and cap intra-op threads before torch is imported by a run."""
    if parent_poll_s is not None:
        watch_parent(parent_poll_s)
    if torch_threads is None:
        return
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(torch_threads)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a core dependency
        return
    torch.set_num_threads(torch_threads)


class LocalPoolExecutor:
    """A process pool on this machine.

    ``max_workers`` defaults to the CPU count; ``torch_threads`` (default 1, None
    to leave alone) is set in each worker; ``context`` is ``'spawn'`` (default,
    safe with threads and CUDA) or ``'forkserver'``.
    """

    def __init__(self, max_workers: int | None = None, torch_threads: int | None = 1,
                 context: str = "spawn", max_tasks_per_child: int | None = None) -> None:
        if context not in ("spawn", "forkserver"):
            raise ConfigError(f"context: must be 'spawn' or 'forkserver', got {context!r}")
        if max_workers is not None and (not isinstance(max_workers, int) or max_workers < 1):
            raise ConfigError(f"max_workers: must be a positive integer, got {max_workers!r}")
        self.max_workers = max_workers or os.cpu_count() or 1
        self._pool = ProcessPoolExecutor(self.max_workers, mp_context=multiprocessing.get_context(context),
                                         initializer=init_worker, initargs=(torch_threads,),
                                         max_tasks_per_child=max_tasks_per_child)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)

    def __enter__(self) -> "LocalPoolExecutor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


class RayExecutor:
    """Ray Core tasks; each gets ``num_cpus`` CPUs (and ``num_gpus`` GPUs).

    ``max_workers`` defaults to the cluster's CPUs // ``num_cpus``. Ray is shut
    down on :meth:`shutdown` only if this executor started it.
    """

    def __init__(self, max_workers: int | None = None, address: str | None = None, num_cpus: float = 1,
                 num_gpus: float = 0, init_kwargs: dict[str, Any] | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise ConfigError("executor 'ray': ray is not installed; pip install 'anchorlab[ray]' "
                              "or use executor='process'") from None
        self._ray = ray
        self._started = False
        if not ray.is_initialized():
            ray.init(address=address, **(init_kwargs or {}))
            self._started = True
        self._options = {"num_cpus": num_cpus, "num_gpus": num_gpus}
        cpus = ray.cluster_resources().get("CPU", 1)
        self.max_workers = max_workers or max(int(cpus // max(num_cpus, 1e-9)), 1)
        self._remote: dict[Callable[..., Any], Any] = {}

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._remote[fn] = self._ray.remote(**self._options)(fn)
        return remote.remote(*args, **kwargs).future()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if self._started:
            self._ray.shutdown()
            self._started = False

    def __enter__(self) -> "RayExecutor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


EXECUTORS: dict[str, Callable[..., Any]] = {
    "inprocess": InProcessExecutor,
    "process": LocalPoolExecutor,
    "ray": RayExecutor,
}


def check_executor(name: "str | Any", max_workers: int | None = None) -> None:
    """Refuse, in one line and before a sweep writes anything, an executor that :func:`make_executor` would refuse
    (an unknown name, the in-process one with workers, Ray not installed). An executor object passes."""
    import importlib.util

    if not isinstance(name, str):
        return
    if name not in EXECUTORS:
        raise ConfigError(f"executor: must be one of {', '.join(repr(k) for k in EXECUTORS)}, got {name!r}")
    if name == "inprocess" and max_workers not in (None, 1):
        raise ConfigError(f"executor 'inprocess': runs one job at a time, so --workers {max_workers} does not apply "
                          f"(use --executor process for parallel runs)")
    if name == "ray" and importlib.util.find_spec("ray") is None:
        raise ConfigError("executor 'ray': ray is not installed; pip install 'anchorlab[ray]' or use executor='process'")


def make_executor(name: str, **kwargs: Any) -> Any:
    """``'inprocess'`` | ``'process'`` | ``'ray'`` -> executor; ``kwargs`` go to its constructor
    (``max_workers=None`` is dropped for the in-process one)."""
    if name not in EXECUTORS:
        raise ConfigError(f"executor: must be one of {', '.join(repr(k) for k in EXECUTORS)}, got {name!r}")
    if name == "inprocess":
        kwargs = {k: v for k, v in kwargs.items() if not (k == "max_workers" and v in (None, 1))}
        if kwargs:
            raise ConfigError(f"executor 'inprocess': takes no options (runs one job at a time), got "
                              f"{', '.join(f'{k}={v!r}' for k, v in kwargs.items())}")
    try:
        return EXECUTORS[name](**kwargs)
    except TypeError as e:
        raise ConfigError(f"executor {name!r}: {e}") from None
