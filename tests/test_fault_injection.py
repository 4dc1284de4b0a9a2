"""Fault injection: SIGKILL a real (tiny) sweep at many points, resume each time, compare with an uninterrupted one.

Each attempt runs the sweep driver in a forked child (torch is already
imported, so a start costs milliseconds). The child either kills itself with
SIGKILL at a chosen point -- half-way through writing a checkpoint, between
the checkpoint rotation and the new write, inside an SQLite transaction before
its COMMIT, mid-append of metrics.jsonl, before final.json, between a run's end
and its recording -- or is killed by the parent at a random moment. The next
attempt resumes. After the last attempt the results table must equal an
uninterrupted sweep's exactly, with every run present once and no duplicated
metric row. A run whose disk writes fail (ENOSPC) is marked failed while the
others finish.
"""

import errno
import json
import os
import random
import signal
import sqlite3
import time

import pandas as pd
import pytest

from anchorlab.sweep.runner import run_sweep

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

TINY = {"model.d_model": 16, "model.d_head": 8, "model.d_ff": 32, "task.n_train": 1024, "task.n_eval_per_group": 16,
        "train.batch_size": 128, "train.epochs": 4, "train.eval_every": 2, "optim.lr": 1.0e-3, "train.threads": 1}
SPEC = {"name": "faults", "base": "demo/small", "set": TINY,
        "axes": {"init.gamma": [0.3, 0.7]}, "zip": [{"train.init_seed": [0, 1, 2], "train.data_seed": [0, 1, 2]}]}
TIMING = ["started", "finished", "wall_seconds"]


def _suicide():
    os.kill(os.getpid(), signal.SIGKILL)


def _nth(n, fn_before=None):
    """A counter that kills this process at its n-th call (after ``fn_before()``)."""
    state = {"calls": 0}

    def hit():
        state["calls"] += 1
        if state["calls"] == n:
            if fn_before is not None:
                fn_before()
            _suicide()
    return hit


