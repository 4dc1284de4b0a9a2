"""What the command line tells a user: run state (start line, resume, already finished, unfinished eval),
help and defaults, presets, dry runs, errors that name the flag and the right command, no empty leftovers."""

import argparse
import json
import os
import re

import pytest

from anchorlab.cli import build_parser, main
from anchorlab.config import experiment_from_dict


def _sets(items):
    return [x for s in items for x in ("--set", s)]


@pytest.fixture
def tiny(tiny_overrides):
    return tiny_overrides + ["train.eval_every=8"]


# ------------------------------------------------------------------ run state
def test_train_says_what_it_will_do_and_a_finished_run_is_left_untouched(tmp_path, tiny, capsys):
    run = tmp_path / "run"
    args = ["train", "demo/small", "--out", str(run), "--no-progress", *_sets(tiny)]
    assert main(args) == 0
    out = capsys.readouterr().out
    line = out.splitlines()[0]
    assert line == (f"{run}: new run, 32 steps (16 per epoch at batch 256); evaluation every 8 steps and at the "
                    "end, checkpoint every 8; peak lr 0.002; task anchor on cpu")
    before = {p.name: p.stat().st_mtime_ns for p in run.iterdir()}
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"{run}: already finished (finished at step 32); nothing trained or rewritten"
    assert "status=finished" in out
    assert {p.name: p.stat().st_mtime_ns for p in run.iterdir()} == before
    assert main(["eval", str(run)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"{run}: step 32 of 32, finished"
    assert json.loads((run / "eval.json").read_text())["run_status"] == "finished"


def test_resume_is_announced_and_eval_of_an_unfinished_run_names_its_step(tmp_path, tiny, capsys):
    from anchorlab.train import train

    from anchorlab.config import load_config

    run = tmp_path / "run"
    train(load_config("demo/small", tiny), run, stop_after_step=8)
    assert main(["eval", str(run)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"{run}: step 8 of 32, unfinished (its latest checkpoint)"
    ev = json.loads((run / "eval.json").read_text())
    assert (ev["step"], ev["total_steps"], ev["run_status"]) == (8, 32, "unfinished") and "id_acc" in ev
    assert main(["train", "demo/small", "--out", str(run), "--no-progress", *_sets(tiny)]) == 0
    assert capsys.readouterr().out.startswith(f"{run}: resuming from step 8 of 32 (16 per epoch")
    assert main(["train", "demo/small", "--out", str(run), "--no-progress", "--set", "init.gamma=0.9"]) == 2
    assert capsys.readouterr().err.startswith(f"anchorlab: error: --out {run}: holds a different run")


def test_an_interrupted_train_promises_a_resume_only_with_a_checkpoint(tmp_path, tiny, capsys, monkeypatch):
    import anchorlab.train as T

    real = T.train

    def killed_after_a_checkpoint(cfg, out, **kw):
        real(cfg, out, stop_after_step=8)
        raise KeyboardInterrupt

    def killed_at_once(cfg, out, **kw):
        out.mkdir(parents=True, exist_ok=True)
        raise KeyboardInterrupt

    args = ["train", "demo/small", "--no-progress", *_sets(tiny)]
    monkeypatch.setattr(T, "train", killed_after_a_checkpoint)
    assert main([*args, "--out", str(tmp_path / "a")]) == 130
    err = capsys.readouterr().err
    assert "checkpoint at step 8" in err and "resumes from it" in err and str(tmp_path / "a") in err
    monkeypatch.setattr(T, "train", killed_at_once)
    assert main([*args, "--out", str(tmp_path / "b" / "run")]) == 130
    err = capsys.readouterr().err
    assert "no checkpoint yet; re-running starts from step 0" in err and "resumes" not in err
    assert not (tmp_path / "b").exists()                 # the empty folders it made are gone


def test_files_a_run_writes_are_readable_by_the_group(tmp_path, tiny):
    from anchorlab.train import train

    old = os.umask(0o022)
    try:
        train(experiment_from_dict({}, tiny), tmp_path / "run")
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "run").iterdir() if p.is_file()}
    assert {"final.json", "model.safetensors", "checkpoint.pt", "config.yaml"} <= set(modes)
    assert set(modes.values()) == {0o644}, modes


# ------------------------------------------------------------------ help, presets, version
def _actions(parser):
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                yield from ((name, b) for b in sp._actions)
        else:
            yield "anchorlab", a


def test_every_flag_has_help_and_shows_its_default(capsys):
    p = build_parser()
    for cmd, a in _actions(p):
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction, argparse._VersionAction)):
            continue
        assert a.help, (cmd, a.dest)
    for cmd in ("train", "sweep", "robustness", "demo", "reproduce", "eval", "config"):
        with pytest.raises(SystemExit):
            main([cmd, "-h"])
        text = " ".join(capsys.readouterr().out.split())
        for _, a in ((c, a) for c, a in _actions(p) if c == cmd):
            d = a.default
            if a.option_strings and not (d is None or d is False or d is argparse.SUPPRESS or d == []):
                assert f"default: {a.default}" in text, (cmd, a.dest)
    with pytest.raises(SystemExit):
        main(["-h"])
    assert "workflow:" in capsys.readouterr().out


