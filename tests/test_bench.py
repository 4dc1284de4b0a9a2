"""anchorlab bench: its tables' columns, the path that ran, the GEMM layouts, the cast share, the targets'
lines, the GPU part's skip, and one-line errors. Tiny shapes and a fake clock: nothing here times anything."""

import pandas as pd
import pytest
import torch

import anchorlab.bench.core as core
import anchorlab.bench.gemm as gemm
import anchorlab.bench.steps as steps_mod
import anchorlab.train.precision as precision_mod
from anchorlab.bench import LAYOUTS, STEP_COLUMNS, BenchResult, format_result, run_bench
from anchorlab.bench.cuda import cuda_bench, device_bench
from anchorlab.bench.gemm import layout_gemms, matmul_gflops, measure_layouts, operands
from anchorlab.bench.shapes import SHAPES, shape_config
from anchorlab.bench.steps import SPLIT, fwd_bwd_split
from anchorlab.train.precision import CpuMatrixUnits, Precision

AMX = CpuMatrixUnits("AVX512", amx=True, avx512_bf16=True)
ZEN4 = CpuMatrixUnits("AVX512", amx=False, avx512_bf16=True)
AVX2 = CpuMatrixUnits("AVX2", amx=False, avx512_bf16=False)
TINY = ("model.d_model=16", "model.d_head=8", "model.d_ff=32", "task.n_train=512", "task.n_eval_per_group=8")


class FakeClock:
    """Advances ``tick`` seconds each time it is read."""

    def __init__(self, tick: float = 1e-3) -> None:
        self.t, self.tick = 0.0, tick

    def __call__(self) -> float:
        self.t += self.tick
        return self.t


@pytest.fixture
def tiny(monkeypatch):
    """Both shapes shrunk (the bench's code unchanged), a CPU with bf16 units (so bf16 is timed and profiled
    like on one) and GEMMs timed for a few reads of the clock."""
    monkeypatch.setitem(SHAPES, "demo", ("demo/small", (*TINY, "train.batch_size=16")))
    monkeypatch.setitem(SHAPES, "paper", ("demo/small", (*TINY, "train.batch_size=32")))
    monkeypatch.setattr(core, "cpu_matrix_units", lambda: ZEN4)
    monkeypatch.setattr(precision_mod, "cpu_matrix_units", lambda: ZEN4)   # what the native step's W.T reads
    real = gemm.measure_layouts
    monkeypatch.setattr(core, "measure_layouts", lambda s, d, c, m=0.3, device=None: real(s, d, c, 3e-3, device))


def test_tables_have_their_columns_and_the_path_that_ran(tiny):
    r = run_bench(("demo", "paper"), ("fp32", "bf16", "bf16-native"), steps={"demo": 2, "paper": 1}, warmup=1,
                  clock=FakeClock(), profile=True, cuda=False)
    assert list(r.steps.columns) == STEP_COLUMNS and len(r.steps) == 6
    assert list(r.layouts.columns) == ["shape", "linear", "dtype", "layout", "m", "k", "n", "gflops", "pct_of_peak"]
    path = dict(zip(r.steps.precision, r.steps.path))
    assert path == {"fp32": "fp32", "bf16": "autocast", "bf16-native": "native"}
    # the native forward's W.T: auto -> W's view on a CPU without AMX (ZEN4); the other paths have none
    assert dict(zip(r.steps.precision, r.steps.weight_t)) == {"fp32": "", "bf16": "", "bf16-native": "view"}
    fp32 = r.steps[r.steps.precision == "fp32"]
    assert (fp32.speedup_vs_fp32 == 1.0).all()
    assert r.steps.cast_share.between(0, 1).all()            # profiled: every precision has its cast share
    cmp = r.profile_compare()
    assert list(cmp.category[cmp["shape"] == "demo"]) == list(SPLIT)
    for p in ("fp32", "bf16", "bf16-native"):
        assert cmp.groupby("shape")[f"{p}_share"].sum().round(9).eq(1.0).all()
        share = r.steps.set_index(["shape", "precision"]).cast_share
        got = cmp.set_index(["shape", "category"])[f"{p}_share"]
        assert got[("demo", "casts")] == pytest.approx(share[("demo", p)])


