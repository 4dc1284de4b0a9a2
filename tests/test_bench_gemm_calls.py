"""benchmarks/bench_gemm_calls.py runs and gives one row per product and batch, both dtypes (no timing asserted)."""

import importlib.util
from pathlib import Path


def test_the_gemm_call_benchmark_gives_every_product_in_both_dtypes():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_gemm_calls.py"
    spec = importlib.util.spec_from_file_location("bench_gemm_calls", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    wide = mod.measure(batches=(1, 2), reps=3)
    assert list(wide["product"].unique()) == list(mod.PRODUCTS)
    assert len(wide) == 2 * len(mod.PRODUCTS)
    assert (wide[["float32", "bfloat16"]] > 0).all().all()
    assert (wide["bf16_minus_fp32_us"] == wide["bfloat16"] - wide["float32"]).all()
