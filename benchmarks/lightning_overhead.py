"""Lightning's overhead per training step: the study's Trainer against a plain loop.

Both sides train the same model (`scalestudy.train.Classifier`: transformer
backbone + ClassifierHead) on the same data (random ListOps-like batches: 32
sequences of random lengths up to T, padded with 0, through the study's
`train.loader`), with the same optimiser and schedule (`configure_optimizers`:
AdamW, `warmup_cosine`), gradient clipping, divergence check and token count:

- plain: a PyTorch loop written here, which also keeps the train loss every
  10 steps (the history a run writes to metrics.csv);
- lightning: `Trainer.fit` on a trainer from `scalestudy.train.make_trainer`,
  the study's factory, as a run builds it: CSVLogger (metrics.csv every
  log_every_n_steps = 10 steps), the last.ckpt checkpoint, its callbacks, a
  progress bar only on a terminal, `deterministic=True`. Validation (and with
  it the checkpoint) comes once, after the last timed step.

The two alternate step by step in one process: a callback runs one plain step
at the start of every Lightning step, so each pair of steps runs under the same
load of a shared machine. A Lightning step is timed from the end of its plain
step to the start of the next batch (data loading, hooks, logging and callbacks
included), a plain step from its batch fetch to its schedule step. Reports
ms/step (median step), the median over pairs of lightning/plain (target <=
1.05) and of lightning - plain, and each fit's fixed cost outside its steps.
A third contender, Lightning Fabric's wrappers without the Trainer
(`FabricLoop`), alternates step by step with a plain loop of its own: what a
Fabric-based training loop would cost. Writes its section of docs/benchmarks.md.

    python benchmarks/lightning_overhead.py --sizes xs s m --seq-lens 48 128
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager
from contextlib import nullcontext
from pathlib import Path

import lightning as L
import torch
from benchlib import machine_line, make_clock, write_section

from scalestudy.models import backbone_class, backbone_config
from scalestudy.models.heads import ClassifierHead
from scalestudy.train import Classifier, TrainConfig, TrainerConfig, loader, make_trainer

VOCAB, N_CLASSES, LOG_EVERY = 20, 10, 10


def listops_like(n: int, seq_len: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token ids 3..VOCAB-1 with random lengths 4..seq_len, pad id 0."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(3, VOCAB, (n, seq_len), generator=g)
    lengths = torch.randint(4, seq_len + 1, (n, 1), generator=g)
    tokens[torch.arange(seq_len) >= lengths] = 0
    return tokens, torch.randint(0, N_CLASSES, (n,), generator=g)


def classifier(size: str, seq_len: int, cfg: TrainConfig) -> Classifier:
    torch.manual_seed(0)
    bcfg = backbone_config("transformer", size, VOCAB, seq_len, protocol=cfg.protocol)
    backbone = backbone_class("transformer")(bcfg)
    return Classifier(backbone, ClassifierHead(backbone, N_CLASSES), cfg, N_CLASSES)


class PlainLoop:
    """A plain PyTorch training loop, one `step()` at a time: the work of a
    StudyModule step (loss, divergence check, token count, backward, clipping,
    AdamW, schedule) and the loss kept every LOG_EVERY steps."""

    def __init__(self, model: Classifier, data, cfg: TrainConfig,
                 forward_context: Callable[[], ContextManager] = nullcontext,
                 optimizer_options: dict | None = None):
        conf = model.configure_optimizers()
        self.optimizer, self.schedule = conf["optimizer"], conf["lr_scheduler"]["scheduler"]
        for group in self.optimizer.param_groups:  # e.g. another AdamW kernel
            group.update(optimizer_options or {})
        self.model, self.cfg, self.forward_context = model.train(), cfg, forward_context
        self.batches, self.steps, self.tokens_seen, self.history = iter(data), 0, 0, []

    def step(self) -> None:
        model, batch = self.model, next(self.batches)
        with self.forward_context():
            loss, aux_loss = model.training_loss(batch)
        total = loss + aux_loss
        if not torch.isfinite(total):
            raise FloatingPointError(f"diverged at step {self.steps}")
        self.tokens_seen += int((batch[0] != model.pad_id).sum())
        if self.steps % LOG_EVERY == 0:
            self.history.append(float(loss))
        self.backward(total)
        self.clip()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.schedule.step()
        self.steps += 1

    def backward(self, total: torch.Tensor) -> None:
        total.backward()

    def clip(self) -> None:
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)


class FabricLoop(PlainLoop):
    """The same step through Lightning Fabric, as a Fabric-based train.py would
    run it: model and optimiser from `fabric.setup`, batches from
    `fabric.setup_dataloaders`, `fabric.backward` and `fabric.clip_gradients`.
    What Lightning's wrappers cost without the Trainer's loop and hooks."""

    def __init__(self, model: Classifier, data, cfg: TrainConfig, fabric: L.Fabric):
        super().__init__(model, data, cfg)
        self.fabric = fabric
        self.model, self.optimizer = fabric.setup(model, self.optimizer)
        self.model.mark_forward_method("training_loss")
        self.batches = iter(fabric.setup_dataloaders(data))

    def backward(self, total: torch.Tensor) -> None:
        self.fabric.backward(total)

    def clip(self) -> None:
        self.fabric.clip_gradients(self.model, self.optimizer, max_norm=self.cfg.grad_clip)


def fabric_side_by_side(fabric_model: Classifier, plain_model: Classifier, data,
                        cfg: TrainConfig, steps: int, clock) -> tuple[list, list]:
    """`steps` pairs of a plain step and a Fabric step, alternating: the seconds
    of each (step k of each aligned)."""
    fabric = L.Fabric(accelerator="cpu", devices=1, precision="32-true")
    loops = PlainLoop(plain_model, data, cfg), FabricLoop(fabric_model, data, cfg, fabric)
    seconds = [], []
    for _ in range(steps):
        for loop, kept in zip(loops, seconds, strict=True):
            start = clock()
            loop.step()
            kept.append(clock() - start)
    return seconds


def plain_loop(model: Classifier, data, cfg: TrainConfig, warmup: int, steps: int, clock,
               forward_context: Callable[[], ContextManager] = nullcontext,
               optimizer_options: dict | None = None) -> list[float]:
    """Seconds of each of `steps` plain steps after `warmup` ones; `forward_context`
    wraps the forward pass and loss (e.g. autocast), `optimizer_options` replace
    those of the study's AdamW (e.g. its kernel)."""
    loop = PlainLoop(model, data, cfg, forward_context, optimizer_options)
    for _ in range(warmup):
        loop.step()
    seconds = []
    for _ in range(steps):
        start = clock()
        loop.step()
        seconds.append(clock() - start)
    return seconds


