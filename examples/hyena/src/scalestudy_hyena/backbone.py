"""A Hyena-style backbone (Poli et al. 2023, "Hyena Hierarchy: Towards Larger
Convolutional Language Models"), written against scalestudy.extend alone.

Each block replaces self-attention with a Hyena operator of order 2:

    u = in_proj(x) -> (v, x1, x2), each through a short depthwise convolution
    v <- x1 * (h1 conv v); v <- x2 * (h2 conv v)          (elementwise gates)
    y = out_proj(v)

where h1, h2 are long convolutions as long as the sequence, one filter per
channel, made by an implicit filter: a small MLP (with a sine activation) of
sinusoidal features of the lag, times an exponential decay window with a
decay per channel. The long convolutions run as FFTs (O(T log T)). A
position-wise FFN branch follows, as in the vanilla block; pre-LayerNorm
residuals.

Faithful: order-2 data-controlled gating, short depthwise convolutions on the
projections, implicit long filters (FFN of positional features, sine
activation, exponential window), FFT convolution. Simplified: one FFN of
width `filter_width` for every filter, no bias term in the long convolution,
learned absolute position embeddings at the input. Bidirectional by default:
the filter spans lags -(T-1)..T-1 (the encoder setting scalestudy's tasks
use); causal mode keeps lags 0..T-1, so a position reads only its past.
Padded positions are zeroed before every convolution, so the outputs at real
tokens do not depend on what the padding holds.

Every prior takes it: its token table is `embed.token` (the pretraining
priors tie their LM head to it), it honours `norm: none`, and its two
residual branches state `fixup_weights()` (T-Fixup and DT-Fixup scale them).

Parameters: in_proj 3D^2 and out_proj D^2 against attention's 4D^2, plus
small filters; the FFN is the vanilla one, so the non-embedding count tracks
the vanilla ladder at every size.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from scalestudy.extend import BackboneConfig, BackboneOutput, shape_for


class ImplicitFilter(nn.Module):
    """`order` filters per channel over the lags of a sequence of length T:
    an MLP of sinusoidal lag features, times exp(-decay * |lag| / T)."""

    def __init__(self, width: int, order: int, features: int, filter_width: int):
        super().__init__()
        self.order, self.width, self.features = order, width, features
        self.mlp_in = nn.Linear(2 * features + 1, filter_width)
        self.mlp_out = nn.Linear(filter_width, order * width)
        self.log_decay = nn.Parameter(torch.linspace(math.log(0.5), math.log(8.0), width)
                                      .repeat(order, 1))

    def forward(self, lags: torch.Tensor, length: int) -> torch.Tensor:
        """[order, width, len(lags)] filters at integer `lags`."""
        t = lags.float()[:, None] / length
        freqs = torch.arange(1, self.features + 1, device=lags.device).float()[None, :]
        z = torch.cat([t, torch.sin(math.pi * freqs * t), torch.cos(math.pi * freqs * t)], -1)
        h = self.mlp_out(torch.sin(self.mlp_in(z)))  # [K, order * width]
        h = h.T.reshape(self.order, self.width, -1)
        window = torch.exp(-self.log_decay.exp()[..., None] * t.abs().T[None])
        return h * window


def long_conv(v: torch.Tensor, h: torch.Tensor, causal: bool) -> torch.Tensor:
    """v [B, D, T] convolved with per-channel filters h [D, K] (K = T causal,
    lags 0..T-1; else 2T-1, lags -(T-1)..T-1), as an FFT product."""
    length, taps = v.shape[-1], h.shape[-1]
    n = length + taps
    y = torch.fft.irfft(torch.fft.rfft(v.float(), n=n) * torch.fft.rfft(h.float(), n=n), n=n)
    start = 0 if causal else length - 1
    return y[..., start:start + length].to(v.dtype)


class HyenaOperator(nn.Module):
    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        width, self.order, self.causal = cfg.width, cfg.extra["order"], cfg.causal
        self.in_proj = nn.Linear(width, (self.order + 1) * width)
        channels = (self.order + 1) * width
        self.short = nn.Conv1d(channels, channels, 3, groups=channels, padding=0)
        self.filter = ImplicitFilter(width, self.order, cfg.extra["features"],
                                     cfg.extra["filter_width"])
        self.out_proj = nn.Linear(width, width)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        keep = real[:, None, :].to(x.dtype)
        u = self.in_proj(x).transpose(1, 2) * keep  # [B, (order+1) D, T]
        left = 2 if self.causal else 1
        u = self.short(F.pad(u, (left, 2 - left))) * keep
        v, *gates = u.chunk(self.order + 1, dim=1)
        length = x.shape[1]
        lags = (torch.arange(length, device=x.device) if self.causal
                else torch.arange(-(length - 1), length, device=x.device))
        filters = self.filter(lags, length)
        for gate, h in zip(gates, filters, strict=True):
            v = gate * long_conv(v * keep, h, self.causal)
        return self.drop(self.out_proj(v.transpose(1, 2)))

    def fixup_weights(self) -> tuple[torch.Tensor, ...]:
        """What T-Fixup and DT-Fixup scale (scalestudy.extend): the value
        path's projection (attention's value analogue; the gates are the
        query and key analogues, left alone) and the output projection."""
        return self.in_proj.weight[: self.out_proj.in_features], self.out_proj.weight


class FeedForward(nn.Module):
    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.up, self.down = nn.Linear(cfg.width, cfg.d_ff), nn.Linear(cfg.d_ff, cfg.width)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.down(F.gelu(self.up(x))))

    def fixup_weights(self) -> tuple[torch.Tensor, ...]:
        return self.up.weight, self.down.weight


class Embed(nn.Module):
    """The token table (`token`, which the pretraining priors' LM head ties
    to) and learned positions, under the `embed` name the priors look for."""

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.token = nn.Embedding(cfg.vocab_size, cfg.width)
        self.position = nn.Embedding(cfg.max_len, cfg.width)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        return self.token(tokens) + self.position(positions)


class Block(nn.Module):
    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.norm = cfg.norm
        self.mixer = HyenaOperator(cfg)
        self.ffn = FeedForward(cfg)
        self.norms = nn.ModuleList([nn.LayerNorm(cfg.width) for _ in range(2)]
                                   if cfg.norm != "none" else [nn.Identity(), nn.Identity()])

    def forward(self, x: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        for norm, branch in zip(self.norms, (lambda h: self.mixer(h, real), self.ffn),
                                strict=True):
            if self.norm == "post":
                x = norm(x + branch(x))
            else:
                x = x + branch(norm(x))
        return x


class Hyena(nn.Module):
    """Token and position embeddings, `depth` Hyena blocks, a final norm."""

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = Embed(cfg)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.depth))
        self.final_norm = nn.LayerNorm(cfg.width) if cfg.norm == "pre" else nn.Identity()
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=0.02)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)

    @staticmethod
    def config_for(size: str, protocol: str = "default", **common) -> BackboneConfig:
        extra = {"order": 2, "features": 8, "filter_width": 32}
        return BackboneConfig.from_shape("hyena", shape_for(size, protocol), extra=extra,
                                         **common)

    def forward(self, tokens: torch.Tensor, real: torch.Tensor) -> BackboneOutput:
        x = self.drop(self.embed(tokens))
        for block in self.blocks:
            x = block(x, real)
        return BackboneOutput(self.final_norm(x), real)