def test_unprofiled_steps_have_no_cast_share(tiny):
    r = run_bench(("demo",), ("fp32",), steps={"demo": 1}, warmup=0, clock=FakeClock(), cuda=False)
    assert r.steps.cast_share.isna().all() and not r.splits and r.profile_compare().empty


def test_without_bf16_units_bf16_runs_one_unprofiled_step_and_the_targets_do_not_apply(tiny, monkeypatch):
    monkeypatch.setattr(core, "cpu_matrix_units", lambda: AVX2)   # bfloat16 emulated: slow, so one step
    r = run_bench(("demo",), ("fp32", "bf16-native"), steps={"demo": 3}, warmup=1, clock=FakeClock(),
                  profile=True, cuda=False)
    s = r.steps.set_index("precision")
    assert (s.steps["fp32"], s.steps["bf16-native"]) == (3, 1)
    assert 0 <= s.cast_share["fp32"] <= 1 and pd.isna(s.cast_share["bf16-native"])
    assert list(r.splits) == [("demo", "fp32")]
    lines = r.verdicts()
    assert "(AVX2, no bfloat16 matrix units)" in lines[0] and lines[1].startswith("bfloat16 targets do not apply")
    assert lines[2].endswith("not applicable here)")


def test_the_path_column_reads_the_resolved_precision_not_the_request(tiny, monkeypatch):
    # a bf16-native request that resolved to autocast (as before the native path existed) says autocast
    monkeypatch.setattr(steps_mod, "bench_precision", lambda cfg: Precision("bf16", "bf16", "test", path="autocast"))
    r = run_bench(("demo",), ("bf16-native",), steps={"demo": 1}, warmup=0, clock=FakeClock(), cuda=False)
    assert list(r.steps.path) == ["autocast"]


def test_the_native_precision_asks_for_the_native_path():
    cfg = shape_config("demo", "bf16-native")
    assert (cfg.train.amp, cfg.train.bf16_path) == ("bf16", "native")
    assert shape_config("demo", "bf16").train.bf16_path == "autocast"
    assert steps_mod.bench_precision(cfg).path == "native"
    assert steps_mod.bench_precision(shape_config("demo", "fp32")).path == "fp32"


def test_layout_rows_cover_nt_nn_tn_with_each_linears_dimensions(tiny):
    lay = measure_layouts(["demo"], ["fp32", "bf16"], FakeClock(), 3e-3)
    cfg = shape_config("demo")
    rows, d, f = cfg.train.batch_size * cfg.task.seq_len, cfg.model.d_model, cfg.model.d_ff
    for (linear, dtype), g in lay.groupby(["linear", "dtype"]):
        assert sorted(g.layout) == sorted(LAYOUTS)
    ffn_in = lay[(lay.linear == "ffn in") & (lay.dtype == "fp32")].set_index("layout")
    assert tuple(ffn_in.loc["NT", ["m", "k", "n"]]) == (rows, d, f)      # x @ W.T
    assert tuple(ffn_in.loc["NN", ["m", "k", "n"]]) == (rows, f, d)      # g @ W
    assert tuple(ffn_in.loc["TN", ["m", "k", "n"]]) == (f, rows, d)      # g.T @ x
    assert lay.groupby("dtype").pct_of_peak.max().eq(100).all() and (lay.pct_of_peak > 0).all()
    assert len(layout_gemms(["demo", "paper"])) == 12


