"""S4D, the diagonal structured state-space model (Gu et al. 2022, "On the
Parameterization and Initialization of Diagonal State Space Models"), in the
spirit of the minimal S4D layer of the state-spaces/s4 repository
(models/s4/s4d.py).

Each of the D channels is an independent linear state-space model with N/2
complex modes (N = `extra["d_state"]`, default min(64, D)); the other N/2 are
their complex conjugates, which the factor 2 in the kernel accounts for:

    A_n = -exp(log_A_real_n) + i A_imag_n     S4D-Lin init: A_n = -1/2 + i pi n
    dt  = exp(log_dt),  log_dt ~ U[log dt_min, log dt_max]  (1e-3, 1e-1)
    zero-order hold:  Abar_n = exp(dt A_n),  Bbar_n = (exp(dt A_n) - 1) / A_n  (B = 1)
    K_l = 2 Re( sum_n C_n Bbar_n Abar_n^l ),  l = 0 .. T-1

and y = K * u + D u, computed as an FFT convolution of length 2T (no circular
wrap-around). It equals the recurrence x_k = Abar x_{k-1} + Bbar u_k,
y_k = 2 Re(C x_k) + D u_k (see tests). The layer then applies GELU, dropout
and the output projection D -> 2D with GLU, as in the minimal S4D.

Encoders are bidirectional as in the repository's `bidirectional=True`: two
kernels (two C's, shared A and dt), the second run over the reversed sequence;
the two outputs are *summed* (the second placed on strictly later positions,
so together with D u every position is seen once). Causal mode uses only the
forward kernel. Padded positions are zeroed before the convolution.

Each block is an S4D residual branch followed by the vanilla position-wise FFN
branch, norm per cfg.norm. The repository's example model stacks S4D layers
without an FFN; we keep the FFN so the vanilla depth and width are kept and
`config_for` matches the non-embedding parameter count by adjusting the FFN
width (an S4D layer has about 2D^2 + 3DN weights against attention's 4D^2).
Within 1% at every ladder size.

Faithful: S4D-Lin init, ZOH discretisation, the kernel formula, complex C ~
N(0, 1), real D ~ N(0, 1), GELU + GLU output, bidirectional kernels.
Simplified: no position embedding is needed or used; plain (not tied) dropout;
LayerNorm per cfg.norm (the repository often uses post-norm or BatchNorm).

Optimiser: the S4 papers train A and dt with lr 1e-3 and no weight decay
(`extra["ssm_lr"]`). The kernel says so for its own parameters
(`S4DKernel.optim_hints`, after the `_optim` attributes of state-spaces/s4's
s4d.py, kept on the module so that a copied model keeps them), and the
training module gives them their own AdamW group.

`fixup_weights` of the S4D branch returns its output projection (there is no
input projection); the FFN returns both of its weights.

Two ablations of the structured parameterisation share the layer (the
kernel is `extra["kernel"]`):

- `dlr` (`DLR`): the unstructured SSM of Amos et al. 2023's ablation ("Never
  Train from Scratch", whose structured parameterisations "become mostly
  redundant" under self-pretraining): the diagonal linear RNN (DLR) of Gupta,
  Mehta & Berant 2022, "Simplifying and Understanding State Space Models with
  Diagonal Linear RNNs", as Amos et al.'s repository builds it
  (IdoAmos/not-from-scratch, src/models/sequence/ss/dss.py `DLRKernel`,
  configs/model/layer/dlr.yaml). No continuous-time system, no
  discretisation, no B: M complex eigenvalues lambda_m = exp(Lambda_m), shared
  by every channel, and a complex weight W[c, h, m] per channel, so that
  K[c, h, l] = Re( sum_m W[c, h, m] lambda_m^l ). Lambda_m = -r_m^2 + i theta_m
  (r stored, so Re Lambda <= 0 by construction, as theirs). Their default init
  ("omega"): r_m^2 = dt_m / 2 with dt_m log-uniform in [1e-4, 1e-1], theta_m =
  2 pi m / M (the M-th roots of unity), W ~ N(0, 1) / M in each of its real and
  imaginary parts; D ~ N(0, 1). Here M = d_state / 2, S4D's complex modes per
  channel, so W has the weights of S4D's C. Faithful: the kernel, the
  parameterisation, the init, the bidirectional pair of kernels, GELU + GLU.
  Simplified: W trains at the run's learning rate and r, theta at `ssm_lr`
  with no weight decay, as S4's C and A, dt do here (their configs give
  Lambda and W 1e-4 under a global 1e-2, weight decay 0 on both); no pykeops.
  Checked against the repository's code as stored (its DLRKernel), not run.
- `s4_random_a` (`S4RandomA`): S4D with A drawn at random instead of
  S4D-Lin's values: per channel and mode, Re A = -1/2 exp(g), Im A = h,
  g, h ~ N(0, 1). It keeps S4D's continuous-time form, its zero-order hold, B
  and the dt range, so the decay structure stays: a milder ablation than
  Amos et al.'s. `extra["a_init"]` ("lin" | "random") carries the choice.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..ladder import shape_for
from .config import BackboneConfig, BackboneOutput
from .layers import FeedForward, Residual, closing_norm, full_float32_matmuls, standard_init

SSM_PARAMETER_NAMES = ("log_dt", "log_A_real", "A_imag")
A_INITS = ("lin", "random")  # S4D-Lin (structured) or random A (s4_random_a)
KERNELS = ("s4d", "diagonal_rnn")  # extra["kernel"]: S4D, or the DLR of `dlr`


class S4DKernel(nn.Module):
    """The convolution kernels [channels, D, L] of D diagonal SSMs."""

    def __init__(self, width: int, d_state: int, channels: int, dt_min: float, dt_max: float,
                 a_init: str = "lin", lr: float | None = None):
        super().__init__()
        if d_state % 2:
            raise ValueError(f"d_state: got {d_state}, must be even (conjugate pairs)")
        if a_init not in A_INITS:
            raise ValueError(f"a_init: got {a_init!r}, accepted values: {', '.join(A_INITS)}")
        self.dt_min, self.dt_max, self.a_init, self.lr = dt_min, dt_max, a_init, lr
        modes = d_state // 2
        self.log_dt = nn.Parameter(torch.empty(width))
        self.log_A_real = nn.Parameter(torch.empty(width, modes))
        self.A_imag = nn.Parameter(torch.empty(width, modes))
        # Complex C stored as (real, imag) pairs so optimisers and state dicts stay real.
        self.C = nn.Parameter(torch.empty(channels, width, modes, 2))

    def optim_hints(self) -> dict[str, dict]:
        """AdamW settings of A and dt (by parameter name): the S4 papers' own
        learning rate (at most the run's) and no weight decay."""
        hint = {"weight_decay": 0.0} | ({} if self.lr is None else {"lr": self.lr})
        return dict.fromkeys(SSM_PARAMETER_NAMES, hint)

    @torch.no_grad()
    def reset_parameters(self) -> None:
        low, high = math.log(self.dt_min), math.log(self.dt_max)
        self.log_dt.uniform_(low, high)
        if self.a_init == "random":  # no structure: Re A = -exp(g)/2, Im A = h, g, h ~ N(0, 1)
            self.log_A_real.normal_().add_(math.log(0.5))
            self.A_imag.normal_()
        else:
            self.log_A_real.fill_(math.log(0.5))  # Re A = -1/2
            n = torch.arange(self.A_imag.shape[1], dtype=self.A_imag.dtype,
                             device=self.A_imag.device)
            self.A_imag.copy_(math.pi * n.expand_as(self.A_imag))  # Im A = pi n
        self.C.normal_(0.0, math.sqrt(0.5))  # complex standard normal

    def discretised(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(dt A [D, N/2], Abar [D, N/2], Bbar [D, N/2], C [channels, D, N/2]), complex.

        Computed in at least float32: complex exponentials and FFTs have no
        half-precision kernels, and the kernel needs the precision anyway
        (its matmul without TF32: `forward`).
        """
        real = torch.promote_types(self.log_dt.dtype, torch.float32)
        dt = self.log_dt.to(real).exp().unsqueeze(-1)
        a = -self.log_A_real.to(real).exp() + 1j * self.A_imag.to(real)
        dt_a = a * dt
        c = torch.view_as_complex(self.C.to(real))
        return dt_a, dt_a.exp(), (dt_a.exp() - 1.0) / a, c

    def forward(self, length: int) -> torch.Tensor:
        dt_a, _, b_bar, c = self.discretised()
        steps = torch.arange(length, device=dt_a.device, dtype=dt_a.real.dtype)
        powers = (dt_a.unsqueeze(-1) * steps).exp()  # Abar^l: [D, N/2, L]
        with full_float32_matmuls():  # a complex64 matmul, which TF32 would reach too
            return 2 * torch.einsum("cdn,dnl->cdl", c * b_bar, powers).real


class DLRKernel(nn.Module):
    """The kernels [channels, D, L] of a diagonal linear RNN (module docstring):
    `modes` eigenvalues shared by the D channels, a complex weight per channel."""

    def __init__(self, width: int, modes: int, channels: int, dt_min: float, dt_max: float,
                 lr: float | None = None):
        super().__init__()
        self.dt_min, self.dt_max, self.lr = dt_min, dt_max, lr
        self.Lambda_re = nn.Parameter(torch.empty(modes))  # r: Re Lambda = -r^2
        self.Lambda_im = nn.Parameter(torch.empty(modes))
        self.W = nn.Parameter(torch.empty(channels, width, modes, 2))

    def optim_hints(self) -> dict[str, dict]:
        """The eigenvalues at S4's SSM learning rate, no weight decay; W without
        weight decay (Amos et al.'s dlr.yaml: wd 0)."""
        hint = {"weight_decay": 0.0} | ({} if self.lr is None else {"lr": self.lr})
        return {"Lambda_re": hint, "Lambda_im": hint, "W": {"weight_decay": 0.0}}

    @torch.no_grad()
    def reset_parameters(self) -> None:
        modes = self.Lambda_re.numel()
        low, high = math.log(self.dt_min), math.log(self.dt_max)
        dt = torch.empty_like(self.Lambda_re).uniform_(low, high).exp()
        self.Lambda_re.copy_((0.5 * dt).sqrt())
        m = torch.arange(modes, dtype=self.Lambda_im.dtype, device=self.Lambda_im.device)
        self.Lambda_im.copy_(2 * math.pi * m / modes)
        self.W.normal_().div_(modes)

    def forward(self, length: int) -> torch.Tensor:
        real = torch.promote_types(self.W.dtype, torch.float32)
        lam = -self.Lambda_re.to(real) ** 2 + 1j * self.Lambda_im.to(real)  # [M]
        steps = torch.arange(length, device=lam.device, dtype=real)
        powers = (lam.unsqueeze(-1) * steps).exp()  # lambda^l: [M, L]
        w = torch.view_as_complex(self.W.to(real))  # [channels, D, M]
        with full_float32_matmuls():
            return torch.einsum("chm,ml->chl", w, powers).real


class S4DLayer(nn.Module):
    """SSM convolution (+ D skip), GELU, dropout, output projection with GLU."""

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.bidirectional = not cfg.causal
        channels, extra = 2 if self.bidirectional else 1, cfg.extra
        if extra.get("kernel", "s4d") == "diagonal_rnn":
            self.kernel = DLRKernel(cfg.width, extra["d_state"] // 2, channels, extra["dt_min"],
                                    extra["dt_max"], extra["ssm_lr"])
        else:
            self.kernel = S4DKernel(cfg.width, extra["d_state"], channels, extra["dt_min"],
                                    extra["dt_max"], extra.get("a_init", "lin"), extra["ssm_lr"])
        self.D = nn.Parameter(torch.empty(cfg.width))
        self.drop = nn.Dropout(cfg.dropout)
        self.output = nn.Linear(cfg.width, 2 * cfg.width)

    def ssm(self, u: torch.Tensor) -> torch.Tensor:
        """[B, T, D] -> [B, T, D]: y = K * u + D u by FFT convolution of length 2T."""
        t, dtype = u.shape[1], u.dtype
        u = u.to(torch.promote_types(dtype, torch.float32))
        k = self.kernel(t)  # [channels, D, T]
        if self.bidirectional:
            # Forward kernel on lags 0..T-1, reversed kernel on lags -1..-(T-1) (wrapped).
            k = F.pad(k[0], (0, t)) + F.pad(k[1].flip(-1), (t, 0))
        else:
            k = k[0]
        u_t = u.transpose(1, 2)  # [B, D, T]
        y = torch.fft.irfft(torch.fft.rfft(u_t, n=2 * t) * torch.fft.rfft(k, n=2 * t), n=2 * t)
        y = y[..., :t] + u_t * self.D.unsqueeze(-1).to(u.dtype)
        return y.transpose(1, 2).to(dtype)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        # Zero padded positions so they cannot leak into real ones.
        x = x * mask.unsqueeze(-1).to(x.dtype)
        y = self.drop(F.gelu(self.ssm(x)))
        return F.glu(self.output(y), dim=-1)

    def fixup_weights(self) -> list[torch.Tensor]:
        """The weights the Fixup priors rescale: the output projection."""
        return [self.output.weight]


class S4Block(nn.Module):
    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.ssm = Residual(S4DLayer(cfg), cfg.width, cfg.norm, cfg.dropout)
        ffn = FeedForward(cfg.width, cfg.d_ff, cfg.dropout)
        self.mlp = Residual(ffn, cfg.width, cfg.norm, cfg.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.ssm(x, mask))


def init_weights(module: nn.Module) -> None:
    standard_init(module)
    if isinstance(module, S4DKernel | DLRKernel):
        module.reset_parameters()
    elif isinstance(module, S4DLayer):
        nn.init.normal_(module.D)


def s4d_layer_params(width: int, d_state: int, channels: int, kernel: str = "s4d") -> int:
    """The weights of one SSM layer: its kernel's, the D skip and the output D -> 2D."""
    if kernel == "diagonal_rnn":  # W: channels x D x N/2 complex; N/2 shared eigenvalues
        return channels * width * d_state + d_state + width + 2 * width * width + 2 * width
    # C: channels * D * N reals; A: D * N reals; dt, D skip; output D -> 2D.
    return width * d_state * (channels + 1) + 2 * width + 2 * width * width + 2 * width


class S4(nn.Module):
    """Token ids [B, T] and mask [B, T] -> hidden states [B, T, D]."""

    arch = "s4"
    a_init = "lin"
    kernel = "s4d"
    dt_range = (1e-3, 1e-1)

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.width)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(S4Block(cfg) for _ in range(cfg.depth))
        self.final_norm = closing_norm(cfg.norm, cfg.width)
        self.apply(init_weights)

    @classmethod
    def config_for(cls, size: str, protocol: str = "default", **common) -> BackboneConfig:
        shape = shape_for(size, protocol)
        d = shape.width
        d_state = min(64, d)
        channels = 1 if common.get("causal", False) else 2
        # Spend what attention would have had (4D^2 + 4D) minus the S4D layer on the FFN.
        spare = 4 * d * d + 4 * d - s4d_layer_params(d, d_state, channels, cls.kernel)
        d_ff = max(1, shape.d_ff + round(spare / (2 * d + 1)))
        extra = {"d_state": d_state, "dt_min": cls.dt_range[0], "dt_max": cls.dt_range[1],
                 "ssm_lr": 1e-3, "a_init": cls.a_init, "kernel": cls.kernel}
        return BackboneConfig.from_shape(cls.arch, shape, d_ff=d_ff, extra=extra, **common)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> BackboneOutput:
        x = self.drop(self.embed(tokens))
        for block in self.blocks:
            x = block(x, mask)
        return BackboneOutput(self.final_norm(x), mask)


class DLR(S4):
    """S4's model with the diagonal linear RNN kernel (module docstring): Amos et
    al. 2023's unstructured SSM."""

    arch = "dlr"
    kernel = "diagonal_rnn"
    dt_range = (1e-4, 1e-1)  # their dlr.yaml


class S4RandomA(S4):
    """S4D with a random diagonal A (Re A < 0, S4D's discretisation and dt kept)."""

    arch = "s4_random_a"
    a_init = "random"
