"""What a study's runs cost before they run: estimated training memory (for
refusing a size that cannot fit: the host's, and a GPU's) and estimated FLOPs
(for starting the longest jobs first).

Rough shape-only estimates, never records: a record counts the FLOPs of the
actual model (training/flops.py). The host estimate is the vanilla
transformer's; the GPU estimate is each backbone's (its registry entry's
measured coefficients).
"""

from __future__ import annotations

import functools
import math

from ..architectures import ARCHITECTURES
from ..ladder import shape_for
from ..priors import PRIORS
from ..tasks.contract import BYTE_VOCAB
from .config import StudyConfig
from .grid import budget_label

VOCAB_BOUND = 512  # above every vocabulary here (ListOps 18 ids, the byte corpus 259)
FLOATS_PER_TOKEN_LAYER = 16  # activations kept for backward: attention, norms, residuals


def training_memory(size: str, protocol: str, batch: int, seq_len: int) -> tuple[int, int]:
    """Estimated bytes to train the vanilla transformer of `size` in fp32 with
    AdamW, and its parameter count.

    Parameters P = L (4 D^2 + 2 D F) + (vocab + T) D; weights, gradients and two
    AdamW moments cost 16 P bytes; activations kept for the backward pass about
    B T L (16 D + 2 F) floats (fused attention keeps no T x T scores). A rough
    bound, for refusing what cannot fit, not a measurement; the other backbones
    are within 25% of the vanilla non-embedding parameters (switch ~3x).
    """
    shape = shape_for(size, protocol)
    depth, width, d_ff = shape.depth, shape.width, shape.d_ff
    params = depth * (4 * width**2 + 2 * width * d_ff) + (VOCAB_BOUND + seq_len) * width
    activations = batch * seq_len * depth * (FLOATS_PER_TOKEN_LAYER * width + 2 * d_ff) * 4
    return 16 * params + activations, params


GIB = 2**30
# What a GPU holds besides the run's tensors: the CUDA context, cuBLAS's and
# cuDNN's workspaces, the caching allocator's slack.
GPU_RESERVE = 2 * GIB
# Dropout's masks and outputs a token keeps per layer per unit of width
# (measured as the activations, models/memory.py: S4 and lconv at dropout
# 0.1); attention's own dropout runs inside SDPA's fused kernels on a GPU.
DROPOUT_BYTES = 32.0
MIXED = ("16-mixed", "bf16-mixed", "bf16-true", "16-true", "auto")


def gpu_memory(arch: str, size: str, protocol: str, batch: int, seq_len: int,
               precision: str, dropout: float = 0.0, vocab: int = 0) -> int:
    """Estimated GPU bytes to train `arch` at `size` on `batch` sequences
    (one micro-batch; a pair task's two documents are two) of `seq_len`
    tokens, with AdamW, in `precision` ("auto" counted as bf16-mixed, what
    it is on a GPU); `vocab` > 0 for a masked-LM head (its logits).

    Weights, gradients and AdamW's two moments in float32 (16 bytes a
    parameter, plus a bf16 copy of the weights under autocast); the
    activations kept for backward (the registry's bytes per token per layer
    per unit of width: architectures.py), dropout's masks; S4's kernel, kept
    whatever the batch; the logits of a masked-LM head in float32 with their
    softmax and gradient; the score matrix B H T^2 of softmax attention only
    where it exists, on SDPA's math path (float64: no fused kernel takes it;
    the masks here are [B, 1, 1, T] or is_causal, which the fused kernels
    take); and GPU_RESERVE. A bound for refusing what cannot fit, not a
    measurement: tools/gpu_check.py compares it with a GPU's peak."""
    entry = ARCHITECTURES[arch]
    shape = shape_for(size, protocol)
    depth, width = shape.depth, shape.width
    mixed = precision in MIXED
    scale = 2 if precision == "64-true" else 1
    _, vanilla = training_memory(size, protocol, 0, seq_len)
    params = entry.params_factor * vanilla
    weights = params * (16 + (2 if mixed else 0)) * scale
    saved = entry.activation_bytes or measured_bytes(arch, protocol)
    per_token = depth * width * (saved[mixed] + (DROPOUT_BYTES if dropout else 0.0))
    activations = batch * seq_len * per_token * scale
    kernel = depth * width * seq_len * entry.kernel_bytes
    logits = batch * seq_len * vocab * 4 * 3
    scores = (batch * shape.heads * seq_len**2 * 8 * 2 * depth
              if entry.attention and precision == "64-true" else 0)
    return int(weights + activations + kernel + logits + scores + GPU_RESERVE)


