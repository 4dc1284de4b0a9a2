"""The run table: one schema from a run directory, a sweep directory and a committed CSV of the older
Fig. 2 schema; a config rebuilt from its row names the same run."""

import json

import pandas as pd
import pytest

from anchorlab.config import ConfigError, load_config
from anchorlab.sweep.runtable import HEAD, LEGACY, row_config, run_table


def _run(root, gamma, status="finished", **sets):
    cfg = load_config("demo/small", ["init.ref_width=400", f"init.gamma={gamma}", "optim.peak_lr=2e-4",
                                     *[f"{k}={v}" for k, v in sets.items()]])
    d = root / "runs" / cfg.run_id()
    d.mkdir(parents=True)
    (d / "final.json").write_text(json.dumps({
        "run_id": cfg.run_id(), "status": status, "steps": 4680, "total_steps": 4680, "wall_seconds": 9.0,
        "config": cfg.to_dict(), "final": {"id_acc": 0.99, "ood_inferential_acc": 0.7, "train_loss": 0.1},
        "best": {"id_acc": 1.0, "ood_inferential_acc": 0.8}, "device": "cpu: X",
        "precision": {"matmul_dtype": "bfloat16"}}))
    return cfg, d


def test_one_schema_from_run_dirs_sweep_dirs_and_committed_tables(tmp_path):
    a, run_a = _run(tmp_path / "s", 0.8)
    b, _ = _run(tmp_path / "s", 0.3)
    _run(tmp_path / "s", 0.5, status="failed")                         # not a completed run: left out
    t = run_table([tmp_path / "s"])
    assert list(t.columns[: len(HEAD)]) == HEAD and len(t) == 2 and t.run_id.is_unique
    r = t.set_index("run_id").loc[a.run_id()]
    assert (r.paper_gamma, r.peak_lr, r.seed, r.clock, r.device, r.precision) == (0.8, 2e-4, 0, 0.05, "cpu: X", "bfloat16")
    assert (r["init.gamma"], r["model.d_model"], r["final.ood_inferential_acc"], r["best.id_acc"]) == (0.8, 128, 0.7, 1.0)
    assert r.op_set == "" or r.op_set.startswith("{1:+5")              # the papers' op set label (demo: neurips)
    assert isinstance(json.loads(r["task.pair_rules"]), dict)         # a mapping value as JSON
    assert row_config(r.to_dict() | {"run_id": a.run_id()}).to_dict() | {"name": a.name} == a.to_dict()   # rebuilt
    one = run_table([run_a])                                            # a run directory is a source too
    assert list(one.run_id) == [a.run_id()] and one.run_dir.iloc[0] == str(run_a)
    old = pd.DataFrame({"run_id": [b.run_id(), "gone"], "op_set": "x", "paper_gamma": [0.3, 0.8], "peak_lr": 1e-4,
                        "seed": [0, 1], "id_acc": [0.5, 1.0], "inferential_best": 0.1, "symmetric_best": 0.9,
                        "inferential_final": 0.0, "symmetric_final": 0.8, "n_layers": 2, "clock": 1.0})
    old.to_csv(tmp_path / "old.csv", index=False)
    both = run_table([tmp_path / "s", tmp_path / "old.csv"]).set_index("run_id")
    assert len(both) == 3 and both.loc[b.run_id(), "final.id_acc"] == 0.99     # the directory's row wins
    g = both.loc["gone"]
    assert (g["final.id_acc"], g["best.ood_symmetric_acc"], g["model.n_layers"], g["train.init_seed"]) == (1.0, 0.9, 2, 1)
    assert (g.status, g.device, g.run_dir, g.source) == ("finished", "unrecorded", "", str(tmp_path / "old.csv"))
    assert set(LEGACY) & set(both.columns) == set()                    # every older name mapped
    with pytest.raises(ConfigError, match="holds no whole config"):
        row_config(g.to_dict())
    assert len(run_table([])) == 0 and "run_id" in run_table([]).columns
