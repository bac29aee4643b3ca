"""The mixture of softmaxes against a hand-computed mixture, and every parameter
of every backbone *with its heads* (classifier, masked-LM; MoS where the backbone
asks for it) gets a gradient."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from scalestudy.architectures import ARCHITECTURES
from scalestudy.models import build_backbone
from scalestudy.models.heads import ClassifierHead
from scalestudy.models.mos import MixtureOfSoftmaxes, MoSTransformer
from scalestudy.training.masked_lm import MaskedLM
from scalestudy.training.modules import Classifier

from tests.support import built_in
from tests.support.model_checks import MAX_LEN, VOCAB, build


def mixture_by_hand(mos: MixtureOfSoftmaxes, h: list[float]) -> list[float]:
    """P(y | h) = sum_k pi_k softmax(W tanh(P_k h + b_k) + c)_y, pi = softmax(Q h),
    with Python floats and math.exp only."""
    width, k = mos.width, mos.n_components
    q = mos.prior.weight.tolist()  # [K, D]
    p_w, p_b = mos.latent.weight.tolist(), mos.latent.bias.tolist()  # [K*D, D], [K*D]
    w, c = mos.decoder.weight.tolist(), mos.decoder.bias.tolist()  # [V, D], [V]

    def softmax(z):
        top = max(z)
        e = [math.exp(v - top) for v in z]
        return [v / sum(e) for v in e]

    pi = softmax([sum(q[i][j] * h[j] for j in range(width)) for i in range(k)])
    out = [0.0] * len(c)
    for i in range(k):
        latent = [math.tanh(sum(p_w[i * width + r][j] * h[j] for j in range(width))
                            + p_b[i * width + r]) for r in range(width)]
        probs = softmax([sum(w[y][r] * latent[r] for r in range(width)) + c[y]
                         for y in range(len(c))])
        out = [o + pi[i] * p for o, p in zip(out, probs, strict=True)]
    return out


def test_mos_is_the_mixture_written_out():
    torch.manual_seed(0)
    mos = MixtureOfSoftmaxes(width=4, n_out=5, n_components=3)
    with torch.no_grad():  # a bias and a prior far from uniform, so the weights matter
        mos.latent.bias.normal_()
        mos.prior.weight.mul_(4.0)
    hs = torch.randn(3, 4)
    with torch.no_grad():
        got = mos(hs).exp()
    for h, row in zip(hs.tolist(), got, strict=True):
        assert row.tolist() == pytest.approx(mixture_by_hand(mos, h), rel=1e-5, abs=1e-7)
    # The mixture weights are not uniform here: the uniform mixture is another answer.
    with torch.no_grad():
        latent = torch.tanh(mos.latent(hs)).unflatten(-1, (3, 4))
        uniform = F.softmax(mos.decoder(latent), -1).mean(-2)
    assert (got - uniform).abs().max() > 1e-3


def test_mos_with_equal_components_is_their_softmax_whatever_the_weights():
    """K identical components: the mixture is that one softmax, for any pi."""
    torch.manual_seed(1)
    mos = MixtureOfSoftmaxes(width=4, n_out=6, n_components=2)
    with torch.no_grad():
        mos.latent.weight[4:] = mos.latent.weight[:4]
        mos.latent.bias[4:] = mos.latent.bias[:4]
    h = torch.randn(2, 4)
    with torch.no_grad():
        one = F.log_softmax(mos.decoder(torch.tanh(mos.latent(h)[:, :4])), -1)
        torch.testing.assert_close(mos(h), one, rtol=1e-5, atol=1e-6)


def idle_experts(model: torch.nn.Module) -> set[str]:
    """Name prefixes of the Switch experts that the last forward routed no token to
    (an expert without tokens has nothing to learn from; every other one must)."""
    idle = set()
    for name, module in model.named_modules():
        kept = getattr(module, "last_kept", None)
        if kept is not None:
            experts = kept.shape[1]
            assert int(kept.any(0).sum()) >= experts // 2, (name, kept.sum(0))  # routing works
            idle |= {f"{name}.experts.{i}." for i in range(experts) if not kept[:, i].any()}
    return idle


def assert_every_parameter_has_a_gradient(model: torch.nn.Module) -> None:
    idle = idle_experts(model)
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum()]
    missing = [n for n in missing if not any(n.startswith(prefix) for prefix in idle)]
    assert not missing, f"no gradient for {missing}"


def tokens_and_mask(seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(3, VOCAB, (4, MAX_LEN), generator=g)
    lengths = torch.tensor([MAX_LEN, MAX_LEN - 5, MAX_LEN // 2, MAX_LEN])
    real = torch.arange(MAX_LEN)[None] < lengths[:, None]
    return tokens.masked_fill(~real, 0)


@pytest.mark.parametrize("pair", [False, True], ids=["single", "pair"])
@pytest.mark.parametrize("arch", sorted(built_in(ARCHITECTURES)))
def test_every_parameter_of_backbone_and_classifier_head_gets_a_gradient(arch, pair):
    torch.manual_seed(0)
    backbone = build_backbone(arch, "xxs", VOCAB, MAX_LEN)
    head = ClassifierHead(backbone, 3, pair=pair)
    model = Classifier(backbone, head, 3).train()
    tokens = tokens_and_mask()
    batch = (tokens[:2], tokens[2:], torch.tensor([0, 1])) if pair else (
        tokens, torch.tensor([0, 1, 2, 1]))
    loss, aux = model.training_loss(batch)
    (loss + aux).backward()
    assert_every_parameter_has_a_gradient(model)
    if arch == "mos":
        assert isinstance(head.out, MixtureOfSoftmaxes)


@pytest.mark.parametrize("arch", sorted(built_in(ARCHITECTURES)))
def test_every_parameter_of_backbone_and_masked_lm_head_gets_a_gradient(arch):
    torch.manual_seed(0)
    backbone = build_backbone(arch, "xxs", VOCAB, MAX_LEN, token_outputs=True)
    # Every real token masked, so every position is scored: a state that reaches no
    # scored position (an expert of the last block fed only unmasked tokens) has no
    # gradient to get.
    model = MaskedLM(backbone, VOCAB, 1.0, None, seed=0).train()
    loss, aux = model.training_loss(model.masked(tokens_and_mask(),
                                                 torch.Generator().manual_seed(0)))
    (loss + aux).backward()
    assert_every_parameter_has_a_gradient(model)
    if arch == "mos":
        assert isinstance(model.head.out, MixtureOfSoftmaxes)


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
