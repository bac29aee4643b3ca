"""Performer (Choromanski et al. 2020, "Rethinking Attention with Performers").

Softmax attention is replaced by FAVOR+: with positive random features
phi(x) = exp(w^T x - |x|^2 / 2) / sqrt(m), softmax(q k^T / sqrt(d)) v is
estimated in linear time as phi(q) (phi(k)^T v) / phi(q) (phi(k)^T 1), where q
and k are scaled by d^(-1/4). The m feature rows w are orthogonal in blocks of d
(QR of Gaussian matrices, sign-fixed so the blocks are Haar-distributed) and
rescaled by chi(d)-distributed norms, so each row is marginally Gaussian. They
are a fixed buffer drawn once from cfg.extra["feature_seed"] (+ the layer
index), shared by the heads of a layer.

Faithful: positive orthogonal random features, bidirectional and causal modes
(the causal mode is the paper's prefix sum of phi(k) v^T, evaluated chunk by
chunk: a running sum over earlier chunks plus a masked product inside the chunk,
which is exact and keeps memory at O(T m + m d)), padded keys excluded by zeroing
their features. Default m = d log d features per head, as in the reference code.

Stabilisation (exact rewrite, no data-dependent constant across positions, so
padding and causality stay exact): feature j is multiplied by exp(-|w_j|^2 / 2)
on the key side and exp(+|w_j|^2 / 2) on the query side (cancels in the
product), so key features are exp(-|w_j - k|^2 / 2) <= 1; each query row is
then shifted by its own maximum, which cancels in the normalisation. The
features are computed in float32, their logits' matmul without TF32.

Simplified: features are never redrawn during training (the paper allows
periodic redrawing); no attention dropout (there is no attention matrix).

fixup_weights: value and output projections, as for softmax attention.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..ladder import shape_for
from .config import BackboneConfig, BackboneOutput
from .layers import (
    Embedding,
    FeedForward,
    Residual,
    SelfAttention,
    closing_norm,
    full_float32_matmuls,
    standard_init,
)

CAUSAL_CHUNK = 128  # positions per chunk of the causal prefix sum


def default_features(head_dim: int) -> int:
    return max(head_dim, int(head_dim * math.log(head_dim)))


def orthogonal_features(features: int, dim: int, seed: int) -> torch.Tensor:
    """[features, dim] rows: orthogonal within blocks of `dim`, chi(dim)-distributed norms.

    Drawn on the CPU from a seeded generator, so the same seed gives the same
    features on any device; under a meta default device nothing is drawn.
    """
    if torch.empty(0).device.type == "meta":  # built for counting: nothing to draw
        return torch.empty(features, dim)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    blocks = []
    for _ in range(math.ceil(features / dim)):
        gaussian = torch.randn(dim, dim, generator=generator, device="cpu")
        orthonormal, triangular = torch.linalg.qr(gaussian)
        # Sign-fix so Q is Haar-distributed; raw LAPACK QR is not, and its rows
        # then give a biased kernel estimate that stops improving as m grows.
        orthonormal = orthonormal * torch.diagonal(triangular).sign()
        blocks.append(orthonormal.T)
    rows = torch.cat(blocks)[:features]
    norms = torch.randn(features, dim, generator=generator, device="cpu").norm(dim=1)
    return rows * norms[:, None]


def positive_features(x: torch.Tensor, projection: torch.Tensor, is_query: bool) -> torch.Tensor:
    """phi(x) for x [..., T, d] (already scaled by d^-1/4), stabilised as in the docstring."""
    x, projection = x.float(), projection.float()
    with full_float32_matmuls():  # exp turns a logit's absolute error into a relative one
        logits = x @ projection.T - x.pow(2).sum(-1, keepdim=True) / 2
    half_norms = projection.pow(2).sum(-1) / 2
    if is_query:
        logits = logits + half_norms
        logits = logits - logits.amax(-1, keepdim=True).detach()
    else:
        logits = logits - half_norms
    return logits.exp() / math.sqrt(projection.shape[0])


def linear_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool
) -> torch.Tensor:
    """phi(q) [B,H,T,m], phi(k) [B,H,T,m] (zero at padding), v [B,H,T,d] -> [B,H,T,d]."""
    if not causal:
        numerator = q @ (k.transpose(-1, -2) @ v)
        denominator = q @ k.sum(-2).unsqueeze(-1)
        return numerator / denominator.clamp_min(torch.finfo(q.dtype).tiny)
    state = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])  # sum of phi(k) v^T so far
    key_sum = q.new_zeros(*q.shape[:-2], q.shape[-1], 1)
    outputs = []
    for start in range(0, q.shape[-2], CAUSAL_CHUNK):
        qc, kc, vc = (a[..., start : start + CAUSAL_CHUNK, :] for a in (q, k, v))
        within = (qc @ kc.transpose(-1, -2)).tril()
        numerator = qc @ state + within @ vc
        denominator = qc @ key_sum + within.sum(-1, keepdim=True)
        outputs.append(numerator / denominator.clamp_min(torch.finfo(q.dtype).tiny))
        state = state + kc.transpose(-1, -2) @ vc
        key_sum = key_sum + kc.sum(-2).unsqueeze(-1)
    return torch.cat(outputs, dim=-2)


def favor_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, projection: torch.Tensor,
    mask: torch.Tensor, causal: bool,
) -> torch.Tensor:
    """FAVOR+ estimate of softmax(q k^T / sqrt(d)) v; q, k, v [B, H, T, d], mask [B, T]."""
    scale = q.shape[-1] ** -0.25
    # exp() of logits near -d/2 needs float32: keep autocast from lowering the matmuls.
    with torch.autocast(q.device.type, enabled=False):
        q_features = positive_features(q.float() * scale, projection, is_query=True)
        k_features = positive_features(k.float() * scale, projection, is_query=False)
        k_features = k_features * mask[:, None, :, None]
        return linear_attention(q_features, k_features, v.float(), causal).to(v.dtype)


class PerformerAttention(SelfAttention):
    """Multi-head attention with FAVOR+ in place of the softmax kernel."""

    def __init__(
        self, width: int, heads: int, features: int, seed: int,
        dropout: float = 0.0, causal: bool = False,
    ):
        super().__init__(width, heads, dropout, causal)
        self.register_buffer("projection", orthogonal_features(features, width // heads, seed))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape

        def split(proj: nn.Linear) -> torch.Tensor:
            return proj(x).view(b, t, self.heads, d // self.heads).transpose(1, 2)

        y = favor_attention(
            split(self.query), split(self.key), split(self.value), self.projection, mask,
            self.causal,
        )
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class PerformerBlock(nn.Module):
    def __init__(self, cfg: BackboneConfig, layer: int):
        super().__init__()
        attention = PerformerAttention(
            cfg.width, cfg.heads, cfg.extra["features"], cfg.extra["feature_seed"] + layer,
            cfg.dropout, cfg.causal,
        )
        self.attention = Residual(attention, cfg.width, cfg.norm, cfg.dropout)
        mlp = FeedForward(cfg.width, cfg.d_ff, cfg.dropout)
        self.mlp = Residual(mlp, cfg.width, cfg.norm, cfg.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.attention(x, mask))


class Performer(nn.Module):
    """Token ids [B, T] and mask [B, T] -> hidden states [B, T, D]."""

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = Embedding(cfg.vocab_size, cfg.max_len, cfg.width, cfg.dropout)
        self.blocks = nn.ModuleList(PerformerBlock(cfg, i) for i in range(cfg.depth))
        self.final_norm = closing_norm(cfg.norm, cfg.width)
        self.apply(standard_init)

    @staticmethod
    def config_for(size: str, protocol: str = "default", **common) -> BackboneConfig:
        # Same shape as vanilla: the random features are buffers, not parameters.
        shape = shape_for(size, protocol)
        extra = {"features": default_features(shape.width // shape.heads), "feature_seed": 0}
        extra.update(common.pop("extra", {}))
        return BackboneConfig.from_shape("performer", shape, extra=extra, **common)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> BackboneOutput:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, mask)
        return BackboneOutput(self.final_norm(x), mask)
