"""run_sweep: recording, failures, divergence, resume, and the SIGKILL story, with a fake run function.

``fake_run`` stands in for ``anchorlab.train.loop.run_experiment``: module level
(so process workers can unpickle it), deterministic metrics from the config,
a ``calls.log`` line per invocation, ``final.json`` written like the real one.
"""

import functools
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from anchorlab.config import ConfigError, ExperimentConfig
from anchorlab.io import write_json
from anchorlab.sweep.executors import InProcessExecutor, init_worker, make_executor
from anchorlab.sweep.runner import execute_run, outcome, plan_sweep, resolve_run_fn, run_sweep

TINY = {"model": {"d_model": 16, "d_head": 8, "d_ff": 32}, "task": {"n_train": 512}}
SPEC = {"name": "fake", "base": TINY,
        "axes": {"init.gamma": [0.25, 0.5, 0.75], "optim.lr": [1e-4, 2e-4]},
        "zip": [{"train.init_seed": [0, 1], "train.data_seed": [0, 1]}]}
STEPS = (0, 5, 10)
TIMING = ["started", "finished", "wall_seconds"]


def fake_acc(gamma: float, lr: float, seed: int) -> float:
    return round(gamma * 0.5 + lr * 1000 + seed * 0.01, 6)


def fake_run(cfg, out_dir, sleep=0.0, fail_gammas=(), nan_gammas=()):
    """Deterministic stand-in for run_experiment; raises for ``fail_gammas``, NaN loss for ``nan_gammas``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "calls.log", "a") as f:
        f.write("start\n")
    if sleep:
        time.sleep(sleep)
    g = cfg.init.gamma
    if g in fail_gammas:
        raise RuntimeError(f"boom at gamma={g}")
    a = fake_acc(g, cfg.optim.lr, cfg.train.init_seed)
    history = [{"step": s, "epoch": s / 5, "train_loss": 2.0 - a * s / 10, "id_acc": a * s / 10,
                "ood_acc": a * s / 20, "commutativity": 1.0 - a * s / 40} for s in STEPS]
    if g in nan_gammas:
        history[-1]["train_loss"] = math.nan
    final = {k: v for k, v in history[-1].items() if k not in ("step", "epoch")}
    best = {k: (min if k.endswith("loss") else max)(h[k] for h in history[1:] if math.isfinite(h[k]))
            for k in final}
    res = {"run_id": cfg.run_id(), "status": "finished", "steps": STEPS[-1], "final": final, "best": best,
           "history": history, "wall_seconds": 0.01, "versions": {"fake": "1"}}
    write_json(out / "final.json", res)
    return res


def calls(out_dir, run_id) -> int:
    p = Path(out_dir) / "runs" / run_id / "calls.log"
    return len(p.read_text().splitlines()) if p.exists() else 0


def value(df, run_id, metric, kind="final"):
    v = df[(df.run_id == run_id) & (df.metric == metric) & (df.kind == kind)].value
    assert len(v) == 1
    return float(v.iloc[0])


def canonical(df):
    return (df.drop(columns=TIMING).sort_values(["run_id", "kind", "metric", "step"], na_position="first")
            .reset_index(drop=True))


# ------------------------------------------------------------------ in process
def test_sweep_records_results_failures_and_divergence(tmp_path):
    fn = functools.partial(fake_run, fail_gammas=(0.75,), nan_gammas=(0.5,))
    df = run_sweep(SPEC, tmp_path, executor="inprocess", run_fn=fn)
    runs = df.drop_duplicates("run_id").set_index("run_id")
    assert len(runs) == 3 * 2 * 2
    assert set(runs.loc[runs["init.gamma"] == 0.25, "status"]) == {"finished"}
    assert set(runs.loc[runs["init.gamma"] == 0.5, "status"]) == {"diverged"}
    failed = runs[runs["init.gamma"] == 0.75]
    assert set(failed.status) == {"failed"}
    assert all("RuntimeError: boom at gamma=0.75" in e for e in failed.error)
    # each finished run got its own numbers (the fake's formula, from the axis columns)
    for rid, r in runs[runs.status == "finished"].iterrows():
        a = fake_acc(r["init.gamma"], r["optim.lr"], r["train.init_seed"])
        assert value(df, rid, "id_acc") == pytest.approx(a)
        assert value(df, rid, "train_loss", "best") == pytest.approx(2.0 - a)
        assert r.run_dir == f"runs/{rid}"
    assert (tmp_path / "sweep.yaml").exists() and (tmp_path / "results.sqlite").exists()


def test_rerun_skips_done_and_retries_failed(tmp_path):
    fn = functools.partial(fake_run, fail_gammas=(0.75,), nan_gammas=(0.5,))
    first = run_sweep(SPEC, tmp_path, executor="inprocess", run_fn=fn)
    ids = first.run_id.unique()
    before = {i: calls(tmp_path, i) for i in ids}
    assert set(before.values()) == {1}
    status = first.drop_duplicates("run_id").set_index("run_id").status

    plan = plan_sweep(SPEC, tmp_path).set_index("run_id")
    assert (plan.status == status.reindex(plan.index)).all()
    assert set(plan.loc[plan.status == "failed", "action"]) == {"retry"}
    assert set(plan.loc[plan.status != "failed", "action"]) == {"skip"}

    run_sweep(SPEC, tmp_path, executor="inprocess", run_fn=fn, retry_failed=False)
    assert {i: calls(tmp_path, i) for i in ids} == before                 # nothing ran

    second = run_sweep(SPEC, tmp_path, executor="inprocess", run_fn=fake_run)   # no failures now
    for i in ids:
        assert calls(tmp_path, i) == before[i] + (status[i] == "failed")
    st2 = second.drop_duplicates("run_id").set_index("run_id").status
    assert (st2[status == "failed"] == "finished").all()
    assert (st2[status == "diverged"] == "diverged").all()                # divergence is final


def test_runs_done_on_another_machine_are_left_out_by_a_committed_table(tmp_path, capsys):
    from anchorlab.cli import main
    from anchorlab.sweep.results import done_ids

    first = run_sweep(SPEC, tmp_path / "a", executor="inprocess", run_fn=fake_run)   # "another machine"
    ids = sorted(first.run_id.unique())
    table = tmp_path / "committed.csv"   # what that machine committed: two finished runs, one that failed
    pd.DataFrame({"run_id": ids[:3], "status": ["finished", "stopped_early", "failed"]}).to_csv(table, index=False)
    done = done_ids([table])
    assert done == set(ids[:2])                                      # a failed row is not done
    plan = plan_sweep(SPEC, tmp_path / "b", done_elsewhere=done).set_index("run_id")
    assert set(plan.loc[ids[:2], "status"]) == {"elsewhere"} and set(plan.loc[ids[:2], "action"]) == {"skip"}
    assert (plan.drop(index=ids[:2]).action == "run").all()
    df = run_sweep(SPEC, tmp_path / "b", executor="inprocess", run_fn=fake_run, done_elsewhere=done)
    assert set(df.run_id) == set(ids[2:]) and all(calls(tmp_path / "b", i) == 0 for i in ids[:2])
    # a run this store completed stays its own, whatever the table says
    assert plan_sweep(SPEC, tmp_path / "a", done_elsewhere=done).set_index("run_id").loc[ids[0], "status"] == "finished"
    assert set(run_sweep(SPEC, tmp_path / "a", executor="inprocess", run_fn=fake_run, done_elsewhere=done).run_id) == set(ids)
    with pytest.raises(ConfigError, match="no run_id column; its columns: status"):
        pd.DataFrame({"status": ["finished"]}).to_csv(tmp_path / "bad.csv", index=False)
        done_ids([tmp_path / "bad.csv"])
    with pytest.raises(ConfigError, match="--done-in .*nope.csv: no such file"):
        done_ids([tmp_path / "nope.csv"])
    spec = tmp_path / "fake.yaml"
    spec.write_text(json.dumps(SPEC))
    capsys.readouterr()
    assert main(["sweep", str(spec), "--out", str(tmp_path / "c"), "--done-in", str(table), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count(" elsewhere ") == 2 and f"{len(ids)} runs; {len(ids) - 2} to do" in out


def test_completed_run_dir_is_adopted_without_running(tmp_path):
    plan = plan_sweep(SPEC)
    assert set(plan.action) == {"run"} and len(plan) == 12
    rid = plan.run_id.iloc[0]
    # a run whose worker finished but whose driver died before recording it
    run_sweep({**SPEC, "axes": {"init.gamma": [0.25], "optim.lr": [1e-4]}}, tmp_path,
              executor="inprocess", run_fn=fake_run)
    con = sqlite3.connect(tmp_path / "results.sqlite")
    with con:
        con.execute("UPDATE runs SET status = 'running' WHERE run_id = ?", (rid,))
        con.execute("DELETE FROM metrics WHERE run_id = ?", (rid,))
    con.close()
    assert plan_sweep(SPEC, tmp_path).set_index("run_id").loc[rid, "action"] == "resume"
    df = run_sweep(SPEC, tmp_path, executor="inprocess", run_fn=fake_run)
    assert calls(tmp_path, rid) == 1
    assert value(df, rid, "id_acc") == pytest.approx(fake_acc(0.25, 1e-4, 0))


def test_two_sweeps_share_a_store(tmp_path):
    run_sweep({"name": "a", "base": TINY, "axes": {"optim.lr": [1e-4]}}, tmp_path, "inprocess", run_fn=fake_run)
    df = run_sweep({"name": "b", "base": TINY, "axes": {"init.gamma": [0.25, 0.5]}}, tmp_path, "inprocess",
                   run_fn=fake_run)
    assert "optim.lr" not in df.columns and df.attrs["axes"] == ["init.gamma"]
    assert sorted(df.drop_duplicates("run_id")["init.gamma"]) == [0.25, 0.5]
    # gamma 0.5 with the default lr 1e-5 is not the run of sweep a (lr 1e-4, gamma 0.5)
    assert len(plan_sweep({"name": "a", "base": TINY, "axes": {"optim.lr": [1e-4]}}, tmp_path)
               .query("status == 'finished'")) == 1


def test_history_is_stored_and_can_be_left_out(tmp_path):
    from anchorlab.sweep.aggregate import history_table
    from anchorlab.sweep.store import ResultStore

    seen = []
    spec = {**SPEC, "zip": []}
    run_sweep(spec, tmp_path / "a", executor="inprocess", run_fn=fake_run,
              on_result=lambda r, s: seen.append((r.run_id, s)))
    assert len(seen) == 6 and {s for _, s in seen} == {"finished"}
    with ResultStore(tmp_path / "a" / "results.sqlite") as st:
        h = history_table(st.to_dataframe(kinds=("history",)), seen[0][0])
    assert h.step.tolist() == list(STEPS) and h.id_acc.iloc[0] == 0.0
    run_sweep(spec, tmp_path / "b", executor="inprocess", run_fn=fake_run, store_history=False)
    with ResultStore(tmp_path / "b" / "results.sqlite") as st:
        kinds = {k for (k,) in st.con.execute("SELECT DISTINCT kind FROM metrics")}
    assert kinds == {"final", "best"}


def test_run_fn_and_executor_resolution(tmp_path):
    assert resolve_run_fn("anchorlab.sweep.aggregate:lower_is_better")("train_loss") is True
    for bad in ("no_colon", "anchorlab.nope:fn", "anchorlab.sweep.runner:nope", 3):
        with pytest.raises(ConfigError, match="run_fn"):
            resolve_run_fn(bad)
    with pytest.raises(ConfigError, match="executor"):
        make_executor("threads")
    with pytest.raises(ConfigError, match="inprocess"):
        make_executor("inprocess", max_workers=4)
    assert isinstance(make_executor("inprocess", max_workers=None), InProcessExecutor)
    # a raising run function becomes a failed result, never an exception in the driver
    res = execute_run(functools.partial(fake_run, fail_gammas=(0.5,)), ExperimentConfig(), str(tmp_path))
    assert res["status"] == "failed" and "RuntimeError: boom at gamma=0.5" in res["error"]
    res = execute_run(lambda cfg, d: [1], ExperimentConfig(), str(tmp_path))
    assert res["status"] == "failed" and "expected a dict" in res["error"]
    assert outcome({"status": "interrupted"})[0] == "failed"
    assert outcome({"status": "finished", "final": {"ood_symmetric_acc": math.nan, "id_acc": 1.0,
                                                     "train_loss": 0.1}}) == ("finished", None)
    assert outcome({"status": "finished", "final": {"id_acc": 1.0, "train_loss": math.inf}})[0] == "diverged"
    assert outcome({"status": "finished", "final": {"id_acc": math.nan}})[0] == "diverged"


def test_ray_missing_gives_clear_error():
    try:
        import ray  # noqa: F401
        pytest.skip("ray is installed")
    except ImportError:
        pass
    with pytest.raises(ConfigError, match="ray is not installed"):
        make_executor("ray")


def test_worker_initializer_sets_torch_threads():
    import torch

    old = torch.get_num_threads()
    try:
        init_worker(2, parent_poll_s=None)
        assert torch.get_num_threads() == 2 and os.environ["OMP_NUM_THREADS"] == "2"
        init_worker(1, parent_poll_s=None)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(old)


# ------------------------------------------------------------------ SIGKILL story
def write_pid_and_sleep(path: str) -> None:
    Path(path).write_text(str(os.getpid()))
    time.sleep(60)


ORPHAN_DRIVER = """
import sys, time
sys.path.insert(0, {tests!r})
from test_sweep_runner import write_pid_and_sleep
from anchorlab.sweep.executors import LocalPoolExecutor
if __name__ == "__main__":
    ex = LocalPoolExecutor(1, torch_threads=None)
    ex.submit(write_pid_and_sleep, {pidfile!r})
    time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
