"""Parameter and FLOP counting, from the built model.

FLOPs are counted by torch.utils.flop_counter (the matmul, convolution and
attention kernels an actual step dispatches), not estimated from a whole-model
formula. Elementwise operations are not counted, as in the usual 6ND
accounting. Three corrections to torch's per-kernel formulas:

- attention: torch registers only the CUDA kernels of
  `scaled_dot_product_attention`. On a CPU it dispatches to
  `_scaled_dot_product_flash_attention_for_cpu` (and its backward), which torch
  does not count, so QK^T and AV counted as zero. Here every fused backend (CPU
  flash, flash, memory-efficient, cuDNN, and the overrideable one of other
  devices) costs 4 B H T_q T_k d forward (QK^T and AV) and twice that backward:
  model FLOPs, the same on every backend and the same as the unfused math path
  (whose matmuls torch counts), not the kernel's recomputation of the scores
  (torch's own backward formula counts it, 2.5x forward). Masked scores count:
  padding and the causal half of the T x T matrix count as a dense kernel's
  (a causal attention passes `is_causal`, which the flash kernels use to skip
  the masked blocks: the count is the model's, the same on every backend, not
  the kernel's work).

- convolution backward: torch 2.13 ignores `groups` in the weight-gradient
  term, overcounting a depthwise convolution's backward by the channel count
  (a 256-channel depthwise conv: 4.9 GFLOP counted instead of 38 MFLOP). Here
  each of the input and weight gradients costs what the forward did.
- FFTs (S4's convolution) are not counted by torch at all. Here a complex
  transform of length N costs 5 N log2 N and a real one half that (the usual
  radix-2 count).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, conv_flop_count

aten = torch.ops.aten


def count_params(model: nn.Module) -> tuple[int, int]:
    """(all trainable parameters, those outside embedding tables).

    Shared parameters (ALBERT, Universal) count once, as `parameters()` yields
    each tensor once.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    embedding = {
        id(p) for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters()
    }
    total = sum(p.numel() for p in params)
    nonembed = sum(p.numel() for p in params if id(p) not in embedding)
    return total, nonembed


def conv_backward_flop(grad_out_shape, x_shape, w_shape, _bias, _stride, _padding, _dilation,
                       transposed, _output_padding, _groups, output_mask, out_shape=None,
                       **kwargs) -> int:
    """Each requested gradient (input, weight) costs one forward convolution."""
    forward = conv_flop_count(list(x_shape), list(w_shape), list(grad_out_shape), transposed)
    return forward * (int(output_mask[0]) + int(output_mask[1]))


def _fft_flop(shape, dims, length_of_last=None, real=False) -> int:
    lengths = [shape[d] for d in dims]
    if length_of_last is not None:
        lengths[-1] = length_of_last
    n = math.prod(lengths)
    batch = math.prod(shape) // math.prod(shape[d] for d in dims)
    per_transform = 5 * n * math.log2(max(n, 2))
    return int(batch * per_transform / (2 if real else 1))


def fft_r2c_flop(x_shape, dim, normalization, onesided, out_shape=None, **kwargs) -> int:
    return _fft_flop(x_shape, dim, real=True)


def fft_c2r_flop(x_shape, dim, normalization, last_dim_size, out_shape=None, **kwargs) -> int:
    return _fft_flop(x_shape, dim, length_of_last=last_dim_size, real=True)


def fft_c2c_flop(x_shape, dim, normalization, forward, out_shape=None, **kwargs) -> int:
    return _fft_flop(x_shape, dim)


def _attention_shapes(query_shape, key_shape, value_shape) -> int:
    """4 B H T_q T_k d: the QK^T and AV matmuls of one attention call."""
    b, h, t_q, d_qk = query_shape
    t_k, d_v = key_shape[-2], value_shape[-1]
    return 2 * b * h * t_q * t_k * (d_qk + d_v)


def attention_flop(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return _attention_shapes(query_shape, key_shape, value_shape)


def attention_backward_flop(grad_out_shape, query_shape, key_shape, value_shape, *args,
                            out_shape=None, **kwargs) -> int:
    """The gradients of QK^T and AV with respect to both operands: twice the forward."""
    return 2 * _attention_shapes(query_shape, key_shape, value_shape)


ATTENTION_KERNELS = ("_scaled_dot_product_flash_attention_for_cpu",
                     "_scaled_dot_product_flash_attention",
                     "_scaled_dot_product_efficient_attention",
                     "_scaled_dot_product_cudnn_attention",
                     "_scaled_dot_product_fused_attention_overrideable")


def _attention_corrections() -> dict:
    """Forward and backward of every fused SDPA kernel this torch build has."""
    corrections = {}
    for name in ATTENTION_KERNELS:
        for op, formula in ((name, attention_flop), (f"{name}_backward", attention_backward_flop)):
            if hasattr(aten, op):
                corrections[getattr(aten, op)] = formula
    return corrections


CORRECTIONS = {
    **_attention_corrections(),
    aten.convolution_backward: conv_backward_flop,
    aten._fft_r2c: fft_r2c_flop,
    aten._fft_c2r: fft_c2r_flop,
    aten._fft_c2c: fft_c2c_flop,
}


def count_flops(step: Callable[[], object]) -> int:
    """FLOPs of one call of `step` (e.g. one forward and backward)."""
    with FlopCounterMode(display=False, custom_mapping=CORRECTIONS) as counter:
        step()
    return int(counter.get_total_flops())


def flops_per_step(module: nn.Module, batch: tuple) -> int:
    """Counted forward+backward FLOPs of one training step of a StudyModule on
    `batch`. The step draws random numbers (dropout, pretraining's masks): the
    module's random streams are put back as they were, so that counting
    changes nothing a run then does."""

    def step():
        loss, aux_loss = module.training_loss(batch)
        (loss + aux_loss).backward()

    streams = module.rng_state()
    flops = count_flops(step)
    module.zero_grad(set_to_none=True)
    module.set_rng_state(streams)
    return flops
