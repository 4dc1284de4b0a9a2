"""Long runs a user can trust: one driver per sweep folder (anchorlab.sweep.lock), finals of the last step."""

import json
import re
import logging
import os
import subprocess
import sys

import pytest

from anchorlab.config import ConfigError
from anchorlab.sweep.lock import LOCK_NAME, driver_lock, read_lock


def _lock_as(path, pid, host=None):
    import socket

    path.mkdir(parents=True, exist_ok=True)
    (path / LOCK_NAME).write_text(json.dumps({"pid": pid, "host": host or socket.gethostname(), "started": 0,
                                              "command": "anchorlab reproduce neurips-fig2 --out x"}))


def test_a_second_driver_is_refused_in_one_line_naming_the_first(tmp_path):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        _lock_as(tmp_path, other.pid)
        with pytest.raises(ConfigError) as e:
            with driver_lock(tmp_path):
                pass
        msg = str(e.value)
        assert "\n" not in msg and f"pid {other.pid}" in msg and "anchorlab reproduce neurips-fig2" in msg
        assert "another driver is running in it" in msg
        assert read_lock(tmp_path)["pid"] == other.pid          # the first driver's lock is left alone
    finally:
        other.kill()
        other.wait()


def test_a_stale_lock_is_taken_over_and_says_so(tmp_path, caplog):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _lock_as(tmp_path, dead.pid)
    with caplog.at_level(logging.WARNING):
        with driver_lock(tmp_path):
            assert read_lock(tmp_path)["pid"] == os.getpid()
    assert "taking over a stale lock" in caplog.text and f"pid {dead.pid}" in caplog.text
    assert not (tmp_path / LOCK_NAME).exists()


def test_the_lock_is_released_when_the_driver_fails(tmp_path):
    with pytest.raises(RuntimeError):
        with driver_lock(tmp_path):
            raise RuntimeError("boom")
    assert not (tmp_path / LOCK_NAME).exists()
    with driver_lock(tmp_path):
        pass


def test_another_hosts_lock_is_refused_with_how_to_clear_it(tmp_path):
    _lock_as(tmp_path, 1, host="elsewhere")
    with pytest.raises(ConfigError, match=r"if that driver is gone, remove .*\.driver\.lock"):
        with driver_lock(tmp_path):
            pass


def test_run_sweep_into_a_busy_folder_trains_nothing(tmp_path, tiny_overrides):
    from anchorlab.sweep.runner import run_sweep

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        _lock_as(tmp_path, other.pid)
        spec = {"name": "t", "base": "demo/small", "set": list(tiny_overrides), "axes": {"init.gamma": [0.3]}}
        with pytest.raises(ConfigError, match="another driver is running in it"):
            run_sweep(spec, tmp_path, executor="inprocess")
        assert not (tmp_path / "results.sqlite").exists() and not (tmp_path / "runs").exists()
    finally:
        other.kill()
        other.wait()


