"""Transformer with a GLU-variant feed-forward (Shazeer 2020, "GLU Variants
Improve Transformer"), the GLU-Transformer of Tay et al. 2022.

Faithful: the MLP is FFN_GEGLU(x) = (GELU(x W) * x V) W2 with no biases, as in
the paper (and T5.1.1, which Tay et al. build on); SwiGLU (Swish gate) is
`extra["activation"] = "silu"`. The hidden width is cut to 2/3 of the vanilla
d_ff (rounded to a multiple of 8) so the three matrices hold as many parameters
as the vanilla two, as the paper does. Everything else is the vanilla pre-LN
encoder of transformer.py. A causal mode exists (the MLP is position-wise).

Fixup mapping: attention value and output projections; in the MLP the value
input projection V (`up`) and the output projection W2 (`down`). The gate W
(`gate`) is left alone: it plays the query-like role of choosing, not carrying,
the signal.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..ladder import shape_for
from .config import BackboneConfig, BackboneOutput
from .layers import Embedding, Residual, SelfAttention, closing_norm, standard_init

ACTIVATIONS = {"gelu": F.gelu, "silu": F.silu}


def glu_hidden_width(d_ff: int) -> int:
    """2/3 of the vanilla MLP width, rounded to a multiple of 8 (at least 8)."""
    return max(8, 8 * round(2 * d_ff / 3 / 8))


class GatedFeedForward(nn.Module):
    """down(act(gate(x)) * up(x)), bias-free (Shazeer 2020, eq. 6)."""

    def __init__(self, width: int, d_ff: int, activation: str = "gelu", dropout: float = 0.0):
        super().__init__()
        if activation not in ACTIVATIONS:
            accepted = ", ".join(ACTIVATIONS)
            raise ValueError(f"activation: got {activation!r}, accepted values: {accepted}")
        self.activation = ACTIVATIONS[activation]
        self.gate = nn.Linear(width, d_ff, bias=False)
        self.up = nn.Linear(width, d_ff, bias=False)
        self.down = nn.Linear(d_ff, width, bias=False)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.drop(self.activation(self.gate(x)) * self.up(x)))

    def fixup_weights(self) -> list[torch.Tensor]:
        """The value path: input projection V and output projection W2 (not the gate)."""
        return [self.up.weight, self.down.weight]


class GLUBlock(nn.Module):
    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        attention = SelfAttention(cfg.width, cfg.heads, cfg.dropout, cfg.causal)
        mlp = GatedFeedForward(cfg.width, cfg.d_ff, cfg.extra["activation"], cfg.dropout)
        self.attention = Residual(attention, cfg.width, cfg.norm, cfg.dropout)
        self.mlp = Residual(mlp, cfg.width, cfg.norm, cfg.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.attention(x, mask))


class GLUTransformer(nn.Module):
    """Token ids [B, T] and mask [B, T] -> hidden states [B, T, D]."""

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = Embedding(cfg.vocab_size, cfg.max_len, cfg.width, cfg.dropout)
        self.blocks = nn.ModuleList(GLUBlock(cfg) for _ in range(cfg.depth))
        self.final_norm = closing_norm(cfg.norm, cfg.width)
        self.apply(standard_init)

    @staticmethod
    def config_for(size: str, protocol: str = "default", **common) -> BackboneConfig:
        shape = shape_for(size, protocol)
        extra = {"activation": "gelu", **common.pop("extra", {})}
        return BackboneConfig.from_shape(
            "glu", shape, d_ff=glu_hidden_width(shape.d_ff), extra=extra, **common
        )

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> BackboneOutput:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, mask)
        return BackboneOutput(self.final_norm(x), mask)
