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
from ..priors import PRIORS
from ..stages import STAGES
from ..tasks import task_config
from .grid import task_grid
from .ladder import shape_for

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
# (measured as the activations, training/memory.py: S4 and lconv at dropout
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
    per_token = depth * width * (entry.activation_bytes[mixed] + (DROPOUT_BYTES if dropout
                                                                    else 0.0))
    activations = batch * seq_len * per_token * scale
    kernel = depth * width * seq_len * entry.kernel_bytes
    logits = batch * seq_len * vocab * 4 * 3
    scores = (batch * shape.heads * seq_len**2 * 8 * 2 * depth
              if entry.attention and precision == "64-true" else 0)
    return int(weights + activations + kernel + logits + scores + GPU_RESERVE)


def run_flops(size: str, protocol: str, batch: int, seq_len: int, steps: int) -> float:
    """Estimated FLOPs of a training run of the vanilla transformer of `size`:
    6 N B T a step, N its non-embedding parameters L (4 D^2 + 2 D F), times the
    steps."""
    shape = shape_for(size, protocol)
    non_embedding = shape.depth * (4 * shape.width**2 + 2 * shape.width * shape.d_ff)
    return 6.0 * non_embedding * batch * seq_len * steps


@functools.cache
def _seq_len(task: str, section: str) -> int:
    import json

    return task_config(task, json.loads(section)).seq_len


def task_seq_len(config: dict, task: str) -> int:
    import json

    return _seq_len(task, json.dumps(config["tasks"].get(task, {}), sort_keys=True))


def pretraining_flops(config: dict, stage: str, task: str | None, size: str) -> float:
    """Estimated FLOPs of one pretraining run of `stage`."""
    pretrain = config["pretrain"]
    tokens = (task_seq_len(config, task) if STAGES[stage].on_task
              else config["upstream"]["seq_len"])
    return run_flops(size, config["train"]["protocol"], pretrain["batch_size"], tokens,
                     pretrain["max_steps"])


def training_flops(config: dict, task: str, size: str, prior: str) -> float:
    """Estimated FLOPs of one task run, with its pretraining's where its prior
    matches that compute."""
    train = config["train"]
    own = run_flops(size, train["protocol"], train["batch_size"], task_seq_len(config, task),
                    train["max_steps"])
    matched = PRIORS[prior].matched_to
    return own + (pretraining_flops(config, matched, task, size) if matched else 0.0)


# Longest first. Snakemake starts the ready jobs of highest priority, and a
# job's priority is the estimated FLOPs of the longest chain of runs it starts:
# a pretraining run before the runs that wait for it, a compute-matched run
# (its pretraining's FLOPs on top of its own) and the large sizes before the
# small ones. Otherwise a long run started last trains alone while the other
# cores idle. On a log scale, so that priorities stay small numbers in the
# scheduler's integer program.
def as_priority(flops: float) -> int:
    return round(100 * math.log10(max(flops, 1.0)))


def train_priority(config: dict, task: str, size: str, prior: str) -> int:
    return as_priority(training_flops(config, task, size, prior))


def pretrain_priority(config: dict, stage: str, task: str | None, size: str) -> int:
    """The pretraining run's FLOPs plus those of the longest run that waits
    for it (a stage on the upstream corpus serves every task)."""
    grid = config["grid"]
    tasks = [task] if STAGES[stage].on_task else grid["tasks"]
    waiting = [
        training_flops(config, t, size, prior)
        for t in tasks
        for prior in task_grid(grid, t)["priors"]
        if PRIORS[prior].needs == stage
    ]
    own = pretraining_flops(config, stage, task, size)
    return as_priority(own + max(waiting, default=0.0))
