"""ALBERT (Lan et al. 2019, "ALBERT: A Lite BERT for Self-supervised Learning of
Language Representations").

Two parameter reductions of BERT: a factorised embedding (token and position
tables of a small size E, then a Linear E -> D) and cross-layer parameter
sharing (one transformer block applied depth times).

Faithful: both reductions, all-shared (attention and MLP) blocks, E =
min(128, D / 2) (the paper uses E = 128 at every size). The E -> D projection is
a Linear, not an nn.Embedding, so it counts as a non-embedding parameter.
The embeddings are LayerNormed before the projection, as in ALBERT (dropped with
norm="none"); without it the projected inputs start tiny (std about 1e-3, two
std-0.02 matrices in a row) and the xxs model failed the generic learning check.
Simplified: no sentence-order-prediction loss (the pretraining task belongs to
the training code, not the backbone); no token-type embedding.

Compute-matched, not parameter-matched (like the Universal Transformer): the
same depth x width x d_ff as vanilla, so the same FLOPs per token (plus the
small E -> D projection), while the non-embedding parameters are one block, the
projection and the norms: about 1/depth of vanilla (0.52x at depth 2,
0.26x at depth 4, 0.17x at depth 6, 0.085x at depth 12, 0.042x at depth 24).

Causal mode: the shared block is a standard transformer block, so it has one.

fixup_weights: the shared block's attention value/output and both MLP weights,
one set of tensors; a prior that rescales by depth should use cfg.depth (the
number of times the block is applied).
"""

from __future__ import annotations

import torch
from torch import nn

from ..ladder import shape_for
from .config import BackboneConfig, BackboneOutput
from .layers import Embedding, closing_norm, make_norm, standard_init
from .transformer import TransformerBlock


class FactorisedEmbedding(nn.Module):
    """Token + position tables of size E, LayerNorm (as in BERT/ALBERT), then a Linear E -> D."""

    def __init__(
        self, vocab_size: int, max_len: int, embed_dim: int, width: int, norm: str,
        dropout: float,
    ):
        super().__init__()
        self.lookup = Embedding(vocab_size, max_len, embed_dim, dropout)
        self.norm = make_norm(norm, embed_dim)
        self.project = nn.Linear(embed_dim, width)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        # Outside autocast: the residual stream starts in the weights' dtype
        # (float32 under mixed precision) as the other backbones' does from
        # their embedding tables, not in the bf16 of an autocast Linear.
        with torch.autocast(tokens.device.type, enabled=False):
            return self.project(self.norm(self.lookup(tokens)))


class Albert(nn.Module):
    """Token ids [B, T] and mask [B, T] -> hidden states [B, T, D]."""

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = FactorisedEmbedding(
            cfg.vocab_size, cfg.max_len, cfg.extra["embed_dim"], cfg.width, cfg.norm,
            cfg.dropout,
        )
        self.block = TransformerBlock(cfg)  # the one block, applied cfg.depth times
        self.final_norm = closing_norm(cfg.norm, cfg.width)
        self.apply(standard_init)

    @staticmethod
    def config_for(size: str, protocol: str = "default", **common) -> BackboneConfig:
        shape = shape_for(size, protocol)
        extra = {"embed_dim": min(128, shape.width // 2), **common.pop("extra", {})}
        return BackboneConfig.from_shape("albert", shape, extra=extra, **common)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> BackboneOutput:
        x = self.embed(tokens)
        for _ in range(self.cfg.depth):
            x = self.block(x, mask)
        return BackboneOutput(self.final_norm(x), mask)
