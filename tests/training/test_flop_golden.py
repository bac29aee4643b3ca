"""Every architecture's counted step FLOPs, pinned per size.

One backbone step (forward + backward of `hidden.sum()`, as tests/models/test_backbones.py
counts it) on model_checks' batch: B = 3 sequences of T = 16 positions (35 real;
padding costs what real positions do), vocabulary 17. Each count is pinned as a
literal (GOLDEN) and derived analytically (`analytic`), so a changed count says
which term moved. Conventions of scalestudy.flops: a Linear of fan-in i and
fan-out o on n rows costs 2 n i o forward and twice that backward (input and
weight gradients: every layer's input needs a gradient, the first one's too,
since the embeddings are trained), so 6 n i o a step; an attention call 4 B Tq
Tk D forward and twice that backward; a convolution's forward 2 x outputs x
(in channels per group) x kernel, each gradient the same again; elementwise
operations are free. Notation: N = B T tokens, D width, F d_ff, L depth.

Also the masked-LM pretraining step (the x of alpha_U) against its analytic count.
"""

from __future__ import annotations

import math

import pytest
import torch

from scalestudy.architectures import ARCHITECTURES
from scalestudy.models import backbone_class, build_backbone
from scalestudy.training.flops import count_flops, flops_per_step
from scalestudy.training.masked_lm import MaskedLM

from tests.support import built_in
from tests.support.model_checks import (
    BATCH,
    MAX_LEN,
    VOCAB,
    analytic_transformer_step,
    batch,
    build,
)

B, T = BATCH, MAX_LEN
N = B * T

GOLDEN = {
    "albert": {"xxs": 2_101_248, "xs": 7_815_168},
    "dconv": {"xxs": 1_815_552, "xs": 7_170_048},
    "dlr": {"xxs": 1_754_112, "xs": 6_555_648},
    "evolved": {"xxs": 1_898_496, "xs": 6_967_296},
    "funnel": {"xxs": 1_373_184, "xs": 5_078_016},
    "glu": {"xxs": 1_990_656, "xs": 7_815_168},
    "lconv": {"xxs": 1_815_552, "xs": 7_170_048},
    "mixer": {"xxs": 1_769_472, "xs": 7_409_664},
    "mos": {"xxs": 2_064_384, "xs": 7_667_712},
    "performer": {"xxs": 2_279_424, "xs": 9_831_936},
    "s4": {"xxs": 1_606_656, "xs": 5_965_824},
    "s4_random_a": {"xxs": 1_606_656, "xs": 5_965_824},
    "switch": {"xxs": 1_671_168, "xs": 6_168_576},
    "transformer": {"xxs": 2_064_384, "xs": 7_667_712},
    "universal": {"xxs": 2_064_384, "xs": 7_667_712},
}


def attention(t_q: int, t_k: int, d: int) -> int:
    """QK^T and AV over all heads, forward: 2 B Tq Tk (d_qk + d_v) = 4 B Tq Tk D."""
    return 4 * B * t_q * t_k * d


def vanilla_block(d: int, f: int, n: int = N, t: int = T) -> int:
    """Forward of a transformer block: four D x D projections, up and down, attention."""
    return 8 * n * d * d + 4 * n * d * f + attention(t, t, d)


def fft(rows: int) -> float:
    """A real FFT of length 2T (S4's convolution length) over `rows` rows: half the
    complex 5 n log2 n."""
    return rows * 5 * (2 * T) * math.log2(2 * T) / 2