def test_pool_worker_exits_when_only_the_sweep_process_is_killed(tmp_path):
    pidfile = tmp_path / "worker.pid"
    code = ORPHAN_DRIVER.format(tests=str(Path(__file__).parent), pidfile=str(pidfile))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    worker = None
    try:
        deadline = time.monotonic() + 120
        while not (pidfile.exists() and pidfile.read_text()):
            assert proc.poll() is None, f"driver exited early: {proc.stderr.read().decode()[-2000:]}"
            assert time.monotonic() < deadline, "worker never started"
            time.sleep(0.05)
        worker = int(pidfile.read_text())
        assert _alive(worker)
        proc.kill()                          # the sweep process alone, not its group
        proc.wait()
        deadline = time.monotonic() + 15
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(worker), "pool worker outlived its sweep process"
    finally:
        if proc.poll() is None:
            proc.kill()
        if worker is not None and _alive(worker):
            os.kill(worker, signal.SIGKILL)


DRIVER = """
import functools, sys
sys.path.insert(0, {tests!r})
from test_sweep_runner import SPEC, fake_run
from anchorlab.sweep.executors import LocalPoolExecutor
from anchorlab.sweep.runner import run_sweep
if __name__ == "__main__":
    ex = LocalPoolExecutor(2, torch_threads=None)
    run_sweep(SPEC, {out!r}, executor=ex, run_fn=functools.partial(fake_run, sleep=0.4))
    ex.shutdown()
"""


