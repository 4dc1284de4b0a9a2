"""``train.bf16_path``: ``auto`` (native where the model has the path) is the default, and no recorded run id moves."""

import pytest
import yaml

from anchorlab.config import load_config
from anchorlab.config.base import ConfigError, config_hash, identity_dict
from anchorlab.config.experiment import experiment_from_dict
from anchorlab.sweep.grid import expand


def _hash(*sets):
    return config_hash(load_config("demo/small", list(sets)))


def test_auto_is_the_default_and_resolves_to_native_for_the_transformer():
    assert load_config("demo/small").train.bf16_path == "native"
    assert load_config("demo/small", ["model.arch=gpt2"]).train.bf16_path == "native"
    # the default and an explicit native are one run
    assert _hash() == _hash("train.bf16_path=native") == _hash("train.bf16_path=auto")


def test_auto_resolves_to_autocast_where_native_cannot_run():
    assert load_config("demo/small", ["train.compile=true"]).train.bf16_path == "autocast"
    assert load_config("lm/cpu").train.bf16_path == "autocast"                 # Hugging Face GPT-2
    assert load_config("concepts/cpu").train.bf16_path == "autocast"           # the diffusion UNet
    # autocast leaves a float64 model in float64; native would multiply it in bfloat16
    assert load_config("demo/small", ["train.dtype=float64"]).train.bf16_path == "autocast"


def test_the_saved_config_names_the_path_that_ran():
    cfg = load_config("demo/small")
    assert cfg.to_dict()["train"]["bf16_path"] == "native"
    again = experiment_from_dict(cfg.to_dict())
    assert again == cfg and again.run_id() == cfg.run_id()


def test_autocast_leaves_the_id_alone():
    """Recorded bf16 runs trained on autocast with no path in their config: their ids stay."""
    assert _hash("train.bf16_path=autocast") == _hash("train.amp=auto", "train.bf16_path=autocast")
    cfg = load_config("demo/small", ["train.bf16_path=autocast"])
    assert "bf16_path" not in str(identity_dict(cfg))
    assert cfg.run_id() == "2ac2e681c502"      # demo/small's id before the field existed


def test_native_changes_the_id_of_a_bf16_run_only():
    assert _hash("train.amp=auto", "train.bf16_path=native") != _hash("train.amp=auto", "train.bf16_path=autocast")
    assert _hash("train.amp=bf16", "train.bf16_path=native") != _hash("train.amp=bf16", "train.bf16_path=autocast")
    # a float32 run trains the same either way, so its id must not depend on the field
    assert _hash("train.amp=none", "train.bf16_path=native") == _hash("train.amp=none", "train.bf16_path=autocast")


def test_bad_value_names_the_field_and_choices():
    with pytest.raises(ConfigError, match=r"train\.bf16_path.*autocast.*native"):
        load_config("demo/small", ["train.bf16_path=fast"])


def _bf16_studies():
    """Every committed sweep preset with a run that may train in bf16 (``train.amp`` not ``none``): its file."""
    from anchorlab.sweep.presets import sweep_presets

    out = []
    for p in sweep_presets().values():
        try:
            runs = expand(p)
        except ConfigError:      # a sweep over data files this machine lacks
            continue
        if any(r.config.train.amp != "none" for r in runs):
            out.append(p)
    return out


STUDIES_ON_AUTOCAST = _bf16_studies()


def test_the_bf16_studies_are_found():
    assert {"journal_fig3_cpu", "fig2_cell_cpu"} <= {p.stem for p in STUDIES_ON_AUTOCAST}


@pytest.mark.parametrize("path", STUDIES_ON_AUTOCAST, ids=[p.stem for p in STUDIES_ON_AUTOCAST])
def test_every_committed_bf16_study_keeps_autocast(path):
    """Every committed study that trains in bf16 trained on autocast; its sweep pins that, so that the
    ``auto`` default (native) never silently retrains (or mislabels) a committed study."""
    runs = expand(path)
    assert all(r.config.train.bf16_path == "autocast" for r in runs if r.config.train.amp != "none")
    text = open(path).read()
    assert "bf16_path: autocast" in text or "bf16_path=autocast" in text


def test_a_run_recorded_before_the_field_reads_back_as_autocast(tmp_path):
    """A config.yaml (or a run-table row) written before train.bf16_path existed has no such key: that run
    trained on autocast, so it reads back as autocast with its own run id, and resuming it is allowed."""
    from anchorlab.sweep.runtable import row_config
    from anchorlab.train.run import check_run_dir, config_of

    cfg = load_config("demo/small", ["train.bf16_path=autocast"])
    old = cfg.to_dict()
    del old["train"]["bf16_path"]
    assert experiment_from_dict(old).train.bf16_path == "native"       # what the key's absence means today
    run_dir = tmp_path / cfg.run_id()
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(old))
    back = config_of(run_dir)
    assert back.train.bf16_path == "autocast" and back.run_id() == cfg.run_id() == run_dir.name
    check_run_dir(run_dir, cfg)                                           # the same run: no error
    with pytest.raises(ConfigError, match="holds a different run"):
        check_run_dir(run_dir, load_config("demo/small"))                 # today's default is another run
    row = {"run_id": cfg.run_id(), **{f"{sec}.{k}": v for sec in ("task", "model", "init", "optim", "train")
                                      for k, v in old[sec].items()}}
    assert row_config(row).train.bf16_path == "autocast"
    # a recorded native run keeps its path
    nat = load_config("demo/small").to_dict()
    (run_dir.parent / "n").mkdir()
    (run_dir.parent / "n" / "config.yaml").write_text(yaml.safe_dump(nat))
    assert config_of(run_dir.parent / "n").train.bf16_path == "native"