@pytest.mark.parametrize("layout", LAYOUTS)
def test_operands_are_stored_as_the_layer_holds_them_and_multiply_right(layout):
    a, b = operands(layout, 5, 3, 4, torch.float32, torch.Generator().manual_seed(0))
    assert a.shape == (5, 3) and b.shape == (3, 4)
    assert a.is_contiguous() == (layout[0] == "N") and a.T.is_contiguous() == (layout[0] == "T")
    assert b.is_contiguous() == (layout[1] == "N") and b.T.is_contiguous() == (layout[1] == "T")
    assert torch.allclose(a @ b, a.contiguous() @ b.contiguous())


def test_matmul_gflops_counts_reps_against_the_clock():
    # every product takes one tick of the clock: its rate, whatever the time spent
    assert matmul_gflops(8, 4, 2, torch.float32, FakeClock(0.5), min_seconds=2.0, layout="TN") == \
        pytest.approx(2 * 8 * 4 * 2 / 0.5 / 1e9)
    ticks = iter([0.0, 3.0, 3.0, 4.0, 4.0, 9.0])           # products of 3 s, 1 s and 5 s: the fastest counts
    assert matmul_gflops(8, 4, 2, torch.float32, lambda: next(ticks), min_seconds=9.0) == \
        pytest.approx(2 * 8 * 4 * 2 / 1.0 / 1e9)
    with pytest.raises(ValueError, match="layout: must be one of NT, NN, TN, got 'TT'"):
        matmul_gflops(8, 4, 2, torch.float32, FakeClock(), layout="TT")


def test_fwd_bwd_split_leaves_the_optimizer_out():
    events = [("aten::mm", 6.0, False), ("aten::copy_", 2.0, False), ("aten::relu", 1.0, False),
              ("aten::copy_", 50.0, True), ("aten::_foreach_mul_", 9.0, False), ("aten::view", 1.0, False)]
    split = fwd_bwd_split(events, steps=2).set_index("category")
    assert list(split.index) == list(SPLIT)
    assert split.ms_per_step["matmul"] == 3.0 and split.ms_per_step["casts"] == 1.0
    assert split.share["casts"] == pytest.approx(2 / 10) and split.ms_per_step["softmax"] == 0.0


def _result(units, demo_fp32, demo_native, paper_pct, cpu="Some CPU 9000"):
    steps = pd.DataFrame([
        {"shape": "demo", "precision": "fp32", "path": "fp32", "ms_per_step": demo_fp32, "pct_of_peak": 70.0},
        {"shape": "demo", "precision": "bf16-native", "path": "native", "ms_per_step": demo_native,
         "pct_of_peak": 20.0},
        {"shape": "paper", "precision": "bf16-native", "path": "native", "ms_per_step": 1.0, "pct_of_peak": paper_pct}])
    return BenchResult(units, 1, "wall", pd.DataFrame(columns=["dtype", "gflops"]), steps, cpu=cpu)


def test_targets_are_printed_met_or_not_with_the_cpu_and_its_units():
    met = _result(AMX, 30.0, 9.0, 55.0).verdicts()
    assert met == [
        "targets on Some CPU 9000 (AVX512 with AMX and AVX512-BF16), measured, not asserted:",
        "demo shape, bf16-native (native path): step 3.33x the fp32 step (target >= 2.5x: met; stretch 3x: met)",
        "paper shape, bf16-native (native path): step at 55% of the bf16 matmul peak (target >= 40%: met; "
        "stretch 50%: met)"]
    part = _result(ZEN4, 30.0, 11.5, 45.0).verdicts()
    assert "(AVX512 with AVX512-BF16)" in part[0]
    assert part[1].endswith("2.61x the fp32 step (target >= 2.5x: met; stretch 3x: not met)")
    assert part[2].endswith("(target >= 40%: met; stretch 50%: not met)")
    missed = _result(ZEN4, 30.0, 20.0, 17.0).verdicts()
    assert missed[1].endswith("(target >= 2.5x: not met; stretch 3x: not met)")
    assert missed[2].endswith("(target >= 40%: not met; stretch 50%: not met)")
    none = _result(AVX2, 30.0, 200.0, 1.0).verdicts()
    assert none[1].startswith("bfloat16 targets do not apply: this CPU has no bfloat16 matrix units")
    assert all(line.endswith("not applicable here)") for line in none[2:]) and len(none) == 4


