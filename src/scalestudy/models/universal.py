"""Universal Transformer (Dehghani et al. 2018, "Universal Transformers"), the
encoder without adaptive computation time.

Faithful: ONE Transformer block (attention + MLP, the vanilla block) is applied
cfg.depth times, and before each application a sinusoidal timestep embedding
is added: signal[t, 2j] = sin(t / 10000^(2j/D)), signal[t, 2j+1] =
cos(t / 10000^(2j/D)) for t = 1 .. depth, the timestep half of the paper's
coordinate embedding. Simplified: no ACT (every position takes exactly depth
steps, the fixed-depth UT of the paper); the position half of the coordinate
embedding is the learned absolute position embedding, added once at the input
rather than at every step. Causal mode exists (the block is the vanilla one).
The signal is scaled by SIGNAL_SCALE, the per-element scale of the standard
embedding init: at unit amplitude it swamped the token embeddings (std 0.02)
and the model stayed near chance on ListOps; Tensor2Tensor's UT keeps the two
commensurate the other way, multiplying the embeddings by sqrt(D).

Compute-matched, not parameter-matched: same depth, width, heads and d_ff as the
vanilla size, so the same FLOPs per token but about 1/depth of its non-embedding
parameters: exactly (vanilla - final norm) / depth + final norm. For the Fixup
priors the number of residual layers N is cfg.depth (the shared block is
applied depth times).

Fixup mapping: the shared block's attention value and output projections and
its two MLP weights (held once).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..ladder import shape_for
from .config import BackboneConfig, BackboneOutput
from .layers import Embedding, closing_norm, standard_init
from .transformer import TransformerBlock

SIGNAL_SCALE = 0.02  # the standard init's embedding std (layers.standard_init)


def timestep_signal(step: int, width: int, device=None, dtype=None) -> torch.Tensor:
    """Sinusoidal embedding [width] of the recurrence step (interleaved sin/cos),
    unit amplitude."""
    j = torch.arange(0, width, 2, device=device, dtype=torch.float32)
    angle = step * torch.exp(-math.log(10000.0) * j / width)
    signal = torch.stack([angle.sin(), angle.cos()], dim=-1).flatten()[:width]
    return signal.to(dtype)


class UniversalTransformer(nn.Module):
    """Token ids [B, T] and mask [B, T] -> hidden states [B, T, D]."""

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = Embedding(cfg.vocab_size, cfg.max_len, cfg.width, cfg.dropout)
        self.block = TransformerBlock(cfg)  # shared across all depth steps
        self.final_norm = closing_norm(cfg.norm, cfg.width)
        self.apply(standard_init)

    @staticmethod
    def config_for(size: str, protocol: str = "default", **common) -> BackboneConfig:
        return BackboneConfig.from_shape("universal", shape_for(size, protocol), **common)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> BackboneOutput:
        x = self.embed(tokens)
        for step in range(1, self.cfg.depth + 1):
            signal = SIGNAL_SCALE * timestep_signal(step, x.shape[-1], x.device, x.dtype)
            x = self.block(x + signal, mask)
        return BackboneOutput(self.final_norm(x), mask)
