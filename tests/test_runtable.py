"""The run table: one schema from a run directory, a sweep directory and a committed CSV of the older
Fig. 2 schema; a config rebuilt from its row names the same run."""

import ast
import json
from pathlib import Path

import pandas as pd
import pytest

from anchorlab.config import ConfigError, load_config
import anchorlab
from anchorlab.papers import runs as paper_runs
from anchorlab.sweep.runtable import HEAD, history_table, row_config, row_section, run_history, run_table


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
    lib = run_table([tmp_path / "s"])                                   # the library's table knows no paper
    assert list(lib.columns[: len(HEAD)]) == HEAD and not {"op_set", "paper_gamma", "clock"} & set(lib.columns)
    t = paper_runs.run_table([tmp_path / "s"])                          # the papers' adds their columns
    assert list(t.columns[: len(paper_runs.HEAD)]) == paper_runs.HEAD and len(t) == 2 and t.run_id.is_unique
    assert t.drop(columns=["op_set", "paper_gamma", "clock"]).columns.tolist() == lib.columns.tolist()
    r = t.set_index("run_id").loc[a.run_id()]
    assert (r.paper_gamma, r.peak_lr, r.seed, r.clock, r.device, r.precision) == (0.8, 2e-4, 0, 0.05, "cpu: X", "bfloat16")
    assert (r["init.gamma"], r["model.d_model"], r["final.ood_inferential_acc"], r["best.id_acc"]) == (0.8, 128, 0.7, 1.0)
    assert r.op_set == "" or r.op_set.startswith("{1:+5")              # the papers' op set label (demo: neurips)
    assert isinstance(json.loads(r["task.pair_rules"]), dict)         # a mapping value as JSON
    assert row_config(r.to_dict() | {"run_id": a.run_id()}).to_dict() | {"name": a.name} == a.to_dict()   # rebuilt
    one = run_table([run_a])                                            # a run directory is a source too
    assert list(one.run_id) == [a.run_id()] and one.run_dir.iloc[0] == str(run_a)
    old = pd.DataFrame({"run_id": [b.run_id(), "gone"], "op_set": "x", "paper_gamma": [0.3, 0.8], "peak_lr": 1e-4,
                        "seed": [0, 1], "final.id_acc": [0.5, 1.0], "best.ood_inferential_acc": 0.1,
                        "best.ood_symmetric_acc": 0.9, "final.ood_inferential_acc": 0.0, "final.ood_symmetric_acc": 0.8,
                        "model.n_layers": 2, "clock": 1.0, "outcome": "memorizes"})
    old.to_csv(tmp_path / "old.csv", index=False)
    both = paper_runs.run_table([tmp_path / "s", tmp_path / "old.csv"]).set_index("run_id")
    assert len(both) == 3 and both.loc[b.run_id(), "final.id_acc"] == 0.99     # the directory's row wins
    g = both.loc["gone"]
    assert (g["final.id_acc"], g["best.ood_symmetric_acc"], g["model.n_layers"], g["train.init_seed"]) == (1.0, 0.9, 2, 1)
    assert (g.status, g.device, g.run_dir, g.source) == ("finished", "unrecorded", "", str(tmp_path / "old.csv"))
    assert g.outcome == "memorizes"                                    # a study's derived column passes through
    with pytest.raises(ConfigError, match="holds no whole config"):
        row_config(g.to_dict())
    assert len(run_table([])) == 0 and "run_id" in run_table([]).columns
    assert list(paper_runs.run_table([]).columns) == [*paper_runs.HEAD, "run_dir"]


