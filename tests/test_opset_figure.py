"""The op-set crossing figure from a committed-style run table: rows, counts, the rule's verdict, claims."""

import pandas as pd

from anchorlab.papers.reproduce import FIGURES
from anchorlab.papers.eval.crossing import RUN_COLUMNS
from anchorlab.papers.reproduce.figures_opset import O1, O2, make_cross
from anchorlab.papers.reproduce.runner import claims_table
from anchorlab.papers.runs import run_table


def _write_table(tmp_path, o1_mem: int, o2_way: int):
    """9 small-init runs per op set and one large-init control each, with trajectories beside the table."""
    rows, curves = [], []
    for op, mem, way in ((O1, o1_mem, 0), (O2, 0, o2_way)):
        for i in range(10):
            gamma = 0.8 if i < 9 else 0.3
            m = i < mem or gamma == 0.3
            w = (i >= 9 - way) and gamma == 0.8
            rid = f"{op.held_out[0]}{op.held_out[1]}r{i}"
            rows.append({"run_id": rid, "op_set": op.label, "paper_gamma": gamma, "peak_lr": [1.25e-4, 1.77e-4, 2.5e-4][i % 3],
                         "seed": i // 3, "clock": 0.5, "model.n_layers": 2, "final.id_acc": 0.98,
                         "final.ood_inferential_acc": 0.0 if m else 0.3, "best.ood_inferential_acc": 0.6 if w else 0.2,
                         "final.ood_symmetric_acc": 0.9 if m else 0.1, "best.ood_symmetric_acc": 0.9 if m else 0.1,
                         "device": "cpu", "precision": "bfloat16", "status": "finished"})
            for step, idv in ((0, 0.1), (500, 0.5), (1000, 0.95), (1500, 0.98)):
                curves.append({"run_id": rid, "step": step, "id_acc": idv, "inferential": 0.6 if (w and step == 1000) else 0.1,
                               "symmetric": 0.9 if (m and step == 1500) else 0.0})
    p = tmp_path / "opset_cross_cpu.csv"
    pd.DataFrame(rows).to_csv(p, index=False)
    pd.DataFrame(curves).to_csv(tmp_path / "opset_cross_cpu_curves.csv", index=False)
    return p


def test_the_crossing_reads_a_committed_table(tmp_path):
    table = _write_table(tmp_path, o1_mem=6, o2_way=7)
    out = tmp_path / "out"
    out.mkdir()
    tables, files = make_cross(run_table([table]), out, "cpu")
    runs = tables["runs"]
    assert list(runs.columns) == RUN_COLUMNS and len(runs) == 20
    assert (runs.steps_to_id_fit == 1000).all()
    assert set(runs[runs.paper_gamma == 0.3].outcome) == {"memorizes"}
    o2 = runs[(runs.op_set == O2.label) & (runs.paper_gamma == 0.8)]
    assert (o2.step_gap == 8).all() and (o2.inferential_at_fit == 0.6).sum() == 7
    assert tables["verdict"].verdict.iloc[0] == "H1 (step gap)"
    c = tables["counts"].set_index(["name", "paper_gamma"])
    assert c.loc[("O1", 0.8), "n_memorize"] == 6 and c.loc[("O2", 0.8), "n_compose_on_way"] == 7
    claims = claims_table(FIGURES["study-opset-cross"], tables).set_index("claim").ours
    assert "6 of 9" in claims.values and "H1 (step gap)" in claims.values
    assert "curves.png" in files and files["curves.png"].exists()


def test_the_verdict_waits_while_runs_are_missing(tmp_path):
    table = _write_table(tmp_path, o1_mem=0, o2_way=9)
    rows = run_table([table])
    out = tmp_path / "out"
    out.mkdir()
    tables, _ = make_cross(rows[rows.run_id != "42r3"], out, "cpu")
    assert tables["verdict"].verdict.iloc[0] == "pending"
    assert tables["verdict"].O2_reading.iloc[0] == "pending (8 of 9)"
