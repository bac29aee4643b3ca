"""Task heads, separate from the backbones: a pooled classifier.

For a task whose examples are document pairs (LRA Retrieval), the backbone
encodes both documents (stacked along the batch: first documents, then second
ones) and the head classifies [u, v, u*v, u-v] of their pooled states u and v,
as LRA's dual-encoder head (Tay et al. 2021, lra_benchmarks/models/layers/
common_layers.py, classifier_head_dual).

A backbone that defines `output_layer(width, n_out)` gets that output layer
instead of a linear one: the MoS transformer's mixture of softmaxes
(models/mos.py), which returns log-probabilities that cross-entropy and
argmax take as logits unchanged.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

POOLINGS = ("mean", "max", "first")


def pool(hidden: torch.Tensor, mask: torch.Tensor, how: str) -> torch.Tensor:
    """[B, T, D] states and [B, T] mask -> [B, D], ignoring padded positions."""
    if how == "mean":
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(1) / weights.sum(1).clamp_min(1.0)
    if how == "max":
        return hidden.masked_fill(~mask.unsqueeze(-1), torch.finfo(hidden.dtype).min).amax(1)
    if how == "first":
        return hidden[:, 0]
    raise ValueError(f"pooling: got {how!r}, accepted values: {', '.join(POOLINGS)}")


def output_layer(backbone: nn.Module, width: int, n_out: int) -> nn.Module:
    """The output layer a backbone asks for (its `output_layer`), else linear."""
    make = getattr(backbone, "output_layer", None)
    return make(width, n_out) if make is not None else nn.Linear(width, n_out)


class ClassifierHead(nn.Module):
    """Pool the sequence, then a one-hidden-layer MLP to class scores (as in LRA).

    pair=True: the batch holds the first documents then the second ones, and
    the MLP reads [u, v, u*v, u-v] of each pair's pooled states.
    """

    def __init__(self, backbone: nn.Module, n_classes: int, pooling: str = "mean",
                 pair: bool = False):
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling: got {pooling!r}, accepted values: {', '.join(POOLINGS)}")
        self.pooling, self.pair = pooling, pair
        width = backbone.cfg.width
        self.hidden = nn.Linear(4 * width if pair else width, width)
        self.out = output_layer(backbone, width, n_classes)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        pooled = pool(hidden, mask, self.pooling)
        if self.pair:
            u, v = pooled.chunk(2)
            pooled = torch.cat([u, v, u * v, u - v], dim=-1)
        return self.out(F.gelu(self.hidden(pooled)))
