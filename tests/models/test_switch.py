"""The Switch Transformer (models/switch.py): capacity, routing, the balancing loss,
and its FLOP and parameter match with vanilla."""

import math

import pytest
import torch

from scalestudy.ladder import CPU_SIZES, SIZES, shape_for
from scalestudy.models.layers import Residual
from scalestudy.models.switch import SwitchFeedForward, SwitchTransformer, load_balancing_loss
from scalestudy.models.transformer import Transformer
from scalestudy.training.flops import count_flops

from tests.support.model_checks import batch, build, nonembed_params, vanilla_params


def skewed_switch(capacity_factor=1.0, experts=4):
    """A Switch FFN whose router sends every positive input to expert 0."""
    torch.manual_seed(0)
    moe = SwitchFeedForward(8, 4, experts, capacity_factor, alpha=0.01).eval()
    with torch.no_grad():
        moe.router.weight.zero_()
        moe.router.weight[0] = 1.0
    x = torch.rand(2, 10, 8) + 0.1
    mask = torch.arange(10)[None, :] < torch.tensor([[10], [6]])
    return moe, x, mask


def test_switch_capacity_is_honoured_and_overflow_passes_unchanged():
    moe, x, mask = skewed_switch()
    residual = Residual(moe, 8, "none")
    y = residual(x, mask)
    capacity = math.ceil(1.0 * mask.sum().item() / 4)  # 16 real tokens -> 4 each
    kept = moe.last_kept.view(10, 2, 4).transpose(0, 1)  # position-major -> [B, T, E]
    assert (kept.sum((0, 1)) <= capacity).all()
    assert kept[..., 0].sum() == capacity  # the favoured expert is full
    routed = kept.any(-1)
    assert not routed[~mask].any()  # padding is never routed
    # Overflow (and padding) tokens: FFN output exactly zero, residual unchanged.
    assert torch.equal(y[~routed], x[~routed])
    assert (y[routed] != x[routed]).any(-1).all()
    # Queues fill position-major: the first `capacity` positions win.
    assert routed[:, :2].all() and not routed[:, 2:].any()


def test_switch_capacity_with_random_routing():
    torch.manual_seed(1)
    moe = SwitchFeedForward(8, 4, 4, capacity_factor=0.5, alpha=0.01)
    x = torch.randn(3, 16, 8)
    _, mask = batch()
    moe(x, mask)
    capacity = math.ceil(0.5 * mask.sum().item() / 4)
    assert (moe.last_kept.sum(0) <= capacity).all()


def test_switch_balancing_loss_is_alpha_at_uniform_routing_and_larger_when_skewed():
    alpha, experts, n = 0.01, 4, 64
    real = torch.ones(n, dtype=torch.bool)
    uniform = torch.full((n, experts), 1 / experts)
    balanced = torch.arange(n) % experts
    loss = load_balancing_loss(uniform, balanced, real, alpha)
    torch.testing.assert_close(loss, torch.tensor(alpha))
    skewed = torch.tensor([0.7, 0.1, 0.1, 0.1]).expand(n, experts)
    assert load_balancing_loss(skewed, torch.zeros(n, dtype=torch.long), real, alpha) > alpha
    # Through the module: a zero router is uniform; the skewed router is not.
    moe, x, mask = skewed_switch()
    moe(x, mask)
    assert moe.aux_loss > alpha
    with torch.no_grad():
        moe.router.weight.zero_()
    moe(x, mask)
    torch.testing.assert_close(moe.aux_loss, torch.tensor(alpha))


def test_switch_aux_loss_sums_layers_and_ignores_padding():
    model = build(SwitchTransformer)
    tokens, mask = batch()
    out = model(tokens, mask)
    layers = [block.mlp.branch.aux_loss for block in model.blocks]
    torch.testing.assert_close(out.aux_loss, sum(layers))
    other = model(tokens.masked_fill(~mask, 16), mask)
    torch.testing.assert_close(out.aux_loss, other.aux_loss)


def full_batch_step_flops(cls, size, batch_size=8, length=48, **common):
    """Counted FLOPs of one forward+backward (+ aux loss) on a fixed batch of
    `batch_size` x `length` real tokens; returns them and the model."""
    model = build(cls, size, max_len=length, **common).train()
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(1, 17, (batch_size, length), generator=g)
    mask = torch.ones_like(tokens, dtype=torch.bool)

    def step():
        out = model(tokens, mask)
        (out.hidden.sum() + out.aux_loss).backward()

    return count_flops(step), model


@pytest.mark.parametrize("size", CPU_SIZES)
def test_switch_is_flop_matched_to_vanilla(size):
    """Every expert has the ladder's full d_ff and a token goes to one expert, so
    a training step costs vanilla's FLOPs (Fedus et al. 2021) plus the router.
    Compared at the same batch and length, attention is identical in both,
    whether or not the counter sees it.

    Counted FLOPs follow the routing: an expert computes its kept tokens only.
    So the sizing is checked with no token dropped (capacity = all tokens), and
    the default capacity 1.25 is checked to remove exactly one FFN (forward +
    backward: 12 D d_ff) per dropped token. At init on this batch the routing is
    uneven and 1.25 drops some tokens: measured ratio to vanilla 0.99 (xxs) ..
    0.88 (l); training's balancing loss evens the loads.
    """
    vanilla, _ = full_batch_step_flops(Transformer, size)
    experts = SwitchTransformer.config_for(size, vocab_size=17, max_len=16).extra["experts"]
    no_drop, model = full_batch_step_flops(
        SwitchTransformer, size, extra={"capacity_factor": float(experts)}
    )
    assert all(block.mlp.branch.last_kept.sum(-1).eq(1).all() for block in model.blocks)
    assert 0.9 <= no_drop / vanilla <= 1.1, (size, no_drop / vanilla)

    default, model = full_batch_step_flops(SwitchTransformer, size)
    cfg = model.cfg
    assert cfg.d_ff == shape_for(size).d_ff
    assert all(e.up.out_features == cfg.d_ff for b in model.blocks for e in b.mlp.branch.experts)
    kept = [block.mlp.branch.last_kept for block in model.blocks]
    assert all(k.sum(-1).max() <= 1 for k in kept)  # top-1: at most one expert per token
    dropped = sum(k.shape[0] - k.sum().item() for k in kept)
    assert default == no_drop - dropped * 12 * cfg.width * cfg.d_ff, (size, dropped)


def test_switch_ffn_parameters_grow_with_the_experts():
    """FFN(switch) >= experts / 2 x FFN(vanilla): the non-embedding surplus over
    vanilla is at least (experts / 2 - 1) vanilla FFNs (it is experts - 1 of
    them plus the router)."""
    for size in SIZES:
        experts = SwitchTransformer.config_for(size, vocab_size=17, max_len=16).extra["experts"]
        with torch.device("meta"):
            vanilla = Transformer(Transformer.config_for(size, vocab_size=17, max_len=16))
        ffn = sum(p.numel() for block in vanilla.blocks for p in block.mlp.branch.parameters())
        surplus = nonembed_params(SwitchTransformer, size) - vanilla_params(size)
        assert surplus >= (experts / 2 - 1) * ffn, (size, surplus / ffn)
        assert surplus <= 1.1 * (experts - 1) * ffn, (size, surplus / ffn)


def test_switch_fixup_weights_are_every_expert_mlp():
    block = build(SwitchTransformer).blocks[0]
    weights = block.mlp.branch.fixup_weights()
    assert len(weights) == 2 * len(block.mlp.branch.experts)
    assert block.attention.branch.fixup_weights()[0] is block.attention.branch.value.weight
