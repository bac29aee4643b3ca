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

from scalestudy.models.s4 import DLR, S4, S4RandomA

from tests.support.model_checks import MAX_LEN, VOCAB, build


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


def kernel_recurrence(kernel, d_skip, u, channel=0):
    """Run x_k = Abar x_{k-1} + Bbar u_k, y_k = 2 Re(C x_k) + D u_k step by step."""
    _, a_bar, b_bar, c = kernel.discretised()
    state = torch.zeros(u.shape[0], *a_bar.shape, dtype=a_bar.dtype)
    ys = []
    for k in range(u.shape[1]):
        state = a_bar * state + b_bar * u[:, k, :, None]
        ys.append(2 * (c[channel] * state).sum(-1).real + d_skip * u[:, k])
    return torch.stack(ys, 1)


def test_s4_fft_convolution_equals_the_recurrence():
    layer = build(S4, causal=True).double().blocks[0].ssm.branch
    torch.manual_seed(1)
    u = torch.randn(2, 20, layer.D.shape[0], dtype=torch.float64)
    expected = kernel_recurrence(layer.kernel, layer.D, u)
    torch.testing.assert_close(layer.ssm(u), expected, atol=1e-4, rtol=0)


def test_s4_bidirectional_sums_a_forward_and_a_reversed_recurrence():
    layer = build(S4).double().blocks[0].ssm.branch
    torch.manual_seed(1)
    u = torch.randn(2, 20, layer.D.shape[0], dtype=torch.float64)
    forward = kernel_recurrence(layer.kernel, layer.D, u)
    # The second kernel sees the reversed sequence, strictly after the position.
    backward = kernel_recurrence(layer.kernel, torch.zeros_like(layer.D), u.flip(1),
                                 channel=1).flip(1)
    backward = torch.cat([backward[:, 1:], torch.zeros_like(backward[:, :1])], 1)
    torch.testing.assert_close(layer.ssm(u), forward + backward, atol=1e-4, rtol=0)


def hinted(model) -> dict:
    """The parameters with optimiser hints (`optim_hints` of their module), by name."""
    return {f"{prefix}.{name}" if prefix else name: getattr(module, name)
            for prefix, module in model.named_modules()
            for name in getattr(module, "optim_hints", dict)()}


def test_s4_init_and_ssm_parameters():
    model = build(S4)
    kernel = model.blocks[0].ssm.branch.kernel
    n = kernel.A_imag.shape[1]
    assert n == model.cfg.extra["d_state"] // 2
    torch.testing.assert_close(-kernel.log_A_real.exp(), torch.full_like(kernel.log_A_real, -0.5))
    torch.testing.assert_close(kernel.A_imag[0], torch.pi * torch.arange(n, dtype=torch.float32))
    dt = kernel.log_dt.exp()
    assert (dt >= model.cfg.extra["dt_min"]).all() and (dt <= model.cfg.extra["dt_max"]).all()
    special = hinted(model)
    assert len(special) == 3 * model.cfg.depth
    kernel_hint = kernel.optim_hints()["log_dt"]
    assert kernel_hint == {"weight_decay": 0.0, "lr": model.cfg.extra["ssm_lr"]}
    named = dict(model.named_parameters())
    assert all(named[name] is p for name, p in special.items())
    assert {name.rsplit(".", 1)[-1] for name in special} == {"log_dt", "log_A_real", "A_imag"}


def test_s4_vocab_and_lengths_beyond_the_test_size():
    model = build(S4, token_outputs=True)
    tokens = torch.randint(0, VOCAB, (2, 3 * MAX_LEN))  # no length limit
    assert model(tokens, torch.ones_like(tokens, dtype=torch.bool)).hidden.shape[1] == 3 * MAX_LEN