def test_the_printout_has_every_table_and_the_targets(tiny):
    r = run_bench(("demo", "paper"), ("fp32", "bf16-native"), steps={"demo": 1, "paper": 1}, warmup=0,
                  clock=FakeClock(), profile=True, cuda=False)
    text = format_result(r)
    for needle in ("FFN GEMMs per layout", "bf16 %peak", "training step", "cast_share",
                   "forward + backward operator split", "bf16-native_share", "targets on ",
                   "demo shape, bf16-native (native path): step", "paper shape, bf16-native (native path): step at"):
        assert needle in text, needle


def test_the_gpu_bench_skips_cleanly_without_cuda(tiny, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cuda_bench() == (None, None, "no CUDA device: the GPU bench skipped")
    r = run_bench(("demo",), ("fp32",), steps={"demo": 1}, warmup=0, clock=FakeClock())
    assert r.cuda_steps is None and "no CUDA device: the GPU bench skipped" in format_result(r)


def test_a_failing_gpu_bench_keeps_the_cpu_tables_and_says_why(tiny, monkeypatch):
    import anchorlab.bench.cuda as cuda_mod

    def broken(**kw):
        raise RuntimeError("CUDA error: out of memory")
    monkeypatch.setattr(cuda_mod, "cuda_bench", broken)
    r = run_bench(("demo",), ("fp32",), steps={"demo": 1}, warmup=0, clock=FakeClock())
    assert len(r.steps) == 1 and r.cuda_steps is None
    assert "the GPU bench failed: RuntimeError: CUDA error: out of memory" in format_result(r)


def test_the_gpu_bench_code_path_runs_on_the_cpu(tiny, tmp_path):
    """device_bench is the GPU bench's body; on the CPU it trains one model and a stack through the loops."""
    table, lay = device_bench(torch.device("cpu"), shape="demo", precisions=("fp32",), stacks=(1, 2), steps=2,
                              min_seconds=3e-3)
    assert list(table.models) == [1, 2] and (table.path == "fp32").all() and (table.ms_per_step > 0).all()
    assert set(lay.layout) == set(LAYOUTS) and (table.pct_of_peak > 0).all()


def test_bad_names_give_one_line_naming_the_flag_and_the_choices(capsys):
    from anchorlab.cli import main

    assert main(["bench", "--precisions", "fp32,fp16"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--precisions: unknown precision 'fp16'; choose from fp32, bf16, bf16-native" in err
    assert len(err.splitlines()) == 1
    assert main(["bench", "--shapes", "huge"]) == 2
    assert "--shapes: unknown shape 'huge'; choose from demo, paper" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--clock: must be 'wall' or 'process', got 'cpu'"):
        run_bench(("demo",), ("fp32",), clock="cpu", cuda=False)


def test_csv_writes_the_steps_layouts_and_profile_tables(tiny, tmp_path, capsys):
    from anchorlab.cli import main

    out = tmp_path / "b.csv"
    assert main(["bench", "--shapes", "demo", "--precisions", "fp32,bf16", "--steps", "demo=1", "--warmup", "0",
                 "--profile", "--no-cuda", "--csv", str(out)]) == 0
    assert list(pd.read_csv(out).columns) == STEP_COLUMNS
    assert set(pd.read_csv(tmp_path / "b_layouts.csv").layout) == set(LAYOUTS)
    prof = pd.read_csv(tmp_path / "b_profile.csv")
    assert {"fp32_share", "bf16_share"} <= set(prof.columns) and list(prof.category) == list(SPLIT)
    assert "b_profile.csv" in capsys.readouterr().out


def test_set_overrides_every_cpu_step_and_is_recorded(tiny, monkeypatch):
    seen = []
    real = steps_mod.make_optimizer
    monkeypatch.setattr(steps_mod, "make_optimizer", lambda m, c: seen.append(c.fused) or real(m, c))
    r = run_bench(("demo",), ("fp32", "bf16"), steps={"demo": 1}, warmup=0, clock=FakeClock(), cuda=False,
                  overrides=["optim.fused=true"])
    assert seen == [True, True] and list(r.steps.overrides) == ["optim.fused=true"] * 2
    assert "every step with optim.fused=true" in format_result(r).splitlines()[0]
    plain = run_bench(("demo",), ("fp32",), steps={"demo": 1}, warmup=0, clock=FakeClock(), cuda=False)
    assert seen[-1] is False and list(plain.steps.overrides) == [""]
    assert "every step with" not in format_result(plain)
    copy = run_bench(("demo",), ("bf16-native",), steps={"demo": 1}, warmup=0, clock=FakeClock(), cuda=False,
                     overrides=["train.bf16_wt=copy"])
    assert list(copy.steps.weight_t) == ["copy"]


@pytest.mark.parametrize("override, message", [
    ("train.amp=none", "--set: train.amp is set by --precisions (fp32, bf16, bf16-native); got 'train.amp=none'"),
    ("optim.fused=maybe", "optim.fused: expected true or false, got 'maybe'"),
])
def test_a_bad_set_is_one_line_before_anything_is_timed(capsys, monkeypatch, override, message):
    from anchorlab.cli import main

    monkeypatch.setattr(core, "measure_layouts", lambda *a, **k: pytest.fail("timed before checking --set"))
    assert main(["bench", "--set", override, "--no-cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_set_reaches_the_gpu_bench_and_a_stack_it_rules_out_says_why(tiny, monkeypatch):
    """--set goes to the GPU bench's runs too; optim.fused=true trains one model fused, and the stack it
    rules out (a stack's update is the foreach one) keeps an untimed row with the ConfigError's line."""
    import anchorlab.bench.cuda as cuda_mod

    seen = {}
    monkeypatch.setattr(cuda_mod, "cuda_bench", lambda **kw: seen.update(kw) or (None, None, "skipped"))
    run_bench(("demo",), ("fp32",), steps={"demo": 1}, warmup=0, clock=FakeClock(), overrides=["optim.fused=true"])
    assert seen["overrides"] == ("optim.fused=true",)

    trained = []
    monkeypatch.setattr(cuda_mod, "time_trained",
                        lambda cfg, g, *a: trained.append((g, cfg.optim.fused)) or (0.01, "fp32"))
    table, _ = device_bench(torch.device("cpu"), shape="demo", precisions=("fp32",), stacks=(1, 2), steps=2,
                            min_seconds=3e-3, overrides=["optim.fused=true"])
    assert trained == [(1, True)]
    one, stack = table.iloc[0], table.iloc[1]
    assert one.ms_per_step == pytest.approx(10.0) and one.note == "" and one.overrides == "optim.fused=true"
    assert stack.models == 2 and pd.isna(stack.ms_per_step) and stack.note.startswith("not timed: optim.fused:")


def test_rounds_time_every_precision_per_round_and_profile_only_the_first(tiny):
    r = run_bench(("demo",), ("fp32", "bf16-native"), steps={"demo": 1}, warmup=0, clock=FakeClock(),
                  profile=True, cuda=False, rounds=3)
    assert list(r.steps.columns) == STEP_COLUMNS and r.rounds == 3
    assert list(zip(r.steps["round"], r.steps.precision)) == [(1, "fp32"), (1, "bf16-native"), (2, "fp32"),
                                                              (2, "bf16-native"), (3, "fp32"), (3, "bf16-native")]
    first = r.steps["round"] == 1
    assert r.steps.cast_share[first].notna().all() and r.steps.cast_share[~first].isna().all()
    for _, g in r.steps.groupby("round"):          # each round's speed-up is against its own fp32 step
        fp32 = g[g.precision == "fp32"].ms_per_step.item()
        assert g.speedup_vs_fp32.tolist() == pytest.approx([fp32 / ms for ms in g.ms_per_step])
    summ = r.summary().set_index("precision")
    assert summ.rounds.tolist() == [3, 3]
    native = r.steps[r.steps.precision == "bf16-native"]
    assert summ.speedup_median["bf16-native"] == pytest.approx(native.speedup_vs_fp32.median())
    text = format_result(r)
    assert "over the 3 rounds" in text and "demo shape, bf16-native (native path): step" in text
    assert "(median of 3 rounds, " in text


def test_targets_read_the_median_round_against_its_own_fp32_step():
    # per round: fp32 30/24/36 ms, bf16 12/10/13 ms -> 2.50x, 2.40x, 2.77x: the median round 2.50x (met)
    rows = []
    for rnd, (f, b) in enumerate([(30.0, 12.0), (24.0, 10.0), (36.0, 13.0)], 1):
        rows += [{"shape": "demo", "precision": "fp32", "round": rnd, "path": "fp32", "ms_per_step": f,
                  "pct_of_peak": 70.0},
                 {"shape": "demo", "precision": "bf16", "round": rnd, "path": "autocast", "ms_per_step": b,
                  "pct_of_peak": 20.0}]
    lines = BenchResult(ZEN4, 1, "wall", pd.DataFrame(columns=["dtype", "gflops"]), pd.DataFrame(rows),
                        cpu="Some CPU").verdicts()
    assert lines[1] == ("demo shape, bf16 (autocast path): step 2.50x the fp32 step (median of 3 rounds, "
                        "2.40x-2.77x) (target >= 2.5x: met; stretch 3x: not met)")
    rows[1]["ms_per_step"] = 12.5                   # round 1 now 2.40x: the median round 2.40x, not met
    lines = BenchResult(ZEN4, 1, "wall", pd.DataFrame(columns=["dtype", "gflops"]), pd.DataFrame(rows),
                        cpu="Some CPU").verdicts()
    assert "step 2.40x the fp32 step (median of 3 rounds, 2.40x-2.77x) (target >= 2.5x: not met;" in lines[1]


@pytest.mark.parametrize("bad", ["0", "-2"])
def test_rounds_below_one_is_a_one_line_error(capsys, bad):
    from anchorlab.cli import main

    assert main(["bench", "--rounds", bad, "--no-cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--rounds: must be a whole number >= 1, got {bad}" in err and len(err.splitlines()) == 1


def test_the_gpu_bench_keeps_an_untimed_row_for_the_cpu_only_native_path(tiny, monkeypatch):
    """On CUDA, bf16-native (a CPU-only path) is not trained: its rows say why; bf16 (autocast) is timed."""
    import anchorlab.bench.cuda as cuda_mod

    real = cuda_mod.measure_layouts
    monkeypatch.setattr(cuda_mod, "synced", lambda tick, device: tick)
    monkeypatch.setattr(cuda_mod, "measure_layouts",
                        lambda shapes, dtypes, tick, s, device: real(shapes, dtypes, tick, s, torch.device("cpu")))
    monkeypatch.setattr(cuda_mod, "_name", lambda device: "cuda: a GPU")
    monkeypatch.setattr("anchorlab.train.precision.device_label", lambda device, units=None: "cuda: a GPU")
    trained = []
    monkeypatch.setattr(cuda_mod, "time_trained",
                        lambda cfg, g, *a: trained.append((cfg.train.bf16_path, g)) or (0.01, cfg.train.bf16_path))
    table, _ = device_bench(torch.device("cuda"), shape="demo", precisions=("bf16", "bf16-native"), stacks=(1, 2),
                            steps=2, min_seconds=3e-3)
    assert trained == [("autocast", 1), ("autocast", 2)]
    native = table[table.precision == "bf16-native"]
    assert len(native) == 2 and native.ms_per_step.isna().all()
    assert native.note.str.startswith("not timed: train.bf16_path: 'native' runs on a CPU only").all()
    assert (table[table.precision == "bf16"].note == "").all()
