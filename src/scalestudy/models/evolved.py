"""The Evolved Transformer encoder (So et al. 2019, "The Evolved Transformer",
Figure 3), as in its reference implementation (tensor2tensor
`evolved_transformer_encoder`).

One block is four residual sub-blocks, in order:
  1. gated linear unit: values(x) * sigmoid(gates(x));
  2. branched convolutions: left 1x1 conv (wide, ReLU) + right 3x1 conv (width/2,
     ReLU, zero-padded to wide), summed; LayerNorm; separable 9x1 conv (depthwise
     9-tap, then pointwise to width/2), zero-padded back to width;
  3. multi-head self-attention;
  4. feed-forward (ReLU in the encoder; see below).

Faithful: the cell structure, kernel sizes and channel ratios; padded positions
are zeroed before each convolution (as the reference does); the "wide" 4 x width
of the reference is d_ff here (the same at every size but xl); the block count is
half the vanilla depth (at least 1), the paper's and tensor2tensor's rule (an ET
block is about two Transformer blocks deep), which keeps non-embedding
parameters at ~0.9x vanilla. The encoder feed-forward is ReLU in the paper and
the reference code (Swish is in the *decoder*); `extra["ffn_activation"]` =
"swish" gives the Swish variant. The LayerNorm inside the convolution branch is
the reference's pre-processing step, so it exists only with norm="pre" (post and
none leave it out, as tensor2tensor does). Simplified: learned absolute positions
(the vanilla embedding). Causal mode: convolutions are padded on the left only.

Fixup mapping: GLU branch -> its value projection (not the sigmoid gate);
convolution branch -> its input projections (left 1x1 and right 3x1) and its
output projection (the pointwise conv), not the depthwise kernel, which mixes
positions like attention weights do; attention -> value and output projections;
feed-forward -> both weights.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..ladder import shape_for
from .config import BackboneConfig, BackboneOutput
from .layers import Embedding, Residual, SelfAttention, closing_norm, make_norm, standard_init

ACTIVATIONS = {"relu": F.relu, "swish": F.silu}


def sequence_conv(conv: nn.Conv1d, x: torch.Tensor, causal: bool) -> torch.Tensor:
    """Apply `conv` along time to [B, T, C], keeping length T ("SAME" padding, or
    left-only padding when causal so position t sees only t-k+1 .. t)."""
    k = conv.kernel_size[0]
    left = k - 1 if causal else (k - 1) // 2
    return conv(F.pad(x.transpose(1, 2), (left, k - 1 - left))).transpose(1, 2)


class GatedLinearUnit(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.values = nn.Linear(width, width)
        self.gates = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.values(x) * torch.sigmoid(self.gates(x))

    def fixup_weights(self) -> list[torch.Tensor]:
        """The value projection (the gate only selects)."""
        return [self.values.weight]


class SeparableConv(nn.Module):
    """Depthwise conv (one k-tap filter per channel), then a pointwise 1x1 conv."""

    def __init__(self, channels: int, out_channels: int, kernel_size: int, causal: bool):
        super().__init__()
        self.causal = causal
        self.depthwise = nn.Conv1d(channels, channels, kernel_size, groups=channels, bias=False)
        self.pointwise = nn.Conv1d(channels, out_channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sequence_conv(self.pointwise, sequence_conv(self.depthwise, x, self.causal), False)


class ConvBranches(nn.Module):
    """relu(1x1 conv, wide) + relu(3x1 conv, width/2); norm; separable 9x1 conv."""

    def __init__(self, width: int, wide: int, norm: str, causal: bool, dropout: float = 0.0):
        super().__init__()
        self.width, self.wide, self.causal = width, wide, causal
        narrow = width // 2
        self.left = nn.Linear(width, wide)  # a 1x1 convolution
        self.right = nn.Conv1d(width, narrow, 3)
        self.norm = make_norm(norm if norm == "pre" else "none", wide)
        self.separable = SeparableConv(wide, narrow, 9, causal)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        # Zero padded positions so the convolutions cannot read them.
        keep = mask.unsqueeze(-1).to(x.dtype)
        x = x * keep
        left = self.drop(F.relu(self.left(x)))
        right = self.drop(F.relu(sequence_conv(self.right, x, self.causal)))
        h = self.norm(left + F.pad(right, (0, self.wide - right.shape[-1]))) * keep
        h = self.separable(h)
        return F.pad(h, (0, self.width - h.shape[-1]))

    def fixup_weights(self) -> list[torch.Tensor]:
        """Input projections (left 1x1, right 3x1) and output projection (pointwise)."""
        return [self.left.weight, self.right.weight, self.separable.pointwise.weight]


class EvolvedFeedForward(nn.Module):
    def __init__(self, width: int, d_ff: int, activation: str, dropout: float = 0.0):
        super().__init__()
        if activation not in ACTIVATIONS:
            accepted = ", ".join(ACTIVATIONS)
            raise ValueError(f"ffn_activation: got {activation!r}, accepted values: {accepted}")
        self.activation = ACTIVATIONS[activation]
        self.up = nn.Linear(width, d_ff)
        self.down = nn.Linear(d_ff, width)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.drop(self.activation(self.up(x))))

    def fixup_weights(self) -> list[torch.Tensor]:
        return [self.up.weight, self.down.weight]


class EvolvedBlock(nn.Module):
    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        d, norm, p = cfg.width, cfg.norm, cfg.dropout
        convs = ConvBranches(d, cfg.d_ff, norm, cfg.causal, p)
        attention = SelfAttention(d, cfg.heads, p, cfg.causal)
        mlp = EvolvedFeedForward(d, cfg.d_ff, cfg.extra["ffn_activation"], p)
        self.glu = Residual(GatedLinearUnit(d), d, norm, p)
        self.convs = Residual(convs, d, norm, p)
        self.attention = Residual(attention, d, norm, p)
        self.mlp = Residual(mlp, d, norm, p)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.attention(self.convs(self.glu(x), mask), mask))


def init_weights(module: nn.Module) -> None:
    """Standard init for projections (1x1 and 3x1 convs included); the depthwise
    9-tap kernels keep PyTorch's fan-in default, since at std 0.02 a 9-tap filter
    would scale its channel by ~0.06 and mute the branch."""
    if isinstance(module, nn.Conv1d) and module.groups == 1:
        nn.init.normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    else:
        standard_init(module)


class EvolvedTransformer(nn.Module):
    """Token ids [B, T] and mask [B, T] -> hidden states [B, T, D]."""

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = Embedding(cfg.vocab_size, cfg.max_len, cfg.width, cfg.dropout)
        self.blocks = nn.ModuleList(EvolvedBlock(cfg) for _ in range(cfg.depth))
        self.final_norm = closing_norm(cfg.norm, cfg.width)
        self.apply(init_weights)

    @staticmethod
    def config_for(size: str, protocol: str = "default", **common) -> BackboneConfig:
        shape = shape_for(size, protocol)
        extra = {"ffn_activation": "relu", **common.pop("extra", {})}
        return BackboneConfig.from_shape(
            "evolved", shape, depth=max(1, shape.depth // 2), extra=extra, **common
        )

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> BackboneOutput:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, mask)
        return BackboneOutput(self.final_norm(x), mask)
