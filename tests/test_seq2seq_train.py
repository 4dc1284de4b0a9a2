"""Seq2seq training (SCAN / COGS): loop, resume, decoding, configs, data subsets."""

import itertools
import json
from collections import Counter

import numpy as np
import pytest
import torch

from anchorlab.config import ConfigError, ExperimentConfig, ModelConfig, experiment_from_dict, load_config
from anchorlab.model.init import apply_init_rate
from anchorlab.model.transformer import build_model
from anchorlab.tasks.seq2seq import PairsTask, Vocab, decode
from anchorlab.tasks.seq2seq.cogs import CogsTask, CogsTaskConfig
from anchorlab.tasks.seq2seq.scan import ScanTask
from anchorlab.train import train


def run_seq2seq(cfg, out, data, **kw):
    return train(cfg, out, task=data, **kw).final


def data_from_pairs(pairs, evals=None):
    return PairsTask.from_pairs(pairs, evals)

LETTERS = "abcdef"


def _reverse_pairs():
    """Every length-3 string over 6 letters -> its reverse (216 pairs)."""
    return [(" ".join(w), " ".join(reversed(w))) for w in itertools.product(LETTERS, repeat=3)]


def _tiny_cfg(**train):
    return experiment_from_dict({
        "task": {"name": "pairs"},
        "model": {"arch": "gpt2", "n_layers": 2, "d_model": 32, "n_heads": 2, "d_head": 16, "d_ff": 64,
                  "activation": "gelu", "vocab_size": 10, "max_len": 8},
        "init": {"gamma": 0.5, "fan_in": "d_model"},
        "optim": {"lr": 5e-3, "warmup_epochs": 0.5, "warmup_multiplier": 1, "cosine_epochs": 15,
                  "min_lr": 5e-4, "weight_decay": 0.0},
        "train": {"batch_size": 32, "threads": 1, **train}})


def test_tiny_model_learns_to_reverse_with_loss_on_outputs_only(tmp_path):
    pairs = _reverse_pairs()
    data = data_from_pairs(pairs, {"id": pairs[:64]})
    f = run_seq2seq(_tiny_cfg(epochs=15, eval_every=30), tmp_path / "r", data=data)  # 6 steps/epoch
    # Inputs are uniformly random letters (entropy log 6 = 1.8 nats each): a loss
    # that also covered the 2 predictable-only-by-chance input positions of each
    # row would stay above 2 * 1.8 / 7 = 0.5.
    assert f["history"][0]["id_exact"] < 0.05
    assert f["final"]["train_loss"] < 0.15
    assert f["final"]["id_exact"] > 0.9 and f["final"]["id_token_acc"] > 0.95
    for name in ("config.yaml", "metrics.jsonl", "param_table.csv", "final.json", "model.safetensors",
                 "checkpoint.pt"):
        assert (tmp_path / "r" / name).exists(), name
    assert {"run_id", "status", "final", "best", "history", "wall_seconds", "versions", "config"} <= set(f)
    import pandas as pd
    t = pd.read_csv(tmp_path / "r" / "param_table.csv")
    assert {"lr", "weight_decay"} <= set(t)


