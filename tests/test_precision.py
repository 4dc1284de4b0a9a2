"""train.amp: bf16 on CPU keeps float32 master weights, resumes exactly, is recorded; auto picks by the CPU."""

import logging

import os

import pytest
import torch
from safetensors.torch import load_file

from anchorlab.bench import time_steps, train_flops_per_sample
from anchorlab.config import ConfigError, experiment_from_dict
from anchorlab.train import load_run, train
from run_helpers import assert_stack_matches_singles, train_stop_resume
from anchorlab.train.run import init_model
from anchorlab.train.precision import CpuMatrixUnits, cpu_matrix_units, device_label, resolve_precision

CPU = torch.device("cpu")
AMX = CpuMatrixUnits("AVX512", amx=True, avx512_bf16=True)
AVX2 = CpuMatrixUnits("AVX2", amx=False, avx512_bf16=False)
# 1024 / 64 = 16 steps per epoch, 2 epochs -> 32 steps, evaluated every 8.
TINY = ["model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=1024", "task.n_eval_per_group=16",
        "train.batch_size=64", "train.epochs=2", "train.eval_every=8", "optim.lr=1e-3", "optim.warmup_epochs=0.5",
        "optim.warmup_multiplier=2", "optim.cosine_epochs=1.5", "optim.min_lr=1e-4", "train.threads=1",
        "train.amp=bf16", "train.bf16_path=autocast"]   # this file covers autocast; native: test_bf16_native*.py


def test_auto_picks_bf16_only_on_a_cpu_with_bf16_units():
    assert resolve_precision("auto", CPU, AMX).amp == "bf16"
    p = resolve_precision("auto", CPU, AVX2)
    assert p.amp == "none" and "no bfloat16 matrix units" in p.reason and "AVX2" in p.reason
    assert resolve_precision("auto", torch.device("cuda"), AMX).amp == "none"   # GPU runs keep the papers' fp32
    assert resolve_precision("bf16", torch.device("cuda"), AVX2).amp == "bf16"
    assert resolve_precision("none", CPU, AMX).amp == "none"


def test_the_device_is_named_in_words(monkeypatch):
    import anchorlab.train.precision as P

    monkeypatch.setattr(P, "cpu_model_name", lambda: "Some CPU 9000")
    assert device_label(CPU, AMX) == "cpu: Some CPU 9000 (AVX512 with AMX and AVX512-BF16)"
    assert resolve_precision("none", CPU, AVX2).device == "cpu: Some CPU 9000 (AVX2, no bfloat16 matrix units)"
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "NVIDIA H200")
    assert resolve_precision("auto", torch.device("cuda"), AMX).device == "cuda: NVIDIA H200"
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: 1 / 0)   # no readable name: the type
    assert device_label(torch.device("cuda")) == "cuda"


def test_the_run_and_the_cost_estimate_resolve_amp_by_one_rule():
    from anchorlab.config.experiment import matmul_amp

    table = {(amp, dev, units.bf16): resolve_precision(amp, torch.device(dev), units).amp
             for amp in ("none", "bf16", "auto") for dev in ("cpu", "cuda") for units in (AMX, AVX2)}
    assert all(matmul_amp(*k) == v for k, v in table.items())
    assert [k for k, v in table.items() if v == "bf16"] == [("bf16", "cpu", True), ("bf16", "cpu", False),
                                                           ("bf16", "cuda", True), ("bf16", "cuda", False),
                                                           ("auto", "cpu", True)]


def test_explicit_bf16_on_a_cpu_without_units_is_honoured_with_a_warning(caplog, monkeypatch):
    import anchorlab.train.precision as P

    monkeypatch.setattr(P, "_WARNED", set())
    with caplog.at_level(logging.WARNING, logger="anchorlab.train.precision"):
        p = resolve_precision("bf16", CPU, AVX2)
        again = resolve_precision("bf16", CPU, AVX2)     # a stack resolves once per model: one warning
    assert p.amp == "bf16" and p.matmul_dtype == "bfloat16" and again == p
    assert sum("slower than float32" in r.message for r in caplog.records) == 1


def test_unknown_amp_names_the_field_and_choices():
    with pytest.raises(ConfigError, match=r"train\.amp.*'none', 'bf16', 'auto'"):
        experiment_from_dict({}, ["train.amp=fp16"])


@pytest.fixture(scope="module")
def bf16_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("bf16")
    cfg = experiment_from_dict({}, TINY)
    full, part, resumed = train_stop_resume(cfg, root)
    return root, cfg, full, part, resumed


