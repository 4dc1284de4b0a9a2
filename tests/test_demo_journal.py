"""The demo on the journal's task (the README's first command): its files, its answers, its rate table."""

import json
import math
import shlex
from pathlib import Path

import pandas as pd
import pytest

from anchorlab.papers import demo_journal as dj
from anchorlab.cli import main
from anchorlab.config import ConfigError

TINY = ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=1024", "task.n_eval_per_group=16",
        "train.batch_size=256", "train.epochs=1", "train.eval_every=2"]
FIGS = Path(__file__).parents[1] / "docs" / "figures"


def _sets(sets):
    return [a for s in sets for a in ("--set", s)]


def test_the_journal_demo_writes_each_models_answers_verdict_and_figure(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--workers", "1", "--seed", "3", *_sets(TINY)]) == 0
    out = capsys.readouterr().out
    assert "journal's task ((3,4) and (4,3) unseen" in out and "expected time:" in out
    written = json.loads((tmp_path / "summary.json").read_text())
    models = written["models"]
    assert [m["arm"] for m in models] == ["large_init", "small_init"]
    for m in models:
        assert {"arm", "init.gamma", "paper_gamma", "final.id_acc", "final.ood_acc", "best.ood_acc", "verdict",
                "top_answer", "precision_label"} <= set(m)
        assert m["seed"] == 3 and m["op_set"] == "{1:+5,2:+1,3:-2,4:-8}"
        shares = [m[f"answer_{k.replace(' ', '_')}"] for k in dj.ANSWERS]
        assert math.isclose(sum(shares), 1.0, abs_tol=1e-9)
        # the unseen pairs' accuracy is the share of composed answers
        assert math.isclose(m["answer_composition"], m["final.ood_acc"], abs_tol=1e-6)
        assert m["verdict"] == dj.verdict(m["final.id_acc"], m["final.ood_acc"])
        # paper gamma: the NeurIPS convention (std at width 400) of the journal gamma (std at width 640)
        assert math.isclose(400 ** -m["paper_gamma"], 640 ** -m["init.gamma"], rel_tol=5e-3)
    assert [m["init.gamma"] for m in models] == [0.4, 0.8]
    assert written["rule"] == dj.RULE
    rate = pd.read_csv(tmp_path / "rate.csv")
    assert list(rate.columns[:len(dj.RATE_COLUMNS)]) == dj.RATE_COLUMNS and len(rate) == 2
    assert (tmp_path / "demo.png").stat().st_size > 5000
    assert (tmp_path / "small_init" / "final.json").exists()
    # each model's verdict line, the rule, the measured rate per op set, then one plain sentence
    assert out.count("top answer on the unseen pairs") == 2 and "rule: small init composes" in out
    assert "seeds (small init composes" in out
    assert out.split("\nwrote ")[0].rstrip().splitlines()[-1].startswith("In plain words: the large init ")


def test_the_demo_spec_is_the_preset_at_two_gammas_with_seeds_together():
    s = dj.spec(seeds=3, first_seed=4)
    assert s["axes"] == {"init.gamma": [0.4, 0.8]}
    assert s["zip"] == [{"train.init_seed": [4, 5, 6], "train.data_seed": [4, 5, 6]}]
    assert s["base"]["task"]["preset"] == "journal" and s["base"]["init"]["ref_width"] == 640
    op = dj.spec(op_set=2)["set"][-1]["task.anchors"]
    assert op == dj.op_set_steps(2) and op != dj.op_set_steps(0)


@pytest.mark.parametrize("bad", ["init.gamma=0.6", "train.init_seed=3", "task.anchors={1: 2}"])
def test_the_demo_refuses_overrides_it_would_ignore(bad):
    with pytest.raises(ConfigError, match=r"the demo sets .* itself \(allowed instead: --seed"):
        dj.spec([bad])


def test_the_cli_refuses_journal_only_flags_on_the_mirror_demo_and_the_reverse(tmp_path, capsys):
    assert main(["demo", "--task", "neurips", "--seed", "2", "--out", str(tmp_path / "a")]) == 2
    assert "--task journal only" in capsys.readouterr().err
    assert main(["demo", "--peak-lrs", "1e-3", "--out", str(tmp_path / "b")]) == 2
    assert "--task neurips only" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_the_mirror_demo_is_one_flag_away(tmp_path, capsys):
    assert main(["demo", "--task", "neurips", "--dry-run", "--out", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert "2 runs; 2 to do" in out and "0.45" in out
    assert main(["demo", "--dry-run", "--out", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert "2 runs; 2 to do" in out and "0.8" in out and "expected time:" in out


def test_verdicts_and_the_seed_judgement():
    assert dj.verdict(0.95, 0.9).startswith("composes")
    assert dj.verdict(0.95, 0.1).startswith("memorized")
    assert dj.verdict(0.5, 0.9).startswith("unfit")
    assert dj.verdict(0.95, 0.5) == "in between"
    t = pd.DataFrame({"op_set": ["a"] * 4, "seed": [0, 0, 1, 1], "arm": ["large_init", "small_init"] * 2,
                      "final.id_acc": [1.0, 0.95, 1.0, 0.85], "final.ood_acc": [0.05, 0.9, 0.0, 0.9]})
    j = dj.judge_seeds(t)
    assert list(j.contrast) == [True, False] and list(j.small_composes) == [True, False]
    s = dj.rate_summary(t).iloc[0]
    assert (s.seeds, s.small_composes, s.large_memorizes, s.contrast) == (2, 1, 2, 1)


def test_journal_op_sets_are_valid_and_the_papers_steps_are():
    from anchorlab.tasks.anchor.opsets import PAPERS, journal_op_set_problems, journal_op_sets

    assert journal_op_set_problems(PAPERS["anchors"]) == []
    for a in journal_op_sets(6):
        assert journal_op_set_problems(a) == [] and a != PAPERS["anchors"]
    # (1,2)'s target equals the unseen composition: refused
    assert "also the trained pair (1, 2)" in journal_op_set_problems({1: 1, 2: 4, 3: 2, 4: 3})[0]
    assert journal_op_set_problems({1: 1, 2: 1, 3: 2, 4: 3})


# ------------------------------------------------------------------ the committed rate
def test_the_committed_rate_table_holds_the_demos_runs_and_the_papers_bar():
    """demo_rate_cpu.csv is what RATE_STUDY trains: the papers' steps over seeds 0-9 and two other step sets over
    seeds 0-2, both arms, with the run ids the demo's spec gives (so the command reproduces the table)."""
    from anchorlab.sweep.grid import expand, load_sweep

    rate = pd.read_csv(FIGS / dj.RATE_TABLE)
    assert list(rate.columns[:len(dj.RATE_COLUMNS)]) == dj.RATE_COLUMNS
    want = set()
    for op, seeds in ((0, 10), (1, 3), (2, 3)):
        want |= {r.run_id for r in expand(load_sweep(dj.spec(seeds=seeds, op_set=op)))}
    assert set(rate.run_id) == want
    s = dj.rate_summary(rate)
    assert list(s.seeds) == [10, 3, 3]
    for part in shlex.split(dj.RATE_STUDY.split(";")[0])[1:2]:
        assert part == "demo"


def test_the_expected_time_is_read_from_the_committed_table(monkeypatch, tmp_path, probe_on):
    rate = pd.read_csv(FIGS / dj.RATE_TABLE)
    papers = rate[rate.op_set == rate.op_set.iloc[0]]
    assert dj.expected_seconds() == pytest.approx(float(papers.groupby("seed").wall_seconds.max().median()))
    line = dj.expected_line(overrides=["train.epochs=0.1"])
    assert line.startswith("expected time: ~") and "on this CPU (a timed probe" in line and "the committed runs took" in line
    monkeypatch.setenv("ANCHORLAB_FIGURES", str(tmp_path))
    assert dj.expected_seconds() is None and "committed" not in dj.expected_line(overrides=["train.epochs=0.1"])
    assert "demo_rate_cpu.csv" in dj.measured_lines()[0]


def test_the_mirror_demo_refuses_the_gamma_it_would_ignore(tmp_path, capsys):
    assert main(["demo", "--task", "neurips", "--set", "init.gamma=0.8", "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "the demo sets init.gamma itself" in err
    assert not (tmp_path / "d").exists()
