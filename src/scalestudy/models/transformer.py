"""The vanilla Transformer encoder (Vaswani et al. 2017, "Attention Is All You
Need"), in the pre-LN placement of Xiong et al. 2020 by default.

Faithful: multi-head self-attention and a GELU MLP in residual branches, learned
absolute positions, a final LayerNorm for pre-LN. Simplified: no relative
position buckets (T5 uses them; Tay et al. 2022 trained T5-style models).
"""

from __future__ import annotations

import torch
from torch import nn

from ..ladder import shape_for
from .config import BackboneConfig, BackboneOutput
from .layers import Embedding, FeedForward, Residual, SelfAttention, closing_norm, standard_init


class TransformerBlock(nn.Module):
    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        attention = SelfAttention(cfg.width, cfg.heads, cfg.dropout, cfg.causal)
        self.attention = Residual(attention, cfg.width, cfg.norm, cfg.dropout)
        mlp = FeedForward(cfg.width, cfg.d_ff, cfg.dropout)
        self.mlp = Residual(mlp, cfg.width, cfg.norm, cfg.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.attention(x, mask))


class Transformer(nn.Module):
    """Token ids [B, T] and mask [B, T] -> hidden states [B, T, D]."""

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = Embedding(cfg.vocab_size, cfg.max_len, cfg.width, cfg.dropout)
        self.blocks = nn.ModuleList(TransformerBlock(cfg) for _ in range(cfg.depth))
        self.final_norm = closing_norm(cfg.norm, cfg.width)
        self.apply(standard_init)

    @staticmethod
    def config_for(size: str, protocol: str = "default", **common) -> BackboneConfig:
        return BackboneConfig.from_shape("transformer", shape_for(size, protocol), **common)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> BackboneOutput:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, mask)
        return BackboneOutput(self.final_norm(x), mask)