class Alongside(L.Callback):
    """Runs one plain step at the start of every Lightning step, and times both:
    the plain step, and the Lightning step from the end of that plain step to
    the start of the next batch (its data, hooks, forward, backward, clipping,
    optimizer, logging and callbacks)."""

    def __init__(self, plain: PlainLoop, clock):
        self.plain, self.clock = plain, clock
        self.plain_seconds, self.lightning_seconds = [], []
        self.start = self.first = self.after = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        before = self.clock()
        if self.after is None:
            self.first = before
        else:
            self.lightning_seconds.append(before - self.after)
        self.plain.step()
        self.after = self.clock()
        self.plain_seconds.append(self.after - before)


def side_by_side(lightning_model: Classifier, plain_model: Classifier, data, val,
                 cfg: TrainConfig, hw: TrainerConfig, clock) -> tuple[list, list, float]:
    """One Trainer.fit with a plain step before each of its steps: the per-step
    seconds of both (aligned, step k of each), and the fit's fixed cost outside
    its steps: make_trainer and set-up before the first step, the validation,
    last.ckpt and teardown after the last (less one median step)."""
    timer = Alongside(PlainLoop(plain_model, data, cfg), clock)
    with tempfile.TemporaryDirectory() as run_dir:
        start = clock()
        trainer = make_trainer(cfg, hw, Path(run_dir))
        trainer.callbacks.append(timer)
        trainer.fit(lightning_model, data, val)
        end = clock()
        assert (Path(run_dir) / "metrics.csv").exists() and (Path(run_dir) / "last.ckpt").exists()
    lightning = timer.lightning_seconds
    plain = timer.plain_seconds[: len(lightning)]
    steps = sum(lightning) + sum(timer.plain_seconds)
    fixed = end - start - steps - statistics.median(lightning)
    return lightning, plain, fixed