def _poll(db: Path) -> dict[str, str]:
    if not db.exists():
        return {}
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return dict(con.execute("SELECT run_id, status FROM runs"))
        finally:
            con.close()
    except sqlite3.OperationalError:
        return {}


def test_sigkill_mid_sweep_then_resume_matches_uninterrupted(tmp_path):
    out, fresh = tmp_path / "killed", tmp_path / "fresh"
    code = DRIVER.format(tests=str(Path(__file__).parent), out=str(out))
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while True:
            st = _poll(out / "results.sqlite")
            vals = list(st.values())
            if vals.count("finished") >= 2 and "running" in vals:
                break
            assert proc.poll() is None, f"driver exited early: {proc.stderr.read().decode()[-2000:]}"
            assert time.monotonic() < deadline, f"sweep made no progress: {st}"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)     # the driver and its pool workers, as in a node crash
        proc.wait()
        proc.stderr.close()

    at_kill = _poll(out / "results.sqlite")
    ids = list(at_kill)
    assert len(ids) == 12 and 2 <= list(at_kill.values()).count("finished") < 12
    starts = {i: calls(out, i) for i in ids}
    had_final = {i: (out / "runs" / i / "final.json").exists() for i in ids}

    df = run_sweep(SPEC, out, executor="inprocess", run_fn=fake_run)
    ref = run_sweep(SPEC, fresh, executor="inprocess", run_fn=fake_run)

    for i in ids:
        if at_kill[i] == "finished":
            assert calls(out, i) == starts[i] == 1                        # never run again
        else:                                                             # re-run once, or adopted
            assert calls(out, i) == starts[i] + (0 if had_final[i] else 1)
    con = sqlite3.connect(out / "results.sqlite")
    assert dict(con.execute("SELECT status, COUNT(*) FROM runs GROUP BY status")) == {"finished": 12}
    dup = con.execute("SELECT COUNT(*) FROM (SELECT 1 FROM metrics GROUP BY run_id, step, metric, kind "
                      "HAVING COUNT(*) > 1)").fetchone()[0]
    n_rows = con.execute("SELECT COUNT(*) FROM metrics").fetchone()[0]
    con.close()
    assert dup == 0
    con = sqlite3.connect(fresh / "results.sqlite")
    assert n_rows == con.execute("SELECT COUNT(*) FROM metrics").fetchone()[0]
    con.close()
    pd.testing.assert_frame_equal(canonical(df), canonical(ref))
    assert json.loads((out / "runs" / ids[0] / "final.json").read_text())["run_id"] == ids[0]


