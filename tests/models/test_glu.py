"""GLU (models/glu.py): a bias-free GEGLU feed-forward of two-thirds width."""

import torch
import torch.nn.functional as F

from scalestudy.models.glu import GatedFeedForward, GLUTransformer

from tests.support.model_checks import build


def test_glu_is_bias_free_geglu_with_two_thirds_width():
    model = build(GLUTransformer, "s")
    assert model.cfg.d_ff == 168  # 2/3 of 256 = 170.7, to a multiple of 8
    mlp = model.blocks[0].mlp.branch
    assert isinstance(mlp, GatedFeedForward)
    assert all(m.bias is None for m in (mlp.gate, mlp.up, mlp.down))
    x = torch.randn(2, 5, model.cfg.width)
    expected = (F.gelu(x @ mlp.gate.weight.T) * (x @ mlp.up.weight.T)) @ mlp.down.weight.T
    torch.testing.assert_close(mlp(x), expected)
    swiglu = GatedFeedForward(8, 16, "silu")
    x = torch.randn(3, 8)
    expected = swiglu.down(F.silu(swiglu.gate(x)) * swiglu.up(x))
    torch.testing.assert_close(swiglu(x), expected)
    assert mlp.fixup_weights() == [mlp.up.weight, mlp.down.weight]
