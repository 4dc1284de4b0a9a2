"""Every row of tests/malformed_configs.py gives a one-line ConfigError naming the field, never a traceback.

Each row is checked through the library and through the CLI (return code 2,
exactly one stderr line ``anchorlab: error: <field>: ...``).
"""

import math
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from malformed_configs import FAMILIES, FILES, SHARED, SWEEPS  # noqa: E402

from anchorlab.cli import main  # noqa: E402
from anchorlab.config import ConfigError, experiment_from_dict, load_config, load_yaml  # noqa: E402
from anchorlab.sweep.grid import expand, load_sweep  # noqa: E402

CASES = [(fam, r) for fam, f in FAMILIES.items() for r in SHARED + f.rows
         if f.shared_model_rows or r in f.rows or not r[1].startswith("model.")]
IDS = [f"{fam}:{' '.join(r[0])}" for fam, r in CASES]


def _check_message(msg: str, field: str, hint: str) -> None:
    assert "\n" not in msg and "Traceback" not in msg, msg
    assert msg.startswith(f"{field}:") or msg.startswith(f"{field} "), (field, msg)
    assert hint in msg, (hint, msg)


def _check_cli(capsys, argv, field, hint) -> None:
    capsys.readouterr()
    rc = main(argv)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, (argv, rc, captured.err[-2000:])
    assert lines[0].startswith("anchorlab: error: ")
    _check_message(lines[0][len("anchorlab: error: "):], field, hint)


@pytest.fixture(scope="module")
def base_files(tmp_path_factory):
    """Each family's base as the CLI takes it: a preset name, or a YAML file holding the mapping."""
    d = tmp_path_factory.mktemp("bases")
    out = {}
    for fam, f in FAMILIES.items():
        if isinstance(f.base, str):
            out[fam] = f.base
        else:
            p = d / f"{fam}.yaml"
            p.write_text(yaml.safe_dump(f.base))
            out[fam] = str(p)
    return out


def _base(fam):
    b = FAMILIES[fam].base
    return load_yaml(b) if isinstance(b, str) else b


def test_the_table_covers_every_section_and_every_registered_task():
    from anchorlab.registry import TASKS

    missing = sorted(set(TASKS) - set(FAMILIES))
    assert not missing, f"add rows for task families {missing} to tests/malformed_configs.py:FAMILIES"
    sections = {r[1].split(".")[0].split("[")[0] for r in SHARED}
    assert {"name", "model", "init", "optim", "train", "task"} <= sections
    for fam, f in FAMILIES.items():
        assert any(r[1].startswith("task.") for r in f.rows), fam
    distinct = {(fam if r in f.rows else "*", r) for fam, f in FAMILIES.items() for r in f.rows} | set(SHARED)
    assert len(distinct) + len(FILES) + len(SWEEPS) >= 60
    print(f"malformed-config table: {len(SHARED)} shared rows x {len(FAMILIES)} families + "
          f"{sum(len(f.rows) for f in FAMILIES.values())} family rows + {len(FILES)} files + {len(SWEEPS)} sweep specs "
          f"= {len(CASES) + len(FILES) + len(SWEEPS)} cases")


@pytest.mark.parametrize("fam, row", CASES, ids=IDS)
def test_library_gives_one_line_naming_the_field(fam, row):
    overrides, field, hint = row
    with pytest.raises(ConfigError) as e:
        experiment_from_dict(_base(fam), list(overrides))
    _check_message(str(e.value), field, hint)


@pytest.mark.parametrize("fam, row", CASES, ids=IDS)
def test_cli_gives_one_line_naming_the_field(fam, row, base_files, capsys):
    overrides, field, hint = row
    argv = ["config", base_files[fam]] + [x for s in overrides for x in ("--set", s)]
    _check_cli(capsys, argv, field, hint)


@pytest.mark.parametrize("text, field, hint", FILES, ids=[f"file{i}" for i in range(len(FILES))])
def test_bad_yaml_files(text, field, hint, tmp_path, capsys):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    field = field.format(path=p)
    with pytest.raises(ConfigError) as e:
        load_config(str(p))
    _check_message(str(e.value), field, hint)
    _check_cli(capsys, ["config", str(p)], field, hint)


@pytest.mark.parametrize("spec, field, hint", SWEEPS, ids=[f"sweep{i}" for i in range(len(SWEEPS))])
def test_bad_sweep_specs(spec, field, hint, tmp_path, capsys):
    with pytest.raises(ConfigError) as e:
        expand(load_sweep(spec))
    _check_message(str(e.value), field, hint)
    p = tmp_path / "spec.yaml"
    p.write_text(yaml.safe_dump(spec))
    _check_cli(capsys, ["sweep", str(p), "--dry-run"], field, hint)


def test_nonfinite_numbers_are_rejected_by_every_float_field():
    """Each float field of the shared sections, set to NaN, +inf and -inf, names itself."""
    import dataclasses
    import typing

    from anchorlab.config import InitConfig, ModelConfig, OptimConfig, TrainConfig

    n = 0
    for section, cls in (("model", ModelConfig), ("init", InitConfig), ("optim", OptimConfig),
                         ("train", TrainConfig)):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if hints[f.name] is not float:
                continue
            for bad in (math.nan, math.inf, -math.inf):
                with pytest.raises(ConfigError, match=rf"^{section}\.{f.name}: must be a finite number"):
                    experiment_from_dict({section: {f.name: bad}})
                n += 1
    assert n >= 3 * 12


def test_a_corrupt_data_file_is_one_line_naming_it(tmp_path, capsys):
    d = tmp_path / "data" / "scan"
    d.mkdir(parents=True)
    for name in ("tasks_train_addprim_turn_left.txt", "tasks_test_addprim_turn_left.txt"):
        (d / name).write_text("IN: jump OUT: I_JUMP\n")            # not the pinned file
    p = tmp_path / "scan.yaml"
    p.write_text(yaml.safe_dump({"task": {"name": "scan", "data_dir": str(tmp_path / "data")}}))
    _check_cli(capsys, ["config", str(p)], str(d / "tasks_train_addprim_turn_left.txt"), "sha256 mismatch")
