"""MLP-Mixer (Tolstikhin et al. 2021, "MLP-Mixer: An all-MLP Architecture for
Vision") on token sequences, as in Tay et al. 2022.

Each block has two residual branches: a token-mixing MLP that mixes the
positions of each channel (a two-layer GELU MLP across the time axis, whose
weights have one row/column per position, so their shape is tied to
`cfg.max_len`) and a channel-mixing MLP (the position-wise FFN). Inputs shorter
than max_len are right-padded to it inside the token-mixing branch and the
output is cut back to T; inputs longer than max_len are rejected with a
ValueError. Padded positions (padding of the batch and the internal right
padding) are zeroed before token mixing, so they do not affect real positions.

Causal mode exists: every hidden unit s of the token-mixing MLP is assigned a
position p(s) = floor(s * max_len / d_tokens); the first weight is masked so
that unit s reads positions <= p(s) and the second so that output position t
reads only units with p(s) <= t. The product of the two lower-triangular-style
masks lets token t see only positions <= t (with d_tokens == max_len both
weights are plain lower-triangular matrices). With d_tokens < max_len the causal
mixing is coarse: output t reads only the units placed at or before t.

Faithful: token-mixing and channel-mixing MLPs with GELU, pre-LN residual
branches and a final LayerNorm, the paper's token-MLP width of D/2. No position
embedding, as in the paper (the token-mixing weights are position-specific).
Simplified/changed: the causal masking above is our own (Mixer has none); the
channel-mixing width is not the paper's 4D but whatever makes the
non-embedding parameter count match the vanilla transformer (below).

Parameter matching: the token-mixing MLP has 2 * max_len * d_tokens weights
in place of attention's 4D^2, so `config_for` uses d_tokens = min(D/2,
2D^2/max_len) (at least 1; never above attention's budget when it can be) and
gives the rest of the layer's budget to the channel-mixing width `d_ff`. The
count then matches the vanilla one within 1% at every ladder size as long as
the token MLP fits in a layer's budget (4D^2 + 2D*d_ff); it does not at the
tiniest width with very long inputs (xxs at max_len 4096: 3.8x). Note that at
long inputs and small widths d_tokens gets small (xxs: 1 from max_len 512 on).

`fixup_weights`: both token-mixing weights and both channel-mixing weights.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..ladder import shape_for
from .config import BackboneConfig, BackboneOutput
from .layers import FeedForward, Residual, closing_norm, standard_init


def causal_masks(max_len: int, hidden: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Masks for the [hidden, L] and [L, hidden] token-mixing weights such that
    output position t depends only on input positions <= t."""
    unit_position = torch.arange(hidden) * max_len // hidden
    positions = torch.arange(max_len)
    reads = positions[None, :] <= unit_position[:, None]  # unit s reads t' <= p(s)
    writes = unit_position[None, :] <= positions[:, None]  # output t reads p(s) <= t
    return reads.float(), writes.float()


class TokenMixing(nn.Module):
    """Two-layer GELU MLP across the (fixed-length) position axis."""

    def __init__(self, max_len: int, hidden: int, dropout: float = 0.0, causal: bool = False):
        super().__init__()
        self.max_len = max_len
        self.up = nn.Linear(max_len, hidden)
        self.down = nn.Linear(hidden, max_len)
        self.drop = nn.Dropout(dropout)
        self.causal = causal
        if causal:
            reads, writes = causal_masks(max_len, hidden)
            self.register_buffer("up_mask", reads, persistent=False)
            self.register_buffer("down_mask", writes, persistent=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        if t > self.max_len:
            raise ValueError(f"mixer: input length {t} exceeds max_len {self.max_len}")
        # Zero padded positions, then right-pad with zeros to the fixed length.
        x = x * mask.unsqueeze(-1).to(x.dtype)
        x = F.pad(x, (0, 0, 0, self.max_len - t)).transpose(1, 2)  # [B, D, L]
        up, down = self.up.weight, self.down.weight
        if self.causal:
            up, down = up * self.up_mask, down * self.down_mask
        h = self.drop(F.gelu(F.linear(x, up, self.up.bias)))
        y = F.linear(h, down, self.down.bias)
        return y.transpose(1, 2)[:, :t]

    def fixup_weights(self) -> list[torch.Tensor]:
        """The weights the Fixup priors rescale: both token-mixing weights."""
        return [self.up.weight, self.down.weight]


class MixerBlock(nn.Module):
    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        tokens = TokenMixing(cfg.max_len, cfg.extra["d_tokens"], cfg.dropout, cfg.causal)
        self.token_mixing = Residual(tokens, cfg.width, cfg.norm, cfg.dropout)
        channels = FeedForward(cfg.width, cfg.d_ff, cfg.dropout)
        self.channel_mixing = Residual(channels, cfg.width, cfg.norm, cfg.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.channel_mixing(self.token_mixing(x, mask))


class Mixer(nn.Module):
    """Token ids [B, T <= max_len] and mask [B, T] -> hidden states [B, T, D]."""

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.width)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(MixerBlock(cfg) for _ in range(cfg.depth))
        self.final_norm = closing_norm(cfg.norm, cfg.width)
        self.apply(standard_init)

    @staticmethod
    def config_for(size: str, protocol: str = "default", **common) -> BackboneConfig:
        shape = shape_for(size, protocol)
        d, max_len = shape.width, common["max_len"]
        # Token MLP: the paper's D/2, but never more weights than attention's 4D^2.
        d_tokens = max(1, min(d // 2, 2 * d * d // max_len))
        attention = 4 * d * d + 4 * d
        token_mixing = 2 * max_len * d_tokens + d_tokens + max_len
        d_ff = max(1, shape.d_ff + round((attention - token_mixing) / (2 * d + 1)))
        return BackboneConfig.from_shape(
            "mixer", shape, d_ff=d_ff, extra={"d_tokens": d_tokens}, **common
        )

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> BackboneOutput:
        if tokens.shape[1] > self.cfg.max_len:
            raise ValueError(
                f"mixer: input length {tokens.shape[1]} exceeds max_len {self.cfg.max_len}"
            )
        x = self.drop(self.embed(tokens))
        for block in self.blocks:
            x = block(x, mask)
        return BackboneOutput(self.final_norm(x), mask)
