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
from scalestudy.models.mos import MixtureOfSoftmaxes
from scalestudy.training.masked_lm import MaskedLM
from scalestudy.training.modules import Classifier

VOCAB, MAX_LEN = 17, 16


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
@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
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


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_every_parameter_of_backbone_and_masked_lm_head_gets_a_gradient(arch):
    torch.manual_seed(0)
    backbone = build_backbone(arch, "xxs", VOCAB, MAX_LEN, token_outputs=True)
    # Every real token masked, so every position is scored: a state that reaches no
    # scored position (an expert of the last block fed only unmasked tokens) has no
    # gradient to get.
    model = MaskedLM(backbone, VOCAB, 1.0, None, seed=0).train()
    loss, aux = model.masked_loss(tokens_and_mask(), torch.Generator().manual_seed(0))
    (loss + aux).backward()
    assert_every_parameter_has_a_gradient(model)
    if arch == "mos":
        assert isinstance(model.head.out, MixtureOfSoftmaxes)
