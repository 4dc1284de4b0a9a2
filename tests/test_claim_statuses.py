"""The claims' statuses follow the results page's legend, read from their tables (synthetic tables here)."""
from __future__ import annotations

import pandas as pd
import pytest

from anchorlab.papers.docs import c13, studies


def _lm(monkeypatch, ppl: dict[float, tuple[float, float, float]]) -> str:
    rows = [{"init.gamma": g, "final_val_ppl": m, "ppl_min": lo, "ppl_max": hi} for g, (m, lo, hi) in ppl.items()]
    monkeypatch.setattr(studies, "table", lambda name: pd.DataFrame(rows))
    return studies.c11_status()


@pytest.mark.parametrize("ppl, status", [
    ({0.3: (48, 47, 49), 0.5: (40, 39, 41), 0.8: (30, 29, 31)}, "reproduced"),      # falls with every step
    ({0.3: (48, 47, 49), 0.5: (35, 34, 36), 0.8: (45, 44, 46)}, "partly"),          # both below the largest, not steady
    ({0.3: (48, 47, 49), 0.5: (40, 39, 41), 0.8: (40.5, 38, 42)}, "partly"),        # the last step within the seeds
    ({0.3: (48, 40, 49), 0.5: (45, 44, 46), 0.8: (30, 29, 31)}, "not reproduced"),  # ranges overlap with the largest
    ({0.3: (30, 29, 31), 0.5: (40, 39, 41), 0.8: (48, 47, 49)}, "not reproduced"),  # rises
])
def test_c11_status_reads_the_seed_ranges(monkeypatch, ppl, status):
    assert _lm(monkeypatch, ppl) == status


def test_c11_status_of_the_committed_table_is_partly():
    """The committed runs: 0.5 and 0.8 both below 0.3 with seed ranges apart, 0.8 above 0.5."""
    d = studies.table("fig7d_seeds_cpu_summary.csv").sort_values("init.gamma")
    assert (d.iloc[1:].ppl_max < d.iloc[0].ppl_min).all()
    assert studies.c11_status() == "partly"


def _pq(monkeypatch, search_hop1: float) -> None:
    tables = {
        "fig7e_cpu_runs.csv": pd.DataFrame({"test_final": [0.5], "test_acc/hop1_at": [0.52]}),
        "prontoqa_probe_cpu.csv": pd.DataFrame({"final.test_acc": [0.5], "final.test_acc/hop1": [0.55]}),
        c13.SEARCH_TABLE: pd.DataFrame([{
            "task.proof": False, "task.max_hops": 1, "init.gamma": 0.75, "optim.weight_decay": 0.5,
            "task.n_train": 200000, "steps": 6000, "final.train_acc": 0.5, "final.test_acc": search_hop1,
            "final.test_acc/hop1": search_hop1, "best.test_acc/hop1": search_hop1, "final.test_token_acc": 0.75,
            "final.test_exact": search_hop1}]),
    }
    monkeypatch.setattr(c13, "table", lambda name: tables[name])


def test_c13_untested_while_no_setting_learns(monkeypatch):
    _pq(monkeypatch, 0.69)
    assert c13.c13_status() == "not tested at this scale"
    assert "does not learn" in c13.c13_search()


def test_c13_refuses_a_status_once_a_setting_learns_without_the_comparison(monkeypatch):
    """A setting that learns makes the init / weight-decay comparison due: no status is given before it is judged."""
    _pq(monkeypatch, 0.71)
    assert "| learns |" in c13.c13_search()
    with pytest.raises(NotImplementedError, match="comparison"):
        c13.c13_status()
