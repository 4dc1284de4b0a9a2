"""Sweep specs -> runs, and the SQLite results store."""

import json
import math
import sqlite3

import pandas as pd
import pytest
import yaml

from anchorlab.config import ConfigError, load_config
from anchorlab.sweep.grid import expand, get_dotted, load_sweep, restrict, runs_frame, sweep_from_dict
from anchorlab.sweep.store import ResultStore, export_frame

TINY = {"name": "tiny", "model": {"d_model": 16, "d_head": 8, "d_ff": 32}, "task": {"n_train": 512}}


def spec_dict(**kw):
    d = {"name": "s", "base": TINY, "axes": {"init.gamma": [0.5, 0.8], "optim.lr": ["1e-4", 2.0e-4]}}
    d.update(kw)
    return d


# ------------------------------------------------------------------ grid
def test_yaml_spec_with_preset_base_set_axes_and_zip(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "name": "fig2", "base": "demo/small", "set": ["train.epochs=2", "task.n_train=1000"],
        "axes": {"init.gamma": [0.3, 0.8], "model.n_layers": [1, 2, 3]},
        "zip": [{"train.init_seed": [0, 1], "train.data_seed": [5, 6]}],
        "aggregate": {"source": "final"}}, sort_keys=False))
    spec = load_sweep(path)
    assert spec.axis_keys == ("init.gamma", "model.n_layers", "train.init_seed", "train.data_seed")
    assert spec.aggregate.source == "final"
    runs = expand(spec)
    assert len(runs) == 2 * 3 * 2 == spec.n_combinations
    demo = load_config("demo/small")
    for r in runs:
        c = r.config
        assert r.run_id == c.run_id()
        assert (c.init.gamma, c.model.n_layers) == (r.values["init.gamma"], r.values["model.n_layers"])
        assert c.train.data_seed == c.train.init_seed + 5                     # zipped, not crossed
        assert c.train.epochs == 2.0 and c.task.n_train == 1000               # `set` applied
        assert c.model.d_model == demo.model.d_model and c.name == "fig2"     # rest from the preset
    assert len({r.run_id for r in runs}) == len(runs)
    # first axis varies slowest
    assert [r.values["init.gamma"] for r in runs] == [0.3] * 6 + [0.8] * 6


def test_relative_base_path_next_to_spec(tmp_path):
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(TINY))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"name": "s", "base": "base.yaml",
                                                     "axes": {"init.gamma": [0.1]}}))
    (r,) = expand(tmp_path / "s.yaml")
    assert r.config.model.d_model == 16 and r.config.init.gamma == 0.1


def test_axis_values_are_typed_by_the_config_and_duplicates_collapse():
    runs = expand(spec_dict(axes={"optim.lr": ["1e-4", 0.0001, 2e-4], "init.gamma": [0.5, 0.5]}))
    assert [r.values["optim.lr"] for r in runs] == [1e-4, 2e-4]
    assert all(isinstance(r.values["optim.lr"], float) for r in runs)


def test_no_axes_is_one_run_and_spec_round_trips():
    assert len(expand({"name": "one", "base": TINY})) == 1
    spec = sweep_from_dict(spec_dict(zip=[{"train.init_seed": [0, 1], "train.data_seed": [0, 1]}]))
    again = sweep_from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec
    assert [r.run_id for r in expand(again)] == [r.run_id for r in expand(spec)]


@pytest.mark.parametrize("axes, match", [
    ({"init.gamm": [0.5]}, "init.gamm"),                      # unknown key, from config validation
    ({"optimizer.lr": [1e-3]}, "optimizer"),
    ({"init.gamma": [9.0]}, "init.gamma"),                    # out-of-range value
    ({"model.n_layers": [1.5]}, "model.n_layers"),            # wrong type
    ({"init.gamma.x": [1]}, "init.gamma"),                    # a value, not a section
    ({"init.gamma": []}, "init.gamma"),
    ({"init.gamma": 0.5}, "init.gamma"),
    ({"name": ["a", "b"]}, "axes.name"),
])
def test_bad_axes_fail_naming_the_key(axes, match):
    with pytest.raises(ConfigError, match=match):
        expand(spec_dict(axes=axes))


def test_bad_specs():
    with pytest.raises(ConfigError, match="axs"):
        sweep_from_dict(spec_dict(axs={}))
    with pytest.raises(ConfigError, match="name"):
        sweep_from_dict({"base": TINY})
    with pytest.raises(ConfigError, match="equal lengths"):
        sweep_from_dict(spec_dict(zip=[{"train.init_seed": [0, 1], "train.data_seed": [0]}]))
    with pytest.raises(ConfigError, match="init.gamma: key appears in more than one axis"):
        sweep_from_dict(spec_dict(zip=[{"init.gamma": [0.1], "train.data_seed": [0]}]))
    with pytest.raises(ConfigError, match="no such file or preset"):
        sweep_from_dict(spec_dict(base="nope/missing"))
    with pytest.raises(ConfigError, match="aggregate.source"):
        sweep_from_dict(spec_dict(aggregate={"source": "mean"}))
    with pytest.raises(ConfigError, match="train.epochs"):
        expand(spec_dict(set=["train.epochs=-1"]))