def analytic(arch: str, model) -> int:
    """The step's FLOPs from the architecture (docstring conventions); `model` gives
    the built config and, for Switch, the routing of the counted step."""
    cfg = model.cfg
    d, f, depth, heads = cfg.width, cfg.d_ff, cfg.depth, cfg.heads
    if arch in ("transformer", "mos", "universal"):
        # mos: the vanilla body (the mixture is a head); universal: one block applied
        # depth times costs depth blocks.
        return 3 * depth * vanilla_block(d, f)
    if arch == "glu":  # the MLP is three bias-free D x F' matrices (gate, up, down)
        return 3 * depth * (8 * N * d * d + 6 * N * d * f + attention(T, T, d))
    if arch == "albert":  # the factorised embedding's E -> D projection, then the blocks
        return 3 * (2 * N * cfg.extra["embed_dim"] * d + depth * vanilla_block(d, f))
    if arch == "evolved":
        block = (4 * N * d * d  # GLU: values and gates
                 + 2 * N * d * f  # left 1x1 conv D -> F (a Linear)
                 + 2 * N * (d // 2) * d * 3  # right 3x1 conv D -> D/2
                 + 2 * N * f * 9  # depthwise 9x1 conv over F channels
                 + 2 * N * f * (d // 2)  # pointwise F -> D/2
                 + 8 * N * d * d + attention(T, T, d)  # attention
                 + 4 * N * d * f)  # feed-forward
        return 3 * depth * block
    if arch == "performer":
        m = cfg.extra["features"]
        dense = 3 * depth * (8 * N * d * d + 4 * N * d * f)
        # phi(q), phi(k): x W^T with W [m, d/H] a buffer, so the backward has the
        # input gradient only (2 x the forward 2 N D m each).
        features = depth * 2 * (2 * 2 * N * d * m)
        # phi(k)^T v, phi(q) (phi(k)^T v) and the normaliser phi(q) (sum phi(k)).
        linear = 3 * depth * (2 * 2 * B * T * m * d + 2 * B * heads * T * m)
        return dense + features + linear
    if arch == "funnel":
        # Group 0 at T; each later group starts with a pooling block whose queries
        # (and output, MLP) run on ceil(T/2) positions, keys and values on T.
        total, t = 0, T
        for g, blocks in enumerate(cfg.extra["groups"]):
            for i in range(blocks):
                if g > 0 and i == 0:
                    t_q = math.ceil(t / 2)
                    total += (4 * B * t_q * d * d + 4 * B * t * d * d + attention(t_q, t, d)
                              + 4 * B * t_q * d * f)
                    t = t_q
                else:
                    total += vanilla_block(d, f, B * t, t)
        return 3 * total
    if arch == "mixer":
        # Token mixing: max_len -> d_tokens -> max_len on every (sequence, channel).
        tokens = 4 * B * d * cfg.max_len * cfg.extra["d_tokens"]
        return 3 * depth * (tokens + 4 * N * d * f)
    if arch in ("lconv", "dconv"):
        total = 0
        for k in cfg.extra["kernel_sizes"]:
            # Input D -> 2D (GLU), the K-tap depthwise convolution, output D -> D, FFN.
            total += 6 * N * d * d + 2 * N * d * k + 4 * N * d * f
            if arch == "dconv":  # the per-position kernel predictor D -> H K
                total += 2 * N * d * heads * k
        return 3 * total
    if arch == "switch":
        # Router D -> E on every position; experts run on their kept tokens only.
        experts = cfg.extra["experts"]
        total = 0
        for block in model.blocks:
            kept = int(block.mlp.branch.last_kept.sum())
            total += (8 * N * d * d + attention(T, T, d) + 2 * N * d * experts
                      + 4 * kept * d * f)
        return 3 * total
    if arch in ("s4", "s4_random_a", "dlr"):  # S4D, or the DLR's einsum over shared modes
        modes, channels = cfg.extra["d_state"] // 2, 2  # bidirectional: two kernels
        dense = 3 * depth * (4 * N * d * d + 4 * N * d * f)  # output D -> 2D (GLU), FFN
        # The kernel: einsum over [channels, D, N/2] x [D, N/2, T] (DLR's: x [N/2, T],
        # its modes shared by the channels), forward and 2 x back.
        kernel = 3 * depth * 2 * channels * d * modes * T
        # rfft(u), rfft(K), irfft(y): each forward r2c or c2r costs fft(rows); torch's
        # backward of an r2c is a full complex c2c (2 x) and of a c2r an r2c (1 x).
        ffts = depth * (fft(B * d) * (1 + 2) + fft(d) * (1 + 2) + fft(B * d) * (1 + 1))
        return int(dense + kernel + ffts)
    raise KeyError(arch)


def counted(arch: str, size: str):
    model = build(backbone_class(arch), size).train()
    tokens, mask = batch()
    flops = count_flops(lambda: model(tokens, mask).hidden.sum().backward())
    return flops, model


def test_every_architecture_is_pinned():
    assert set(GOLDEN) == set(built_in(ARCHITECTURES))


@pytest.mark.parametrize("size", ["xxs", "xs"])
@pytest.mark.parametrize("arch", sorted(built_in(ARCHITECTURES)))
def test_counted_step_flops_are_the_golden_and_analytic_count(arch, size):
    flops, model = counted(arch, size)
    assert flops == GOLDEN[arch][size] == analytic(arch, model), (arch, size, flops)


def test_switch_routes_fewer_tokens_than_positions():
    """The Switch count depends on routing: its experts ran on at most the real
    tokens of the batch (35 of 48 positions), so it is below vanilla's FFN cost."""
    _, model = counted("switch", "xxs")
    kept = [int(block.mlp.branch.last_kept.sum()) for block in model.blocks]
    assert all(0 < k <= 35 for k in kept), kept


@pytest.mark.parametrize("size", ["xxs", "xs"])
def test_masked_lm_pretraining_step_is_the_analytic_count(size):
    """A masked-LM step of the transformer (the x of alpha_U): the backbone's step
    plus the MLM head on every position (masked or not): dense D -> E, then the
    tied decoder E -> V (E = D here), each 6 N i o."""
    torch.manual_seed(0)
    backbone = build_backbone("transformer", size, VOCAB, MAX_LEN, token_outputs=True)
    model = MaskedLM(backbone, VOCAB, 0.5, None, seed=0)
    tokens, _ = batch()
    d = backbone.cfg.width
    head = 6 * N * d * d + 6 * N * d * VOCAB
    expected = analytic_transformer_step(size, B, T, None) + head
    assert flops_per_step(model, (tokens,)) == expected