def test_bf16_run_keeps_float32_master_weights_and_records_precision(bf16_runs):
    root, cfg, full, _, _ = bf16_runs
    assert full["status"] == "finished" and full["steps"] == 32
    assert full["precision"] == {"requested": "bf16", "amp": "bf16", "reason": full["precision"]["reason"],
                                 "device": full["device"], "path": "autocast", "matmul_dtype": "bfloat16",
                                 "master_dtype": "float32"}
    assert full["device"].startswith("cpu: ") and cpu_matrix_units().describe() in full["device"]
    weights = load_file(root / "full" / "model.safetensors")
    assert all(w.dtype == torch.float32 for w in weights.values())
    ck = torch.load(root / "full" / "checkpoint.pt", weights_only=True)
    for st in ck["optimizer"]["state"].values():
        assert st["exp_avg"].dtype == st["exp_avg_sq"].dtype == torch.float32
    # it trained: the loss fell and the weights moved from their init
    losses = [h["train_loss"] for h in full["history"][1:]]
    assert losses[-1] < losses[0]
    init, _ = init_model(cfg)
    assert not torch.equal(init.state_dict()["embed.weight"], weights["embed.weight"])


def test_bf16_run_resumes_exactly(bf16_runs):
    root, _, full, part, resumed = bf16_runs
    assert part["status"] == "interrupted"
    assert resumed["final"] == full["final"] and resumed["steps"] == full["steps"]
    assert [h["train_loss"] for h in resumed["history"]][1:] == [h["train_loss"] for h in full["history"]][1:]
    a = load_run(root / "full").model.state_dict()
    b = load_run(root / "resumed").model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_run_records_its_precision_when_it_starts_so_an_unfinished_run_is_read_with_it(bf16_runs, tmp_path):
    import json

    from anchorlab.sweep.results import in_progress

    root, cfg, full, _, _ = bf16_runs
    started = json.loads((root / "resumed" / "precision.json").read_text())   # rewritten by the resume
    assert started == {**full["precision"], "from_step": 16}
    cut = tmp_path / "sweep" / "runs" / cfg.run_id()                          # a run stopped part-way: no final.json
    assert train(cfg, cut, stop_after_step=8).final["status"] == "interrupted" and not (cut / "final.json").exists()
    (row,) = in_progress([tmp_path / "sweep"])
    assert (row["status"], row["steps"], row["device"]) == ("in_progress", 8, full["device"])
    assert row["precision"]["matmul_dtype"] == "bfloat16"
    (cut / "precision.json").unlink()                                         # a run from before the file existed
    (row,) = in_progress([tmp_path / "sweep"])
    assert (row["precision"]["matmul_dtype"], row["device"]) == ("unrecorded", None)


def test_bf16_stack_agrees_with_single_runs(tmp_path):
    """Stacked bf16 matmuls (vmap -> batched) round differently from single ones, and AdamW's normalised
    update turns the rounding of near-zero gradients into whole steps, so weights agree to a tolerance,
    not bitwise. Stated tolerance, after 16 steps: the weight difference is < 10% of the distance the
    single run moved from its init (measured 2-3.5%; bf16 vs float32 single runs differ by 3-4%), and
    every training loss agrees within 0.1% (measured < 0.01%)."""
    over = [o for o in TINY if not o.startswith("train.epochs")] + ["train.epochs=1"]
    cfgs = [experiment_from_dict({}, over + v) for v in (["init.gamma=0.5"], ["init.gamma=0.8", "train.init_seed=1"])]
    stacked = assert_stack_matches_singles(cfgs, tmp_path, "autocast")
    assert all(b["precision"]["amp"] == "bf16" for b in stacked)


def test_train_flops_per_sample_by_hand():
    m = experiment_from_dict({}, ["model.d_model=4", "model.d_head=2", "model.d_ff=8", "model.n_layers=2"]).model
    T, V = 9, m.vocab_size
    qkvo, ffn = 4 * 4 * 2, 2 * 4 * 8
    matmul = T * (qkvo + ffn) + T * qkvo // 2 + qkvo // 2 + ffn
    attn = 4 * 2 * (T * T + T)
    assert train_flops_per_sample(m, T) == 6 * matmul + 3 * attn + 6 * 4 * V


def test_time_steps_times_every_phase():
    cfg = experiment_from_dict({}, TINY)
    t, prof = time_steps(cfg, steps=2, warmup=1, clock=__import__("time").perf_counter, profile=True)
    assert t.seconds > 0 and t.forward > 0 and t.backward > 0 and t.optimizer > 0
    assert set(prof.columns) == {"category", "ms_per_step", "share"} and "matmul" in set(prof.category)
    assert prof.share.sum() == pytest.approx(1.0)


