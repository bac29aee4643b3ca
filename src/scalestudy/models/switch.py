"""Switch Transformer (Fedus et al. 2021, "Switch Transformers: Scaling to Trillion
Parameter Models with Simple and Efficient Sparsity").

Each block's feed-forward is a mixture of experts with top-1 ("switch") routing:
a linear router (computed in float32) picks one expert per token, the chosen
expert's output is multiplied by the router probability, and each expert takes
at most capacity = ceil(capacity_factor * tokens / experts) tokens; overflow
tokens get no FFN output, so they pass through the residual unchanged. The
load-balancing loss alpha * E * sum_i f_i P_i (f_i: fraction of tokens sent to
expert i, P_i: mean router probability of expert i) is summed over layers and
returned as `BackboneOutput.aux_loss`. Padding positions are neither routed nor
counted in `tokens`, f or P.

Faithful: top-1 routing, capacity with dropped tokens, probability-scaled expert
output, the balancing loss (alpha = 0.01), and the sizing, FLOP-matched as in
the paper and in Tay et al. 2022's comparison: every expert has the ladder's
full d_ff, so a routed token goes through one FFN of vanilla's size (FLOPs per
token about vanilla's, plus the D x experts router) while the FFN parameters
are experts x vanilla's. Switch's non-embedding count is therefore well above
the ladder's (tests/models/test_backbones.py makes it the documented exception; records
keep n_params and n_params_nonembed, so figures can place it on either axis).
Simplified / chosen here:
- Experts run on their kept tokens only (dynamic shapes), not on padded
  capacity-sized buffers as on TPUs: with capacity factor 1.25 the expert
  compute is at most one FFN per real token (less when tokens overflow), not
  1.25 FFNs.
- Capacity is filled position-major (every sequence's position 0, then position
  1, ...), not in flattened batch order, so a token only competes with tokens at
  earlier positions: this keeps the causal mode exact. Capacity is shared by the
  whole batch, as in the paper, so sequences of one batch interact through it.
- No router jitter noise, no expert dropout distinct from cfg.dropout.

fixup_weights: the attention branch gives value and output projections; the
expert branch gives every expert's two MLP weights (not the router).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..ladder import shape_for
from .config import BackboneConfig, BackboneOutput
from .layers import Embedding, FeedForward, Residual, SelfAttention, closing_norm, standard_init

DEFAULTS = {"experts": 4, "capacity_factor": 1.25, "balance_alpha": 0.01}


def load_balancing_loss(
    probs: torch.Tensor, chosen: torch.Tensor, real: torch.Tensor, alpha: float
) -> torch.Tensor:
    """alpha * E * sum_i f_i P_i over real tokens; equals alpha at uniform routing.

    probs: [N, E] router probabilities; chosen: [N] expert index; real: [N] bool.
    """
    experts = probs.shape[-1]
    weights = real.to(probs.dtype)
    count = weights.sum().clamp_min(1.0)
    fraction = (F.one_hot(chosen, experts) * weights[:, None]).sum(0) / count
    mean_prob = (probs * weights[:, None]).sum(0) / count
    return alpha * experts * (fraction * mean_prob).sum()


class SwitchFeedForward(nn.Module):
    """Top-1 routed mixture of FeedForward experts with a capacity limit.

    Call with x [B, T, D] and mask [B, T]; returns [B, T, D] and leaves the
    layer's balancing loss in `self.aux_loss` (Residual passes a tensor only).
    """

    def __init__(
        self, width: int, d_ff: int, experts: int, capacity_factor: float,
        alpha: float, dropout: float = 0.0,
    ):
        super().__init__()
        self.capacity_factor, self.alpha = capacity_factor, alpha
        self.router = nn.Linear(width, experts, bias=False)
        self.experts = nn.ModuleList(FeedForward(width, d_ff, dropout) for _ in range(experts))
        self.aux_loss: torch.Tensor | float = 0.0
        self.last_kept = None  # [N, E] dispatch of the last call, for inspection

    def capacity(self, real: torch.Tensor) -> torch.Tensor:
        tokens = real.sum().to(torch.float32)
        return torch.ceil(self.capacity_factor * tokens / len(self.experts))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        # Position-major order: a token's place in an expert's queue depends only
        # on tokens at earlier positions (see the module docstring).
        flat = x.transpose(0, 1).reshape(t * b, d)
        real = mask.transpose(0, 1).reshape(t * b)
        with torch.autocast(x.device.type, enabled=False):  # router in float32, as in the paper
            probs = F.linear(flat.float(), self.router.weight.float()).softmax(-1)
        gate, chosen = probs.max(-1)
        # Padding is not routed, so it takes no place in any queue.
        dispatch = F.one_hot(chosen, len(self.experts)) * real[:, None]
        queue_place = dispatch.cumsum(0) * dispatch  # 1-based; 0 = not sent here
        kept = (queue_place > 0) & (queue_place <= self.capacity(real))
        self.last_kept = kept.detach()

        # Each expert's rows, in row order: the kept tokens sorted by expert
        # (stable; the rest, E, last), cut at the experts' counts, read in one
        # device sync per layer (a nonzero() per expert would be one each).
        experts = len(self.experts)
        routed = torch.where(kept.any(1), chosen, experts)
        counts = kept.sum(0).tolist()
        groups = torch.argsort(routed, stable=True).split([*counts, len(routed) - sum(counts)])
        out = torch.zeros_like(flat)
        for expert, rows in zip(self.experts, groups[:experts], strict=True):
            scaled = expert(flat[rows]) * gate[rows, None].to(flat.dtype)
            out = out.index_add(0, rows, scaled)
        self.aux_loss = load_balancing_loss(probs, chosen, real, self.alpha)
        return out.view(t, b, d).transpose(0, 1)

    def fixup_weights(self) -> list[torch.Tensor]:
        """Every expert's two MLP weights (the router is query-like: not rescaled)."""
        return [w for expert in self.experts for w in expert.fixup_weights()]


class SwitchBlock(nn.Module):
    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        attention = SelfAttention(cfg.width, cfg.heads, cfg.dropout, cfg.causal)
        self.attention = Residual(attention, cfg.width, cfg.norm, cfg.dropout)
        moe = SwitchFeedForward(
            cfg.width, cfg.d_ff, cfg.extra["experts"], cfg.extra["capacity_factor"],
            cfg.extra["balance_alpha"], cfg.dropout,
        )
        self.mlp = Residual(moe, cfg.width, cfg.norm, cfg.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.attention(x, mask), mask)


class SwitchTransformer(nn.Module):
    """Token ids [B, T] and mask [B, T] -> hidden states [B, T, D] + balancing loss.

    cfg.d_ff is the hidden size of one expert.
    """

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = Embedding(cfg.vocab_size, cfg.max_len, cfg.width, cfg.dropout)
        self.blocks = nn.ModuleList(SwitchBlock(cfg) for _ in range(cfg.depth))
        self.final_norm = closing_norm(cfg.norm, cfg.width)
        self.apply(standard_init)

    @staticmethod
    def config_for(size: str, protocol: str = "default", **common) -> BackboneConfig:
        shape = shape_for(size, protocol)
        extra = {**DEFAULTS, **common.pop("extra", {})}
        # FLOP-matched (Fedus et al. 2021): every expert has the ladder's full d_ff,
        # so the FFN parameters grow experts-fold and a token's compute stays vanilla's.
        return BackboneConfig.from_shape("switch", shape, extra=extra, **common)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> BackboneOutput:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, mask)
        aux_loss = sum(block.mlp.branch.aux_loss for block in self.blocks)
        return BackboneOutput(self.final_norm(x), mask, aux_loss)
