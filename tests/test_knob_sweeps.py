"""The study sweeps of the real tasks: each expands (dry run, no data read beyond the vocabulary), changes one
knob at a time (the full 2x2 of init rate x weight decay, or init alone), has enough seeds; and the 2x2
naming / knob-effect helpers on hand-built tables."""

import math

import pandas as pd
import pytest

from anchorlab.papers.reproduce.figures_realtasks import SETTING_NAMES, knob_effect, setting_names
from anchorlab.sweep.grid import expand, load_sweep, resolve_sweep


def _runs(name):
    return expand(load_sweep(resolve_sweep(name)))


@pytest.mark.parametrize("name, n_runs, seeds", [
    ("addition_knobs_cpu", 24, 3), ("addition_knobs_paper", 24, 3), ("prontoqa_knobs_cpu", 12, 3),
    ("prontoqa_knobs_paper", 12, 3), ("scan_matched_cpu", 8, 2), ("cogs_matched_cpu", 8, 2),
    ("scan_matched_paper", 12, 3), ("cogs_matched_paper", 12, 3),
])
def test_two_by_two_sweeps_separate_the_knobs(name, n_runs, seeds, shared_datasets, monkeypatch):
    monkeypatch.setenv("ANCHORLAB_DATA_DIR", str(shared_datasets))
    runs = _runs(name)
    assert len(runs) == n_runs
    cells = pd.DataFrame([{"gamma": r.config.init.gamma, "wd": r.config.optim.weight_decay,
                           "seed": r.config.train.init_seed, "rest": r.config.model.arch} for r in runs])
    assert cells.gamma.nunique() == 2 and cells.wd.nunique() == 2
    per = cells.groupby(["rest", "gamma", "wd"]).seed.nunique()
    assert len(per) == 4 * cells.rest.nunique() and (per >= seeds).all()


def test_setting_names_keep_the_diagonal_names_and_name_all_four_cells():
    g, w = pd.Series([0.75, 0.3]), pd.Series([0.5, 0.01])
    assert setting_names(g, w) == [SETTING_NAMES[True], SETTING_NAMES[False]]
    g, w = pd.Series([0.75, 0.75, 0.3, 0.3]), pd.Series([0.5, 0.01, 0.5, 0.01])
    assert setting_names(g, w) == ["small init + large wd", "small init + small wd", "large init + large wd",
                                   "large init + small wd"]
    assert setting_names(pd.Series([0.5, 0.5]), pd.Series([0.1, 0.1])) == [SETTING_NAMES[True]] * 2


def test_knob_effect_takes_each_difference_at_a_fixed_other_knob():
    t = pd.DataFrame({"setting": ["small init + large wd", "small init + small wd", "large init + large wd",
                                  "large init + small wd"], "acc": [0.9, 0.7, 0.4, 0.2]})
    assert knob_effect(t, "acc", "init") == pytest.approx(0.5)    # (0.9 - 0.4 + 0.7 - 0.2) / 2
    assert knob_effect(t, "acc", "wd") == pytest.approx(0.2)      # (0.9 - 0.7 + 0.4 - 0.2) / 2
    assert math.isnan(knob_effect(t.iloc[[0, 3]], "acc", "init"))  # the diagonal alone cannot say


def test_the_lm_seed_sweep_has_three_seeds_per_gamma_and_the_authors_embedding_std():
    runs = _runs("lm_seeds_cpu")
    cells = pd.DataFrame([{"gamma": r.config.init.gamma, "seed": r.config.train.init_seed,
                           "embed_std": r.config.init.embed_std, "ref": r.config.init.ref_width} for r in runs])
    assert len(runs) == 9 and (cells.groupby("gamma").seed.nunique() == 3).all()
    assert (cells.embed_std == 0.02).all() and (cells.ref == 1024).all()   # std-matched to GPT-2 Medium
