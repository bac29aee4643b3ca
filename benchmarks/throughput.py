"""Training-step throughput and model-FLOPs utilisation (MFU) of every backbone,
next to a plain `torch.nn.TransformerEncoder` baseline.

For each architecture at each size: ms per training step (forward, backward,
AdamW update) on a fixed batch, the counted FLOPs of that step
(`scalestudy.flops.count_flops`), and MFU = counted FLOP/s divided by the
peak dense fp32 matmul FLOP/s measured on the same machine in the same run.

`encoder` is the baseline: `nn.TransformerEncoder` (pre-LN `norm_first=True`,
`batch_first=True`, GELU, dropout 0, a final LayerNorm) with the same depth,
width, heads and d_ff as our `transformer`, and the same token + learned
position embedding; it gets no mask (the batch has no padding), while our
backbones get their all-true padding mask, as in training.

What limits the small sizes: `floor ms` is the step of the same model on a
1 x 8 batch, where arithmetic is negligible: the fixed cost of dispatching the
step's `ops/step` ATen operators (Python, autograd, the optimizer's per-tensor
loop); `us/op` is floor / ops.

Timing: see benchmarks/benchlib.py (CPU time of one torch thread by default;
`--rounds` rounds interleaved over the architectures of a size, median step).
The peak is measured in those same rounds (a dense n x n matmul as one more
contender), so that a size's MFU divides by the roof under the same load.
Writes its section of docs/benchmarks.md.

    python benchmarks/throughput.py --sizes xxs xs s m l --batch 32 --seq-len 128
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import torch
from benchlib import (
    interleaved,
    machine_line,
    make_clock,
    matmul_timer,
    peak_matmul_flops,
    step_median,
    write_section,
)
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from scalestudy.ladder import shape_for
from scalestudy.models import ARCHITECTURES, BackboneOutput, build_backbone
from scalestudy.models.layers import Embedding
from scalestudy.training.flops import count_flops, count_params

BASELINE, PEAK = "encoder", "peak"


class TorchEncoder(nn.Module):
    """nn.TransformerEncoder with our embedding, in our backbones' interface."""

    def __init__(self, size: str, vocab_size: int, max_len: int):
        super().__init__()
        shape = shape_for(size)
        self.embed = Embedding(vocab_size, max_len, shape.width)
        layer = nn.TransformerEncoderLayer(
            shape.width, shape.heads, shape.d_ff, dropout=0.0, activation="gelu",
            batch_first=True, norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, shape.depth, norm=nn.LayerNorm(shape.width),
                                             enable_nested_tensor=False)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> BackboneOutput:
        return BackboneOutput(self.encoder(self.embed(tokens)), mask)


def build(arch: str, size: str, seq_len: int) -> nn.Module:
    torch.manual_seed(0)
    if arch == BASELINE:
        return TorchEncoder(size, 32, seq_len)
    return build_backbone(arch, size, vocab_size=32, max_len=seq_len)


class OpCounter(TorchDispatchMode):
    """Counts the ATen operators dispatched (forward, backward and optimizer)."""

    def __init__(self):
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        return func(*args, **(kwargs or {}))


def step_fn(model: nn.Module, batch: int, seq_len: int, device: str,
            optimizer: torch.optim.Optimizer | None) -> Callable[[], None]:
    tokens = torch.randint(3, 32, (batch, seq_len), device=device)
    mask = torch.ones_like(tokens, dtype=torch.bool)

    def step():
        out = model(tokens, mask)
        loss = out.hidden.float().pow(2).mean() + getattr(out, "aux_loss", 0.0)
        loss.backward()
        if optimizer is not None:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    return step


def timed(step: Callable[[], None], steps: int, clock,
          warmup: int = 1) -> Callable[[], list[float]]:
    def run() -> list[float]:
        for _ in range(warmup):
            step()
        seconds = []
        for _ in range(steps):
            start = clock()
            step()
            seconds.append(clock() - start)
        return seconds

    return run