def test_restrict_keeps_a_slice_in_order_with_the_same_run_ids():
    spec = sweep_from_dict(spec_dict(zip=[{"train.init_seed": [0, 1, 2], "train.data_seed": [5, 6, 7]}]))
    full = {r.run_id: r.values for r in expand(spec)}
    part = expand(restrict(spec, ["optim.lr=1e-4", "train.data_seed=7,5", "init.gamma=0.8"]))
    assert [(r.values["train.init_seed"], r.values["optim.lr"]) for r in part] == [(0, 1e-4), (2, 1e-4)]
    assert all(full[r.run_id] == r.values for r in part)            # the same runs as in the full sweep
    two = restrict(spec, ["init.gamma=0.5", "init.gamma=0.8"])      # repeated keys add values
    assert len(expand(two)) == len(full)


@pytest.mark.parametrize("only, match", [
    (["model.d_model=3"], r"not an axis of sweep s; its axis keys: init.gamma, optim.lr"),
    (["init.gamma=0.7"], r"init.gamma=0.7: not on the axis; its values: 0.5, 0.8"),
    (["init.gamma"], r"expected KEY=VALUE"),
])
def test_restrict_refuses_unknown_keys_and_values_naming_the_allowed(only, match):
    with pytest.raises(ConfigError, match=match):
        restrict(sweep_from_dict(spec_dict()), only)


def test_restrict_refuses_a_zip_slice_that_no_value_matches():
    spec = sweep_from_dict(spec_dict(zip=[{"train.init_seed": [0, 1], "train.data_seed": [5, 6]}]))
    with pytest.raises(ConfigError, match="no value of the axis train.init_seed, train.data_seed"):
        restrict(spec, ["train.init_seed=0", "train.data_seed=6"])


def test_get_dotted_reads_dict_entries():
    (r,) = expand({"name": "a", "base": TINY, "axes": {"task.anchors.1": [6]}})
    assert r.config.task.anchors[1] == 6 and r.values["task.anchors.1"] == 6
    assert get_dotted(r.config, "init.gamma") == 0.5


# ------------------------------------------------------------------ store
def fake_result(run_id, acc, loss=0.5, steps=(0, 5, 10)):
    hist = [{"step": s, "epoch": s / 5, "train_loss": loss + 1 - s / 10, "id_acc": acc * s / 10,
             "note": "text is skipped"} for s in steps]
    return {"run_id": run_id, "status": "finished", "steps": steps[-1],
            "final": {"train_loss": loss, "id_acc": acc, "ood_symmetric_acc": math.nan},
            "best": {"train_loss": loss, "id_acc": acc}, "history": hist, "wall_seconds": 1.5,
            "versions": {"torch": "x"}}


@pytest.fixture
def runs():
    return expand(spec_dict())


def test_store_schema_wal_and_axis_columns(tmp_path, runs):
    with ResultStore(tmp_path / "r.sqlite", axes=("init.gamma", "optim.lr")) as st:
        st.register("s", runs, lambda rid: f"runs/{rid}")
        assert st.axes == ["init.gamma", "optim.lr"]
        assert set(st.statuses().values()) == {"pending"}
    con = sqlite3.connect(tmp_path / "r.sqlite")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    got = dict(con.execute('SELECT run_id, "optim.lr" FROM runs'))
    assert got == {r.run_id: r.values["optim.lr"] for r in runs}
    cfg = json.loads(con.execute("SELECT config FROM runs WHERE run_id = ?", (runs[0].run_id,)).fetchone()[0])
    assert cfg["init"]["gamma"] == runs[0].config.init.gamma
    con.close()
    # reopening with a new axis adds a column; existing rows have NULL there
    with ResultStore(tmp_path / "r.sqlite", axes=("init.gamma", "train.init_seed")) as st:
        assert st.axes == ["init.gamma", "optim.lr", "train.init_seed"]
        assert st.runs_frame()["train.init_seed"].isna().all()


def test_record_is_idempotent_and_replaces(tmp_path, runs):
    rid = runs[0].run_id
    with ResultStore(tmp_path / "r.sqlite", axes=("init.gamma",)) as st:
        st.register("s", runs)
        st.mark_running(rid)
        assert st.status(rid) == "running"
        n = st.record_result(rid, fake_result(rid, 0.8), "finished")
        # history: 3 steps x (epoch, train_loss, id_acc); final 3; best 2
        assert n == 9 + 3 + 2
        st.record_result(rid, fake_result(rid, 0.6), "finished")
        count = st.con.execute("SELECT COUNT(*) FROM metrics WHERE run_id = ?", (rid,)).fetchone()[0]
        assert count == n
        with pytest.raises(sqlite3.IntegrityError):
            st.con.execute("INSERT INTO metrics VALUES (?, 10, 'id_acc', 0.1, 'final')", (rid,))
        df = st.to_dataframe(kinds=("final", "best", "history"))
    mine = df[df.run_id == rid].set_index(["kind", "metric", "step"]).value
    assert mine[("final", "id_acc", 10)] == 0.6                    # replaced, not duplicated
    assert math.isnan(mine[("final", "ood_symmetric_acc", 10)])    # NaN -> NULL -> NaN
    assert mine[("best", "id_acc", 10)] == 0.6                     # step where the best was reached
    assert mine[("history", "id_acc", 5)] == pytest.approx(0.3)
    assert ("history", "note", 5) not in mine.index
    row = df[df.run_id == rid].iloc[0]
    assert row.status == "finished" and row.wall_seconds == 1.5 and row["init.gamma"] == 0.5
    # the other runs are pending: one row each without metrics
    others = df[df.run_id != rid]
    assert len(others) == len(runs) - 1 and others.metric.isna().all()


