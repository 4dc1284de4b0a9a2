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


def test_distinct_chance_is_the_chance_that_random_runs_land_on_different_op_sets():
    """Six composing runs, one on each of six of twelve op sets of two runs each: the chance that six runs placed
    at random among the 24 all land on different op sets is C(12,6) 2^6 / C(24,6) (about 0.44); two on one op set
    gives no such baseline."""
    import math

    from anchorlab.papers.docs.fig2 import distinct_chance

    done = pd.DataFrame({"small_compose": [1] * 6 + [0] * 6})
    assert math.isclose(distinct_chance(done, 2), math.comb(12, 6) * 2 ** 6 / math.comb(24, 6))
    assert round(distinct_chance(done, 2), 2) == 0.44
    assert distinct_chance(pd.DataFrame({"small_compose": [2] + [1] * 4 + [0] * 7}), 2) is None
    assert distinct_chance(pd.DataFrame({"small_compose": [1] + [0] * 11}), 2) is None


def test_scale_tables_list_only_the_gammas_that_ran():
    """The depth sweep planned four gammas; the committed runs hold three, so the scale row names those three."""
    from anchorlab.papers.docs.common import gammas_ran, sweep_scale

    ran = gammas_ran("fig2_depth_cpu")
    assert ran is not None and 0.65 not in ran and {0.3, 0.8} <= set(ran)
    assert "0.65" not in sweep_scale("fig2_depth_cpu", ran)["init"] and "0.65" in sweep_scale("fig2_depth_cpu")["init"]


def test_status_table_counts_the_picked_runs_its_mechanism_statuses_read(monkeypatch):
    """C4's status reads the clean picks, so its seeds column gives their count a side, not the sweep's seeds."""
    from anchorlab.papers.docs import claims, clean  # noqa: F401  (registers the claims)
    from anchorlab.papers.docs.status import status_table

    rows = {r.split("|")[1].strip(): r for r in status_table().splitlines()[2:]}
    assert "; 3+3 picks (" in rows["[C4](#c4)"] and "; 20 (" not in rows["[C4](#c4)"]
    judged = pd.DataFrame([{"claim": "C4", "comparison": "cleanest", "kind": ">", "a_n": 2, "b_n": 5}])
    monkeypatch.setattr(clean, "table", lambda name: judged)
    assert clean.claim_runs("C4")() == "2+5 picks"
    tables = {"a_judged.csv": pd.DataFrame([{"claim": "C7", "comparison": "init", "kind": ">", "a_n": 3, "b_n": 2}]),
              "b_judged.csv": pd.DataFrame([{"claim": "C7", "comparison": "init, mirror task", "kind": ">",
                                             "a_n": 3, "b_n": 3}])}
    monkeypatch.setattr(clean, "table", tables.__getitem__)     # each comparison from its own table
    assert clean.claim_runs("C7", ("init", "init, mirror task"), ("a", "b"))() == "3+2, 3+3 runs"


@pytest.mark.parametrize("small, large, others, status", [
    (("composes", 0.95), ("memorizes", 0.97), "composes", "reproduced"),
    (("composes", 0.79), ("memorizes", 0.96), "composes", "partly"),       # the direction, not the paper's size
    (("composes", 0.95), ("memorizes", 0.97), "both", "partly"),           # not on the other op sets
    (("both", 0.95), ("memorizes", 0.97), "composes", "not reproduced"),
])
def test_c1_status_asks_for_direction_and_size(monkeypatch, small, large, others, status):
    from types import SimpleNamespace

    from anchorlab.papers.docs import claims

    def cell(op, clock, gamma, fitted=False):
        if op != "(4,3), papers'":
            return SimpleNamespace(solution=others)
        sol, v = small if gamma == 0.8 else large
        return SimpleNamespace(solution=sol, inferential_best=v, symmetric_best=v)
    monkeypatch.setattr(claims, "_cell", cell)
    assert claims._c1_status() == status


@pytest.mark.parametrize("cv, swap, at, status", [
    (0.92, 1.0, 0.1, "holds in its one setting"),
    (0.85, 1.0, 0.1, "does not hold"),            # cross-validated AUC below the bar
    (0.92, 0.6, 0.1, "does not hold"),            # one design swap below it
    (0.95, 0.95, 0.5, "does not hold"),           # only later than a tenth of training
])
def test_ev_status_follows_its_rule(monkeypatch, cv, swap, at, status):
    from anchorlab.papers.docs import claims

    rows = [{"at_fraction": at, "model": "margin/pair", "validation": "cv", "auc": cv},
            {"at_fraction": at, "model": "margin/pair", "validation": "data_varied->init_varied", "auc": swap},
            {"at_fraction": at, "model": "margin/pair", "validation": "init_varied->data_varied", "auc": 1.0},
            {"at_fraction": 0.0, "model": "all", "validation": "cv", "auc": 1.0}]      # another model: not read
    monkeypatch.setattr(claims, "table", lambda name: pd.DataFrame(rows))
    assert claims.ev_status() == status