def test_sweep_trains_same_shape_runs_as_stacks_with_the_same_results(tmp_path):
    """stack='auto' groups same-shape runs into one stacked job; results equal single runs."""
    from anchorlab.sweep.runner import plan_jobs, run_sweep
    from anchorlab.sweep.grid import expand, load_sweep

    tiny = ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=1024",
            "task.n_eval_per_group=16", "train.batch_size=128", "train.epochs=1", "train.eval_every=4",
            "train.dtype=float64", "optim.lr=1e-3"]
    spec = {"name": "stk", "base": "demo/small", "set": tiny,
            "axes": {"init.gamma": [0.3, 0.8], "optim.weight_decay": [0.0, 0.1]}}
    jobs = plan_jobs(expand(load_sweep(spec)), "auto", 1, None)
    assert [len(j) for j in jobs] == [4]
    stacked = run_sweep(spec, tmp_path / "a", executor="inprocess", stack="auto")
    single = run_sweep(spec, tmp_path / "b", executor="inprocess", stack="never")
    key = ["run_id", "kind", "metric"]
    a = stacked[stacked.kind == "final"].sort_values(key).reset_index(drop=True)
    b = single[single.kind == "final"].sort_values(key).reset_index(drop=True)
    assert set(a.status) == {"finished"} and list(a.run_id) == list(b.run_id)
    assert list(a.metric) == list(b.metric)
    diff = (a.value - b.value).abs().fillna(0)
    assert float(diff.max()) < 1e-6