def test_train_cli_says_which_precision_auto_chose_and_why(tmp_path, capsys, monkeypatch):
    import anchorlab.train.precision as prec
    from anchorlab.cli import main

    monkeypatch.setattr(prec, "cpu_matrix_units", lambda: AVX2)
    over = [x for o in TINY if o != "train.amp=bf16" for x in ("--set", o)]
    assert main(["train", "demo/small", *over, "--set", "train.amp=auto", "--out", str(tmp_path / "r"),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "precision: float32 matmuls (train.amp=auto: float32, this CPU has no bfloat16 matrix units (AVX2" in out


def test_bench_cli_rejects_bad_arguments_naming_the_flag(capsys):
    from anchorlab.cli import main

    assert main(["bench", "--shapes", "huge"]) == 2
    assert "--shapes: unknown shape 'huge'; choose from demo, paper" in capsys.readouterr().err
    assert main(["bench", "--steps", "demo=0"]) == 2
    assert "--steps" in capsys.readouterr().err


def test_malloc_retain_is_not_part_of_the_run_id_and_takes_effect_on_glibc():
    import platform

    from anchorlab.train.allocator import retain_freed_memory

    a, b = experiment_from_dict({}, TINY + ["train.malloc_retain=true"]), experiment_from_dict({}, TINY)
    assert a.run_id() == b.run_id() and a.train.malloc_retain and b.train.malloc_retain is False
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert retain_freed_memory() and retain_freed_memory()


def test_process_settings_are_off_for_a_library_call_on_under_the_command_line(tmp_path, monkeypatch):
    """train.malloc_retain and train.flat_params change the process or the model: a library call leaves them off
    unless asked; the command line turns them on for its commands (and restores the environment after)."""
    from anchorlab.cli import main
    from anchorlab.config.process_settings import PROCESS_SETTINGS_ENV
    from anchorlab.train import config_of

    monkeypatch.delenv(PROCESS_SETTINGS_ENV, raising=False)
    lib = experiment_from_dict({}, TINY)
    assert (lib.train.malloc_retain, lib.train.flat_params) == (False, False)           # resolved, recorded
    asked = experiment_from_dict({}, TINY + ["train.flat_params=true"])
    assert asked.train.flat_params is True and asked.run_id() == lib.run_id()
    monkeypatch.setenv(PROCESS_SETTINGS_ENV, "on")
    assert experiment_from_dict({}, TINY).train.malloc_retain is True
    monkeypatch.delenv(PROCESS_SETTINGS_ENV)
    assert main(["train", "demo/small", "--out", str(tmp_path / "run"), "--set", "train.max_steps=2",
                 "--set", "task.n_train=512", "--set", "task.n_eval_per_group=8", "--no-progress"]) == 0
    cli = config_of(tmp_path / "run").train
    assert (cli.malloc_retain, cli.flat_params) == (True, True) and PROCESS_SETTINGS_ENV not in os.environ


def test_precision_path_follows_bf16_path_only_for_a_bf16_run():
    assert resolve_precision("none", CPU, AMX, bf16_path="native").path == "fp32"
    assert resolve_precision("bf16", CPU, AMX, bf16_path="native").path == "native"
    assert resolve_precision("auto", CPU, AVX2, bf16_path="native").path == "fp32"     # auto fell back to float32
    assert resolve_precision("bf16", CPU, AMX).path == "autocast"                     # the default path
    assert resolve_precision("bf16", CPU, AMX, bf16_path="native").to_dict()["path"] == "native"


def test_a_float64_run_records_float64_matmuls_not_bfloat16():
    """autocast casts only float32 tensors, so a float64 model under train.amp=bf16 multiplies in float64: the
    record says so (amp none, float64 matmuls and masters, the reason), on every CPU."""
    p = resolve_precision("bf16", CPU, AMX, bf16_path="autocast", dtype="float64")
    assert (p.amp, p.path, p.matmul_dtype) == ("none", "fp32", "float64") and "float64" in p.reason
    d = p.to_dict()
    assert d["matmul_dtype"] == d["master_dtype"] == "float64" and "dtype" not in d
    assert resolve_precision("none", CPU, AMX, dtype="float64").to_dict()["matmul_dtype"] == "float64"
    assert resolve_precision("bf16", CPU, AMX, dtype="float32").to_dict()["master_dtype"] == "float32"


def test_native_with_float64_is_refused_in_one_line():
    from anchorlab.config import ConfigError

    with pytest.raises(ConfigError, match=r"train\.bf16_path.*'native' needs train\.dtype 'float32'.*float64") as e:
        experiment_from_dict({}, TINY + ["train.dtype=float64", "train.bf16_path=native"])
    assert "\n" not in str(e.value)
    # float32-only native is a bf16 rule: a float32 run may name it (its id ignores the field)
    assert experiment_from_dict({}, TINY + ["train.amp=none", "train.dtype=float64",
                                            "train.bf16_path=native"]).train.bf16_path == "native"


def test_native_is_cpu_only_and_says_so_in_one_line(monkeypatch):
    """A bf16 run on CUDA with the native path (what 'auto' gives the Transformer) is refused before training,
    naming the field and the way out; autocast and float32 resolve there as before."""
    import anchorlab.train.precision as P
    from anchorlab.config import ConfigError

    monkeypatch.setattr(P, "device_label", lambda device, units=None: device.type)   # no CUDA here to name
    cuda = torch.device("cuda")
    with pytest.raises(ConfigError, match=r"train\.bf16_path: 'native' runs on a CPU only.*cuda.*'autocast'") as e:
        resolve_precision("bf16", cuda, AMX, bf16_path="native")
    assert "\n" not in str(e.value)
    assert resolve_precision("bf16", cuda, AMX, bf16_path="autocast").path == "autocast"
    assert resolve_precision("auto", cuda, AMX, bf16_path="native").path == "fp32"    # auto keeps float32 on CUDA
