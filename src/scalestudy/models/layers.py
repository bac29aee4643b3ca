"""Building blocks shared by the backbones: embeddings, attention, MLP, residual
wrapper with pre-/post-/no LayerNorm, and the standard initialisation.

Attention and MLP keep their projections as named `nn.Linear`s (query, key,
value, out; up, down) because the Fixup priors rescale exactly those.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn


@contextlib.contextmanager
def full_float32_matmuls() -> Iterator[None]:
    """Within it, float32 matmuls in full float32, whatever
    trainer.matmul_precision allows elsewhere (`high`: TF32, which keeps 10
    bits of each input's mantissa): for what is computed in float32 for its
    precision, Performer's feature logits before exp and S4's complex kernel.
    Set and restored with torch.set_float32_matmul_precision, the setting the
    loop makes (torch refuses a mix of it and the newer fp32_precision flags)."""
    saved = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(saved)


class Embedding(nn.Module):
    """Token embedding plus learned absolute position embedding."""

    def __init__(self, vocab_size: int, max_len: int, width: int, dropout: float = 0.0):
        super().__init__()
        self.token = nn.Embedding(vocab_size, width)
        self.position = nn.Embedding(max_len, width)
        self.drop = nn.Dropout(dropout)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        return self.drop(self.token(tokens) + self.position(positions))


def attention_mask(mask: torch.Tensor, causal: bool,
                   padded: bool = True) -> tuple[torch.Tensor | None, bool]:
    """SDPA's (attn_mask, is_causal) for a [B, T] key-padding mask (True =
    real) of right-padded sequences.

    Causal: `is_causal` and no mask. A real position attends only to positions
    before it, all real in a right-padded row, so the outputs at real
    positions are those of the padding-and-causal mask, and no position
    downstream reads a padded one's (tests/training/test_gpu_path.py); no [B, 1, T, T]
    mask is built (at 16,384 tokens and batch 32, 8 GiB a layer plus SDPA's
    float copy kept for backward) and the fused kernels run.
    Not causal: the key mask as [B, 1, 1, T] (broadcast, never T x T), or none
    where there is no padding: inputs that never pad (`padded` False: images,
    Pathfinder; `fixed_length`), or on a CPU a batch without padding (checked
    there only: on an accelerator `mask.all()` would wait for the device at
    every layer; not under torch.compile, where a data-dependent branch breaks
    the graph). Without a mask CUDA may run flash attention, and a CPU step is
    a few per cent faster (docs/benchmarks.md)."""
    if causal:
        return None, True
    if not padded or (mask.device.type == "cpu" and not torch.compiler.is_compiling()
                      and bool(mask.all())):
        return None, False
    return mask[:, None, None, :], False


def fixed_length(model: nn.Module) -> None:
    """Declare that `model`'s inputs never hold padding (every example of its
    data is seq_len long): its self-attention then passes SDPA no mask."""
    for module in model.modules():
        if isinstance(module, SelfAttention):
            module.padded = False


class SelfAttention(nn.Module):
    """Multi-head scaled dot-product self-attention (Vaswani et al. 2017)."""

    def __init__(self, width: int, heads: int, dropout: float = 0.0, causal: bool = False):
        super().__init__()
        self.heads, self.dropout, self.causal = heads, dropout, causal
        self.padded = True  # whether inputs may hold padding (fixed_length)
        self.query = nn.Linear(width, width)
        self.key = nn.Linear(width, width)
        self.value = nn.Linear(width, width)
        self.out = nn.Linear(width, width)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape

        def split(proj: nn.Linear) -> torch.Tensor:
            return proj(x).view(b, t, self.heads, d // self.heads).transpose(1, 2)

        attn_mask, is_causal = attention_mask(mask, self.causal, self.padded)
        y = F.scaled_dot_product_attention(
            split(self.query),
            split(self.key),
            split(self.value),
            attn_mask=attn_mask,
            is_causal=is_causal,
            dropout_p=self.dropout if self.training else 0.0,
        )
        return self.out(y.transpose(1, 2).reshape(b, t, d))

    def fixup_weights(self) -> list[torch.Tensor]:
        """The weights the Fixup priors rescale: value and output projections."""
        return [self.value.weight, self.out.weight]


class FeedForward(nn.Module):
    """Position-wise two-layer MLP."""

    def __init__(self, width: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.up = nn.Linear(width, d_ff)
        self.down = nn.Linear(d_ff, width)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.drop(F.gelu(self.up(x))))

    def fixup_weights(self) -> list[torch.Tensor]:
        """The weights the Fixup priors rescale: both MLP weights."""
        return [self.up.weight, self.down.weight]


def make_norm(norm: str, width: int) -> nn.Module:
    return nn.LayerNorm(width) if norm != "none" else nn.Identity()


def closing_norm(norm: str, width: int) -> nn.Module:
    """The LayerNorm after the last block: pre-LN leaves the residual stream
    unnormalised, post-LN has just normalised it, and no-LN stacks stay LN-free."""
    return make_norm(norm if norm == "pre" else "none", width)


class Residual(nn.Module):
    """A residual branch with the LayerNorm placement of `norm`.

    pre:  x + f(LN(x))      (Xiong et al. 2020; the default)
    post: LN(x + f(x))      (Vaswani et al. 2017)
    none: x + f(x)          (for the Fixup priors, which replace LayerNorm)
    """

    def __init__(self, branch: nn.Module, width: int, norm: str, dropout: float = 0.0):
        super().__init__()
        self.branch, self.placement = branch, norm
        self.norm = make_norm(norm, width)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, *args) -> torch.Tensor:
        if self.placement == "pre":
            return x + self.drop(self.branch(self.norm(x), *args))
        if self.placement == "post":
            return self.norm(x + self.drop(self.branch(x, *args)))
        return x + self.drop(self.branch(x, *args))


def standard_init(module: nn.Module, std: float = 0.02) -> None:
    """The default initialisation (BERT/GPT-2 style), applied with `model.apply`."""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=std)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=std)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)
