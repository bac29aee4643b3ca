"""S4D's zero-order-hold discretisation, computed here from the
raw parameters (log_dt, log_A_real, A_imag, C) with numpy, never from
`S4DKernel.discretised()`:

    dt = exp(log_dt), A = -exp(log_A_real) + i A_imag,
    Abar = exp(dt A), Bbar = (exp(dt A) - 1) / A   (B = 1),
    x_k = Abar x_{k-1} + Bbar u_k,  y_k = 2 Re(C x_k) + D u_k.

Euler (Abar = 1 + dt A, Bbar = dt) or bilinear in its place gives other numbers.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scalestudy.models.s4 import S4

from model_checks import build


def zoh(kernel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Abar, Bbar [D, N/2], C [channels, D, N/2]) from the raw parameters."""
    dt = np.exp(kernel.log_dt.detach().double().numpy())[:, None]
    a = -np.exp(kernel.log_A_real.detach().double().numpy()) + 1j * (
        kernel.A_imag.detach().double().numpy())
    c_pairs = kernel.C.detach().double().numpy()
    c = c_pairs[..., 0] + 1j * c_pairs[..., 1]
    a_bar = np.exp(dt * a)
    return a_bar, (a_bar - 1.0) / a, c


def recurrence(a_bar, b_bar, c, d_skip, u, channel=0) -> np.ndarray:
    """y [B, T, D] of the discrete SSM, step by step."""
    state = np.zeros((u.shape[0], *a_bar.shape), dtype=complex)
    ys = []
    for k in range(u.shape[1]):
        state = a_bar * state + b_bar * u[:, k, :, None]
        ys.append(2 * (c[channel] * state).sum(-1).real + d_skip * u[:, k])
    return np.stack(ys, 1)


@pytest.fixture
def layer():
    """A causal S4D layer whose dt reaches the top of its range (dt_max = 0.1 at
    init spans 1e-3..1e-1), where ZOH and Euler differ most."""
    layer = build(S4, causal=True).double().blocks[0].ssm.branch
    with torch.no_grad():
        layer.kernel.log_dt.copy_(torch.linspace(np.log(1e-3), np.log(0.5), layer.D.shape[0]))
    return layer


def test_discretised_is_the_zero_order_hold_of_the_raw_parameters(layer):
    a_bar, b_bar, c = zoh(layer.kernel)
    dt_a, got_a, got_b, got_c = (t.detach().numpy() for t in layer.kernel.discretised())
    np.testing.assert_allclose(got_a, a_bar, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_b, b_bar, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_c, c, rtol=0, atol=0)
    np.testing.assert_allclose(np.exp(dt_a), a_bar, rtol=1e-10, atol=1e-12)
    # The check can tell: Euler's Bbar = dt is more than 10% off at the largest dt.
    dt = np.exp(layer.kernel.log_dt.detach().numpy())
    assert np.abs(dt[-1] - b_bar[-1]).max() > 0.1 * np.abs(b_bar[-1]).max()


def test_kernel_is_2_re_c_bbar_abar_to_the_l(layer):
    a_bar, b_bar, c = zoh(layer.kernel)
    length = 12
    powers = a_bar[..., None] ** np.arange(length)  # [D, N/2, L]
    expected = 2 * np.einsum("cdn,dnl->cdl", c * b_bar, powers).real
    got = layer.kernel(length).detach().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


def test_the_layers_convolution_is_the_zoh_recurrence(layer):
    a_bar, b_bar, c = zoh(layer.kernel)
    torch.manual_seed(1)
    u = torch.randn(2, 20, layer.D.shape[0], dtype=torch.float64)
    expected = recurrence(a_bar, b_bar, c, layer.D.detach().numpy(), u.numpy())
    np.testing.assert_allclose(layer.ssm(u).detach().numpy(), expected, rtol=0, atol=1e-8)


def test_the_bidirectional_layer_uses_the_same_discretisation():
    layer = build(S4).double().blocks[0].ssm.branch
    a_bar, b_bar, c = zoh(layer.kernel)
    torch.manual_seed(2)
    u = torch.randn(2, 14, layer.D.shape[0], dtype=torch.float64).numpy()
    d_skip = layer.D.detach().numpy()
    forward = recurrence(a_bar, b_bar, c, d_skip, u)
    backward = recurrence(a_bar, b_bar, c, 0 * d_skip, u[:, ::-1], channel=1)[:, ::-1]
    backward = np.concatenate([backward[:, 1:], np.zeros_like(backward[:, :1])], 1)
    got = layer.ssm(torch.from_numpy(u.copy())).detach().numpy()
    np.testing.assert_allclose(got, forward + backward, rtol=0, atol=1e-8)
