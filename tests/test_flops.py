"""FLOP counting: torch's flop counter, with its grouped-convolution backward
and FFTs corrected."""

import torch
from torch.utils.flop_counter import FlopCounterMode

from scalestudy.flops import count_flops


def torch_count(step) -> int:
    with FlopCounterMode(display=False) as counter:
        step()
    return counter.get_total_flops()


def test_linear_forward_and_backward_is_six_flops_per_weight_per_row():
    layer = torch.nn.Linear(64, 32, bias=False)
    x = torch.randn(10, 64, requires_grad=True)
    assert count_flops(lambda: layer(x).sum().backward()) == 3 * 2 * 10 * 64 * 32


def test_dense_convolution_agrees_with_torch():
    conv = torch.nn.Conv1d(16, 8, 3, padding=1)
    x = torch.randn(4, 16, 20, requires_grad=True)

    def step():
        conv(x).sum().backward()

    assert count_flops(step) == torch_count(step) == 3 * 2 * 4 * 20 * 8 * 16 * 3


def test_depthwise_convolution_backward_costs_twice_its_forward():
    conv = torch.nn.Conv1d(64, 64, 9, groups=64, padding=4, bias=False)
    x = torch.randn(2, 64, 32, requires_grad=True)
    forward = 2 * 2 * 32 * 64 * 9
    assert count_flops(lambda: conv(x).sum().backward()) == 3 * forward
    assert torch_count(lambda: conv(x).sum().backward()) > 30 * forward  # torch's overcount


def test_ffts_are_counted():
    x = torch.randn(3, 5, 64)
    flops = count_flops(lambda: torch.fft.irfft(torch.fft.rfft(x, n=128), n=128))
    assert flops == 2 * 15 * 2.5 * 128 * 7  # two real transforms of length 128
    assert torch_count(lambda: torch.fft.irfft(torch.fft.rfft(x, n=128), n=128)) == 0
