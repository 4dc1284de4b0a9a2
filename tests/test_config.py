import pytest

from anchorlab.tasks.anchor import AnchorTaskConfig as TaskConfig
from anchorlab.config import (ConfigError, ExperimentConfig, dump_config, experiment_from_dict,
                              load_config)
from anchorlab.cli import main


def test_defaults_are_the_papers():
    c = ExperimentConfig()
    assert c.task.anchors == {1: 5, 2: 1, 3: -2, 4: -8}
    assert (c.task.value_min, c.task.value_max, c.task.seq_len) == (20, 99, 9)
    assert c.task.rules[(3, 4)] == ("shift", -6) and c.task.rules[(4, 3)] == ("held_out", None)
    assert (c.optim.lr, c.optim.eps, c.optim.betas, c.optim.weight_decay) == (1e-5, 1e-8, (0.9, 0.999), 0.01)


@pytest.mark.parametrize("override, field, hint", [
    ("init.gama=0.8", "init.gama", "allowed: gamma"),
    ("init.gamma=abc", "init.gamma", "expected a number"),
    ("model.n_layers=0", "model.n_layers", ">= 1"),
    ("model.arch=lstm", "model.arch", "'neurips', 'gpt2'"),
    ("task.preset=foo", "task.preset", "'neurips', 'journal'"),
    ("task.pair_rules={'3,4': 'sometimes'}", "task.pair_rules.3,4", "shift:<int>"),
    ("train.batch_size=1.5", "train.batch_size", "integer"),
    ("optim.betas=[0.9]", "optim.betas", "2 values"),
    ("train.flush_denormal=maybe", "train.flush_denormal", "true or false"),
])
def test_bad_values_name_the_field(override, field, hint):
    with pytest.raises(ConfigError) as e:
        experiment_from_dict({}, [override])
    msg = str(e.value)
    assert msg.startswith(field) and hint in msg and "\n" not in msg


def test_target_outside_vocab_is_an_error_not_a_wrap():
    with pytest.raises(ConfigError, match="task.vocab_size: targets span 4..109"):
        experiment_from_dict({}, ["task.vocab_size=100", "model.vocab_size=100"])
    with pytest.raises(ConfigError, match="task.vocab_size"):
        TaskConfig(pair_rules={"1,1": "shift:150"})


def test_yaml_round_trip_and_run_id(tmp_path):
    c = experiment_from_dict({}, ["init.gamma=0.8", "model.n_layers=3"])
    p = tmp_path / "c.yaml"
    p.write_text(dump_config(c))
    c2 = load_config(p)
    assert c2 == c and c2.run_id() == c.run_id()
    assert experiment_from_dict({}, ["init.gamma=0.7"]).run_id() != c.run_id()


def test_presets_load():
    for name in ("neurips/paper", "neurips/complexity", "journal/paper", "journal/mechanism", "demo/small"):
        assert isinstance(load_config(name), ExperimentConfig)
    with pytest.raises(ConfigError, match="presets: "):
        load_config("nope/missing")


def test_cli_reports_config_errors_in_one_line(capsys):
    rc = main(["config", "demo/small", "--set", "init.gamma=oops"])
    err = capsys.readouterr().err
    assert rc == 2 and err.strip().startswith("anchorlab: error: init.gamma") and "Traceback" not in err


def test_planned_steps_from_the_config_alone(shared_datasets):
    """The anchor task states its size: epochs x (n_train // batch), capped by max_steps; a task whose size
    lives in data files plans max_steps, or nothing."""
    cfg = experiment_from_dict({"task": {"n_train": 1000}, "train": {"batch_size": 100, "epochs": 2.5}})
    assert cfg.planned_steps() == 25
    assert cfg.train.plan(1000)[1] == cfg.planned_steps()
    capped = experiment_from_dict({"task": {"n_train": 1000}, "train": {"batch_size": 100, "epochs": 2.5,
                                                                         "max_steps": 7}})
    assert capped.planned_steps() == 7
    scan = {"task": {"name": "scan", "data_dir": str(shared_datasets)}, "model": {"arch": "gpt2"}}
    assert experiment_from_dict(scan).planned_steps() is None
    assert experiment_from_dict({**scan, "train": {"max_steps": 40}}).planned_steps() == 40
