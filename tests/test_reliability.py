"""Reliability of one run: checkpoint rotation and fallback, durable writes, numerics restore, progress lines.

Also the sweep spec's ``set:`` as a mapping.
"""

import io
import json
import logging
import os

import pytest
import torch

from anchorlab.cli import main
from anchorlab.config import ConfigError, experiment_from_dict
from anchorlab.io import atomic_write, write_text
from anchorlab.progress import Progress
from anchorlab.train import load_run, train
from anchorlab.train.checkpoint import CKPT, CORRUPT, PREV, CheckpointError, load_checkpoint, save_checkpoint
from anchorlab.train.run import flush_denormal, numerics

TINY = ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=1024", "task.n_eval_per_group=16",
        "train.batch_size=128", "train.epochs=2", "train.eval_every=4", "optim.lr=1e-3", "train.threads=1"]


# ------------------------------------------------------------------ checkpoints
def test_checkpoints_rotate_and_a_corrupt_latest_falls_back_with_a_warning(tmp_path, caplog):
    cfg = experiment_from_dict({}, TINY)
    full = train(cfg, tmp_path / "full").final
    run = tmp_path / "run"
    assert train(cfg, run, stop_after_step=8).final["status"] == "interrupted"
    assert torch.load(run / CKPT, weights_only=True)["step"] == 8
    assert torch.load(run / PREV, weights_only=True)["step"] == 4        # the one before is kept
    data = (run / CKPT).read_bytes()
    (run / CKPT).write_bytes(data[: len(data) // 2])                      # truncated, as by a full disk
    with caplog.at_level(logging.WARNING):
        resumed = train(cfg, run).final
    assert any("checkpoint.pt is unusable" in r.getMessage() and "step 4" in r.getMessage()
               for r in caplog.records)
    assert (run / CORRUPT).exists()                                       # moved aside for inspection
    assert resumed["final"] == full["final"] and resumed["steps"] == full["steps"]
    assert [h["step"] for h in resumed["history"]] == [h["step"] for h in full["history"]]


@pytest.mark.parametrize("damage", ["truncate", "garbage", "not_a_checkpoint"])
def test_no_usable_checkpoint_is_one_line_naming_the_file_and_how_to_start_over(tmp_path, capsys, damage):
    run = tmp_path / "r"
    overrides = TINY + ["train.epochs=1"]
    assert main(["train", "demo/small", "--out", str(run), "--no-progress", *[f"--set={o}" for o in overrides]]) == 0
    save_checkpoint(run, {"model": {}, "optimizer": {}, "step": 1})       # makes a .prev of the real one
    for name in (CKPT, PREV):
        p = run / name
        if damage == "truncate":
            p.write_bytes(p.read_bytes()[:100])
        elif damage == "garbage":
            p.write_bytes(os.urandom(2000))
        else:
            torch.save({"hello": 1}, p)
    (run / "final.json").unlink()                                         # make it resume
    capsys.readouterr()
    rc = main(["train", "demo/small", "--out", str(run), "--no-progress", *[f"--set={o}" for o in overrides]])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"{run / CKPT}: unusable checkpoint" in err and "checkpoint.prev.pt is unusable too" in err
    assert "To start the run over, delete checkpoint.pt and checkpoint.prev.pt" in err
    (run / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="unusable checkpoint"):
        load_run(run)                                                     # eval / analyze say the same
    # deleting them as told starts the run over
    (run / CKPT).unlink()
    (run / PREV).unlink()
    assert main(["train", "demo/small", "--out", str(run), "--no-progress", *[f"--set={o}" for o in overrides]]) == 0


def test_load_checkpoint_tries_the_previous_when_applying_fails(tmp_path):
    save_checkpoint(tmp_path, {"model": {"w": torch.ones(2)}, "optimizer": {}, "step": 1})
    save_checkpoint(tmp_path, {"model": {"w": torch.ones(3)}, "optimizer": {}, "step": 2})
    seen = []

    def apply(state):
        seen.append(state["step"])
        if state["model"]["w"].shape != (2,):
            raise RuntimeError("size mismatch for w")

    assert load_checkpoint(tmp_path, apply=apply)["step"] == 1 and seen == [2, 1]
    assert load_checkpoint(tmp_path / "empty") is None


def test_atomic_writes_fsync_the_file_and_its_folder(tmp_path, monkeypatch):
    synced = []
    real = os.fsync

    def spy(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    target = tmp_path / "sub" / "a.txt"
    write_text(target, "hello")
    assert target.read_text() == "hello"
    assert any(".a.txt." in s and s.endswith(".tmp") for s in synced)     # the data, before the rename
    assert synced[-1] == str(tmp_path / "sub")                            # the folder entry, after it
    with pytest.raises(RuntimeError):
        atomic_write(target, lambda p: (p.write_text("half"), (_ for _ in ()).throw(RuntimeError("disk"))))
    assert target.read_text() == "hello" and not list(target.parent.glob(".*.tmp"))


def test_a_line_cut_short_in_metrics_jsonl_does_not_stop_resume(tmp_path):
    cfg = experiment_from_dict({}, TINY)
    full = train(cfg, tmp_path / "full").final
    run = tmp_path / "run"
    train(cfg, run, stop_after_step=8)
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 12, "epoch": 1.5, "train_lo')                   # killed mid-append
    resumed = train(cfg, run).final
    assert resumed["final"] == full["final"]
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [h["step"] for h in full["history"]]


# ------------------------------------------------------------------ numerics
def test_numerics_restores_flush_denormal_tf32_and_threads(tiny_overrides):
    before = (flush_denormal(), torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
              torch.get_num_threads())
    try:
        for outside in (True, False):
            torch.set_flush_denormal(outside)
            torch.backends.cuda.matmul.allow_tf32 = outside
            torch.backends.cudnn.allow_tf32 = outside
            for inside in (True, False):
                cfg = experiment_from_dict({}, [f"train.flush_denormal={inside}", f"train.tf32={inside}",
                                                "train.threads=1"])
                with numerics(cfg, torch.device("cpu")):
                    assert flush_denormal() is inside
                    assert torch.backends.cudnn.allow_tf32 is inside
                    assert torch.get_num_threads() == 1
                assert flush_denormal() is outside, (outside, inside)
                assert torch.backends.cuda.matmul.allow_tf32 is outside
                assert torch.backends.cudnn.allow_tf32 is outside
    finally:
        torch.set_flush_denormal(before[0])
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before[1:3]
        torch.set_num_threads(before[3])


# ------------------------------------------------------------------ progress
def test_progress_writes_one_line_per_evaluation_when_not_a_terminal(tmp_path, capsys):
    cfg = experiment_from_dict({}, TINY)
    train(cfg, tmp_path / "r", progress=True)
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.strip().splitlines()
    n_evals = len(json.loads((tmp_path / "r" / "final.json").read_text())["history"]) - 1
    assert len(lines) == n_evals == 4, err
    assert lines[0].startswith("run [4/16 steps") and "step 4 train_loss=" in lines[0] and "id_acc=" in lines[0]


def test_progress_uses_a_bar_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    s = Tty()
    bar = Progress(True, 10, 0, "x", stream=s)
    for _ in range(10):
        bar.update()
    bar.show({"step": 10, "loss": 0.5}, ("loss",))
    bar.close()
    assert "\r" in s.getvalue() and "10/10" in s.getvalue()
    quiet = io.StringIO()
    off = Progress(False, 10, 0, "x", stream=quiet)
    off.update()
    off.show({"step": 1}, ())
    off.note("hi")
    assert quiet.getvalue() == ""


def test_cli_sweep_progress_is_lines_with_etas_off_a_terminal(tmp_path, capsys):
    import yaml

    spec = {"name": "p", "base": "demo/small", "set": TINY + ["train.epochs=0.5"], "axes": {"init.gamma": [0.3, 0.6]}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    assert main(["sweep", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o"), "--executor", "inprocess",
                 "--stack", "never"]) == 0
    err = capsys.readouterr().err
    finished = [line for line in err.splitlines() if " finished (init.gamma=" in line]
    assert len(finished) == 2 and "\r" not in err and finished[1].startswith("p [2/2 runs"), err
    assert all("; sweep ETA " in line for line in finished)
    evaluations = [line for line in err.splitlines() if " step " in line]      # one per evaluation the display saw
    assert all("; run ETA " in line and ", sweep ETA " in line for line in evaluations), err


# ------------------------------------------------------------------ sweep spec: set as a mapping
def test_sweep_set_accepts_a_mapping_and_strings_alike(tmp_path):
    from anchorlab.sweep.grid import expand, load_sweep, sweep_from_dict

    as_strings = {"name": "s", "base": "demo/small", "set": ["model.d_model=64", "optim.lr=1e-4", "task.n_train=5000"],
                  "axes": {"init.gamma": [0.3]}}
    as_mapping = {**as_strings, "set": {"model.d_model": 64, "optim.lr": 1.0e-4, "task.n_train": 5000}}
    mixed = {**as_strings, "set": ["model.d_model=64", {"optim.lr": 1.0e-4}, {"task.n_train": 5000}]}
    ids = [expand(s)[0].run_id for s in (as_strings, as_mapping, mixed)]
    assert len(set(ids)) == 1
    cfg = expand(as_mapping)[0].config
    assert (cfg.model.d_model, cfg.optim.lr, cfg.task.n_train) == (64, 1e-4, 5000)
    spec = sweep_from_dict(mixed)
    assert load_sweep(spec.to_dict()) == spec                             # round trip keeps the order and types
    assert expand(spec.to_dict())[0].run_id == ids[0]
    with pytest.raises(ConfigError, match="^model.d_modle: unknown key"):
        expand({**as_strings, "set": {"model.d_modle": 64}})
    for bad, msg in [([["x"]], r"set\[0\]: expected a mapping"), (["model.d_model"], r"set\[0\]: expected KEY=VALUE"),
                     ([{"": 3}], r"set\[0\]: keys"), (3, "set: expected"), ([{"a": 1, "b": 2}], r"set\[0\]")]:
        with pytest.raises(ConfigError, match=msg):
            sweep_from_dict({**as_strings, "set": bad})


# ------------------------------------------------------------------ a damaged run directory, a refused sweep
@pytest.mark.parametrize("text, says", [("name: x\ntask: [1, 2\n  model: {\n", "invalid YAML at line 3, column 8"),
                                        ("- just\n- a list\n", "top level must be a mapping")])
def test_a_corrupt_config_yaml_is_one_line_naming_the_file(tmp_path, capsys, text, says):
    run = tmp_path / "r"
    sets = [f"--set={o}" for o in TINY + ["train.epochs=1"]]
    assert main(["train", "demo/small", "--out", str(run), "--no-progress", *sets]) == 0
    (run / "config.yaml").write_text(text)
    capsys.readouterr()
    for args in (["eval", str(run)], ["train", "demo/small", "--out", str(run), "--no-progress", *sets],
                 ["analyze", str(run), "early-verdict"]):
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, (args, err)
        assert err.startswith(f"anchorlab: error: {run / 'config.yaml'}: {says}"), (args, err)


def test_a_refused_worker_count_leaves_no_sweep_files(tmp_path, capsys):
    from anchorlab.sweep.runner import run_sweep

    with pytest.raises(SystemExit) as e:
        main(["sweep", "fig2_cpu", "--workers", "0", "--out", str(tmp_path / "s")])
    assert e.value.code == 2 and "argument --workers: must be a positive integer" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()
    (tmp_path / "lib").mkdir()
    for bad in (0, -1, True):
        with pytest.raises(ConfigError, match=r"^max_workers: must be a positive integer"):
            run_sweep("fig2_cpu", tmp_path / "lib", max_workers=bad)
    assert not any((tmp_path / "lib").iterdir())
