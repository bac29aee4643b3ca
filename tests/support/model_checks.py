"""Property checks every backbone must pass; used by tests/models/test_backbones.py over the
whole registry and by the per-mechanism test files on their own classes.

Each check takes a backbone class (with `config_for` and `causal_ok`) and builds
a tiny instance itself.
"""

from __future__ import annotations

import functools
import io

import torch
import torch.nn.functional as F

from scalestudy.models.transformer import Transformer
from scalestudy.training.flops import count_params

VOCAB, MAX_LEN, BATCH = 17, 16, 3


def build(cls, size="xxs", **common):
    common = {"vocab_size": VOCAB, "max_len": MAX_LEN, **common}
    torch.manual_seed(0)
    return cls(cls.config_for(size, **common)).eval()


def batch(seed=0, length=MAX_LEN):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, VOCAB, (BATCH, length), generator=g)
    lengths = torch.tensor([length, length - 5, length // 2])
    mask = torch.arange(length)[None, :] < lengths[:, None]
    return tokens.masked_fill(~mask, 0), mask


def check_output_shape(cls):
    model = build(cls)
    tokens, mask = batch()
    out = model(tokens, mask)
    assert out.hidden.ndim == 3 and out.hidden.shape[0] == BATCH
    assert out.hidden.shape[2] == model.cfg.width
    assert out.mask.shape == out.hidden.shape[:2]
    assert torch.isfinite(out.hidden).all()
    # With token_outputs every position gets a state.
    model = build(cls, token_outputs=True)
    assert model(tokens, mask).hidden.shape[:2] == tokens.shape


def check_padding_invariance(cls):
    model = build(cls, token_outputs=True)
    tokens, mask = batch()
    other = tokens.masked_fill(~mask, VOCAB - 1)  # change only the padded ids
    a, b = model(tokens, mask).hidden, model(other, mask).hidden
    torch.testing.assert_close(a[mask], b[mask], atol=1e-5, rtol=1e-4)


def check_causal(cls):
    model = build(cls, causal=True, token_outputs=True)
    tokens, mask = batch()
    mask = torch.ones_like(mask)
    t = MAX_LEN // 2
    changed = tokens.clone()
    changed[:, t + 1 :] = (changed[:, t + 1 :] % (VOCAB - 1)) + 1
    a, b = model(tokens, mask).hidden, model(changed, mask).hidden
    torch.testing.assert_close(a[:, : t + 1], b[:, : t + 1], atol=1e-5, rtol=1e-4)


def _loss(model, tokens, mask, targets):
    out = model(tokens, mask)
    weights = out.mask.unsqueeze(-1).float()
    pooled = (out.hidden * weights).sum(1) / weights.sum(1)
    logits = pooled[:, :2]
    return F.cross_entropy(logits, targets) + out.aux_loss


def check_all_params_get_grad(cls):
    model = build(cls).train()
    tokens, mask = batch()
    _loss(model, tokens, mask, torch.tensor([0, 1, 0])).backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum()]
    assert not missing, f"no gradient for {missing}"


def check_learns(cls, steps=30):
    model = build(cls).train()
    tokens, mask = batch()
    targets = torch.tensor([0, 1, 1])
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = _loss(model, tokens, mask, targets)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0], losses


def check_state_dict_round_trip(cls):
    model = build(cls)
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    fresh = build(cls)
    for p in fresh.parameters():
        torch.nn.init.zeros_(p) if p.is_floating_point() else None
    fresh.load_state_dict(torch.load(buffer))
    tokens, mask = batch()
    torch.testing.assert_close(model(tokens, mask).hidden, fresh(tokens, mask).hidden)


def nonembed_params(cls, size, **common):
    """Non-embedding parameters of `size`, built on the meta device (no memory)."""
    with torch.device("meta"):
        model = cls(cls.config_for(size, vocab_size=VOCAB, max_len=MAX_LEN, **common))
    return count_params(model)[1]


# A training step of the vanilla transformer, counted against an analytic count
# written from the architecture: per block four D x D projections, the two MLP
# weights and the two attention matmuls (QK^T, AV: 2 B T^2 D each); the head's
# hidden and output layers on the pooled [B, D]; backward = 2 x forward.
def analytic_transformer_step(size: str, batch: int, length: int, n_classes: int | None) -> int:
    """n_classes None: the backbone alone, no head."""
    from scalestudy.ladder import shape_for

    shape = shape_for(size)
    tokens = batch * length
    d, d_ff = shape.width, shape.d_ff
    block = (4 * 2 * tokens * d * d  # query, key, value, out
             + 2 * 2 * tokens * d * d_ff  # up, down
             + 2 * 2 * batch * length * length * d)  # QK^T and AV over all heads
    head = 0 if n_classes is None else 2 * batch * d * d + 2 * batch * d * n_classes
    return 3 * (shape.depth * block + head)


ALL_CHECKS = [
    check_output_shape,
    check_padding_invariance,
    check_all_params_get_grad,
    check_learns,
    check_state_dict_round_trip,
]


@functools.cache
def vanilla_params(size: str) -> int:
    """The vanilla Transformer's non-embedding parameters at `size`: the ladder the
    other architectures are matched to."""
    return nonembed_params(Transformer, size)
