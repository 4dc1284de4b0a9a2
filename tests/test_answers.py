"""The answers analysis: every answer on a held-out pair, named composition / mirror / a trained pair's target."""

from pathlib import Path

import pandas as pd
import pytest
import torch

from anchorlab.analysis.answers import AnswersOptions, answer_kinds, answers_summary, compute_answers
from anchorlab.config import ConfigError, experiment_from_dict
from anchorlab.tasks.base import build_task
from anchorlab.train import RunResult


class FixedShift(torch.nn.Module):
    """Answers key + shift(pair): the key is the token before the first anchor (anchors are 1..4, keys 20..99)."""

    def __init__(self, shifts: dict[tuple[int, int], list[int]], vocab: int = 201) -> None:
        super().__init__()
        self.shifts, self.vocab = shifts, vocab
        self.w = torch.nn.Parameter(torch.zeros(1))

    def forward(self, tokens: torch.Tensor, last_only: bool = True) -> torch.Tensor:
        pos = (tokens < 20).int().argmax(1)
        rows = torch.arange(len(tokens))
        key, a, b = tokens[rows, pos - 1], tokens[rows, pos], tokens[rows, pos + 1]
        out = torch.zeros(len(tokens), self.vocab)
        for i in range(len(tokens)):
            options = self.shifts[(int(a[i]), int(b[i]))]
            out[i, key[i] + options[i % len(options)]] = 1.0     # alternate between the given shifts
        return out


def _run(shifts, over=()):
    cfg = experiment_from_dict({}, ["task.n_eval_per_group=60", *over])
    return RunResult(FixedShift(shifts), build_task(cfg.task), cfg, {}, Path("fake"))


def test_the_papers_task_names_its_answers():
    k = answer_kinds(build_task(experiment_from_dict({}, []).task), (4, 3))    # steps +5, +1, -2, -8
    assert k[-10] == ("composition", "") and k[-6] == ("mirror", "(3,4)")
    assert k[-3] == ("trained target", "(1,4) (4,1)") and k[+2] == ("trained target", "(2,2)")
    assert len(k) == 11 and 0 not in k          # 9 other trained targets, the mirror and the composition


def test_a_model_that_borrows_a_seen_pairs_target_reads_as_such():
    # (4,3) answered half by the mirror (x-6), half by (2,2)'s target (x+2): neither composition nor other
    run = _run({(4, 3): [-6, +2]})
    t = compute_answers(run, AnswersOptions(pairs=((4, 3),)))
    a, s = t["answers"], t["summary"].iloc[0]
    assert set(a.answer) == {"x-6", "x+2"} and a.share.sum() == pytest.approx(1.0)
    assert dict(zip(a.answer, a.kind)) == {"x-6": "mirror", "x+2": "trained target"}
    assert a.set_index("answer").loc["x+2", "matches"] == "(2,2)"
    assert s.n == 120 and s.mirror_share == pytest.approx(0.5) and s.trained_target_share == pytest.approx(0.5)
    assert s.composition_share == 0.0 and s.other_share == 0.0
    one = compute_answers(run, AnswersOptions(pairs=((4, 3),), split="test"))["summary"].iloc[0]
    assert one.n == 60


def test_composition_wins_a_tie_and_unnamed_answers_are_other():
    run = _run({(4, 3): [-10, +40]})
    s = compute_answers(run, AnswersOptions())["summary"].iloc[0]
    assert s.pair == "(4,3)" and s.composition_share == pytest.approx(0.5) and s.other_share == pytest.approx(0.5)


def test_bad_options_are_one_line_errors():
    with pytest.raises(ConfigError, match="split: must be one of train, test, all"):
        AnswersOptions(split="ood")
    with pytest.raises(ConfigError, match=r"pairs: \[\(5, 1\)\] are not pairs of this task"):
        compute_answers(_run({}), AnswersOptions(pairs=((5, 1),)))


def test_the_cli_writes_the_tables_and_the_summary_over_runs(tmp_path, tiny_overrides):
    from anchorlab.cli import main
    from anchorlab.train import train

    runs = []
    for g in (0.3, 0.8):
        cfg = experiment_from_dict({}, tiny_overrides + [f"init.gamma={g}"])
        train(cfg, tmp_path / str(g))
        runs.append(tmp_path / str(g))
    assert main(["analyze", str(runs[0]), "answers"]) == 0
    a = pd.read_csv(runs[0] / "analysis" / "answers.csv")
    assert a.share.sum() == pytest.approx(1.0) and set(a.kind) <= {"composition", "mirror", "trained target", "other"}
    assert (runs[0] / "analysis" / "answers.png").stat().st_size > 3000
    s = answers_summary(runs)
    assert len(s) == 2 and list(s.gamma) == [0.3, 0.8] and (s.n > 0).all()
    shares = s[["composition_share", "mirror_share", "trained_target_share", "other_share"]].sum(axis=1)
    assert shares.to_numpy() == pytest.approx([1.0, 1.0])
    # the same answers the run's own final evaluation counted
    import json
    for r, row in zip(runs, s.itertuples()):
        m = json.loads((r / "final.json").read_text())["final"]
        assert row.composition_share == pytest.approx(m["ood_inferential_acc"], abs=1e-6)
        assert row.mirror_share == pytest.approx(m["ood_symmetric_acc"], abs=1e-6)