@functools.cache
def measured_bytes(arch: str, protocol: str) -> tuple[float, float]:
    """A plugin's activation bytes, where its entry states none: measured on a
    probe batch (models/memory.py; imports torch)."""
    from ..models.memory import backbone_bytes

    return backbone_bytes(arch, protocol=protocol)


def run_flops(size: str, protocol: str, batch: int, seq_len: int, steps: int) -> float:
    """Estimated FLOPs of a training run of the vanilla transformer of `size`:
    6 N B T a step, N its non-embedding parameters L (4 D^2 + 2 D F), times the
    steps."""
    shape = shape_for(size, protocol)
    non_embedding = shape.depth * (4 * shape.width**2 + 2 * shape.width * shape.d_ff)
    return 6.0 * non_embedding * batch * seq_len * steps


def step_flops_estimate(arch: str, size: str, protocol: str, batch: int, seq_len: int,
                        vocab: int = 0) -> float:
    """Estimated FLOPs of one training step of `arch` at `size`, for a
    budget's steps before the run counts its own (training/flops.py, which
    the run then uses and records): 6 N B T (`run_flops`), attention's
    QK^T and AV, 12 B T^2 D a layer forward and backward (an attention
    backbone), and a masked-LM head over `vocab` ids, 6 B T D V. Against the
    counted FLOPs of an upstream masked-LM step (T 48, the default ladder,
    xxs-m; tests/study/test_budgets.py): the transformer 2-3% under, lconv 3-4%
    under, S4 3-16% over (its FFT convolution costs less than the dense
    layer 6 N B T counts for it). A refusal near its threshold is therefore
    up to 16% conservative for S4."""
    shape = shape_for(size, protocol)
    flops = run_flops(size, protocol, batch, seq_len, 1)
    if ARCHITECTURES[arch].attention:
        flops += 12.0 * batch * seq_len**2 * shape.width * shape.depth
    return flops + 6.0 * batch * seq_len * shape.width * vocab


def budget_steps_estimate(study: StudyConfig, section: str, task: str | None, arch: str,
                          size: str, budget: float) -> tuple[int, float]:
    """(estimated steps, estimated cost of a step in train.budget_unit) a budget buys a run of
    `section` (train: a task run of `task`; pretrain: a pretraining run, on
    `task`'s data or, task None, the upstream corpus)."""
    schedule = getattr(study, section)
    seq_len = study.task(task).seq_len if task else study.upstream.seq_len
    vocab = (BYTE_VOCAB if task is None else VOCAB_BOUND) if section == "pretrain" else 0
    per_step = step_flops_estimate(arch, size, study.train.protocol,
                                   schedule.batch_size, seq_len, vocab)
    if study.train.budget_unit == "tokens":
        per_step = schedule.batch_size * seq_len
    return math.ceil(budget / per_step), per_step


def budget_flops(study: StudyConfig, section: str, task: str | None, size: str,
                 budget: float) -> float:
    """A budget's estimated FLOPs, for priorities: itself (budget_unit flops),
    or the vanilla transformer's 6 N D of its tokens."""
    if study.train.budget_unit == "flops":
        return budget
    seq_len = study.task(task).seq_len if task else study.upstream.seq_len
    batch = getattr(study, section).batch_size
    steps = math.ceil(budget / (batch * seq_len))
    return run_flops(size, study.train.protocol, batch, seq_len, steps)


