"""GLU, MoS, Evolved and Universal Transformers: one test per mechanism (the
generic backbone checks and the parameter match with the vanilla ladder run
over the whole registry in test_models.py)."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from scalestudy.models.evolved import ConvBranches, EvolvedTransformer
from scalestudy.models.glu import GatedFeedForward, GLUTransformer
from scalestudy.models.mos import MixtureOfSoftmaxes, MoSTransformer
from scalestudy.models.transformer import Transformer, TransformerBlock
from scalestudy.models.universal import SIGNAL_SCALE, UniversalTransformer, timestep_signal
from scalestudy.training.flops import count_params

from model_checks import MAX_LEN, VOCAB, batch, build

# --- GLU ---------------------------------------------------------------------


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


# --- MoS ---------------------------------------------------------------------


def test_mos_log_probs_normalise():
    torch.manual_seed(0)
    mos = MixtureOfSoftmaxes(16, 11, n_components=4)
    for p in mos.parameters():  # away from the tiny init, so the mixture matters
        torch.nn.init.normal_(p, std=0.5)
    log_probs = mos(torch.randn(3, 5, 16))
    assert log_probs.shape == (3, 5, 11)
    torch.testing.assert_close(log_probs.logsumexp(-1), torch.zeros(3, 5))
    # A genuine mixture: not a single softmax of one component.
    h = torch.randn(4, 16)
    single = F.log_softmax(mos.decoder(torch.tanh(mos.latent(h)[:, :16])), -1)
    assert not torch.allclose(mos(h), single, atol=1e-3)


def test_mos_with_one_component_is_a_softmax_of_tanh_projection():
    torch.manual_seed(0)
    mos = MixtureOfSoftmaxes(16, 11, n_components=1)
    for p in mos.parameters():
        torch.nn.init.normal_(p, std=0.5)
    h = torch.randn(7, 16)
    expected = F.log_softmax(mos.decoder(torch.tanh(mos.latent(h))), dim=-1)
    torch.testing.assert_close(mos(h), expected)


def test_mos_init_passes_gradient_like_a_linear_output():
    """At init the MoS output must not starve the body of gradient: the 0.02 init
    everywhere gave it a tenth of a linear output's (and slow learning)."""
    torch.manual_seed(0)
    width, n_out = 32, 10
    hidden = torch.randn(256, width, requires_grad=True)
    targets = torch.randint(0, n_out, (256,))
    linear = torch.nn.Linear(width, n_out)
    torch.nn.init.normal_(linear.weight, std=0.02)
    grads = []
    for out in (linear, MixtureOfSoftmaxes(width, n_out, n_components=4)):
        hidden.grad = None
        F.cross_entropy(out(hidden), targets).backward()
        grads.append(hidden.grad.norm())
    assert grads[1] > 0.3 * grads[0]


def test_mos_keeps_its_init_inside_the_heads():
    from scalestudy.models.heads import ClassifierHead
    from scalestudy.models.lm_head import MaskedLMHead

    backbone = build(MoSTransformer)
    expected = backbone.cfg.width**-0.5
    for head in (ClassifierHead(backbone, 10), MaskedLMHead(backbone, VOCAB)):
        mos = head.out
        assert mos.latent.weight.std().item() == pytest.approx(expected, rel=0.2)


def test_mos_backbone_gives_the_heads_its_output_layer():
    model = build(MoSTransformer)
    assert isinstance(model.output_layer(model.cfg.width, 3), MixtureOfSoftmaxes)
    assert model.cfg.extra["mos_components"] == 4
    cfg = MoSTransformer.config_for("xxs", vocab_size=VOCAB, max_len=MAX_LEN,
                                    extra={"mos_components": 2})
    assert cfg.extra["mos_components"] == 2


# --- Evolved Transformer -------------------------------------------------------


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


# --- Universal Transformer ---------------------------------------------------


def test_universal_holds_one_block_whatever_the_depth():
    model = build(UniversalTransformer, "s")
    blocks = [m for m in model.modules() if isinstance(m, TransformerBlock)]
    assert len(blocks) == 1
    block_params = sum(p.numel() for p in blocks[0].parameters())
    counts = set()
    for depth in (1, 2, 6):
        cfg = dataclasses.replace(model.cfg, depth=depth)
        with torch.device("meta"):
            counts.add(count_params(UniversalTransformer(cfg))[1])
    assert counts == {block_params + 2 * model.cfg.width}


def test_universal_applies_the_block_depth_times_with_timestep_embedding():
    model = build(UniversalTransformer, "xs")
    tokens, mask = batch()
    x = model.embed(tokens)
    for step in range(1, model.cfg.depth + 1):
        x = model.block(x + SIGNAL_SCALE * timestep_signal(step, x.shape[-1]), mask)
    torch.testing.assert_close(model(tokens, mask).hidden, model.final_norm(x))
    signal = timestep_signal(3, 8)  # step 3, first frequency pair: sin(3), cos(3)
    assert torch.allclose(signal[0], torch.tensor(3.0).sin())
    assert torch.allclose(signal[1], torch.tensor(3.0).cos())
