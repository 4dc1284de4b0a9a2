"""Time the complexity callback (stable ranks, condensation, embedding order) on the NeurIPS model.

    python benchmarks/bench_callbacks.py [--repeats 5]

Prints the median seconds per call; a figure, never an assert.
"""

import argparse
import statistics
import time

import torch

from anchorlab.analysis.spectra import ComplexityCallback
from anchorlab.config import ModelConfig
from anchorlab.model.transformer import build_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = build_model(ModelConfig())               # d_model 400, 2 layers
    cb = ComplexityCallback(every=1)
    cb(0, model)                                     # warm-up
    times = []
    for step in range(1, args.repeats + 1):
        t0 = time.perf_counter()
        cb(step, model)
        times.append(time.perf_counter() - t0)
    print(f"complexity callback, d_model 400: median {statistics.median(times):.3f} s per call "
          f"({args.repeats} calls, {torch.get_num_threads()} threads)")


if __name__ == "__main__":
    main()