def test_history_table_holds_every_logged_metric_and_a_directory_wins_over_a_committed_history(tmp_path):
    a, run_a = _run(tmp_path / "s", 0.8)
    b, run_b = _run(tmp_path / "s", 0.3)
    hists = {run_a: [{"step": 0, "epoch": 0.0, "id_acc": 0.1}, {"step": 5, "epoch": 0.5, "id_acc": 0.9, "val_ppl": 3.0}],
             run_b: [{"step": 0, "epoch": 0.0, "acc/12/train": 0.2}]}
    for d, h in hists.items():
        f = json.loads((d / "final.json").read_text())
        (d / "final.json").write_text(json.dumps({**f, "history": h, "name": "fig"}))
    h = history_table([tmp_path / "s"])
    assert list(h.columns[:2]) == ["run_id", "step"] and {"epoch", "id_acc", "val_ppl", "acc/12/train"} <= set(h.columns)
    assert len(h) == 3 and sorted(h.run_id.unique()) == sorted([a.run_id(), b.run_id()])
    assert h[h.run_id == b.run_id()].val_ppl.isna().all()                # a metric a run never logged: NaN
    assert run_history(h, a.run_id()) == hists[run_a]                   # back as the rows it logged
    assert run_history(h, "none") == []
    assert set(run_table([tmp_path / "s"]).name) == {"fig"}              # final.json's name, a column
    pd.DataFrame({"run_id": [a.run_id(), "gone"], "step": [1, 2], "id_acc": [0.0, 0.5]}).to_csv(
        tmp_path / "old_history.csv", index=False)
    pd.DataFrame({"run_id": [a.run_id(), "gone"]}).to_csv(tmp_path / "old.csv", index=False)
    both = history_table([tmp_path / "s", tmp_path / "old.csv"])
    assert len(both) == 4 and both[both.run_id == "gone"].id_acc.tolist() == [0.5]   # the directory's run wins
    assert len(history_table([tmp_path / "old.csv"])) == 2
    with pytest.raises(ConfigError, match="neither a directory nor a CSV"):
        history_table([tmp_path / "missing"])


def test_row_section_reads_one_config_section_back_from_a_row(tmp_path):
    a, _ = _run(tmp_path / "s", 0.8)
    row = run_table([tmp_path / "s"]).iloc[0]
    task = row_section(row, "task")
    assert task == {k: v for k, v in a.to_dict()["task"].items() if v is not None}   # mappings parsed back
    assert row_section(row, "init")["gamma"] == 0.8 and row_section(row, "nothing") == {}


# the modules that may read final.json: the run table, the sweep reader and runner (its layout owner), the
# store, and train (the writer)
MAY_READ_FINALS = ("sweep/runtable.py", "sweep/results.py", "sweep/runner.py", "sweep/store.py", "train/")
READERS = ("read_json", "open", "Path", "glob", "rglob", "read_text", "load", "exists", "is_file")


def final_json_reads(source: str) -> list[str]:
    """``line: what`` for each call of ``finals(`` / ``unique_finals(`` and each path ending in final.json that
    a module reads (an operand of ``/``, or an argument of a reading call such as ``read_json`` or ``glob``)."""
    tree = ast.parse(source)
    out = []

    def ends_final(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value == "final.json" or node.value.endswith("/final.json")
        return isinstance(node, ast.JoinedStr) and bool(node.values) and ends_final(node.values[-1])

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name in ("finals", "unique_finals"):
                out.append(f"{node.lineno}: {name}(")
            elif name in READERS and any(ends_final(a) for a in node.args):
                out.append(f"{node.lineno}: {name}(... final.json)")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and ends_final(node.right):
            out.append(f"{node.lineno}: / final.json")
    return sorted(out, key=lambda s: int(s.split(":")[0]))


def test_only_the_run_table_and_the_sweep_and_train_layers_read_final_json():
    root = Path(anchorlab.__file__).parent
    found = {}
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if not rel.startswith(MAY_READ_FINALS) and (hits := final_json_reads(p.read_text())):
            found[rel] = hits
    assert found == {}, f"read runs through anchorlab.sweep.runtable (run_table, history_table), not: {found}"
    # the check sees each way of reading one
    assert final_json_reads("from x import finals\nfs = finals(d)\n") == ["2: finals("]
    assert final_json_reads("r = read_json(Path(d) / 'final.json')\n") == ["1: / final.json"]
    assert final_json_reads("g = d.glob('runs/*/final.json')\n") == ["1: glob(... final.json)"]
    assert final_json_reads("h = read_json(f'{d}/final.json')\ns = 'final.json holds the history'\n") == [
        "1: read_json(... final.json)"]
    assert final_json_reads((root / "sweep" / "results.py").read_text())      # the reader itself is seen