def measure(size: str, seq_len: int, batch: int, args, clock) -> dict:
    total = args.warmup + args.steps + 1  # the last step only closes the timed window
    cfg = TrainConfig(max_steps=total, batch_size=batch, lr=2e-3, warmup_steps=12,
                      val_every=total, grad_clip=1.0, protocol="default")
    hw = TrainerConfig(accelerator="cpu", devices=1, precision="32-true")
    train = loader(listops_like(batch * total, seq_len, 0), batch, 0, True)
    val = loader(listops_like(2 * batch, seq_len, 1), batch, 0, False)
    plain_model, lightning_model = classifier(size, seq_len, cfg), classifier(size, seq_len, cfg)
    plain, lightning, fixed = [], [], []
    for _ in range(args.rounds):
        light, base, rest = side_by_side(lightning_model, plain_model, train, val, cfg, hw,
                                         clock)
        lightning += light[args.warmup:]
        plain += base[args.warmup:]
        fixed.append(rest)
    fabric_plain, fabric = [], []
    fabric_model = classifier(size, seq_len, cfg)
    for _ in range(args.rounds):
        base, wrapped = fabric_side_by_side(fabric_model, plain_model, train, cfg, total - 1,
                                            clock)
        fabric_plain += base[args.warmup:]
        fabric += wrapped[args.warmup:]
    row = {
        "size": size, "seq_len": seq_len, "batch": batch, "fixed": statistics.median(fixed),
        "plain": 1e3 * statistics.median(plain), "lightning": 1e3 * statistics.median(lightning),
        "plain_mean": 1e3 * statistics.fmean(plain),
        "lightning_mean": 1e3 * statistics.fmean(lightning),
        "ratio": statistics.median(a / b for a, b in zip(lightning, plain, strict=True)),
        "mean_ratio": sum(lightning) / sum(plain),
        "extra": 1e3 * statistics.median(a - b for a, b in zip(lightning, plain, strict=True)),
        "fabric": 1e3 * statistics.median(fabric),
        "fabric_ratio": statistics.median(a / b for a, b in zip(fabric, fabric_plain,
                                                                strict=True)),
        "fabric_extra": 1e3 * statistics.median(a - b for a, b in zip(fabric, fabric_plain,
                                                                      strict=True)),
    }
    print(row, flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["xs", "s", "m"])
    parser.add_argument("--seq-lens", nargs="+", type=int, default=[48, 128])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's)")
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    parser.add_argument("--no-floor", dest="floor", action="store_false",
                        help="skip the xxs, T=8, batch-2 row (Lightning's fixed cost per step)")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", module="lightning")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    clock = make_clock("cpu", args.clock)

    rows = [measure(s, t, args.batch, args, clock) for t in args.seq_lens for s in args.sizes]
    if args.floor:  # next to no arithmetic: what Lightning adds to any step
        rows.append(measure("xxs", 8, 2, args, clock))
    lines = [
        "## Lightning overhead",
        "",
        f"`python benchmarks/lightning_overhead.py --sizes {' '.join(args.sizes)} --seq-lens "
        f"{' '.join(map(str, args.seq_lens))} --steps {args.steps} --rounds {args.rounds}`: "
        f"{machine_line('cpu', args.clock)}.",
        "",
        f"{args.rounds} fits of {args.warmup} + {args.steps} steps, each Lightning step "
        "paired with a plain step run just before it; the first "
        f"{args.warmup} pairs of a fit are warm-up. ms/step: median over the timed steps "
        "(mean in brackets); added ms and lightning/plain: medians over the pairs of "
        "lightning - plain and lightning / plain (the target: <= 1.05); ratio of means: "
        "sum over sum, which also counts the metrics.csv steps (every 10th) and the "
        "bursts of other jobs. The last row (xxs, T=8, batch 2) has next to no "
        "arithmetic: its added ms is Lightning's fixed cost per step. Fit fixed s: a fit's "
        "cost outside its steps (make_trainer and set-up; the validation, last.ckpt and "
        "teardown at the end), median over fits. Fabric: the same step through Lightning "
        "Fabric's wrappers without the Trainer (`FabricLoop`), alternating step by step "
        f"with a plain loop in {args.rounds} rounds of {args.warmup} + {args.steps} steps; "
        "its added ms and fabric/plain are medians over those pairs.",
        "",
        "| size | T | batch | plain ms/step | lightning ms/step | added ms | lightning/plain "
        "| ratio of means | target met | fit fixed s | fabric ms/step | fabric added ms "
        "| fabric/plain |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['size']} | {r['seq_len']} | {r['batch']} | {r['plain']:.1f} "
            f"({r['plain_mean']:.1f}) | {r['lightning']:.1f} ({r['lightning_mean']:.1f}) | "
            f"{r['extra']:.2f} | {r['ratio']:.3f} | {r['mean_ratio']:.3f} | "
            f"{'yes' if r['ratio'] <= 1.05 else 'no'} | {r['fixed']:.2f} | "
            f"{r['fabric']:.1f} | {r['fabric_extra']:.2f} | {r['fabric_ratio']:.3f} |"
        )
    text = "\n".join(lines)
    write_section(args.out, "lightning_overhead", text)
    print(text)


if __name__ == "__main__":
    main()