def test_a_repaired_runs_final_metrics_are_its_last_steps(tmp_path, tiny_overrides, caplog):
    """final.json gone and the last metrics line cut: the re-run's final metrics are the last step's (evaluated
    again from the weights), never the earlier evaluation's."""
    from anchorlab import load_config
    from anchorlab.train import load_run, train

    cfg = load_config("demo/small", [*tiny_overrides, "train.eval_every=10"])
    run = tmp_path / "r"
    first = train(cfg, run)
    total = first.final["steps"]
    assert total % 10 != 0                                 # the last evaluation is the end's own
    (run / "final.json").unlink()
    lines = (run / "metrics.jsonl").read_text().splitlines()
    (run / "metrics.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:25])   # the last line cut
    with caplog.at_level(logging.WARNING):
        again = train(cfg, run)
    assert "evaluating the weights at step" in caplog.text
    assert again.final["steps"] == total and again.final["history"][-1]["step"] == total
    assert again.final["final"]["id_acc"] == pytest.approx(first.final["final"]["id_acc"])
    res = load_run(run)
    m = res.task.evaluate(res.model, res.task.eval_data(cfg.train.data_seed)).metrics
    assert again.final["final"]["id_acc"] == pytest.approx(m["id_acc"])


def test_workers_beyond_the_cores_are_lowered_in_one_line(tmp_path, capsys, monkeypatch):
    from anchorlab import cli

    monkeypatch.setattr(cli, "local_cores", lambda: 2)
    assert cli.main(["demo", "--workers", "100", "--dry-run", "--out", str(tmp_path / "d")]) == 0
    captured = capsys.readouterr()
    assert captured.err.strip() == "anchorlab: --workers 100: this machine has 2 core(s); using 2"
    assert "with 2 worker(s)" in captured.out
    assert cli.main(["sweep", "fig2_cpu", "--executor", "ray", "--workers", "100", "--dry-run",
                     "--out", str(tmp_path / "s")]) == 0
    assert "using" not in capsys.readouterr().err          # a Ray cluster's workers are not this machine's


# ------------------------------------------------------------------ one line for every path mistake
@pytest.mark.parametrize("args", [
    ["train", "demo/small", "--set", "train.epochs=0.01"],
    ["demo"],
    ["sweep", "fig2_demo"],
])
def test_an_out_under_a_file_is_one_line_and_leaves_nothing(tmp_path, capsys, args):
    from anchorlab.cli import main

    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main([*args, "--out", str(afile / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is a file, not a folder" in err and err.startswith("anchorlab: error: --out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_an_out_that_cannot_be_created_is_one_line(tmp_path, capsys, monkeypatch):
    from pathlib import Path

    from anchorlab.cli import main

    def refuse(self, *a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "mkdir", refuse)
    assert main(["demo", "--out", str(tmp_path / "new" / "demo")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"anchorlab: error: --out {tmp_path / 'new' / 'demo'}: cannot be created (Permission denied)"


def test_the_wrong_figures_table_is_one_line(tmp_path, capsys):
    from pathlib import Path

    from anchorlab.cli import main

    figs = Path(__file__).parents[1] / "docs" / "figures"
    assert main(["reproduce", "journal-fig3", "--from-table", str(figs / "fig2_cell_cpu.csv"), "--no-train",
                 "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a run table that figure journal-fig3 can draw" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("extra, words", [(["--executor", "inprocess", "--workers", "2"], "runs one job at a time"),
                                          (["--executor", "ray"], "ray is not installed")])
def test_a_refused_executor_leaves_no_files(tmp_path, capsys, extra, words):
    import importlib.util

    from anchorlab.cli import main

    if "ray" in extra and importlib.util.find_spec("ray") is not None:
        pytest.skip("ray is installed here")
    assert main(["sweep", "fig2_demo", *extra, "--out", str(tmp_path / "s")]) == 2
    assert words in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


# ------------------------------------------------------------------ no machine paths in what is committed
def test_committed_tables_and_docs_hold_no_machine_path():
    import re
    from pathlib import Path

    root = Path(__file__).parents[1]
    machine = re.compile(r"(?<![\w.])/(work|root|home|tmp|Users)/")
    files = [*root.glob("docs/**/*.md"), *root.glob("docs/figures/*.csv"), root / "README.md"]
    hits = [f"{f.relative_to(root)}" for f in files if machine.search(f.read_text(errors="replace"))]
    assert hits == []


def test_written_tables_keep_paths_relative(tmp_path):
    import pandas as pd

    from anchorlab.io import portable_paths

    out = tmp_path / "fig"
    t = pd.DataFrame({"source": [str(out / "sweep"), "docs/figures/x.csv"],
                      "run_dir": [str(out / "sweep" / "runs" / "abc"), ""], "x": [1, 2]})
    p = portable_paths(t, out)
    assert list(p.source) == ["sweep", "docs/figures/x.csv"] and list(p.run_dir) == ["runs/abc", ""]
    assert list(p.x) == [1, 2] and t.source.iloc[0].startswith("/")          # the caller's table is left alone


# ------------------------------------------------------------------ progress and status
def _fake_sweep(out, n_runs=3, running_step=500, total=1000, wall=50.0):
    """A sweep folder with one finished, one running (plan.json + metrics rows) and pending runs."""
    from anchorlab import load_config
    from anchorlab.sweep.grid import expand, load_sweep
    from anchorlab.sweep.store import ResultStore

    spec = load_sweep({"name": "t", "base": "demo/small", "axes": {"init.gamma": [0.3, 0.5, 0.8][:n_runs]}})
    runs = expand(spec)
    with ResultStore(out / "results.sqlite", axes=spec.axis_keys) as store:
        store.register("t", runs, lambda rid: f"runs/{rid}")
        store.record_result(runs[0].run_id, {"final": {"id_acc": 1.0}, "steps": total}, "finished")
        store.mark_running(runs[1].run_id)
    d = out / "runs" / runs[1].run_id
    d.mkdir(parents=True)
    (d / "plan.json").write_text(json.dumps({"total_steps": total, "from_step": 0, "wall_before": 0.0}))
    rows = [{"step": s, "wall_seconds": wall * s / running_step, "id_acc": 0.5} for s in (0, running_step)]
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 6')   # a line being written
    return runs


def test_status_says_done_running_left_and_the_eta(tmp_path, capsys):
    from anchorlab.cli import main

    runs = _fake_sweep(tmp_path)
    assert main(["status", str(tmp_path), "--workers", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{tmp_path}: 1 of 3 runs done, 1 running, 1 left; ETA ")
    # the running run: 500 of 1000 steps at 10 steps/s -> 50 s left; the pending one: its config's 4,680 steps
    # (demo/small: 12 epochs of 390) at the same rate -> 468 s; one worker: 518 s
    assert runs[2].config.train.plan(runs[2].config.task.n_train)[1] == 4680 and "ETA 8m38s" in out[0]
    assert out[1] == f"  run {runs[1].run_id}: step 500/1,000 (50%), 10.0 steps/s, ETA 50s"


def test_the_live_display_writes_a_line_per_evaluation_on_a_pipe(tmp_path):
    import io

    from anchorlab.sweep.watch import SweepMonitor

    runs = _fake_sweep(tmp_path)
    stream = io.StringIO()
    mon = SweepMonitor(tmp_path, 2, 1, "t", stream=stream, keys=("id_acc",))
    d = tmp_path / "runs" / runs[1].run_id
    mon.tick([(runs[1].run_id, d)])
    mon.tick([(runs[1].run_id, d)])            # nothing new: no second line
    mon.finished(runs[1], "finished")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert f"run {runs[1].run_id} step 500/1,000 id_acc=0.5; run ETA 50s, sweep ETA " in lines[0]
    assert lines[1].startswith("t [1/2 runs") and "finished (init.gamma=0.5); sweep ETA" in lines[1]


def test_a_training_line_on_a_pipe_carries_its_eta():
    import io

    from anchorlab.progress import Progress

    s = io.StringIO()
    p = Progress(True, 100, 0, "run", stream=s)
    p.update(50)
    p.show({"step": 50, "id_acc": 0.5}, ["id_acc"])
    assert "ETA " in s.getvalue() and "[50/100 steps" in s.getvalue()


# ------------------------------------------------------------------ estimates of this machine
def test_the_probe_times_this_cpu_once_and_caches_it(tiny_overrides, probe_on, monkeypatch):
    from anchorlab import load_config
    from anchorlab.sweep import probe as pr

    cfg = load_config("demo/small", tiny_overrides)
    secs = pr.run_seconds(cfg)
    _, total, every = cfg.train.plan(cfg.task.n_train)
    got = json.loads((probe_on / pr.CACHE_FILE).read_text())[pr.shape_key(cfg)]
    assert secs == pytest.approx(total * got["step"] + (total // every + 2) * got["eval"]) and secs > 0

    def no_timing(*a, **k):
        raise AssertionError("timed again")

    monkeypatch.setattr(pr, "_step_seconds", no_timing)
    assert pr.run_seconds(cfg) == secs                                   # from the cache
    other = load_config("demo/small", [*tiny_overrides, "init.gamma=0.8", "train.init_seed=3"])
    assert pr.shape_key(other) == pr.shape_key(cfg)                      # init and seeds do not change a step
    wider = load_config("demo/small", [*tiny_overrides, "model.d_ff=128"])
    assert pr.shape_key(wider) != pr.shape_key(cfg)
    secs2, unknown = pr.sweep_seconds([cfg, other, cfg], 2)
    assert unknown == 0 and secs2 == pytest.approx(2 * secs)            # three runs on two cores: two lanes' worth


def test_a_dry_run_says_the_probes_estimate(tmp_path, tiny_overrides, capsys, probe_on):
    from anchorlab.cli import main

    assert main(["demo", "--task", "neurips", "--dry-run", "--out", str(tmp_path / "d"),
                 *[x for s in tiny_overrides for x in ("--set", s)]]) == 0
    out = capsys.readouterr().out
    assert re.search(r"measured here: ~\d+(m\d\ds|s) with 2 worker\(s\) on this CPU \(a timed probe", out)