def measure_size(size: str, archs: list[str], args, clock, n: int) -> tuple[list[dict], float]:
    """Every architecture at one size, rounds interleaved over architectures and
    the n x n matmul that measures the peak under the same load; the rows and
    that peak (FLOP/s)."""
    rows, full, floor = {}, {PEAK: matmul_timer(n, args.device, clock, 8)}, {}
    for arch in archs:
        model = build(arch, size, args.seq_len).to(args.device).train()
        flops = count_flops(step_fn(model, args.batch, args.seq_len, args.device, None))
        model.zero_grad(set_to_none=True)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        tiny = step_fn(model, 1, 8, args.device, optimizer)
        tiny()  # the optimizer's state exists before counting
        with OpCounter() as counter:
            tiny()
        rows[arch] = {"arch": arch, "size": size, "params": count_params(model)[1],
                      "flops": flops, "ops": counter.ops}
        full[arch] = timed(step_fn(model, args.batch, args.seq_len, args.device, optimizer),
                           args.steps, clock)
        floor[arch] = timed(tiny, 10, clock)
    times = interleaved(full, args.rounds)
    peak = 2 * n**3 / step_median(times.pop(PEAK))
    for arch, values in times.items():
        rows[arch]["seconds"] = step_median(values)
        rows[arch]["mfu"] = rows[arch]["flops"] / rows[arch]["seconds"] / peak
    for arch, values in interleaved(floor, args.rounds).items():
        rows[arch]["floor"] = step_median(values)
    print(f"{size}: peak {peak / 1e9:.1f} GFLOP/s", flush=True)
    for row in rows.values():
        print({k: f"{v:.4g}" if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    return list(rows.values()), peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["xxs", "xs", "s", "m", "l"])
    parser.add_argument("--archs", nargs="+", default=[BASELINE, *ARCHITECTURES])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--steps", type=int, default=2, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's)")
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    clock = make_clock(args.device, args.clock)

    start_peak, n = peak_matmul_flops(args.device, clock)
    rows, peaks = [], {}
    for size in args.sizes:
        size_rows, peaks[size] = measure_size(size, args.archs, args, clock, n)
        rows += size_rows
    lines = [
        "## Throughput and MFU",
        "",
        f"`python benchmarks/throughput.py --sizes {' '.join(args.sizes)} --batch {args.batch} "
        f"--seq-len {args.seq_len} --steps {args.steps} --rounds {args.rounds}`: "
        f"{machine_line(args.device, args.clock)}.",
        f"Peak dense fp32 matmul measured in the same run: {start_peak / 1e9:.1f} GFLOP/s at "
        f"the start ({n} x {n}, the fastest of 512, 1024, 2048), and as the roof of each "
        f"size in its own rounds: "
        + ", ".join(f"{size} {peak / 1e9:.1f}" for size, peak in peaks.items()) + " GFLOP/s.",
        "",
        f"One step = forward + backward + AdamW update on {args.batch} x {args.seq_len} "
        f"tokens; ms/step: median step of {args.rounds} rounds interleaved over the "
        "architectures and the peak's matmul; MFU = counted FLOPs / (ms/step) / that "
        "size's peak.",
        "`encoder` is torch's nn.TransformerEncoder at our transformer's shape. Floor: the "
        "same step on 1 x 8 tokens (dispatch cost); us/op = floor / ATen ops per step.",
        "",
        "| arch | size | non-emb params | GFLOP/step | ms/step | MFU | vs transformer "
        "| floor ms | ops/step | us/op |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    base = {r["size"]: r["seconds"] for r in rows if r["arch"] == "transformer"}
    for r in rows:
        ratio = f"{base[r['size']] / r['seconds']:.2f}" if r["size"] in base else "-"
        lines.append(
            f"| {r['arch']} | {r['size']} | {r['params']:,} | {r['flops'] / 1e9:.2f} | "
            f"{1e3 * r['seconds']:.1f} | {r['mfu']:.1%} | {ratio} | "
            f"{1e3 * r['floor']:.1f} | {r['ops']} | {1e6 * r['floor'] / r['ops']:.0f} |"
        )
    text = "\n".join(lines)
    write_section(args.out, "throughput", text)
    print(text)


if __name__ == "__main__":
    main()