def test_resume_equals_uninterrupted_run(tmp_path):
    pairs = _reverse_pairs()[:96]
    data = data_from_pairs(pairs, {"id": pairs[:16]})
    cfg = _tiny_cfg(epochs=4, eval_every=3)  # 3 steps/epoch, 12 steps
    full = run_seq2seq(cfg, tmp_path / "a", data=data)
    part = run_seq2seq(cfg, tmp_path / "b", data=data, stop_after_step=6)
    assert part["status"] == "interrupted" and not (tmp_path / "b" / "final.json").exists()
    resumed = run_seq2seq(cfg, tmp_path / "b", data=data)
    drop = {"wall_seconds", "eval_seconds"}
    strip = lambda h: json.dumps([{k: v for k, v in r.items() if k not in drop} for r in h])  # noqa: E731
    assert [r["step"] for r in resumed["history"]] == [0, 3, 6, 9, 12]
    assert strip(resumed["history"]) == strip(full["history"])
    from safetensors.torch import load_file
    wa, wb = load_file(str(tmp_path / "a" / "model.safetensors")), load_file(str(tmp_path / "b" / "model.safetensors"))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    # the metrics file holds each evaluation once
    lines = (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [0, 3, 6, 9, 12]


@pytest.mark.parametrize("arch", ["gpt2", "neurips"])
def test_cached_decoding_equals_reference_decoding(arch):
    vocab = Vocab.build(["a b c d e f g"])
    cfg = ModelConfig(arch=arch, n_layers=2, d_model=32, n_heads=2, d_head=16, d_ff=64, max_len=20,
                      vocab_size=len(vocab), activation="gelu")
    model = build_model(cfg)
    # std-1 weights: random logits, so rows stop (emit <eos>) after different numbers of tokens
    apply_init_rate(model, 0.0, generator=torch.Generator().manual_seed(0), fan_in="d_model")
    model = model.double().eval()  # float64: no near-ties that summation order could flip
    rng = np.random.default_rng(1)
    prompts = [" ".join(rng.choice(list("abcdefg"), size=rng.integers(1, 7))) for _ in range(40)]
    ref = decode(model, prompts, vocab, max_new_tokens=10, batch_size=7, cached=False)
    # small batches (few lengths each) and one batch (left pads up to 6 wide)
    assert decode(model, prompts, vocab, max_new_tokens=10, batch_size=5) == ref
    assert decode(model, prompts, vocab, max_new_tokens=10, batch_size=64) == ref
    lengths = Counter(len(r.split()) for r in ref)
    assert len(lengths) > 3 and lengths[10] < len(ref)  # rows stopped at different lengths


def test_config_errors_name_the_field(tmp_path):
    with pytest.raises(ConfigError, match=r"^task\.name: .*'scan'.*'cogs'"):
        experiment_from_dict({"task": {"name": "pcfg"}})
    with pytest.raises(ConfigError, match=r"^task\.bogus: unknown key"):
        experiment_from_dict({"task": {"name": "scan", "bogus": 1}, "model": {"vocab_size": 9, "max_len": 9}})
    with pytest.raises(ConfigError, match=r"^task\.fmt: "):
        experiment_from_dict({"task": {"name": "cogs"}, "model": {"vocab_size": 9, "max_len": 9}}, ["task.fmt=lambda"])
    pairs = _reverse_pairs()[:40]
    data = data_from_pairs(pairs)
    short = experiment_from_dict({"task": {"name": "pairs"}, "model": {"arch": "gpt2", "vocab_size": 10, "max_len": 6}})
    with pytest.raises(ConfigError, match=r"^model\.max_len: "):  # rows are 3 + 1 + 3 + 1 = 8 tokens
        run_seq2seq(short, tmp_path / "short", data=data)
    narrow = experiment_from_dict({"task": {"name": "pairs"}, "model": {"arch": "gpt2", "vocab_size": 5, "max_len": 8}})
    with pytest.raises(ConfigError, match=r"^model\.vocab_size: "):
        run_seq2seq(narrow, tmp_path / "narrow", data=data)
    with pytest.raises(ConfigError, match=r"^task\.files: "):  # a pairs task without data files cannot size itself
        experiment_from_dict({"task": {"name": "pairs"}})


def test_pairs_task_reads_tsv_files(tmp_path):
    pairs = _reverse_pairs()[:60]
    (tmp_path / "train.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in pairs[:50]))
    (tmp_path / "test.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in pairs[50:]))
    cfg = experiment_from_dict({"task": {"name": "pairs", "files": {"train": str(tmp_path / "train.tsv"),
                                                                   "test": str(tmp_path / "test.tsv")}},
                                "model": {"arch": "gpt2", "n_layers": 1, "d_model": 16, "n_heads": 2, "d_head": 8,
                                          "d_ff": 32}, "train": {"max_steps": 2, "batch_size": 16, "threads": 1}})
    assert (cfg.model.vocab_size, cfg.model.max_len) == (10, 8)
    f = train(cfg, tmp_path / "r").final
    assert {"id_exact", "ood_exact", "id_token_acc", "ood_token_acc"} <= set(f["final"])
    (tmp_path / "bad.tsv").write_text("no tab here\n")
    with pytest.raises(ConfigError, match=r"bad.tsv:1"):
        experiment_from_dict({"task": {"name": "pairs", "files": {"train": str(tmp_path / "bad.tsv")}}})


def test_scan_preset_builds_from_the_shared_data(shared_datasets, tmp_path):
    cfg = load_config("scan/cpu", [f"task.data_dir={shared_datasets}"])
    # 13 command words + 6 actions + 4 specials; longest row: a 9-word command,
    # <sep>, 48 actions ("... around ... thrice" twice), <eos>.
    assert (cfg.model.vocab_size, cfg.model.max_len) == (23, 59)
    assert cfg.model.arch == "gpt2" and cfg.task.name == "scan"
    elsewhere = experiment_from_dict({**cfg.to_dict(), "task": {**cfg.to_dict()["task"], "data_dir": "/x"}})
    assert elsewhere.run_id() == cfg.run_id()  # where the files lie is not part of the run
    assert experiment_from_dict(cfg.to_dict(), ["task.train_size=8000"]).run_id() != cfg.run_id()
    small = load_config("scan/cpu", [f"task.data_dir={shared_datasets}", "model.max_len=40"])
    with pytest.raises(ConfigError, match=r"^model\.max_len: .*59"):
        train(small, tmp_path / "small")
    with pytest.raises(ConfigError, match=r"^task\.train_size: "):
        ScanTask(cfg.task.__class__(train_size=10**6, data_dir=str(shared_datasets))).data(0)
    a = ScanTask(cfg.task).data(0)
    b = ScanTask(cfg.task).data(1)
    assert len(a.train_pairs) == 2000 and set(a.train_pairs) != set(b.train_pairs)
    assert set(a.eval_sets) == {"id", "ood"}
    assert set(a.eval_sets["id"].pairs) <= set(a.train_pairs)  # SCAN "id" = fit on the training subset
    assert all("turn left" in c for c, _ in a.eval_sets["ood"].pairs)
    assert len(a.eval_sets["ood"].pairs) == cfg.task.eval_max
    assert a.eval_sets["ood"].pairs == b.eval_sets["ood"].pairs  # same eval subset for every data seed


def test_cogs_configs_build_and_subsets_keep_primitives(shared_datasets):
    for preset in ("cogs/cpu", "cogs/paper"):
        cfg = load_config(preset, [f"task.data_dir={shared_datasets}"])
        assert cfg.task.name == "cogs" and cfg.model.vocab_size > 700
    assert cfg.model.n_layers == 12 and cfg.model.d_model == 768 and cfg.model.activation == "gelu"
    task = CogsTaskConfig(train_size=1000, eval_max=210, data_dir=str(shared_datasets))
    d = CogsTask(task).data(0)
    assert len(d.train_pairs) == 1000
    # all 183 primitive + 12 exposure rows are in every subset
    from anchorlab.tasks.seq2seq.cogs import load_cogs
    train = load_cogs("varfree", shared_datasets, splits=["train"])["train"]
    special = Counter((r.sentence, r.lf) for r in train if r.type != "in_distribution")
    assert sum(special.values()) == 195  # some primitive rows occur twice in the file
    assert not special - Counter(d.train_pairs)
    ood = d.eval_sets["ood"]
    assert Counter(ood.types) == {t: 10 for t in set(ood.types)} and len(set(ood.types)) == 21
    assert set(d.eval_sets["id"].types) == {"in_distribution"}


def test_scan_paper_preset_is_paper_scale(shared_datasets):
    cfg = load_config("scan/paper", [f"task.data_dir={shared_datasets}"])
    m = cfg.model
    assert (m.arch, m.n_layers, m.d_model, m.n_heads, m.d_head, m.d_ff) == ("gpt2", 12, 768, 12, 64, 3072)
    assert isinstance(cfg, ExperimentConfig)


def test_fig7_plot_draws_one_line_per_setting_and_metric():
    import pandas as pd
    from anchorlab.papers.plots.realtasks import plot_exact_vs_train_size
    rows = [{"task.name": ds, "setting": st, "task.train_size": n, "final.ood_exact": o, "final.id_exact": 0.9}
            for ds in ("scan", "cogs") for st, o in (("small", 0.6), ("large", 0.2)) for n in (2000, 8000)]
    rows.append({"task.name": "scan", "setting": "small", "task.train_size": 2000, "final.ood_exact": 0.4,
                 "final.id_exact": 0.9})
    fig = plot_exact_vs_train_size(pd.DataFrame(rows))
    axes = fig.get_axes()
    assert [a.get_title() for a in axes] == ["COGS", "SCAN addprim_turn_left"]
    scan_lines = {ln.get_label(): ln for ln in axes[1].get_lines()}
    assert set(scan_lines) == {"OOD: small", "ID: small", "OOD: large", "ID: large"}
    # two seeds at n=2000 are averaged: (0.6 + 0.4) / 2
    assert list(scan_lines["OOD: small"].get_ydata()) == pytest.approx([0.5, 0.6])
    with pytest.raises(ConfigError, match="setting"):
        plot_exact_vs_train_size(pd.DataFrame(rows).drop(columns="setting"))


def test_matched_plot_orders_the_2x2_and_marks_runs_that_hit_the_cap():
    import pandas as pd
    from anchorlab.papers.plots.realtasks import SETTING_ORDER, plot_matched
    rows = [{"task.name": "scan", "setting": st, "final.ood_exact": o + 0.1 * seed, "steps": 100 + seed,
             "reached_id": not (st.startswith("large init + small") and seed == 1)}
            for st, o in zip(reversed(SETTING_ORDER), (0.1, 0.2, 0.5, 0.6)) for seed in (0, 1)]
    fig = plot_matched(pd.DataFrame(rows))
    ood, steps = fig.get_axes()
    assert [t.get_text().replace("\n", " ") for t in ood.get_xticklabels()] == list(SETTING_ORDER)
    assert [round(p.get_height(), 6) for p in ood.patches] == [0.65, 0.55, 0.25, 0.15]   # seed means, 2x2 order
    hollow = [c for c in steps.collections if len(c.get_offsets()) and c.get_facecolors().size == 0]
    assert len(hollow) == 1 and list(hollow[0].get_offsets()[0]) == [3, 101]          # the one capped run
    assert [t.get_text() for t in steps.get_legend().get_texts()] == ["hit the cap (ID rule not reached)"]
    with pytest.raises(ConfigError, match="reached_id"):
        plot_matched(pd.DataFrame(rows).drop(columns="reached_id"))


def test_cli_train_dispatches_scan_configs(tmp_path, shared_datasets, capsys):
    from anchorlab.cli import main

    args = ["train", "scan/cpu", "--out", str(tmp_path / "s"), "--no-progress",
            "--set", f"task.data_dir={shared_datasets}", "--set", "task.train_size=200",
            "--set", "task.eval_max=8", "--set", "train.max_steps=4", "--set", "train.eval_every=4"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "ood_exact" in out and "status=finished" in out
    assert (tmp_path / "s" / "final.json").exists()
