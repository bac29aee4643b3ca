"""Lightning's overhead per training step: the study's loop against a plain loop.

Both sides train the same model (`scalestudy.training.modules.Classifier`: transformer
backbone + ClassifierHead) on the same data (random ListOps-like batches: 32
sequences of random lengths up to T, padded with 0, through the study's
`train.loader`), with the same optimiser and schedule (`configure_optimizer`:
AdamW, `warmup_cosine`), gradient clipping, divergence check and token count:

- plain: a PyTorch loop written here, which also keeps the train loss every
  10 steps (the history a run writes to metrics.csv);
- study: `scalestudy.loop.TrainingLoop.run`, the loop every run trains in, on a Fabric
  from `loop.make_fabric` as a run builds it: Lightning Fabric's model and
  optimiser wrappers, `fabric.backward`, `fabric.clip_gradients`, the CSV
  logger (metrics.csv every 10 steps), the SIGTERM check, a progress bar only
  on a terminal, deterministic algorithms. Validation (and with it last.ckpt)
  comes once, after the last timed step.

The two alternate step by step in one process: `Alongside.after_step` (the
loop's hook at the end of every step) runs one plain step, so each pair of
steps runs under the same load of a shared machine. A study step is timed
from the end of one plain step to the start of the next (its data, step,
logging and checks), a plain step from its batch fetch to its schedule step.
Reports ms/step (median step), the median over pairs of study/plain (target
<= 1.05) and of study - plain, and each fit's fixed cost outside its steps.

Until this project replaced Lightning's Trainer by the Fabric loop, the same
pairing measured the Trainer at 1.08-1.10 (xs, T=48; +1.6-1.8 ms a step):
docs/benchmarks.md keeps those rows. Writes its section of docs/benchmarks.md.

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

import torch
from benchlib import machine_line, make_clock, write_section

from scalestudy.models import backbone_class, backbone_config
from scalestudy.models.heads import ClassifierHead
from scalestudy.study.specs import TrainConfig, TrainerConfig
from scalestudy.training.data import loader
from scalestudy.training.loop import TrainingLoop, make_fabric
from scalestudy.training.modules import Classifier

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
    return Classifier(backbone, ClassifierHead(backbone, N_CLASSES), N_CLASSES)


class PlainLoop:
    """A plain PyTorch training loop, one `step()` at a time: the work of a
    StudyModule step (loss, divergence check, token count, backward, clipping,
    AdamW, schedule) and the loss kept every LOG_EVERY steps."""

    def __init__(self, model: Classifier, data, cfg: TrainConfig,
                 forward_context: Callable[[], ContextManager] = nullcontext,
                 optimizer_options: dict | None = None):
        self.optimizer, self.schedule = model.configure_optimizer(cfg)
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


class Alongside(TrainingLoop):
    """The study's loop with one plain step run at the end of each of its steps,
    both timed: the plain step, and the study's step from the end of that plain
    step to the end of the next study step (fetch, step, logging, checks)."""

    def pair(self, plain: PlainLoop, clock) -> None:
        self.plain, self.clock = plain, clock
        self.plain_seconds, self.study_seconds = [], []
        self.after = None

    def after_step(self) -> None:
        before = self.clock()
        if self.after is not None:
            self.study_seconds.append(before - self.after)
        self.plain.step()
        self.after = self.clock()
        self.plain_seconds.append(self.after - before)


def side_by_side(study_model: Classifier, plain_model: Classifier, train, plain_train, val,
                 cfg: TrainConfig, hw: TrainerConfig, clock) -> tuple[list, list, float]:
    """One `TrainingLoop.run` with a plain step after each of its steps: the per-step
    seconds of both (aligned), and the fit's fixed cost outside its steps:
    make_fabric and set-up before the first step, the validation, last.ckpt
    and the logger's flush after the last (less one median step)."""
    with tempfile.TemporaryDirectory() as run_dir:
        start = clock()
        fabric = make_fabric(hw, Path(run_dir))
        fit = Alongside(fabric, study_model, cfg, Path(run_dir), "benchmark", train, val)
        fit.pair(PlainLoop(plain_model, plain_train, cfg), clock)
        fit.run()
        for logger in fabric.loggers:
            logger.finalize("success")
        end = clock()
        assert (Path(run_dir) / "metrics.csv").exists() and (Path(run_dir) / "last.ckpt").exists()
    study = fit.study_seconds[:-1]  # the last step also validates and saves: not timed
    plain = fit.plain_seconds[1: len(study) + 1]  # the plain step after each timed study step
    steps = sum(study) + sum(fit.plain_seconds)
    fixed = end - start - steps - statistics.median(study)
    return study, plain, fixed


