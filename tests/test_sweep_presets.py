"""Sweep presets by name: the library's search path (anchorlab.sweep.presets) finds the papers' presets
(anchorlab/papers/sweeps/, declared by pyproject.toml's entry point) without importing the papers' package by
name, and every preset still expands to the run ids it gave before the presets moved out of the library.

tests/fixtures/sweep_preset_run_ids.json holds, per preset, the number of runs and a digest of their sorted run
ids, recorded from the presets as they were in src/anchorlab/sweeps/ (commit cebaae6). A run id is the hash of
its config, so a digest that changes means a preset now trains other runs; a deliberate change to a preset's
runs rewrites the file::

    python tests/test_sweep_presets.py --write
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anchorlab.config import ConfigError
from anchorlab.sweep import presets
from anchorlab.sweep.grid import expand, load_sweep
from anchorlab.sweep.presets import add_sweep_dir, resolve_sweep, sweep_presets

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "tests" / "fixtures" / "sweep_preset_run_ids.json"
DATA_TASKS = ("scan_", "cogs_")   # presets whose configs read the SCAN / COGS data files


def digest(name: str) -> list:
    """[number of runs, sha256 prefix of the sorted run ids] of a preset."""
    ids = sorted(r.run_id for r in expand(name))
    return [len(ids), hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]]


def test_every_preset_expands_to_the_run_ids_it_had_in_the_library(monkeypatch):
    recorded = json.loads(RECORDED.read_text())
    assert sorted(recorded) == list(sweep_presets())   # no preset lost, none added without its record
    data = Path(os.environ.get("ANCHORLAB_DATA_DIR", ROOT.parent / "shared" / "datasets"))
    if data.exists():
        monkeypatch.setenv("ANCHORLAB_DATA_DIR", str(data))
    checked = 0
    for name, want in recorded.items():
        if name.startswith(DATA_TASKS) and not data.exists():
            continue                                  # the reference datasets are not on this machine
        assert digest(name) == want, f"{name}: its run ids changed"
        checked += 1
    assert checked >= len(recorded) - 8


def test_the_presets_live_with_the_papers_and_the_library_holds_none():
    from anchorlab.papers import SWEEP_DIR

    assert not (ROOT / "src" / "anchorlab" / "sweeps").exists()
    assert set(sweep_presets().values()) == {p.resolve() for p in SWEEP_DIR.glob("*.yaml")}
    assert resolve_sweep("fig2_cpu") == (SWEEP_DIR / "fig2_cpu.yaml").resolve() == resolve_sweep("fig2_cpu.yaml")
    assert load_sweep("journal_fig3_cpu").name and expand("fig2_demo")


def test_a_plain_library_session_finds_them_by_name():
    """From Python, with nothing but the library imported: the name resolves through the entry point."""
    code = ("import sys; from anchorlab.sweep.grid import load_sweep, expand; "
            "assert len(expand(load_sweep('fig2_demo'))) == 8; print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT / "tests")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_the_installed_entry_point_is_the_declared_one():
    """pyproject.toml declares the papers' folder; an install made before it lacks it (reinstall: pip install -e .)."""
    tomllib = pytest.importorskip("tomllib")
    from importlib.metadata import entry_points

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][presets.GROUP]
    installed = {e.name: e.value for e in entry_points(group=presets.GROUP)}
    assert installed == declared, "the installed anchorlab predates its entry points: pip install -e ."
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "sweeps/*.yaml" in data["anchorlab.papers"]   # the presets ship in a wheel


def test_a_folder_added_at_run_time_is_searched_and_a_name_in_two_folders_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(presets, "_ADDED", [])
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "my_grid.yaml").write_text("# my grid\nname: my-grid\nbase: demo/small\naxes: {init.gamma: [0.3, 0.8]}\n")
    add_sweep_dir(mine)
    assert resolve_sweep("my_grid") == (mine / "my_grid.yaml").resolve() and len(expand("my_grid")) == 2
    assert "fig2_cpu" in sweep_presets()                          # the declared folders are still searched
    with pytest.raises(ConfigError, match=r"no such file or preset; presets: .*my_grid"):
        resolve_sweep("no_such_grid")
    (mine / "fig2_cpu.yaml").write_text("name: clash\n")
    with pytest.raises(ConfigError, match=r"sweep preset 'fig2_cpu': in two folders of the search path"):
        resolve_sweep("fig2_cpu")
    with pytest.raises(ConfigError, match="no such directory"):
        add_sweep_dir(tmp_path / "absent")


def test_no_folder_on_the_search_path_says_to_reinstall(monkeypatch):
    monkeypatch.setattr(presets, "_ADDED", [])
    monkeypatch.setattr(presets, "declared_dirs", lambda: ())
    with pytest.raises(ConfigError, match=r"no preset on the search path .*pip install -e \."):
        resolve_sweep("fig2_cpu")


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    RECORDED.write_text(json.dumps({n: digest(n) for n in sweep_presets()}, indent=1) + "\n")
    print(f"wrote {RECORDED}")
