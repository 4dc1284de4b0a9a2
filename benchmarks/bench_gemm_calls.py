"""Per-call cost of the small GEMMs a demo training step makes, float32 against bfloat16, on this CPU.

The demo step (``demo/small``: d_model 128, one head of 64, d_ff 512, batch 256) makes 51 GEMM calls:
13 linears forward (``addmm``), 26 backward (``mm``) and 12 attention products (``bmm``). On a CPU
PyTorch sends float32 GEMMs to its BLAS and bfloat16 ones to oneDNN, whose call costs more; at a tiny
size (one sequence) that fixed cost is what a call takes. Prints microseconds per call for each
product at one sequence and at the demo batch, in both dtypes, and the bfloat16 call's excess:

    python benchmarks/bench_gemm_calls.py [--threads 1] [--csv gemm_calls.csv]
"""

from __future__ import annotations

import argparse
import time

import pandas as pd
import torch

# name -> (op, shapes of its operands at one 9-token sequence; the batch multiplies the first dim)
PRODUCTS = {
    "linear fwd (addmm), 128 -> 64": ("addmm", (9, 128), (128, 64)),
    "linear fwd (addmm), 128 -> 512": ("addmm", (9, 128), (128, 512)),
    "linear bwd input (mm), 512 -> 128": ("mm", (9, 512), (512, 128)),
    "linear bwd weight (mm, TN), 128 x 512": ("mm_tn", (9, 128), (9, 512)),
    "attention scores (bmm), 9 x 64 @ 64 x 9": ("bmm", (1, 9, 64), (1, 64, 9)),
}


def _time(fn, reps: int) -> float:
    for _ in range(max(5, reps // 20)):
        fn()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps * 1e6


def _call(op: str, a: torch.Tensor, b: torch.Tensor):
    if op == "addmm":
        bias = torch.zeros(b.shape[1], dtype=a.dtype)
        return lambda: torch.addmm(bias, a, b)
    if op == "mm_tn":
        return lambda: a.t() @ b
    return lambda: a @ b


def measure(batches=(1, 256), reps: int = 2000) -> pd.DataFrame:
    rows = []
    for name, (op, sa, sb) in PRODUCTS.items():
        for batch in batches:
            for dtype in (torch.float32, torch.bfloat16):
                a = torch.randn(sa[0] * batch, *sa[1:]).to(dtype)
                b = torch.randn(sb[0] * batch if op == "mm_tn" else sb[0], *sb[1:]).to(dtype)
                if op == "bmm":
                    a, b = torch.randn(batch, *sa[1:]).to(dtype), torch.randn(batch, *sb[1:]).to(dtype)
                n = reps if batch == 1 else max(50, reps // 20)
                rows.append({"product": name, "batch": batch, "dtype": str(dtype).removeprefix("torch."),
                             "us_per_call": _time(_call(op, a, b), n)})
    df = pd.DataFrame(rows)
    wide = df.pivot_table(index=["product", "batch"], columns="dtype", values="us_per_call", sort=False)
    wide["bf16_minus_fp32_us"] = wide["bfloat16"] - wide["float32"]
    return wide.reset_index()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--csv", default=None)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    from anchorlab.train.precision import cpu_matrix_units, cpu_model_name
    print(f"CPU: {cpu_model_name() or 'unknown'} ({cpu_matrix_units().describe()}); {a.threads} thread(s); torch "
          f"{torch.__version__}")
    wide = measure(reps=a.reps)
    print(wide.round(1).to_string(index=False))
    if a.csv:
        wide.to_csv(a.csv, index=False)
        print(f"wrote {a.csv}")


if __name__ == "__main__":
    main()