def install_fault(kind: str, n: int) -> None:
    """Patch this (child) process so that it SIGKILLs itself at the n-th occurrence of ``kind``."""
    import importlib

    import torch

    from anchorlab.sweep import runner, store
    from anchorlab.train import checkpoint
    run = importlib.import_module("anchorlab.train.run")   # the module (anchorlab.train.run is also a function)

    if kind == "checkpoint_half_written":         # inside atomic_write: temp file half written
        real_save = torch.save
        count = {"n": 0}

        def save(obj, path, *a, **k):
            count["n"] += 1
            if count["n"] == n and isinstance(path, os.PathLike) and "checkpoint" in str(path):
                real_save(obj, path, *a, **k)
                data = open(path, "rb").read()
                with open(path, "wb") as f:
                    f.write(data[: len(data) // 2])
                    f.flush()
                _suicide()
            return real_save(obj, path, *a, **k)
        torch.save = save
    elif kind == "checkpoint_rotated":             # checkpoint.pt -> .prev.pt done, the new one not written
        real, hit = checkpoint._rotate, _nth(n)

        def rotate(run_dir):
            real(run_dir)
            hit()
        checkpoint._rotate = rotate
    elif kind == "sqlite_before_commit":           # statements executed inside BEGIN IMMEDIATE, no COMMIT
        real_exit, hit = store._Transaction.__exit__, _nth(n)

        def exit_(self, exc_type, *exc):
            if exc_type is None:
                hit()
            return real_exit(self, exc_type, *exc)
        store._Transaction.__exit__ = exit_
    elif kind == "metrics_half_line":              # metrics.jsonl append cut short
        real_record = run.RunState.record
        count = {"n": 0}

        def record(self, step, model, loss):
            count["n"] += 1
            if count["n"] == n:
                with open(self.run_dir / "metrics.jsonl", "a") as f:
                    f.write('{"step": %d, "epoch": 0.' % step)
                _suicide()
            return real_record(self, step, model, loss)
        run.RunState.record = record
    elif kind == "before_final_json":              # weights written, final.json not
        real_fin, hit = run.finalize, _nth(n)

        def finalize(*a, **k):
            hit()
            return real_fin(*a, **k)
        run.finalize = finalize
    elif kind == "before_record":                  # final.json written, the store not told
        real_rec, hit = runner._record, _nth(n)

        def rec(*a, **k):
            hit()
            return real_rec(*a, **k)
        runner._record = rec
    elif kind != "timer":
        raise ValueError(kind)


def child_sweep(out, kind: str, n: int) -> int:
    """Fork a driver running the sweep with a fault installed; return its pid."""
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 0
        try:
            install_fault(kind, n)
            run_sweep(SPEC, out, executor="inprocess", stack="never")
        except BaseException:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            code = 3
        finally:
            os._exit(code)
    return pid


def canonical(df: pd.DataFrame) -> pd.DataFrame:
    df = df[~df.metric.fillna("").str.endswith("seconds")]       # wall/eval time differ by nature
    return (df.drop(columns=TIMING).sort_values(["run_id", "kind", "metric", "step"], na_position="first")
            .reset_index(drop=True))


FAULTS = [("checkpoint_half_written", 3), ("sqlite_before_commit", 4), ("timer", 0), ("checkpoint_rotated", 2),
          ("metrics_half_line", 3), ("timer", 0), ("before_final_json", 1), ("sqlite_before_commit", 2),
          ("timer", 0), ("checkpoint_half_written", 2), ("before_record", 1), ("timer", 0),
          ("metrics_half_line", 2), ("checkpoint_rotated", 3)]


def test_sigkill_at_many_points_then_resume_equals_an_uninterrupted_sweep(tmp_path):
    t0 = time.perf_counter()
    ref = run_sweep(SPEC, tmp_path / "ref", executor="inprocess", stack="never")
    ref_seconds = time.perf_counter() - t0
    assert set(ref.status) == {"finished"} and ref.run_id.nunique() == 6
    out = tmp_path / "killed"
    rng = random.Random(17)
    kills, log = 0, []
    for kind, n in FAULTS:
        pid = child_sweep(out, kind, n)
        if kind == "timer":
            # a random moment within the first tenth of an uninterrupted sweep's time, so that the
            # kills land mid-sweep on a fast machine as on a slow one
            time.sleep(rng.uniform(0.02, 0.1) * ref_seconds)
            os.kill(pid, signal.SIGKILL)          # the driver runs its runs in process: nothing else to kill
        _, status = os.waitpid(pid, 0)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        assert killed or (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0), (kind, n, status)
        kills += killed
        log.append((kind, n, "killed" if killed else "completed"))
    print("fault log:", log, f"kills={kills}")
    assert kills >= 10, log
    kinds_killed = {k for k, _, r in log if r == "killed"}
    assert {"checkpoint_half_written", "sqlite_before_commit", "checkpoint_rotated", "metrics_half_line"} <= kinds_killed

    df = run_sweep(SPEC, out, executor="inprocess", stack="never")          # the last resume
    pd.testing.assert_frame_equal(canonical(df), canonical(ref), check_exact=True)
    con = sqlite3.connect(out / "results.sqlite")
    try:
        assert dict(con.execute("SELECT status, COUNT(*) FROM runs GROUP BY status")) == {"finished": 6}
        dup = con.execute("SELECT COUNT(*) FROM (SELECT 1 FROM metrics GROUP BY run_id, step, metric, kind "
                          "HAVING COUNT(*) > 1)").fetchone()[0]
        n_rows = con.execute("SELECT COUNT(*) FROM metrics").fetchone()[0]
    finally:
        con.close()
    ref_con = sqlite3.connect(tmp_path / "ref" / "results.sqlite")
    assert dup == 0 and n_rows == ref_con.execute("SELECT COUNT(*) FROM metrics").fetchone()[0]
    ref_con.close()
    for rid in ref.run_id.unique():
        a = json.loads((out / "runs" / rid / "final.json").read_text())
        b = json.loads((tmp_path / "ref" / "runs" / rid / "final.json").read_text())
        strip = lambda h: [{k: v for k, v in r.items() if not k.endswith("seconds")} for r in h]  # noqa: E731
        assert a["final"] == b["final"] and strip(a["history"]) == strip(b["history"])
        lines = (out / "runs" / rid / "metrics.jsonl").read_text().splitlines()
        assert [json.loads(x)["step"] for x in lines] == [h["step"] for h in b["history"]]
        assert not list((out / "runs" / rid).glob(".*.tmp"))              # no temp file left behind


def test_a_run_whose_disk_writes_fail_is_marked_failed_and_the_sweep_goes_on(tmp_path, monkeypatch):
    from anchorlab.train import checkpoint

    real = checkpoint.atomic_write

    def flaky(path, write):
        if _gamma_of(path) == 0.7:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, write)

    def _gamma_of(path):
        cfg = path.parent / "config.yaml"
        return float(cfg.read_text().split("gamma: ")[1].split()[0]) if cfg.exists() else None

    monkeypatch.setattr(checkpoint, "atomic_write", flaky)
    spec = {**SPEC, "zip": []}                                             # two runs: gamma 0.3 and 0.7
    df = run_sweep(spec, tmp_path, executor="inprocess", stack="never")
    runs = df.drop_duplicates("run_id").set_index("run_id")
    assert sorted(runs.status) == ["failed", "finished"]
    failed = runs[runs.status == "failed"]
    assert set(failed["init.gamma"]) == {0.7} and set(runs[runs.status == "finished"]["init.gamma"]) == {0.3}
    assert all("No space left on device" in e for e in failed.error)
    monkeypatch.setattr(checkpoint, "atomic_write", real)                # the disk has room again
    again = run_sweep(spec, tmp_path, executor="inprocess", stack="never")
    assert set(again.drop_duplicates("run_id").status) == {"finished"}
