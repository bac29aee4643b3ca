"""Forward+backward throughput and model-FLOPs utilisation of every backbone.

For each architecture at each size: tokens per second of a training step
(forward, backward, AdamW update) on a fixed batch, the counted FLOPs of that
step (scalestudy.flops, torch's flop counter), and MFU = counted FLOP/s divided
by the peak dense matmul FLOP/s measured on the same machine in the same run.
Writes a Markdown table (default docs/benchmarks.md) naming the machine.

    python benchmarks/throughput.py --sizes xs s --batch 32 --seq-len 128
"""

from __future__ import annotations

import argparse
import platform
import time
from datetime import date
from pathlib import Path

import torch

from scalestudy.flops import count_flops, count_params
from scalestudy.models import ARCHITECTURES, build_backbone


def peak_matmul_flops(device: str, n: int = 2048, repeats: int = 10) -> float:
    """Dense fp32 matmul FLOP/s: the roof MFU is measured against."""
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    for _ in range(2):
        a @ b
    sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    sync(device)
    return 2 * n**3 * repeats / (time.perf_counter() - start)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def step_fn(model, tokens, mask, optimizer):
    def step():
        out = model(tokens, mask)
        loss = out.hidden.float().pow(2).mean() + out.aux_loss
        loss.backward()
        if optimizer is not None:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    return step


def measure(arch: str, size: str, batch: int, seq_len: int, device: str, steps: int) -> dict:
    torch.manual_seed(0)
    model = build_backbone(arch, size, vocab_size=32, max_len=seq_len).to(device).train()
    tokens = torch.randint(3, 32, (batch, seq_len), device=device)
    mask = torch.ones_like(tokens, dtype=torch.bool)
    flops = count_flops(step_fn(model, tokens, mask, None))
    model.zero_grad(set_to_none=True)
    step = step_fn(model, tokens, mask, torch.optim.AdamW(model.parameters(), lr=1e-4))
    for _ in range(2):  # warm-up
        step()
    sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync(device)
    seconds = (time.perf_counter() - start) / steps
    return {
        "arch": arch, "size": size, "params": count_params(model)[1], "flops": flops,
        "ms": 1e3 * seconds, "tokens_per_s": batch * seq_len / seconds,
        "flops_per_s": flops / seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["xs", "s"])
    parser.add_argument("--archs", nargs="+", default=list(ARCHITECTURES))
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    args = parser.parse_args()

    peak = peak_matmul_flops(args.device)
    rows = [measure(a, s, args.batch, args.seq_len, args.device, args.steps)
            for a in args.archs for s in args.sizes]
    machine = (f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch "
               f"threads, device {args.device}, torch {torch.__version__}")
    lines = [
        "# Throughput benchmark",
        "",
        f"`python benchmarks/throughput.py --sizes {' '.join(args.sizes)} --batch {args.batch} "
        f"--seq-len {args.seq_len}` on {date.today()}: {machine}.",
        f"Peak dense fp32 matmul measured in the same run: {peak / 1e9:.1f} GFLOP/s.",
        "One step = forward + backward + AdamW update, batch "
        f"{args.batch} x {args.seq_len} tokens; FLOPs counted by torch's flop counter;",
        "MFU = counted FLOP/s / peak. Machines are shared and noisy: compare ratios.",
        "",
        "| arch | size | non-emb params | GFLOP/step | ms/step | tokens/s | MFU | vs transformer |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    base = {r["size"]: r["tokens_per_s"] for r in rows if r["arch"] == "transformer"}
    for r in rows:
        ratio = f"{r['tokens_per_s'] / base[r['size']]:.2f}" if r["size"] in base else "-"
        lines.append(
            f"| {r['arch']} | {r['size']} | {r['params']:,} | {r['flops'] / 1e9:.2f} | "
            f"{r['ms']:.1f} | {r['tokens_per_s']:,.0f} | {r['flops_per_s'] / peak:.1%} | {ratio} |"
        )
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