def pretraining_flops(study: StudyConfig, run) -> float:
    """Estimated FLOPs of one pretraining run (a PretrainCell; of a budget: the
    budget's)."""
    if run.budget is not None:
        return budget_flops(study, "pretrain", run.task, run.size, run.budget)
    tokens = study.task(run.task).seq_len if run.task else study.upstream.seq_len
    return run_flops(run.size, study.train.protocol, study.pretrain.batch_size, tokens,
                     study.pretrain.max_steps)


def training_flops(study: StudyConfig, cell) -> float:
    """Estimated FLOPs of one task run (a grid Cell), with its pretraining's
    where its prior matches that compute; a cell's budget sets its task run's
    when its prior pretrains nothing (study.grid), else its pretraining's."""
    from .grid import PretrainCell

    train = study.train
    if cell.trains_budget:
        return budget_flops(study, "train", cell.task, cell.size, cell.budget)
    own = run_flops(cell.size, train.protocol, train.batch_size, study.task(cell.task).seq_len,
                    train.max_steps)
    matched = PRIORS[cell.prior].matched_to
    if matched is None:
        return own
    return own + pretraining_flops(study, PretrainCell(matched, cell.task, cell.arch, cell.size,
                                                       None, cell.budget))


# Longest first. Snakemake starts the ready jobs of highest priority, and a
# job's priority is the estimated FLOPs of the longest chain of runs it starts:
# a pretraining run before the runs that wait for it, a compute-matched run
# (its pretraining's FLOPs on top of its own) and the large sizes before the
# small ones. Otherwise a long run started last trains alone while the other
# cores idle. On a log scale, so that priorities stay small numbers in the
# scheduler's integer program.
def as_priority(flops: float) -> int:
    return round(100 * math.log10(max(flops, 1.0)))


def train_priority(study: StudyConfig, cell) -> int:
    """A train job's priority: its cell's (a grid Cell's) estimated FLOPs."""
    return as_priority(training_flops(study, cell))


def pretrain_priority(study: StudyConfig, run) -> int:
    """A pretraining job's (`run`, a PretrainCell): its FLOPs plus those of the
    longest run that waits for it (a stage on the upstream corpus serves every
    task)."""
    from .grid import Cell

    tasks = [run.task] if run.task else study.grid.tasks
    waiting = [
        training_flops(study, Cell(t, run.arch, run.size, prior, run.seed or 0, run.budget))
        for t in tasks
        for prior in study.grid.of_task(t)["priors"]
        if PRIORS[prior].needs == run.stage
    ]
    return as_priority(pretraining_flops(study, run) + max(waiting, default=0.0))


def budget_scale(study: StudyConfig, section: str, task: str | None, arch: str | None,
                 size: str, budget: float | None) -> float:
    """How much longer than a run of `section`.max_steps a budgeted run
    trains (at least 1): its estimated steps over max_steps, for the runtime
    a cluster job asks for (study/resources.py)."""
    if budget is None:
        return 1.0
    steps, _ = budget_steps_estimate(study, section, task, arch or "transformer", size, budget)
    return max(1.0, steps / getattr(study, section).max_steps)


