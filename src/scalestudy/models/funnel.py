"""Funnel Transformer (Dai et al. 2020, "Funnel-Transformer: Filtering out
Sequential Redundancy for Efficient Language Processing").

The encoder is a sequence of block groups; between groups the sequence is mean
pooled with stride 2 (T, T/2, T/4, ...), and, as in the paper ("pool-query-only"),
the first block of each new group lets the pooled sequence attend over the
unpooled keys and values of the previous group. Without token outputs the
backbone returns the shortened sequence and its pooled mask. With
cfg.token_outputs the last group's output is upsampled to T by repetition, the
first group's output is added (the paper's residual from full resolution), and a
short decoder of full-length blocks follows.

Faithful: strided mean pooling, pool-query-only attention, repeat-upsampling plus
the first group's output, a decoder of full transformer blocks.
Simplified: absolute learned positions instead of the paper's relative
attention; no separate unpooled [CLS] token; an odd length is padded with one
masked position before pooling. A pooled position is real when either of its two
inputs is real, and the mean is taken over the real ones (padding is zeroed, so
padded ids never reach real positions).

No causal mode: pooling merges positions t and t+1, so a pooled state (and every
upsampled position of it) sees the future; the paper defines none.

Parameter matching: the encoder keeps the vanilla depth (split into
min(3, depth) groups) and width; the decoder has 1 block (2 from depth 12, as
in the paper). Every block's d_ff is reduced so that the encoder alone (the
classifier model) and encoder + decoder (the token-output model) bracket the
vanilla count geometrically: 0.82x / 1.23x at depth 2, 0.90x / 1.12x at depth
4, 0.93x / 1.08x at depths 6 and 12, 0.96x / 1.04x at depth 24. The shapes do
not depend on cfg.token_outputs (the decoder is only added), so pretrained
encoder weights load into a classifier.

fixup_weights: value and output projections of attention (pooled-query ones
included) and both MLP weights of every block, encoder and decoder.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..ladder import shape_for
from .config import BackboneConfig, BackboneOutput
from .layers import Embedding, FeedForward, Residual, SelfAttention, closing_norm, standard_init
from .transformer import TransformerBlock


def mean_pool(x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Stride-2 mean over real positions: [B, T, D], [B, T] -> [B, ceil(T/2), D], mask."""
    if x.shape[1] % 2:
        x, mask = F.pad(x, (0, 0, 0, 1)), F.pad(mask, (0, 1))
    b, t, d = x.shape
    weights = mask.to(x.dtype).view(b, t // 2, 2, 1)
    total = (x.view(b, t // 2, 2, d) * weights).sum(2)
    count = weights.sum(2)
    return total / count.clamp_min(1.0), count.squeeze(-1) > 0


def upsample(x: torch.Tensor, factor: int, length: int) -> torch.Tensor:
    """Repeat each position `factor` times and cut to `length`."""
    return x.repeat_interleave(factor, dim=1)[:, :length]


class PoolQueryAttention(SelfAttention):
    """Attention whose queries come from the pooled sequence, keys/values from the full one."""

    def forward(
        self, query_x: torch.Tensor, kv_x: torch.Tensor, kv_mask: torch.Tensor
    ) -> torch.Tensor:
        b, t_q, d = query_x.shape
        t_kv = kv_x.shape[1]

        def split(proj: nn.Linear, x: torch.Tensor, t: int) -> torch.Tensor:
            return proj(x).view(b, t, self.heads, d // self.heads).transpose(1, 2)

        y = F.scaled_dot_product_attention(
            split(self.query, query_x, t_q),
            split(self.key, kv_x, t_kv),
            split(self.value, kv_x, t_kv),
            attn_mask=kv_mask[:, None, None, :],
            dropout_p=self.dropout if self.training else 0.0,
        )
        return self.out(y.transpose(1, 2).reshape(b, t_q, d))


class PoolingBlock(nn.Module):
    """First block of a new group: pool, pooled queries over unpooled keys, MLP."""

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        attention = PoolQueryAttention(cfg.width, cfg.heads, cfg.dropout)
        self.attention = Residual(attention, cfg.width, cfg.norm, cfg.dropout)
        mlp = FeedForward(cfg.width, cfg.d_ff, cfg.dropout)
        self.mlp = Residual(mlp, cfg.width, cfg.norm, cfg.dropout)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        pooled, pooled_mask = mean_pool(x.masked_fill(~mask.unsqueeze(-1), 0.0), mask)
        # Residual normalises only the query input; pre-LN keys/values get the same LN.
        kv = self.attention.norm(x) if self.attention.placement == "pre" else x
        return self.mlp(self.attention(pooled, kv, mask)), pooled_mask


def group_sizes(depth: int) -> list[int]:
    groups = min(3, depth)
    base, extra = divmod(depth, groups)
    return [base + (i < extra) for i in range(groups)]


def decoder_depth(depth: int) -> int:
    return 2 if depth >= 12 else 1


class Funnel(nn.Module):
    """Token ids [B, T] and mask [B, T] -> hidden [B, T', D] with T' = ceil(T / 2^(groups-1)),
    or T' = T with cfg.token_outputs."""

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = Embedding(cfg.vocab_size, cfg.max_len, cfg.width, cfg.dropout)
        self.groups = nn.ModuleList()
        for g, size in enumerate(cfg.extra["groups"]):
            first = PoolingBlock(cfg) if g > 0 else TransformerBlock(cfg)
            rest = [TransformerBlock(cfg) for _ in range(size - 1)]
            self.groups.append(nn.ModuleList([first, *rest]))
        self.decoder = nn.ModuleList(
            TransformerBlock(cfg) for _ in range(cfg.extra["decoder_depth"] * cfg.token_outputs)
        )
        self.final_norm = closing_norm(cfg.norm, cfg.width)
        self.apply(standard_init)

    @staticmethod
    def config_for(size: str, protocol: str = "default", **common) -> BackboneConfig:
        shape = shape_for(size, protocol)
        extra = {"groups": group_sizes(shape.depth), "decoder_depth": decoder_depth(shape.depth)}
        extra.update(common.pop("extra", {}))
        # A block holds about 4 D^2 + 2 D d_ff parameters; scale each block by s so
        # that the encoder (depth blocks) and encoder + decoder bracket vanilla.
        depth, width = shape.depth, shape.width
        s = math.sqrt(depth / (depth + extra["decoder_depth"]))
        d_ff = round(s * shape.d_ff - 2 * width * (1 - s))
        return BackboneConfig.from_shape(
            "funnel", shape, depth=sum(extra["groups"]), d_ff=max(1, d_ff), extra=extra, **common
        )

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> BackboneOutput:
        length = tokens.shape[1]
        x, full_mask = self.embed(tokens), mask
        first_group = None
        for g, blocks in enumerate(self.groups):
            for i, block in enumerate(blocks):
                if g > 0 and i == 0:
                    x, mask = block(x, mask)
                else:
                    x = block(x, mask)
            if g == 0:
                first_group = x
        if self.cfg.token_outputs:
            factor = 2 ** (len(self.groups) - 1)
            x, mask = upsample(x, factor, length) + first_group, full_mask
            for block in self.decoder:
                x = block(x, mask)
        return BackboneOutput(self.final_norm(x), mask)
