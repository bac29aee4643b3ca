"""MLP-Mixer, lightweight/dynamic convolutions and S4D: the parameter match
with the vanilla ladder (S4 in both modes) and one test per mechanism (the
generic backbone checks run over the whole registry in test_models.py)."""

import functools

import pytest
import torch
import torch.nn.functional as F

from scalestudy.models.convolutions import DynamicConv, LightConv
from scalestudy.models.mixer import Mixer
from scalestudy.models.s4 import DLR, S4, S4RandomA
from scalestudy.models.transformer import Transformer
from scalestudy.study.ladder import SIZES

from model_checks import MAX_LEN, VOCAB, batch, build, nonembed_params


@functools.cache
def vanilla_params(size):
    return nonembed_params(Transformer, size)


@pytest.mark.parametrize(
    "cls, causal", [(Mixer, False), (LightConv, False), (DynamicConv, False), (S4, False),
                    (S4, True), (DLR, False), (DLR, True)],  # the SSMs change in causal mode
    ids=["Mixer", "LightConv", "DynamicConv", "S4", "S4-causal", "DLR", "DLR-causal"],
)
def test_nonembed_params_track_the_vanilla_ladder(cls, causal):
    for size in SIZES:
        ours, vanilla = nonembed_params(cls, size, causal=causal), vanilla_params(size)
        assert abs(ours / vanilla - 1) < 0.25, (size, ours, vanilla)


# --- MLP-Mixer --------------------------------------------------------------


def test_mixer_token_mixing_is_tied_to_max_len():
    for max_len in (MAX_LEN, 24):
        model = build(Mixer, max_len=max_len)
        mixing = model.blocks[0].token_mixing.branch
        assert mixing.up.weight.shape == (model.cfg.extra["d_tokens"], max_len)
        assert mixing.down.weight.shape == (max_len, model.cfg.extra["d_tokens"])
    tokens, mask = batch(length=MAX_LEN + 4)
    with pytest.raises(ValueError, match=f"exceeds max_len {MAX_LEN}"):
        build(Mixer)(tokens, mask)


@pytest.mark.parametrize("causal", [False, True])
def test_mixer_short_inputs_equal_padded_ones(causal):
    model = build(Mixer, causal=causal, token_outputs=True)
    tokens, mask = batch(length=10)
    out = model(tokens, mask)
    assert out.hidden.shape[1] == 10
    padded = model(F.pad(tokens, (0, MAX_LEN - 10)), F.pad(mask, (0, MAX_LEN - 10)))
    torch.testing.assert_close(out.hidden[mask], padded.hidden[:, :10][mask])


# --- Lightweight and dynamic convolutions -----------------------------------


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


# --- S4D ----------------------------------------------------------------------


def recurrence(kernel, d_skip, u, channel=0):
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
    expected = recurrence(layer.kernel, layer.D, u)
    torch.testing.assert_close(layer.ssm(u), expected, atol=1e-4, rtol=0)


def test_s4_bidirectional_sums_a_forward_and_a_reversed_recurrence():
    layer = build(S4).double().blocks[0].ssm.branch
    torch.manual_seed(1)
    u = torch.randn(2, 20, layer.D.shape[0], dtype=torch.float64)
    forward = recurrence(layer.kernel, layer.D, u)
    # The second kernel sees the reversed sequence, strictly after the position.
    backward = recurrence(layer.kernel, torch.zeros_like(layer.D), u.flip(1), channel=1).flip(1)
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


# --- DLR: Amos et al.'s unstructured SSM ------------------------------------------


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