def check_budgets(study: StudyConfig) -> str | None:
    """Why a budget cannot run, or None: every budgeted run of the grid
    (study.grid: a cell's pretraining when its prior pretrains, else its
    task run) must buy, by `budget_steps_estimate`, more steps than its
    warm-up. The run checks its counted FLOPs again (training/branches.py)."""
    from .grid import cells, pretrain_cell

    if not study.grid.budgets:
        return None
    runs = set()
    for cell in cells(study.grid):
        pre = pretrain_cell(cell)
        if pre is None:
            runs.add(("train", cell.task, cell.arch, cell.size, cell.budget,
                      f"the {cell.task} runs of {cell.arch} at size {cell.size}"))
        else:
            runs.add(("pretrain", pre.task, pre.arch, pre.size, pre.budget,
                      f"the {pre.stage} pretraining of {pre.arch} at size {pre.size}"
                      + (f" on {pre.task}" if pre.task else "")))
    for section, task, arch, size, budget, what in sorted(runs, key=str):
        steps, per_step = budget_steps_estimate(study, section, task, arch, size, budget)
        warmup = getattr(study, section).warmup_steps
        if steps <= warmup:
            unit = study.train.budget_unit
            return (f"grid.budgets: {budget_label(budget)} {unit} buys {what} about {steps} "
                    f"steps (about {per_step:.3g} {unit} a step, study.costs."
                    f"budget_steps_estimate), not past its {warmup} warm-up steps "
                    f"({section}.warmup_steps); accepted: budgets of at least about "
                    f"{(warmup + 1) * per_step:.3g} {unit} for this cell, or a shorter warm-up")
    return None


# --------------------------------------------------------------------------- wall time


class SecondsModel:
    """A run's wall-clock seconds from its estimated FLOPs (`run_flops`),
    calibrated on a pilot's finished runs (their records' wall_seconds): log
    seconds = a + b log FLOPs, b shared by every kind of run (below 1: a small
    run's time is mostly its fixed start-up and evaluation), a per stage and
    architecture (the pilot's mean where it lacks the pair: its stage's, else
    every run's). What `scalestudy plan` costs a design with."""

    def __init__(self, pilot):
        import numpy as np

        runs = pilot[(pilot["status"] == "ok") & (pilot["wall_seconds"] > 0)]
        if "budget" in runs:
            runs = runs[runs["budget"].isna()]
        if runs.empty:
            raise ValueError("the pilot has no finished run with its wall_seconds: nothing "
                             "to calibrate a design's cost on")
        flops = [run_flops(r.size, r.protocol, int(r.batch_size), int(r.seq_len), int(r.steps))
                 for r in runs.itertuples()]
        lx, ly = np.log(flops), np.log(runs["wall_seconds"].to_numpy(float))
        keys = list(zip(runs["stage"], runs["arch"], strict=True))
        groups: dict = {}
        for key, x, y in zip(keys, lx, ly, strict=True):
            groups.setdefault(key, []).append((x, y))
        num = den = 0.0
        for pairs in groups.values():
            xs, ys = np.array(pairs).T
            num += float(((xs - xs.mean()) * (ys - ys.mean())).sum())
            den += float(((xs - xs.mean()) ** 2).sum())
        self.slope = num / den if den > 0 else 1.0
        self.level = {key: float(np.mean([y - self.slope * x for x, y in pairs]))
                      for key, pairs in groups.items()}
        by_stage: dict = {}
        for (stage, _), level in self.level.items():
            by_stage.setdefault(stage, []).append(level)
        self.stage_level = {stage: float(np.mean(v)) for stage, v in by_stage.items()}
        self.mean_level = float(np.mean(list(self.level.values())))

    def seconds(self, stage: str, arch: str, flops: float) -> float:
        import math

        level = self.level.get((stage, arch), self.stage_level.get(stage, self.mean_level))
        return math.exp(level + self.slope * math.log(max(flops, 1.0)))


def study_seconds(study: StudyConfig, model: SecondsModel) -> float:
    """The estimated wall-clock seconds of every run of the study's grid, one
    after another (task runs and each pretraining run they need, once)."""
    from .grid import cells, pretrain_cells

    per_seed = study.pretrain.seeds == "per_seed"
    total = 0.0
    for cell in cells(study.grid):
        total += model.seconds(PRIORS[cell.prior].stage, cell.arch, training_flops(study, cell))
    for run in pretrain_cells(study.grid, per_seed):
        total += model.seconds(run.stage, run.arch, pretraining_flops(study, run))
    return total
