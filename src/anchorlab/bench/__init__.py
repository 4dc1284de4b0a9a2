"""``anchorlab bench``: this machine's matmul rates per layout and dtype, and the training step per precision.

Tidy tables, all measured in one process with the same thread count and clock:

* **layouts** (:mod:`.gemm`) -- each shape's FFN GEMMs in the three layouts a linear layer runs
  (forward ``x @ W.T`` "NT", input gradient ``g @ W`` "NN", weight gradient ``g.T @ x`` "TN") per
  dtype (fp32, bf16): GFLOP/s and % of that dtype's *peak*, its best row.
* **steps** (:mod:`.steps`) -- the training step (:func:`anchorlab.train.single.train_step`: loss,
  backward, clipping, AdamW, exactly the loop's code) per shape x precision: the path that ran (and
  the native forward's ``W.T`` layout), ms/step, achieved GFLOP/s (analytic count,
  :func:`train_flops_per_sample`), % of that dtype's peak, speed-up over float32, the cast share of
  the forward + backward (when profiled), the step split into its phases (forward, backward,
  optimizer) and the minor page faults per step.
* **profile** (``profile=True``) -- the step's operator time by category (torch.profiler), and the
  forward + backward split (matmul / casts / softmax / layernorm / activation / other) of every
  precision side by side: autocast (before) against native (after).
* **cuda** (:mod:`.cuda`) -- where a CUDA device is present, one model and a stack of 16 at the paper
  shape with % of the device's peak; skipped, saying so, where there is none.

Shapes: ``demo`` is ``demo/small`` (d_model 128, d_ff 512, batch 256, 2 layers); ``paper`` is
``neurips/paper`` (d_model 400, d_ff 1200, batch 2048, 2 layers). Precisions: ``fp32``
(``train.amp=none``), ``bf16`` (``train.amp=bf16``, ``train.bf16_path=autocast``: torch.autocast's
per-op casts) and ``bf16-native`` (``train.amp=bf16``, ``train.bf16_path=native``: activations stay
bfloat16 between ops); float32 master weights and AdamW state in all three. ``--set KEY=VALUE``
(``overrides``) changes every step's config alike, the CPU's and the GPU bench's, e.g. ``optim.fused=true``;
the steps tables record it (column ``overrides``), and a GPU stack it rules out keeps an untimed row that
says why (column ``note``).

``--rounds N`` (``rounds``) times every precision once per round, in turn, N times: the step table gets one
row per round (column ``round``; the speed-up is against the same round's float32 step), the printout the
median, min and max over the rounds, and the targets read the median round.

Nothing here is a test: the targets (:mod:`.targets`: a bf16 step >= 2.5x the fp32 step at the demo
shape, stretch 3x; >= 40% of the bf16 matmul peak at the paper shape, stretch 50%) are printed as met /
not met with the CPU's name and bfloat16 units, never asserted.
"""

from __future__ import annotations

from anchorlab.bench.core import STEP_COLUMNS, BenchResult, format_result, run_bench
from anchorlab.bench.gemm import LAYOUTS, matmul_gflops, measure_layouts
from anchorlab.bench.shapes import PRECISIONS, SHAPES, shape_config, train_flops_per_sample
from anchorlab.bench.steps import categorize, profile_steps, time_steps

__all__ = ["LAYOUTS", "PRECISIONS", "SHAPES", "STEP_COLUMNS", "BenchResult", "categorize", "format_result",
           "matmul_gflops", "measure_layouts", "profile_steps", "run_bench", "shape_config", "time_steps",
           "train_flops_per_sample"]
