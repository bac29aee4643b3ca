"""The Evolved Transformer (models/evolved.py): its separable convolutions."""

import pytest
import torch

from scalestudy.models.evolved import ConvBranches, EvolvedTransformer
from scalestudy.models.transformer import Transformer

from tests.support.model_checks import build


def test_evolved_separable_conv_is_depthwise_then_pointwise():
    model = build(EvolvedTransformer, "s")
    d, wide = model.cfg.width, model.cfg.d_ff
    convs = model.blocks[0].convs.branch
    assert isinstance(convs, ConvBranches)
    depthwise, pointwise = convs.separable.depthwise, convs.separable.pointwise
    assert depthwise.groups == wide and depthwise.weight.shape == (wide, 1, 9)
    assert depthwise.bias is None
    assert pointwise.weight.shape == (d // 2, wide, 1)
    assert convs.right.weight.shape == (d // 2, d, 3)  # 3x1 conv to width/2
    assert convs.left.weight.shape == (wide, d)  # 1x1 conv, wide
    assert model.cfg.depth == Transformer.config_for("s", vocab_size=1, max_len=1).depth // 2


@pytest.mark.parametrize("causal", [True, False])
def test_evolved_convolutions_are_causal_only_in_causal_mode(causal):
    torch.manual_seed(0)
    convs = ConvBranches(8, 32, "pre", causal=causal)
    x, mask = torch.randn(2, 12, 8), torch.ones(2, 12, dtype=torch.bool)
    changed = x.clone()
    changed[:, 7:] += 1.0
    a, b = convs(x, mask), convs(changed, mask)
    assert torch.allclose(a[:, :7], b[:, :7]) == causal  # non-causal must look ahead
    assert torch.allclose(a[:, :2], b[:, :2])  # 7 - (1 + 4) = 2: out of reach either way
