"""Opt-in tracking (train.tracking): MLflow's local file store and TensorBoard event files.

Each backend's test skips when its package (the ``tracking`` extra) is absent.
"""

import subprocess
import sys

import pytest

from anchorlab.cli import main
from anchorlab.config import ConfigError, experiment_from_dict
from anchorlab.train import train

TINY = ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=1024", "task.n_eval_per_group=16",
        "train.batch_size=128", "train.epochs=1", "train.eval_every=4", "optim.lr=1e-3", "train.threads=1"]


def test_tracking_is_validated_and_not_part_of_the_run_id(capsys):
    assert experiment_from_dict({}, TINY + ["train.tracking=mlflow"]).run_id() == experiment_from_dict({}, TINY).run_id()
    with pytest.raises(ConfigError, match="^train.tracking: must be one of 'none', 'mlflow', 'tensorboard', got 'wandb'"):
        experiment_from_dict({}, ["train.tracking=wandb"])
    assert main(["config", "demo/small", "--set", "train.tracking=5"]) == 2
    assert capsys.readouterr().err.startswith("anchorlab: error: train.tracking: expected a string")


def test_mlflow_logs_config_metrics_and_figures_and_resumes_the_same_run(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)                       # the default store is ./mlruns
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cfg = experiment_from_dict({"name": "trk"}, TINY + ["train.tracking=mlflow"])
    run = tmp_path / "run"
    assert train(cfg, run, stop_after_step=4).final["status"] == "interrupted"
    final = train(cfg, run).final                     # resumes: the same MLflow run
    assert (tmp_path / "mlruns").is_dir()
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())
    exp = client.get_experiment_by_name("trk")
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1
    r = runs[0]
    assert r.info.status == "FINISHED" and r.data.tags["anchorlab.run_id"] == cfg.run_id()
    assert r.data.params["init.gamma"] == "0.5" and r.data.params["model.d_model"] == "16"
    hist = client.get_metric_history(r.info.run_id, "id_acc")
    steps = sorted({m.step for m in hist})
    assert steps == [h["step"] for h in final["history"]]
    last = max(hist, key=lambda m: (m.step, m.timestamp))
    assert last.value == pytest.approx(final["final"]["id_acc"])
    arts = {a.path for a in client.list_artifacts(r.info.run_id)}
    assert {"curves.png", "config.yaml", "final.json", "param_table.csv"} <= arts


def test_tensorboard_writes_scalars_and_the_curves_image(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = experiment_from_dict({}, TINY + ["train.tracking=tensorboard"])
    final = train(cfg, tmp_path / "run").final
    acc = EventAccumulator(str(tmp_path / "run" / "tensorboard"), size_guidance={"scalars": 0, "images": 0})
    acc.Reload()
    tags = acc.Tags()
    assert "id_acc" in tags["scalars"] and "train_loss" in tags["scalars"] and "curves" in tags["images"]
    ev = acc.Scalars("id_acc")
    assert [e.step for e in ev] == [h["step"] for h in final["history"]]
    assert ev[-1].value == pytest.approx(final["final"]["id_acc"], rel=1e-6)
    assert [e.step for e in acc.Scalars("train_loss")] == [h["step"] for h in final["history"][1:]]  # step 0: NaN
    assert "config" in "".join(tags.get("tensors", []))


def test_nothing_is_imported_unless_enabled_and_a_missing_backend_is_one_line(tmp_path):
    """One subprocess: a run without tracking imports no backend; with the backends hidden,
    train.tracking=mlflow stops before training with one line naming the extra."""
    code = ("import sys, importlib.abc\n"
            "from anchorlab.config import experiment_from_dict\n"
            "from anchorlab.train import train\n"
            f"train(experiment_from_dict({{}}, {TINY!r}), {str(tmp_path / 'r')!r})\n"
            "bad = [m for m in ('mlflow', 'tensorboard', 'torch.utils.tensorboard', 'anchorlab.tracking') if m in sys.modules]\n"
            "print(bad)\n"
            "class Hide(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('mlflow', 'tensorboard'):\n"
            "            raise ModuleNotFoundError(name)\n"
            "sys.meta_path.insert(0, Hide())\n"
            "from anchorlab.cli import main\n"
            f"sys.exit(main(['train', 'demo/small', '--no-progress', '--out', {str(tmp_path / 'm')!r}, "
            f"*['--set=' + s for s in {TINY + ['train.tracking=mlflow']!r}]]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.strip() == "[]", r.stderr[-2000:]
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.strip() == ("anchorlab: error: train.tracking=mlflow needs mlflow-skinny, which is not installed: "
                                "pip install 'anchorlab[tracking]'")
    assert not (tmp_path / "m" / "metrics.jsonl").exists()              # nothing trained
