"""The matmul rates of ``anchorlab bench``: each shape's FFN GEMMs in the three layouts a linear layer runs.

A linear layer ``y = x @ W.T`` (``x``: rows x in, ``W``: out x in, both stored row-major) multiplies in
three layouts per training step:

* ``NT`` -- the forward ``x @ W.T`` (m = rows, k = in, n = out; the second operand read transposed);
* ``NN`` -- the input gradient ``g @ W`` (m = rows, k = out, n = in);
* ``TN`` -- the weight gradient ``g.T @ x`` (m = out, k = rows, n = in; the first operand read transposed).

Each operand is made in the layout the layer holds it in and the product is taken through ``.T`` views,
as autograd does, so a kernel's preference for one layout shows. Each row is the rate of its fastest
product (a busy moment of a shared machine lowers the others). A dtype's *peak* is its best row over
both FFN linears and all three layouts (the ``NN`` rows are the products the older peak table timed).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch

from anchorlab.bench.shapes import DTYPES, Clock, shape_config

LAYOUTS = ("NT", "NN", "TN")


def operands(layout: str, m: int, k: int, n: int, dtype: torch.dtype,
             generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``(a, b)`` with ``a @ b`` an (m, k) @ (k, n) product in ``layout``: ``T`` marks an operand stored
    the other way round and read through a transposed view."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout: must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    a = torch.randn(k, m, generator=generator).to(dtype).T if layout[0] == "T" else \
        torch.randn(m, k, generator=generator).to(dtype)
    b = torch.randn(n, k, generator=generator).to(dtype).T if layout[1] == "T" else \
        torch.randn(k, n, generator=generator).to(dtype)
    return a, b


def matmul_gflops(m: int, k: int, n: int, dtype: torch.dtype, clock: Clock, min_seconds: float = 0.3,
                  generator: torch.Generator | None = None, layout: str = "NN",
                  device: torch.device | None = None) -> float:
    """GFLOP/s of ``(m, k) @ (k, n)`` in ``dtype`` and ``layout`` on ``device`` (default the CPU): one untimed
    product, then products timed one by one until they add up to ``min_seconds`` of ``clock`` (which on a
    GPU must wait for the device: :func:`anchorlab.bench.cuda.synced`); the rate of the fastest, so a busy
    moment of a shared machine does not lower it."""
    a, b = operands(layout, m, k, n, dtype, generator or torch.Generator().manual_seed(0))
    if device is not None and device.type != "cpu":
        a, b = a.to(device), b.to(device)   # a transposed view stays one after the move
    a @ b
    best, spent = float("inf"), 0.0
    while spent < min_seconds:
        t = clock()
        a @ b
        dt = clock() - t
        best, spent = min(best, dt), spent + dt
    return 2.0 * m * k * n / best / 1e9


def layout_gemms(shapes: Sequence[str]) -> list[tuple[str, str, str, int, int, int]]:
    """(shape, linear, layout, m, k, n) of every FFN GEMM of a training step, per shape."""
    out = []
    for name in shapes:
        cfg = shape_config(name)
        rows = cfg.train.batch_size * cfg.task.seq_len
        d, f = cfg.model.d_model, cfg.model.d_ff
        for linear, fan_in, fan_out in (("ffn in", d, f), ("ffn out", f, d)):
            out += [(name, linear, "NT", rows, fan_in, fan_out), (name, linear, "NN", rows, fan_out, fan_in),
                    (name, linear, "TN", fan_out, rows, fan_in)]
    return out


def measure_layouts(shapes: Sequence[str], dtypes: Sequence[str], clock: Clock,
                    min_seconds: float = 0.3, device: torch.device | None = None) -> pd.DataFrame:
    """Tidy: shape, linear, dtype, layout, m, k, n, gflops, pct_of_peak (of that dtype's best row)."""
    rows = []
    for shape, linear, layout, m, k, n in layout_gemms(shapes):
        for dt in dtypes:
            rows.append({"shape": shape, "linear": linear, "dtype": dt, "layout": layout, "m": m, "k": k, "n": n,
                         "gflops": matmul_gflops(m, k, n, DTYPES[dt], clock, min_seconds, layout=layout,
                                                   device=device)})
    df = pd.DataFrame(rows, columns=["shape", "linear", "dtype", "layout", "m", "k", "n", "gflops"])
    df["pct_of_peak"] = 100 * df.gflops / df.groupby("dtype").gflops.transform("max")
    return df


def peaks(layouts: pd.DataFrame) -> dict[str, float]:
    """dtype -> its peak GFLOP/s (best row of the layouts table)."""
    return layouts.groupby("dtype").gflops.max().to_dict() if len(layouts) else {}


def layout_pivot(layouts: pd.DataFrame) -> pd.DataFrame:
    """One row per GEMM, GFLOP/s and % of peak per dtype side by side (what ``anchorlab bench`` prints)."""
    wide = layouts.pivot_table(index=["shape", "linear", "layout", "m", "k", "n"], columns="dtype",
                               values=["gflops", "pct_of_peak"], sort=False)
    wide.columns = [f"{dt} {'GFLOP/s' if v == 'gflops' else '%peak'}" for v, dt in wide.columns]
    return wide.reset_index()


__all__ = ["LAYOUTS", "layout_gemms", "layout_pivot", "matmul_gflops", "measure_layouts", "operands", "peaks"]