def test_failure_interruption_and_rollback(tmp_path, runs):
    a, b = runs[0].run_id, runs[1].run_id
    with ResultStore(tmp_path / "r.sqlite") as st:
        st.register("s", runs)
        st.record_result(a, fake_result(a, 0.8), "finished")
        st.record_failure(a, "Traceback ...\nRuntimeError: boom")
        assert st.status(a) == "failed"
        assert st.con.execute("SELECT COUNT(*) FROM metrics WHERE run_id = ?", (a,)).fetchone()[0] == 0
        assert "boom" in st.runs_frame().set_index("run_id").loc[a, "error"]
        st.mark_running(b)
        st.mark_running(b)
        assert st.reset_interrupted() == [b] and st.status(b) == "pending"
        assert st.runs_frame().set_index("run_id").loc[b, "attempts"] == 2
        with pytest.raises(ConfigError, match="status"):
            st.record_result(b, fake_result(b, 0.8), "done")
        with pytest.raises(RuntimeError):
            with st._tx():
                st.con.execute("UPDATE runs SET status = 'finished' WHERE run_id = ?", (b,))
                raise RuntimeError("crash inside a transaction")
        assert st.status(b) == "pending"                            # rolled back


def test_to_dataframe_filters_and_export(tmp_path, runs):
    a = runs[0].run_id
    with ResultStore(tmp_path / "r.sqlite", axes=("init.gamma", "optim.lr")) as st:
        st.register("s", runs)
        st.record_result(a, fake_result(a, 0.8), "finished")
        df = st.to_dataframe(run_ids=[a], kinds=("final",))
        assert set(df.kind) == {"final"} and set(df.run_id) == {a} and len(df) == 3
        with pytest.raises(ConfigError, match="kinds"):
            st.to_dataframe(kinds=("last",))
        csv = st.export(tmp_path / "out.csv")
        pq = st.export(tmp_path / "out.parquet")
        full = st.to_dataframe()
    back = pd.read_csv(csv)
    assert len(back) == len(full) and list(back.columns) == list(full.columns)
    assert back.loc[back.metric == "id_acc", "value"].tolist() == full.loc[full.metric == "id_acc", "value"].tolist()
    pd.testing.assert_frame_equal(pd.read_parquet(pq), full, check_dtype=False)
    with pytest.raises(ConfigError, match="extension"):
        export_frame(full, tmp_path / "out.xlsx")


def test_runs_frame_lists_axes_and_each_runs_peak_lr():
    df = runs_frame(expand(spec_dict()))
    assert list(df.columns) == ["run_id", "init.gamma", "optim.lr", "peak_lr"] and len(df) == 4
    mult = expand(spec_dict())[0].config.optim.warmup_multiplier
    assert sorted(set(df.peak_lr)) == pytest.approx([1e-4 * mult, 2e-4 * mult])


def test_a_bundled_sweep_loads_by_its_preset_name_as_by_its_path():
    from anchorlab.papers import SWEEP_DIR
    from anchorlab.sweep.grid import expand

    by_name = [r.run_id for r in expand("fig2_cpu")]
    assert by_name and by_name == [r.run_id for r in expand(SWEEP_DIR / "fig2_cpu.yaml")]


def test_restrict_takes_mapping_values_of_a_zip_axis():
    ops = [{1: 5, 2: 1, 3: -2, 4: -8}, {1: -2, 2: 3, 3: 1, 4: -5}, {1: -6, 2: -1, 3: 3, 4: -4}]
    spec = sweep_from_dict({"name": "ops", "base": TINY, "zip": [{"task.preset": ["custom"] * 3, "task.anchors": ops}]})
    part = expand(restrict(spec, ["task.anchors={1: -2, 2: 3, 3: 1, 4: -5}"]))
    assert [r.config.task.anchors for r in part] == [ops[1]]
    two = expand(restrict(spec, ["task.anchors={1: 5, 2: 1, 3: -2, 4: -8},{1: -6, 2: -1, 3: 3, 4: -4}"]))
    assert [r.values["task.anchors"] for r in two] == [ops[0], ops[2]]
    with pytest.raises(ConfigError, match=r"not on the axis; its values: \{1: 5, 2: 1, 3: -2, 4: -8\}, "):
        restrict(spec, ["task.anchors={1: 1, 2: 2, 3: 3, 4: 4}"])
