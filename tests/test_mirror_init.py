"""NeurIPS Fig. 7 on the mirror task from the ladder's runs: the rule's selection and the tables it writes."""

import pandas as pd
import pytest

from anchorlab.papers.analysis import mirror_init as mi


def _ladder(ids):
    rows = []
    for (rung, op_set, gamma, seed), run_id in zip([(mi.RUNG, mi.OP_SET, 0.3, 0), (mi.RUNG, mi.OP_SET, 0.8, 0),
                                                     (mi.RUNG, "other", 0.8, 1), ("w64", mi.OP_SET, 0.8, 1),
                                                     (mi.RUNG, mi.OP_SET, 0.5, 2)], ids):
        rows.append({"rung": rung, "op_set": op_set, "paper_gamma": gamma, "seed": seed, "run_id": run_id})
    return pd.DataFrame(rows)


def test_rows_are_the_rules_runs_small_init_first(tmp_path):
    ids = ["r0", "r1", "r2", "r3", "r4"]
    for r in ids:
        (tmp_path / r).mkdir()
        (tmp_path / r / "config.yaml").write_text("{}")
    rows = mi.ladder_rows(_ladder(ids), tmp_path)
    assert list(rows.run_id) == ["r1", "r0"] and list(rows.side) == ["small_init", "large_init"]
    assert rows.run_dir.iloc[0] == str(tmp_path / "r1")


def test_a_missing_run_or_rung_is_an_error_naming_it(tmp_path):
    (tmp_path / "r0").mkdir()
    (tmp_path / "r0" / "config.yaml").write_text("{}")
    with pytest.raises(FileNotFoundError, match="r1"):
        mi.ladder_rows(_ladder(["r0", "r1", "r2", "r3", "r4"]), tmp_path)
    with pytest.raises(ValueError, match="rung 'w512'"):
        mi.ladder_rows(_ladder(["r0", "r1", "r2", "r3", "r4"]), tmp_path, rung="w512")


def test_main_reads_two_trained_runs_into_the_claim_tables(tmp_path, tiny_overrides):
    from anchorlab.config import experiment_from_dict, load_yaml
    from anchorlab.train import train

    ids = []
    for i, gamma in enumerate((0.3, 0.8)):
        cfg = experiment_from_dict(load_yaml("demo/small"), [*tiny_overrides, f"train.init_seed={i}",
                                                             "init.ref_width=400", f"init.gamma={gamma}"])
        train(cfg, tmp_path / "runs" / cfg.run_id())
        ids.append(cfg.run_id())
    ladder = _ladder([*ids, "x", "y", "z"])
    ladder.to_csv(tmp_path / "ladder.csv", index=False)
    assert mi.main(["--ladder", str(tmp_path / "ladder.csv"), "--runs", str(tmp_path / "runs"),
                    "--out", str(tmp_path / "out")]) == 0
    emb = pd.read_csv(tmp_path / "out" / f"{mi.STEM}_init.csv")
    assert list(emb.side) == ["small_init", "large_init"] and list(emb.gamma) == [0.8, 0.3]
    assert (emb.ref_width == 400).all() and emb.top2_share.between(0, 1).all()
    judged = pd.read_csv(tmp_path / "out" / f"{mi.STEM}_judged.csv")
    assert set(judged.comparison) == {mi.COMPARISON} and set(judged.claim) == {"C5", "C7"}
    assert (tmp_path / "out" / f"{mi.STEM}_spectra.png").stat().st_size > 0
