"""Training throughput: a plain reference loop vs anchorlab's loop vs a stack of G models.

A script, not a test. Prints one table (and optionally writes it as CSV):

  reference  the straightforward way: DataLoader(TensorDataset, shuffle=True),
             attention with the causal mask built and ``.repeat``-ed every
             batch, logits at every position, default PyTorch init and AdamW
             on all parameters, evaluation every epoch group by group
  anchorlab  ``anchorlab.train.train`` (in-memory indexing, last-position
             logits, no_grad eval, flush-to-zero on CPU)
  stack      ``anchorlab.train.stacked.train_stack`` of G models (different
             init seeds and gammas, one data seed); samples/s counts all G

Every method trains one "epoch" of ``--steps`` batches then evaluates once
(per model), after an untimed warm-up of ``--warmup`` steps. The evaluation
sets are scaled to the papers' proportion (1000 sequences per group for
900k training sequences) unless ``--eval-per-group`` is given.

FLOPs are counted analytically per training sample as the work the task needs
(the last-position loss: what ``forward(last_only=True)`` computes), by
``anchorlab.bench.train_flops_per_sample``, whose docstring gives the formula.
The reference loop's extra work (every position in the last layer, readout
everywhere) is not counted as useful.
"Peak" is a measured dense fp32 matmul on the same device and thread count.

The denormal section trains a small-init (gamma 1.0) model for
``--denormal-pretrain`` steps without flush-to-zero, then times
``--denormal-steps`` steps from the same state with flush on and off, and
counts subnormal entries in the weights and AdamW state.

Examples (see benchmarks/README.md):
  python benchmarks/bench_train.py                                  # CPU, small step counts
  python benchmarks/bench_train.py --device cuda --batch-size 2048 --stack-sizes 4,8 --steps 50
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from anchorlab.bench import train_flops_per_sample
from anchorlab.config import ExperimentConfig, ModelConfig, experiment_from_dict, load_config
from anchorlab.tasks.anchor import AnchorTask
from anchorlab.train.stacked import train_stack
from anchorlab.train import init_model, train
from anchorlab.train.optim import make_optimizer

PRESETS = {"neurips": "neurips/paper", "journal": "journal/paper", "demo": "demo/small"}
TINY = 1.1754944e-38  # smallest normal float32
CLOCK = time.perf_counter  # --clock process: time.process_time (CPU seconds of this process)


# ------------------------------------------------------------------------ FLOPs and peak
def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_peak(device: torch.device, n: int, reps: int) -> float:
    """Measured dense fp32 matmul FLOP/s (n x n @ n x n)."""
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    for _ in range(2):
        a @ b
    sync(device)
    t = CLOCK()
    for _ in range(reps):
        a @ b
    sync(device)
    return 2.0 * n ** 3 * reps / (CLOCK() - t)


# ---------------------------------------------------------------------- reference model
class RefBlock(nn.Module):
    """Typical research-code block: mask built and repeated per batch, heads split by hand."""

    def __init__(self, m: ModelConfig) -> None:
        super().__init__()
        self.m = m
        inner = m.n_heads * m.d_head
        self.q, self.k, self.v = nn.Linear(m.d_model, inner), nn.Linear(m.d_model, inner), nn.Linear(m.d_model, inner)
        self.o = nn.Linear(inner, m.d_model)
        self.ln1, self.ln2 = nn.LayerNorm(m.d_model), nn.LayerNorm(m.d_model)
        self.ff = nn.Sequential(nn.Linear(m.d_model, m.d_ff), nn.ReLU() if m.activation == "relu" else nn.GELU(),
                                nn.Linear(m.d_ff, m.d_model))

    def attn(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        H, dh = self.m.n_heads, self.m.d_head
        q = self.q(x).view(B, T, H, dh).transpose(1, 2).reshape(B * H, T, dh)
        k = self.k(x).view(B, T, H, dh).transpose(1, 2).reshape(B * H, T, dh)
        v = self.v(x).view(B, T, H, dh).transpose(1, 2).reshape(B * H, T, dh)
        mask = torch.triu(torch.ones(T, T, device=x.device), diagonal=1).bool()
        mask = mask.unsqueeze(0).repeat(B * H, 1, 1)
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(dh)
        scores = scores.masked_fill(mask, float("-inf"))
        z = torch.bmm(torch.softmax(scores, dim=-1), v)
        return self.o(z.view(B, H, T, dh).transpose(1, 2).reshape(B, T, H * dh))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.m.arch == "gpt2":
            x = x + self.attn(self.ln1(x))
            return x + self.ff(self.ln2(x))
        x = self.ln1(x + self.attn(x))
        return self.ln2(self.ff(x) + x)


class RefModel(nn.Module):
    def __init__(self, m: ModelConfig) -> None:
        super().__init__()
        self.emb, self.pos = nn.Embedding(m.vocab_size, m.d_model), nn.Embedding(m.max_len, m.d_model)
        self.blocks = nn.ModuleList(RefBlock(m) for _ in range(m.n_layers))
        self.ln_f = nn.LayerNorm(m.d_model) if m.arch == "gpt2" else nn.Identity()
        self.out = nn.Linear(m.d_model, m.vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.emb(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for b in self.blocks:
            x = b(x)
        return self.out(self.ln_f(x))  # (B, T, V): logits at every position


def time_reference(cfg: ExperimentConfig, device: torch.device, warmup: int) -> float:
    """Seconds for one epoch + one evaluation of the straightforward loop."""
    torch.manual_seed(0)  # typical research code seeds the global RNG
    task = AnchorTask(cfg.task)
    data = task.train_data(cfg.train.data_seed)
    sets = task.eval_sets(cfg.train.data_seed)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data.tokens, data.targets),
                                         batch_size=cfg.train.batch_size, shuffle=True, drop_last=True)
    model = RefModel(cfg.model).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay)

    def step(x: torch.Tensor, y: torch.Tensor) -> None:
        x, y = x.to(device), y.to(device)
        loss = F.cross_entropy(model(x)[:, -1, :], y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.clip_norm)
        opt.step()

    model.train()
    for i, (x, y) in enumerate(loader):
        if i >= warmup:
            break
        step(x, y)
    sync(device)
    t = CLOCK()
    for x, y in loader:
        step(x, y)
    model.eval()
    with torch.no_grad():
        for d in sets.values():
            (model(d.tokens.to(device))[:, -1].argmax(-1).cpu() == d.targets).float().mean().item()
    sync(device)
    return CLOCK() - t


# ------------------------------------------------------------------- anchorlab and stack
def with_overrides(cfg: ExperimentConfig, overrides: list[str]) -> ExperimentConfig:
    return experiment_from_dict(cfg.to_dict(), overrides)


def _stamper(stamps: list[tuple[int, float]]):
    def cb(step: int, model: nn.Module) -> dict[str, float]:
        stamps.append((step, CLOCK()))
        return {}
    return cb


def _interval(stamps: list[tuple[int, float]], total: int) -> float:
    """From the last evaluation at step 0 to the last one at the final step."""
    return max(t for s, t in stamps if s == total) - max(t for s, t in stamps if s == 0)


def time_anchorlab(cfg: ExperimentConfig, tmp: Path, warmup: int, steps: int) -> float:
    if warmup:
        train(with_overrides(cfg, [f"train.max_steps={warmup}"]), tmp / "warm")
    stamps: list[tuple[int, float]] = []
    train(cfg, tmp / "timed", callbacks=[_stamper(stamps)])
    return _interval(stamps, steps)


def stack_configs(cfg: ExperimentConfig, G: int) -> list[ExperimentConfig]:
    """G models of a typical sweep: gammas spread over [0.3, 0.9], own init seeds, one data seed."""
    gammas = [0.3 + 0.6 * g / max(G - 1, 1) for g in range(G)]
    return [with_overrides(cfg, [f"init.gamma={gm}", f"train.init_seed={g}"]) for g, gm in enumerate(gammas)]


def time_stack(cfg: ExperimentConfig, G: int, tmp: Path, warmup: int, steps: int) -> float:
    cfgs = stack_configs(cfg, G)
    if warmup:
        warm = [with_overrides(c, [f"train.max_steps={warmup}"]) for c in cfgs]
        train_stack(warm, [tmp / f"warm{g}" for g in range(G)])
    stamps: list[tuple[int, float]] = []
    train_stack(cfgs, [tmp / f"timed{g}" for g in range(G)], callbacks=[_stamper(stamps)])
    return _interval(stamps, steps)


# ---------------------------------------------------------------------------- denormals
def denormal_effect(args: argparse.Namespace, device: torch.device) -> list[dict]:
    """Steps/s of a gamma=1.0 model after pretraining, flush-to-zero on vs off (CPU)."""
    cfg = load_config(PRESETS[args.denormal_config],
                      [f"init.gamma={args.denormal_gamma}", "task.n_train=20000",
                       f"train.batch_size={args.denormal_batch_size}"])
    model, _ = init_model(cfg)
    model.to(device)
    opt = make_optimizer(model, cfg.optim)
    for g in opt.param_groups:
        g["lr"] = args.denormal_lr
    data = AnchorTask(cfg.task).train_data(0)
    tokens, targets = data.tokens.to(device), data.targets.to(device)
    gen = torch.Generator().manual_seed(0)
    B = cfg.train.batch_size

    def run(n: int) -> None:
        for _ in range(n):
            idx = torch.randint(0, len(data), (B,), generator=gen).to(device)
            loss = F.cross_entropy(model(tokens[idx], last_only=True), targets[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.clip_norm)
            opt.step()

    def subnormals() -> int:
        n = 0
        for p in model.parameters():
            for t in [p.detach()] + [v for k, v in opt.state.get(p, {}).items() if k != "step"]:
                n += int(((t != 0) & (t.abs() < TINY)).sum())
        return n

    torch.set_flush_denormal(False)
    run(args.denormal_pretrain)
    n_sub = subnormals()
    snapshot = (copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()))
    rows = []
    for flush in (True, False):
        model.load_state_dict(snapshot[0])
        opt.load_state_dict(snapshot[1])
        torch.set_flush_denormal(flush)
        run(2)
        sync(device)
        t = CLOCK()
        run(args.denormal_steps)
        sync(device)
        rows.append({"flush_denormal": flush, "steps_per_s": args.denormal_steps / (CLOCK() - t),
                     "subnormals_after_pretrain": n_sub})
    torch.set_flush_denormal(False)
    return rows


# ---------------------------------------------------------------------------------- main
def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", default="neurips,journal",
                   help=f"comma list of {', '.join(PRESETS)} (default: neurips,journal)")
    p.add_argument("--methods", default="reference,anchorlab,stack", help="comma list (default: all three)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    p.add_argument("--threads", type=int, default=1, help="torch threads (CPU; default 1)")
    p.add_argument("--batch-size", type=int, default=0, help="0 -> 128 on CPU (journal 32), 2048 on CUDA")
    p.add_argument("--steps", type=int, default=10, help="timed steps = one epoch (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="untimed warm-up steps (default 2)")
    p.add_argument("--stack-sizes", default="2", help="comma list of G (default 2)")
    p.add_argument("--eval-per-group", type=int, default=0, help="0 -> the papers' proportion")
    p.add_argument("--peak-n", type=int, default=0, help="matmul size for the peak (0 -> 1024 CPU, 8192 CUDA)")
    p.add_argument("--tf32", action="store_true", help="train.tf32=true for anchorlab/stack (CUDA)")
    p.add_argument("--amp", default="none", choices=("none", "bf16"),
                   help="train.amp for anchorlab/stack (bf16: the autocast path)")
    p.add_argument("--compile", action="store_true", help="train.compile=true for anchorlab/stack")
    p.add_argument("--denormal", default="auto", choices=("auto", "on", "off"),
                   help="run the flush-to-zero section (auto: on CPU only)")
    p.add_argument("--denormal-config", default="demo", choices=tuple(PRESETS))
    p.add_argument("--denormal-gamma", type=float, default=1.0)
    p.add_argument("--denormal-lr", type=float, default=5e-3)
    p.add_argument("--denormal-batch-size", type=int, default=128)
    p.add_argument("--denormal-pretrain", type=int, default=100)
    p.add_argument("--denormal-steps", type=int, default=20)
    p.add_argument("--clock", default="wall", choices=("wall", "process"),
                   help="wall time, or this process's CPU time (CPU, 1 thread: robust on a shared machine)")
    p.add_argument("--csv", type=Path, default=None, help="also write the table here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    import pandas as pd

    global CLOCK
    args = parse(argv)
    if args.clock == "process":
        CLOCK = time.process_time
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available()
                          else ("cpu" if args.device == "auto" else args.device))
    torch.set_num_threads(args.threads)
    if args.clock == "process" and device.type != "cpu":
        raise SystemExit("--clock process measures CPU time; use it with --device cpu only")
    methods = args.methods.split(",")
    peak = matmul_peak(device, args.peak_n or (8192 if device.type == "cuda" else 1024),
                       reps=20 if device.type == "cuda" else 5)
    print(f"device {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'CPU'}), "
          f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"clock {args.clock}, fp32 matmul peak {peak / 1e9:.1f} GFLOP/s", flush=True)
    rows = []
    for name in args.configs.split(","):
        base = load_config(PRESETS[name])
        B = args.batch_size or (2048 if device.type == "cuda" else (32 if name == "journal" else 128))
        n_train = B * args.steps
        n_eval = args.eval_per_group or max(1, round(n_train * 1000 / 900_000))
        cfg = with_overrides(base, [
            f"task.n_train={n_train}", f"task.n_eval_per_group={n_eval}", f"train.batch_size={B}",
            "train.epochs=1", "train.max_steps=0", f"train.eval_every={args.steps}",
            "train.checkpoint_every=1000000000", f"train.threads={args.threads}", f"train.device={device}",
            f"train.tf32={str(args.tf32).lower()}", f"train.amp={args.amp}",
            "train.bf16_path=autocast",   # --amp bf16 is the autocast path (anchorlab bench times native)
            f"train.compile={str(args.compile).lower()}"])
        flops = train_flops_per_sample(cfg.model, cfg.task.seq_len)
        samples = n_train

        def add(method: str, G: int, seconds: float) -> None:
            sps = G * samples / seconds
            rows.append({"config": name, "batch": B, "method": method, "G": G, "seconds": seconds,
                         "samples_per_s": sps, "per_model_samples_per_s": sps / G,
                         "GFLOP_per_s": sps * flops / 1e9, "frac_of_peak": sps * flops / peak})
            r = rows[-1]
            print(f"  {name:8s} {method:10s} G={G:<2d} {r['samples_per_s']:9.1f} samples/s "
                  f"{r['GFLOP_per_s']:8.1f} GFLOP/s ({r['frac_of_peak']:.0%} of peak)", flush=True)

        with tempfile.TemporaryDirectory() as tmpd:
            tmp = Path(tmpd)
            if "reference" in methods:
                add("reference", 1, time_reference(cfg, device, args.warmup))
            if "anchorlab" in methods:
                add("anchorlab", 1, time_anchorlab(cfg, tmp / "single", args.warmup, args.steps))
            if "stack" in methods:
                for G in (int(g) for g in args.stack_sizes.split(",")):
                    add("stack", G, time_stack(cfg, G, tmp / f"stack{G}", args.warmup, args.steps))
    table = pd.DataFrame(rows)
    if not table.empty:
        ref = table[table.method == "reference"].set_index("config").samples_per_s
        table["speedup_vs_reference"] = [r.samples_per_s / ref.get(r.config, math.nan) for r in table.itertuples()]
        print()
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        if args.csv:
            table.to_csv(args.csv, index=False)
    if args.denormal == "on" or (args.denormal == "auto" and device.type == "cpu"):
        den = pd.DataFrame(denormal_effect(args, device))
        print(f"\nflush-to-zero: {args.denormal_config} model, gamma {args.denormal_gamma}, "
              f"batch {args.denormal_batch_size}, after {args.denormal_pretrain} steps at lr {args.denormal_lr}")
        print(den.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