def test_version_verbose_after_the_command_and_preset_lists(capsys):
    from anchorlab import __version__

    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"anchorlab {__version__}"
    assert build_parser().parse_args(["config", "demo/small", "-v"]).verbose is True
    assert build_parser().parse_args(["-v", "config", "demo/small"]).verbose is True
    assert build_parser().parse_args(["config", "demo/small"]).verbose is False
    assert main(["config", "--list"]) == 0
    out = capsys.readouterr().out
    assert "  demo/small" in out and "  neurips/paper" in out
    assert main(["sweep", "--list"]) == 0
    assert "  fig2_cpu" in capsys.readouterr().out


def test_config_prints_the_peak_lr_and_how_it_follows_from_optim_lr(capsys):
    assert main(["config", "demo/small", "--set", "optim.lr=1e-4", "--set", "optim.warmup_multiplier=5"]) == 0
    out = capsys.readouterr().out
    assert "# peak lr 0.0005 (optim.lr x optim.warmup_multiplier = 0.0001 x 5)" in out
    assert main(["config", "demo/small", "--set", "optim.peak_lr=3e-3"]) == 0
    assert "# peak lr 0.003 (optim.peak_lr)" in capsys.readouterr().out


def test_the_committed_config_reference_is_the_generated_one():
    from pathlib import Path

    from anchorlab.config.reference import config_reference

    text = config_reference()
    committed = (Path(__file__).resolve().parents[1] / "docs" / "config_reference.md").read_text()
    assert committed == text, "docs/config_reference.md is stale: anchorlab config --reference > docs/config_reference.md"
    for field in ("`gamma`", "`peak_lr`", "`stop_when`", "`n_train`", "`warmup_multiplier`", "(task.name: concepts)"):
        assert field in text, field


# ------------------------------------------------------------------ dry runs, --set on sweep
def test_dry_runs_print_the_runs_and_their_cost_and_train_nothing(tmp_path, tiny, capsys):
    assert main(["demo", "--task", "neurips", "--out", str(tmp_path / "d"), "--dry-run", *_sets(tiny)]) == 0
    out = capsys.readouterr().out
    assert "2 runs; 2 to do" in out and re.search(r"~[\d.e+-]+ h on this CPU", out) and "nothing was trained" in out
    assert main(["robustness", "--out", str(tmp_path / "r"), "--op-sets", "2", "--seeds", "1", "--dry-run",
                 *_sets(tiny)]) == 0
    out = capsys.readouterr().out
    assert "4 runs; 4 to do" in out and "h on one GPU" in out
    assert main(["sweep", "fig2_cpu", "--out", str(tmp_path / "s"), "--dry-run", "--set", "train.epochs=1"]) == 0
    out = capsys.readouterr().out
    assert "16 runs; 16 to do" in out
    assert not any(tmp_path.iterdir())


