"""Precision, compilation and attention kernels: ms per training step of the
transformer classifier under each, side by side in one run.

The model, data and loop are those of benchmarks/lightning_overhead.py's plain
loop (`Classifier`, random ListOps-like padded batches, AdamW + warm-up/cosine,
gradient clipping, deterministic algorithms as `loop.make_fabric` sets them):

- fp32: as the study trains by default (`precision: 32-true`);
- bf16-mixed: Lightning's own `MixedPrecision("bf16-mixed")` plugin wraps the
  forward pass and loss (autocast to bfloat16; weights, gradients and AdamW
  stay fp32), as a run with `trainer.precision: bf16-mixed` does (Fabric, same plugin);
- compile: `torch.compile(backbone)`, default mode; its one-off compilation
  (first step, wall time) is reported apart;
- sdpa-math, sdpa-flash: fp32 with `F.scaled_dot_product_attention` held to one
  backend by `torch.nn.attention.sdpa_kernel` (the unfused math path, or the
  fused CPU flash kernel that torch picks by itself on a CPU);
- adamw-loop, adamw-foreach: fp32 with AdamW's other kernels in place of the
  fused one the study uses on a CPU (`train.fused_adamw`): the Python loop over
  the parameters (torch's CPU default), and the multi-tensor (foreach) one.

Speed-up = median over interleaved rounds of fp32 time / variant time (> 1 is
faster). Writes its section of docs/benchmarks.md.

    python benchmarks/precision.py --sizes xs s m --seq-len 128
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import torch
from benchlib import (
    interleaved,
    machine_line,
    make_clock,
    paired_ratio,
    step_mean,
    step_median,
    write_section,
)
from lightning.fabric.plugins.precision import MixedPrecision
from lightning_overhead import classifier, listops_like, plain_loop
from torch.nn.attention import SDPBackend, sdpa_kernel

from scalestudy.study.specs import TrainConfig
from scalestudy.training.data import loader

VARIANTS = ("fp32", "bf16-mixed", "compile", "sdpa-math", "sdpa-flash", "adamw-loop",
            "adamw-foreach")
# AdamW's kernel per variant; the others keep the study's (fused on a CPU).
OPTIMIZER_OPTIONS = {"adamw-loop": {"fused": False, "foreach": False},
                     "adamw-foreach": {"fused": False, "foreach": True}}


def first_step(size: str, cfg: TrainConfig, data, clock):
    """A classifier with a compiled backbone, and the wall seconds of its first
    step (tracing and compiling forward and backward)."""
    torch._dynamo.reset()  # what a fresh process starts from; the disk cache stays
    model = classifier(size, cfg=cfg, seq_len=data.dataset.tensors[0].shape[1])
    model.backbone = torch.compile(model.backbone)
    start = time.perf_counter()
    plain_loop(model, data, cfg, 0, 1, clock)
    return model, time.perf_counter() - start


def contender(variant: str, size: str, args, clock) -> tuple[Callable[[], list[float]], tuple]:
    """A function timing one round of `variant`, and for `compile` the wall
    seconds of compiling with a cold and with a warm inductor cache."""
    total = 1 + args.steps
    cfg = TrainConfig(max_steps=1000, batch_size=args.batch, lr=2e-3, warmup_steps=12,
                      grad_clip=1.0, protocol="default")
    data = loader(listops_like(args.batch * total, args.seq_len, 0), args.batch, 0, True)
    model = classifier(size, args.seq_len, cfg)
    context: Callable = nullcontext
    if variant == "bf16-mixed":
        context = MixedPrecision("bf16-mixed", "cpu").forward_context
    elif variant == "sdpa-math":
        context = lambda: sdpa_kernel(SDPBackend.MATH)  # noqa: E731
    elif variant == "sdpa-flash":
        context = lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)  # noqa: E731
    compile_seconds: tuple = ()
    if variant == "compile":
        _, cold = first_step(size, cfg, data, clock)  # a fresh cache (see main)
        model, warm = first_step(size, cfg, data, clock)  # the same graphs: cache hits
        compile_seconds = (cold, warm)

    def run() -> list[float]:
        # sdpa_kernel picks the forward's kernel, and the backward follows it.
        return plain_loop(model, data, cfg, 1, args.steps, clock, context,
                          OPTIMIZER_OPTIONS.get(variant))

    return run, compile_seconds


def measure(size: str, args, clock) -> dict:
    contenders, compile_seconds = {}, ()
    for variant in VARIANTS:
        contenders[variant], seconds = contender(variant, size, args, clock)
        compile_seconds += seconds
    times = interleaved(contenders, args.rounds)
    row = {"size": size, "compile_s": compile_seconds}
    for variant, values in times.items():
        row[variant] = 1e3 * step_median(values)
        row[f"{variant}_mean"] = 1e3 * step_mean(values)
        row[f"{variant}_speedup"] = paired_ratio(times["fp32"], values)
    print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["xs", "s", "m"])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's)")
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", module="lightning")
    torch.use_deterministic_algorithms(True)  # as loop.make_fabric sets it
    clock = make_clock("cpu", args.clock)

    # An empty inductor cache of this run's own: compile times are measured cold.
    cache = os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-")
    try:
        rows = [measure(size, args, clock) for size in args.sizes]
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    lines = [
        "## Precision, compilation and attention kernels",
        "",
        f"`python benchmarks/precision.py --sizes {' '.join(args.sizes)} --seq-len "
        f"{args.seq_len} --steps {args.steps} --rounds {args.rounds}`: "
        f"{machine_line('cpu', args.clock)}.",
        "",
        f"Transformer classifier, batch {args.batch} x {args.seq_len} (padded), plain loop. "
        f"{args.rounds} interleaved rounds of {args.steps} steps; ms/step: median over all "
        "timed steps (mean in brackets); speed-up: median over rounds of fp32 / variant "
        "(> 1 is faster). Compile: wall seconds of the first (compiling) step, paid once "
        "per process: with an empty inductor cache, and again (a new model, dynamo reset) "
        "with the cache that run filled, as a later job on the same machine would find it.",
        "",
        "| size | variant | ms/step | speed-up vs fp32 | compile s, cold / cached |",
        "|---|---|---:|---:|---:|",
    ]
    for r in rows:
        for v in VARIANTS:
            compiled = " / ".join(f"{s:.0f}" for s in r["compile_s"]) if v == "compile" else ""
            lines.append(f"| {r['size']} | {v} | {r[v]:.1f} ({r[f'{v}_mean']:.1f}) | "
                         f"{r[f'{v}_speedup']:.2f} | {compiled} |")
    text = "\n".join(lines)
    write_section(args.out, "precision", text)
    print(text)


if __name__ == "__main__":
    main()