def test_a_resumed_sweep_finishes_what_it_started_first(tmp_path):
    """resume_ranks / order_jobs: runs with a checkpoint first, then runs of a task another of whose runs is done,
    then new tasks; the planned order (a task's runs together) kept within each class; a fresh sweep unchanged."""
    from anchorlab.sweep.grid import expand, load_sweep
    from anchorlab.sweep.runner import order_jobs, plan_jobs, resume_ranks

    spec = {"name": "order", "base": TINY, "axes": {"train.init_seed": [0, 1]},
            "zip": [{"task.value_min": [20, 21, 22, 23]}]}   # seeds vary slowest: seed 0 of every task first
    design = expand(load_sweep(spec))
    dir_of = lambda rid: tmp_path / rid  # noqa: E731
    by = {(r.config.train.init_seed, r.config.task.value_min): r for r in design}
    name = lambda jobs: [(r.config.train.init_seed, r.config.task.value_min) for j in jobs for r in j]  # noqa: E731
    assert set(resume_ranks(design, design, dir_of).values()) == {2}
    todo = [r for r in design if r is not by[(0, 20)] and r is not by[(0, 21)]]   # task 20 and 21: seed 0 done
    (tmp_path / by[(1, 22)].run_id).mkdir()
    (tmp_path / by[(1, 22)].run_id / "checkpoint.pt").write_bytes(b"")         # interrupted mid-run
    ranks = resume_ranks(todo, design, dir_of)
    single = [[r] for r in todo]                                               # stack "never": the design's order
    assert name(order_jobs(single, ranks)) == [(1, 22), (1, 20), (1, 21), (0, 22), (0, 23), (1, 23)]
    grouped = plan_jobs(todo, "auto", 2, None)                                  # tasks kept together
    assert name(grouped)[:2] == [(0, 22), (1, 22)]
    assert name(order_jobs(grouped, ranks))[:3] == [(1, 22), (1, 20), (1, 21)]
    assert name(order_jobs(grouped, {})) == name(grouped)