def test_sweep_set_changes_every_run(tmp_path, capsys):
    from anchorlab.sweep.grid import expand, load_sweep, resolve_sweep

    assert main(["sweep", "fig2_cpu", "--dry-run", "--out", str(tmp_path / "s"), "--set", "train.epochs=1"]) == 0
    ids = set(re.findall(r"\b[0-9a-f]{12}\b", capsys.readouterr().out))
    plain = {r.run_id for r in expand(load_sweep(resolve_sweep("fig2_cpu")))}
    assert len(ids) == 16 and not ids & plain


# ------------------------------------------------------------------ errors
def test_errors_name_the_flag_and_what_to_run_instead(tmp_path, capsys):
    assert main(["train", "demo/small", "--set", "init.gamma=9", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("anchorlab: error: init.gamma") and err.strip().endswith("(from --set init.gamma=9)")
    assert main(["train", "demo/small", "--set", "init.gama=0.5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("anchorlab: error: init.gama: unknown key") and "(from --set init.gama=0.5)" in err
    assert main(["train", "fig2_cpu"]) == 2
    assert "is a sweep spec, not a config; run it with `anchorlab sweep fig2_cpu`" in capsys.readouterr().err
    sweep = tmp_path / "sw"
    sweep.mkdir()
    (sweep / "results.sqlite").write_bytes(b"")
    assert main(["eval", str(sweep)]) == 2
    assert f"is a sweep directory, not a run; `anchorlab report {sweep}`" in capsys.readouterr().err
    assert main(["train", str(sweep)]) == 2
    assert "is a sweep directory, not a config" in capsys.readouterr().err
    assert main(["eval", "fig2_cpu"]) == 2
    assert "`anchorlab sweep fig2_cpu` runs it" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    assert main(["report", str(tmp_path / "nothing" / "sw")]) == 2     # failed before any file: no folders left
    assert main(["analyze", str(tmp_path / "x"), "flow-scores", "--option", "bogus=1", "--out",
                 str(tmp_path / "nothing" / "a")]) == 2
    assert not (tmp_path / "nothing").exists()


# ------------------------------------------------------------------ README
def test_the_readme_python_snippet_runs_as_pasted(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    blocks = re.findall(r"```python\n(.*?)```", (root / "README.md").read_text(), re.S)
    assert len(blocks) == 1
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", blocks[0]], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stdout.splitlines()
    assert lines[0] == "0.0002 0.002" and lines[1].startswith("finished ")
    assert "torch.Size([8, 9, 201]) torch.Size([8, 1, 9, 9])" in res.stdout and "measured_std" in res.stdout
    assert not any(tmp_path.iterdir())       # a fresh temporary folder, nothing in the working directory


def test_a_reader_that_stops_early_gets_no_traceback():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")])}
    code = ("import sys; from anchorlab.cli import main\n"
            "for _ in range(20):             # more than a pipe buffer holds\n"
            "    rc = main(['config', '--reference'])\n"
            "    if rc: sys.exit(rc)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    p.stdout.readline()
    p.stdout.close()                         # like `| head -1`
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141 and "Traceback" not in err, err


# ------------------------------------------------------------------ the first hour
@pytest.mark.parametrize("seeds", ["0", "-2"])
def test_demo_refuses_fewer_than_one_seed_before_training(tmp_path, capsys, seeds):
    from anchorlab.config import ConfigError
    from anchorlab.papers.demo import demo_spec

    with pytest.raises(SystemExit) as e:
        main(["demo", "--out", str(tmp_path / "d"), "--seeds", seeds])
    assert e.value.code == 2
    assert f"argument --seeds: must be a positive integer (1 or more), got {seeds}" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()
    with pytest.raises(ConfigError, match=r"^seeds: must be a positive integer"):
        demo_spec(seeds=int(seeds))


@pytest.mark.parametrize("args, name, where", [
    (["demo", "--set", "task.name=addition"], "addition", "(from --set task.name=addition)"),
    (["robustness", "addition/cpu"], "addition", "(in addition/cpu)"),
    (["robustness", "scan/cpu", "--dry-run"], "scan", "(in scan/cpu)"),
])
def test_demo_and_robustness_say_they_are_anchor_only(tmp_path, capsys, args, name, where):
    assert main([*args, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "unknown key" not in err
    assert err.startswith(f"anchorlab: error: {args[0]}: anchor task only")
    assert f"task.name is {name!r} {where}" in err
    assert not (tmp_path / "o").exists()


def test_preset_lists_give_each_preset_one_line_from_its_first_comment(capsys):
    from anchorlab.config import preset_names
    from anchorlab.config.base import PRESET_DIR
    from anchorlab.sweep.presets import sweep_presets

    sweeps = sweep_presets()
    for cmd, names, path in (("config", preset_names(), lambda n: PRESET_DIR / f"{n}.yaml"),
                             ("sweep", list(sweeps), sweeps.get)):
        assert main([cmd, "--list"]) == 0
        lines = capsys.readouterr().out.splitlines()[1:]
        assert [ln.split()[0] for ln in lines] == names
        for name, line in zip(names, lines):
            first = path(name).read_text().splitlines()[0]
            assert first.startswith("# ") and line.split(None, 1)[1] == first[2:].strip(), name


def test_a_preset_without_a_first_comment_line_lists_with_no_description(tmp_path):
    from anchorlab.config.base import preset_summary

    (tmp_path / "a.yaml").write_text("\n# the summary\n# more\nname: x\n")
    (tmp_path / "b.yaml").write_text("name: x  # not a summary\n")
    assert preset_summary(tmp_path / "a.yaml") == "the summary" and preset_summary(tmp_path / "b.yaml") == ""


def test_help_examples_are_current(capsys):
    for args in (["-h"], ["config", "-h"], ["train", "-h"], ["sweep", "-h"]):
        with pytest.raises(SystemExit):
            main(args)
        text = capsys.readouterr().out
        assert "gamma=0.8" not in text and "min on a CPU" not in text, args
    with pytest.raises(SystemExit):
        main(["-h"])
    text = capsys.readouterr().out
    assert "anchorlab demo --out demo_out --dry-run" in text and "init.gamma=0.45" in text


def test_the_command_line_is_one_package_and_runs_as_a_module():
    import subprocess
    import sys
    from pathlib import Path

    import anchorlab
    import anchorlab.cli

    src = Path(anchorlab.__file__).parent
    assert Path(anchorlab.cli.__file__).parent == src / "cli" and not list(src.glob("cli_*.py"))
    r = subprocess.run([sys.executable, "-m", "anchorlab.cli", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == f"anchorlab {anchorlab.__version__}", r.stderr[-2000:]


def test_without_the_committed_figures_the_early_verdict_is_one_line_saying_where(tmp_path, tiny, capsys, monkeypatch):
    """A plain `pip install` has no docs/figures: the default verdict model is missing, said in one line."""
    from pathlib import Path

    from anchorlab.io import figures_dir

    monkeypatch.delenv("ANCHORLAB_FIGURES", raising=False)
    assert figures_dir() == Path(__file__).resolve().parents[1] / "docs" / "figures"
    assert (figures_dir() / "early_verdict_demo.json").is_file()
    run = tmp_path / "run"
    assert main(["train", "demo/small", "--out", str(run), "--no-progress", *_sets(tiny)]) == 0
    monkeypatch.setenv("ANCHORLAB_FIGURES", str(tmp_path / "no-figures"))
    capsys.readouterr()
    assert main(["analyze", str(run), "early-verdict", "--out", str(tmp_path / "an")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"no file {tmp_path / 'no-figures' / 'early_verdict_demo.json'} (from $ANCHORLAB_FIGURES)" in err
    assert "set ANCHORLAB_FIGURES to that folder" in err and "--option model=FILE" in err
    assert not (tmp_path / "an").exists()
