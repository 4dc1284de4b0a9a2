"""``train.bf16_path``: a new field that must not move any recorded run id."""

import glob

import pytest
import yaml

from anchorlab.config import load_config
from anchorlab.config.base import ConfigError, config_hash
from anchorlab.sweep.grid import expand


def _hash(*sets):
    return config_hash(load_config("demo/small", list(sets)))


def test_autocast_is_the_default_and_leaves_the_id_alone():
    assert load_config("demo/small").train.bf16_path in ("autocast", "native")
    assert _hash("train.bf16_path=autocast") == _hash("train.amp=auto", "train.bf16_path=autocast")


def test_native_changes_the_id_of_a_bf16_run_only():
    assert _hash("train.amp=auto", "train.bf16_path=native") != _hash("train.amp=auto", "train.bf16_path=autocast")
    assert _hash("train.amp=bf16", "train.bf16_path=native") != _hash("train.amp=bf16", "train.bf16_path=autocast")
    # a float32 run trains the same either way, so its id must not depend on the field
    assert _hash("train.amp=none", "train.bf16_path=native") == _hash("train.amp=none", "train.bf16_path=autocast")


def test_bad_value_names_the_field_and_choices():
    with pytest.raises(ConfigError, match=r"train\.bf16_path.*autocast.*native"):
        load_config("demo/small", ["train.bf16_path=fast"])


STUDIES_ON_AUTOCAST = [p for p in sorted(glob.glob("src/anchorlab/sweeps/*.yaml"))
                       if yaml.safe_load(open(p)).get("base") == "demo/small"]


@pytest.mark.parametrize("path", STUDIES_ON_AUTOCAST)
def test_every_study_based_on_the_demo_config_keeps_autocast(path):
    """Every committed study on demo/small trained its bf16 runs on autocast; its preset pins that, so that
    changing the demo config's path never silently retrains (or mislabels) a committed study."""
    runs = expand(path)
    assert runs
    assert all(r.config.train.bf16_path == "autocast" for r in runs if r.config.train.amp != "none")
    pinned = "bf16_path: autocast" in open(path).read() or "bf16_path=autocast" in open(path).read()
    assert pinned or all(r.config.train.amp == "none" for r in runs)
