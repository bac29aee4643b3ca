"""Lightweight and dynamic convolutions (Wu et al. 2019, "Pay Less Attention with
Lightweight and Dynamic Convolutions"), as encoders in the layout of the fairseq
`LightConvEncoderLayer`.

Each block replaces self-attention with a convolution branch

    input projection D -> 2D, GLU  ->  depthwise convolution  ->  output projection D -> D

followed by the usual position-wise FFN branch. The depthwise kernel has width
K and is softmax-normalised over its width; its D channels are split into H heads
of D/H consecutive channels and every channel of a head uses the head's kernel
(weight sharing across channel groups), so a lightweight convolution has only
H * K kernel weights. DropConnect (dropout on the normalised kernel, rate
`extra["weight_dropout"]`) is optional.

- `LightConv` (`lconv`): one learned kernel per head, fixed over positions.
- `DynamicConv` (`dconv`): the kernel of each position is predicted by a linear
  layer D -> H * K from that position's own input (the GLU output), so it
  changes from position to position but depends on nothing else.

Kernel widths grow with depth as in the paper's encoder, 3, 7, 15, 31, 31, ...
(`extra["kernel_sizes"]`). Causal mode exists: the kernel is placed to the left
of each position (the decoder form, token t sees t-K+1 .. t); the encoder form
centres it. Padded positions are zeroed before the convolution.

Faithful: GLU input projection, softmax-normalised head-shared kernels,
DropConnect, per-position kernel prediction for dconv, growing kernel widths.
Simplified: learned absolute position embeddings (fairseq uses sinusoidal ones
by default), a GELU FFN (fairseq uses ReLU), and the dynamic convolution runs as
an unfold + einsum instead of the paper's CUDA kernel (same result, more memory).

Parameter matching: a convolution branch has about 3D^2 weights against the 4D^2
of attention, so `config_for` widens the FFN by the difference (about D/2 for
lconv) and the non-embedding count equals the vanilla one within a fraction of
a percent at every size.

`fixup_weights` of the convolution branch returns the input projection (the
analogue of the attention value) and the output projection; the kernel (and
dconv's kernel predictor, a query-like part) is left alone. The FFN returns both
of its weights, as in the vanilla model.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..ladder import shape_for
from .config import BackboneConfig, BackboneOutput
from .layers import Embedding, FeedForward, Residual, closing_norm, standard_init


def paper_kernel_sizes(depth: int) -> tuple[int, ...]:
    """3, 7, 15, 31, 31, ...: the encoder kernel widths of Wu et al. 2019."""
    return tuple(min(31, 2 ** (i + 2) - 1) for i in range(depth))


def kernel_padding(kernel_size: int, causal: bool) -> tuple[int, int]:
    """(left, right) zero padding that places the kernel: left-only or centred."""
    left = kernel_size - 1 if causal else kernel_size // 2
    return left, kernel_size - 1 - left


class ConvBranch(nn.Module):
    """Input projection with GLU, a head-shared softmax depthwise convolution and
    an output projection; subclasses say where the kernel comes from."""

    def __init__(self, cfg: BackboneConfig, kernel_size: int):
        super().__init__()
        self.heads, self.kernel_size = cfg.heads, kernel_size
        self.padding = kernel_padding(kernel_size, cfg.causal)
        self.weight_dropout = cfg.extra["weight_dropout"]
        self.input = nn.Linear(cfg.width, 2 * cfg.width)
        self.output = nn.Linear(cfg.width, cfg.width)

    def normalise(self, logits: torch.Tensor) -> torch.Tensor:
        """Softmax over the kernel width, then DropConnect."""
        kernel = logits.softmax(dim=-1)
        return F.dropout(kernel, self.weight_dropout, self.training)

    def convolve(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = F.glu(self.input(x), dim=-1)
        # Zero padded positions so they cannot leak into real ones.
        x = x * mask.unsqueeze(-1).to(x.dtype)
        return self.output(self.convolve(x))

    def fixup_weights(self) -> list[torch.Tensor]:
        """The weights the Fixup priors rescale: input and output projections."""
        return [self.input.weight, self.output.weight]


class LightweightConvolution(ConvBranch):
    """One softmax-normalised kernel of width K per head, shared by the D/H
    channels of the head and by every position."""

    def __init__(self, cfg: BackboneConfig, kernel_size: int):
        super().__init__(cfg, kernel_size)
        self.weight = nn.Parameter(torch.empty(cfg.heads, kernel_size))

    def kernel(self) -> torch.Tensor:
        """[H, K] normalised kernel (each row sums to 1 outside training)."""
        return self.normalise(self.weight)

    def convolve(self, x: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1]
        # Head h owns channels h*D/H .. (h+1)*D/H - 1: repeat its kernel for them.
        weight = self.kernel().repeat_interleave(d // self.heads, dim=0).unsqueeze(1)
        y = F.conv1d(F.pad(x.transpose(1, 2), self.padding), weight, groups=d)
        return y.transpose(1, 2)


class DynamicConvolution(ConvBranch):
    """A kernel per position and head, predicted from that position's input."""

    def __init__(self, cfg: BackboneConfig, kernel_size: int):
        super().__init__(cfg, kernel_size)
        self.predict = nn.Linear(cfg.width, cfg.heads * kernel_size, bias=False)

    def kernels(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, D] convolution input -> [B, T, H, K] normalised kernels."""
        b, t, _ = x.shape
        return self.normalise(self.predict(x).view(b, t, self.heads, self.kernel_size))

    def convolve(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        kernels = self.kernels(x)
        # windows[b, t, c, k] = x[b, t - left + k, c]
        windows = F.pad(x, (0, 0, *self.padding)).unfold(1, self.kernel_size, 1)
        windows = windows.reshape(b, t, self.heads, d // self.heads, self.kernel_size)
        return torch.einsum("bthck,bthk->bthc", windows, kernels).reshape(b, t, d)


class ConvBlock(nn.Module):
    def __init__(self, cfg: BackboneConfig, conv: type[ConvBranch], kernel_size: int):
        super().__init__()
        self.conv = Residual(conv(cfg, kernel_size), cfg.width, cfg.norm, cfg.dropout)
        ffn = FeedForward(cfg.width, cfg.d_ff, cfg.dropout)
        self.mlp = Residual(ffn, cfg.width, cfg.norm, cfg.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.conv(x, mask))


def init_weights(module: nn.Module) -> None:
    standard_init(module)
    if isinstance(module, LightweightConvolution):
        # fairseq: Xavier-uniform on the [H, 1, K] kernel.
        nn.init.xavier_uniform_(module.weight.unsqueeze(1))


class ConvolutionEncoder(nn.Module):
    """Token ids [B, T] and mask [B, T] -> hidden states [B, T, D]."""

    arch = ""
    conv: type[ConvBranch] = ConvBranch

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = Embedding(cfg.vocab_size, cfg.max_len, cfg.width, cfg.dropout)
        self.blocks = nn.ModuleList(
            ConvBlock(cfg, self.conv, k) for k in cfg.extra["kernel_sizes"]
        )
        self.final_norm = closing_norm(cfg.norm, cfg.width)
        self.apply(init_weights)

    @classmethod
    def branch_params(cls, width: int, heads: int, kernel_size: int) -> int:
        raise NotImplementedError

    @classmethod
    def _config_for(cls, size: str, protocol: str = "default", **common) -> BackboneConfig:
        shape = shape_for(size, protocol)
        d, kernel_sizes = shape.width, paper_kernel_sizes(shape.depth)
        # Spend the weights attention would have had (4D^2 + 4D) on a wider FFN.
        spare = sum(
            4 * d * d + 4 * d - cls.branch_params(d, shape.heads, k) for k in kernel_sizes
        ) / shape.depth
        d_ff = max(1, shape.d_ff + round(spare / (2 * d + 1)))
        extra = {"kernel_sizes": kernel_sizes, "weight_dropout": common.get("dropout", 0.0)}
        return BackboneConfig.from_shape(cls.arch, shape, d_ff=d_ff, extra=extra, **common)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> BackboneOutput:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, mask)
        return BackboneOutput(self.final_norm(x), mask)


class LightConv(ConvolutionEncoder):
    """Lightweight-convolution encoder (`lconv`); see the module docstring."""

    arch = "lconv"
    conv = LightweightConvolution

    @classmethod
    def branch_params(cls, width: int, heads: int, kernel_size: int) -> int:
        return 3 * width * width + 3 * width + heads * kernel_size

    @staticmethod
    def config_for(size: str, protocol: str = "default", **common) -> BackboneConfig:
        return LightConv._config_for(size, protocol, **common)


class DynamicConv(ConvolutionEncoder):
    """Dynamic-convolution encoder (`dconv`); see the module docstring."""

    arch = "dconv"
    conv = DynamicConvolution

    @classmethod
    def branch_params(cls, width: int, heads: int, kernel_size: int) -> int:
        return 3 * width * width + 3 * width + width * heads * kernel_size

    @staticmethod
    def config_for(size: str, protocol: str = "default", **common) -> BackboneConfig:
        return DynamicConv._config_for(size, protocol, **common)