def test_s4_random_a_draws_a_at_random_and_is_otherwise_s4():
    torch.manual_seed(0)
    model = build(S4RandomA)
    kernel = model.blocks[0].ssm.branch.kernel
    assert model.cfg.arch == "s4_random_a" and model.cfg.extra["a_init"] == "random"
    assert (-kernel.log_A_real.exp() < 0).all()  # stable
    n = kernel.A_imag.shape[1]
    assert not torch.allclose(kernel.A_imag[0], torch.pi * torch.arange(n, dtype=torch.float32))
    assert kernel.log_A_real.std() > 0.5  # no shared real part
    s4 = build(S4)
    shapes = {k: v.shape for k, v in s4.state_dict().items()}
    assert {k: v.shape for k, v in model.state_dict().items()} == shapes
    assert len(hinted(model)) == len(hinted(s4))


def test_dlr_kernel_is_the_diagonal_linear_rnn_of_its_raw_parameters():
    """K[c, h, l] = Re sum_m W[c, h, m] lambda_m^l, lambda_m = exp(-r_m^2 + i theta_m),
    written out with numpy's complex powers (not the kernel's exp of l x log)."""
    import numpy as np

    torch.manual_seed(0)
    kernel = build(DLR).double().blocks[0].ssm.branch.kernel
    r, theta = kernel.Lambda_re.detach().numpy(), kernel.Lambda_im.detach().numpy()
    w = kernel.W.detach().numpy()
    w = w[..., 0] + 1j * w[..., 1]  # [channels, D, M]
    lam = np.exp(-r**2 + 1j * theta)
    length = 9
    expected = np.real(np.einsum("chm,ml->chl", w, lam[:, None] ** np.arange(length)))
    np.testing.assert_allclose(kernel(length).detach().numpy(), expected, rtol=1e-9, atol=1e-12)


def test_causal_dlr_layer_is_the_recurrence():
    """x_l = lambda x_{l-1} + u_l, y_l = Re(W x_l) + D u_l on every channel: the
    FFT convolution of the causal layer equals it step by step."""
    torch.manual_seed(1)
    layer = build(DLR, causal=True).double().blocks[0].ssm.branch
    k = layer.kernel
    lam = torch.exp(-k.Lambda_re**2 + 1j * k.Lambda_im).detach()  # [M]
    w = torch.view_as_complex(k.W[0].detach())  # [D, M]
    u = torch.randn(2, 11, layer.D.numel(), dtype=torch.float64)
    x = torch.zeros(2, *w.shape, dtype=torch.complex128)
    ys = []
    for step in range(u.shape[1]):
        x = lam * x + u[:, step, :, None]
        ys.append((w * x).sum(-1).real + layer.D.detach() * u[:, step])
    torch.testing.assert_close(layer.ssm(u), torch.stack(ys, 1))


def test_dlr_init_and_optimiser_hints_follow_amos_et_al_dlr_config():
    """Their DLRKernel's 'omega' init: Re Lambda = -dt / 2 with dt log-uniform in
    [1e-4, 1e-1], theta_m = 2 pi m / M, W ~ N(0, 1) / M; eigenvalues shared by the
    channels; no weight decay on Lambda or W (dlr.yaml: wd 0)."""
    torch.manual_seed(2)
    model = build(DLR)
    kernel = model.blocks[0].ssm.branch.kernel
    modes = model.cfg.extra["d_state"] // 2
    assert kernel.Lambda_re.shape == kernel.Lambda_im.shape == (modes,)
    assert kernel.W.shape == (2, model.cfg.width, modes, 2)  # bidirectional: two kernels
    real = -kernel.Lambda_re.detach() ** 2
    assert ((real <= -0.5e-4) & (real >= -0.5e-1)).all()
    torch.testing.assert_close(kernel.Lambda_im.detach(),
                               2 * torch.pi * torch.arange(modes, dtype=torch.float32) / modes)
    assert abs(float(kernel.W.std()) * modes - 1) < 0.2
    hints = kernel.optim_hints()
    assert hints["Lambda_re"] == hints["Lambda_im"] == {"weight_decay": 0.0, "lr": 1e-3}
    assert hints["W"] == {"weight_decay": 0.0}
    assert model.cfg.extra["dt_min"] == 1e-4 and model.cfg.extra["kernel"] == "diagonal_rnn"
