"""Parameter and FLOP counting, from the built model.

FLOPs are counted by torch.utils.flop_counter (the matmul, convolution and
attention kernels an actual step dispatches), not estimated from a formula.
Elementwise operations are not counted, as in the usual 6ND accounting.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode


def count_params(model: nn.Module) -> tuple[int, int]:
    """(all trainable parameters, those outside embedding tables).

    Shared parameters (ALBERT, Universal) count once, as `parameters()` yields
    each tensor once.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    embedding = {
        id(p) for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters()
    }
    total = sum(p.numel() for p in params)
    nonembed = sum(p.numel() for p in params if id(p) not in embedding)
    return total, nonembed


def count_flops(step: Callable[[], torch.Tensor]) -> int:
    """FLOPs of one call of `step` (which runs forward and backward)."""
    with FlopCounterMode(display=False) as counter:
        step()
    return int(counter.get_total_flops())