def measure(size: str, seq_len: int, batch: int, args, clock) -> dict:
    total = args.warmup + args.steps + 2  # the first and last steps close the timed window
    cfg = TrainConfig(max_steps=total, batch_size=batch, lr=2e-3, warmup_steps=12,
                      val_every=total, grad_clip=1.0, protocol="default")
    hw = TrainerConfig(accelerator="cpu", devices=1, precision="32-true")
    data = listops_like(batch * total, seq_len, 0)
    val = loader(listops_like(2 * batch, seq_len, 1), batch, 0, False)
    plain_model, study_model = classifier(size, seq_len, cfg), classifier(size, seq_len, cfg)
    plain, study, fixed = [], [], []
    for _ in range(args.rounds):
        ours, base, rest = side_by_side(study_model, plain_model, loader(data, batch, 0, True),
                                        loader(data, batch, 0, True), val, cfg, hw, clock)
        study += ours[args.warmup:]
        plain += base[args.warmup:]
        fixed.append(rest)
    row = {
        "size": size, "seq_len": seq_len, "batch": batch, "fixed": statistics.median(fixed),
        "plain": 1e3 * statistics.median(plain), "study": 1e3 * statistics.median(study),
        "plain_mean": 1e3 * statistics.fmean(plain),
        "study_mean": 1e3 * statistics.fmean(study),
        "ratio": statistics.median(a / b for a, b in zip(study, plain, strict=True)),
        "mean_ratio": sum(study) / sum(plain),
        "extra": 1e3 * statistics.median(a - b for a, b in zip(study, plain, strict=True)),
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
        f"{args.rounds} fits of {args.warmup} + {args.steps} timed steps of the study's loop "
        "(`loop.TrainingLoop` on Lightning Fabric), each paired with a plain PyTorch step run just "
        f"after it; the first {args.warmup} pairs of a fit are warm-up. ms/step: median "
        "over the timed steps (mean in brackets); added ms and study/plain: medians over "
        "the pairs of study - plain and study / plain (the target: <= 1.05); ratio of "
        "means: sum over sum, which also counts the metrics.csv steps (every 10th) and the "
        "bursts of other jobs. The last row (xxs, T=8, batch 2) has next to no "
        "arithmetic: its added ms is the loop's fixed cost per step. Loop fixed s: a run's "
        "cost outside its steps (make_fabric and set-up; the validation, last.ckpt and "
        "the CSV flush at the end), median over fits.",
        "",
        "| size | T | batch | plain ms/step | study ms/step | added ms | study/plain "
        "| ratio of means | target met | fit fixed s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['size']} | {r['seq_len']} | {r['batch']} | {r['plain']:.1f} "
            f"({r['plain_mean']:.1f}) | {r['study']:.1f} ({r['study_mean']:.1f}) | "
            f"{r['extra']:.2f} | {r['ratio']:.3f} | {r['mean_ratio']:.3f} | "
            f"{'yes' if r['ratio'] <= 1.05 else 'no'} | {r['fixed']:.2f} |"
        )
    text = "\n".join(lines)
    write_section(args.out, "lightning_overhead", text)
    print(text)


if __name__ == "__main__":
    main()
