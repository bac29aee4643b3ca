"""Lightweight and dynamic convolutions (models/convolutions.py): their kernels."""

import pytest
import torch

from scalestudy.models.convolutions import DynamicConv, LightConv

from tests.support.model_checks import build


@pytest.mark.parametrize("causal", [False, True])
def test_lconv_kernel_is_softmax_and_shared_within_a_head(causal):
    model = build(LightConv, causal=causal)
    conv = model.blocks[1].conv.branch
    kernel = conv.kernel()
    heads, width = kernel.shape
    assert (heads, width) == (model.cfg.heads, model.cfg.extra["kernel_sizes"][1])
    torch.testing.assert_close(kernel.sum(-1), torch.ones(heads))
    # Impulse at position p in every channel: each channel's response is its kernel.
    d, t, p = model.cfg.width, 16, 6
    x = torch.zeros(1, t, d)
    x[0, p] = 1.0
    response = conv.convolve(x)[0].T  # [D, T]
    per_head = d // heads
    for c in range(d):
        torch.testing.assert_close(response[c], response[c // per_head * per_head])
    left = width - 1 if causal else width // 2
    # y[p + left - k] = w[k]: the kernel appears reversed around p.
    expected = kernel.flip(-1).repeat_interleave(per_head, dim=0)
    torch.testing.assert_close(response[:, p - (width - 1 - left) : p + left + 1], expected)
    assert not response[:, p + left + 1 :].any() and not response[:, : p - (width - 1 - left)].any()
    if causal:
        assert not response[:, :p].any()  # nothing reaches the past


def test_dconv_kernels_depend_only_on_the_own_position():
    model = build(DynamicConv)
    conv = model.blocks[1].conv.branch
    torch.manual_seed(1)
    x = torch.randn(1, 10, model.cfg.width)
    x[0, 7] = x[0, 2]  # same input at two positions
    kernels = conv.kernels(x)  # [1, T, H, K]
    assert kernels.shape == (1, 10, model.cfg.heads, model.cfg.extra["kernel_sizes"][1])
    torch.testing.assert_close(kernels.sum(-1), torch.ones(kernels.shape[:-1]))
    torch.testing.assert_close(kernels[0, 7], kernels[0, 2])
    assert not torch.allclose(kernels[0, 0], kernels[0, 1])  # differ between positions
    changed = x.clone()
    changed[0, [0, 1, 3, 9]] = torch.randn(4, model.cfg.width)
    torch.testing.assert_close(conv.kernels(changed)[0, 2], kernels[0, 2])
    # The convolution uses them: a window equal to the kernel's own taps.
    y = conv.convolve(x)
    left, k = conv.padding[0], conv.kernel_size
    per_head = model.cfg.width // model.cfg.heads
    window = x[0, 5 - left : 5 - left + k]  # [K, D]
    weights = kernels[0, 5].repeat_interleave(per_head, dim=0).T  # [K, D]
    torch.testing.assert_close(y[0, 5], (window * weights).sum(0))
