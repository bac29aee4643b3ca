"""DT-Fixup on every backbone, exactly: N (the number of
residual layers applied) per architecture written down, and mu (the largest
per-token norm of the stack input) recomputed here from the embedding tables."""

from __future__ import annotations

import math

import pytest
import torch

from scalestudy.architectures import ARCHITECTURES
from scalestudy.models import backbone_class, backbone_config
from scalestudy.models.universal import SIGNAL_SCALE
from scalestudy.priors import fixup

from tests.support import built_in

VOCAB, MAX_LEN = 17, 16
ARCHS = sorted(built_in(ARCHITECTURES))


def expected_blocks(arch: str, size: str, token_outputs: bool) -> int:
    """N: the vanilla depth (xxs 2, m 4) for every backbone of attention/MLP-like
    pairs, shared ones (albert, universal) counting each application; exceptions:
    - evolved: half the blocks (xxs 1, m 2), four branches each: N = 2 x blocks;
    - funnel: the encoder keeps the depth (xxs groups [1, 1], m [2, 1, 1]); with
      token outputs its one decoder block adds 1."""
    depth = {"xxs": 2, "m": 4}[size]
    if arch == "funnel" and token_outputs:
        return depth + 1
    return depth


def stack_input(model, tokens: torch.Tensor) -> torch.Tensor:
    """What the first residual block receives, computed from the parameters."""
    cfg = model.cfg
    t = torch.arange(tokens.shape[1])
    if cfg.arch in ("mixer", "s4", "dlr", "s4_random_a"):  # a bare token table, no positions
        return model.embed.weight[tokens]
    if cfg.arch == "albert":  # E-wide tables, (no LayerNorm under norm none), then E -> D
        lookup = model.embed.lookup
        small = lookup.token.weight[tokens] + lookup.position.weight[t]
        return small @ model.embed.project.weight.T + model.embed.project.bias
    x = model.embed.token.weight[tokens] + model.embed.position.weight[t]
    if cfg.arch == "universal":  # plus the step-1 timestep signal, interleaved sin/cos
        d = cfg.width
        signal = []
        for j in range(0, d, 2):
            angle = 1.0 / 10000 ** (j / d)
            signal += [math.sin(angle), math.cos(angle)]
        x = x + SIGNAL_SCALE * torch.tensor(signal[:d])
    return x


def padded_batch():
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(3, VOCAB, (3, MAX_LEN), generator=g)
    lengths = torch.tensor([MAX_LEN, 7, 3])
    real = torch.arange(MAX_LEN)[None] < lengths[:, None]
    return tokens.masked_fill(~real, 0), real


@pytest.mark.parametrize("token_outputs", [False, True], ids=["pooled", "tokens"])
@pytest.mark.parametrize("size", ["xxs", "m"])
@pytest.mark.parametrize("arch", ARCHS)
def test_dtfixup_block_count_and_mu(arch, size, token_outputs, monkeypatch):
    cfg = backbone_config(arch, size, VOCAB, MAX_LEN, norm="none", token_outputs=token_outputs)
    torch.manual_seed(0)
    model = backbone_class(arch)(cfg)
    tokens, real = padded_batch()
    init = fixup.fixup_init

    def init_with_a_long_pad_row(backbone):
        """Step 1 as dtfixup runs it, then the pad id's row made 5x longer, so that
        a mu read over padded positions would come out larger."""
        init(backbone)
        with torch.no_grad():
            fixup.input_embeddings(backbone)[0].weight[0] *= 5.0

    monkeypatch.setattr(fixup, "fixup_init", init_with_a_long_pad_row)
    torch.manual_seed(1)
    report = fixup.dtfixup(model, [tokens])
    n = expected_blocks(arch, size, token_outputs)
    assert report.n_blocks == n, (arch, size, token_outputs, report.n_blocks)
    with torch.no_grad():
        norms = stack_input(model, tokens).norm(dim=-1)
    mu = norms[real].max().item()
    assert report.mu == pytest.approx(mu, rel=1e-6)
    # Padded positions hold larger norms (the pad id's row): mu reads real ones only.
    assert norms[~real].max().item() > 1.5 * mu
    assert report.factor == pytest.approx((n * (4 * mu**2 + 2 * mu + 2)) ** -0.5, rel=1e-12)
