"""Causal FAVOR+ beyond one chunk: the chunked prefix sum
(`performer.linear_attention`, CAUSAL_CHUNK positions at a time, a running state
carried between chunks) equals the unchunked causal sum written out here, at
lengths of several chunks (the chunk monkeypatched to 4, or T > 128)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from scalestudy.models import performer
from scalestudy.models.performer import (
    Performer,
    favor_attention,
    linear_attention,
    orthogonal_features,
)

from tests.support.model_checks import build


def causal_by_hand(q, k, v) -> torch.Tensor:
    """out_t = sum_{s <= t} (q_t . k_s) v_s / sum_{s <= t} q_t . k_s, position by position."""
    t = q.shape[-2]
    rows = []
    for i in range(t):
        weights = q[..., i : i + 1, :] @ k[..., : i + 1, :].transpose(-1, -2)  # [.., 1, i+1]
        rows.append((weights @ v[..., : i + 1, :]) / weights.sum(-1, keepdim=True))
    return torch.cat(rows, dim=-2)


def features(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g, dtype=torch.float64) + 0.1  # positive, as phi's


@pytest.mark.parametrize("length", [4, 9, 16, 23])
def test_chunked_causal_sum_equals_the_unchunked_one(monkeypatch, length):
    monkeypatch.setattr(performer, "CAUSAL_CHUNK", 4)
    q, k = features((2, 3, length, 6), 0), features((2, 3, length, 6), 1)
    g = torch.Generator().manual_seed(2)
    v = torch.randn(2, 3, length, 5, dtype=torch.float64, generator=g)
    got = linear_attention(q, k, v, causal=True)
    torch.testing.assert_close(got, causal_by_hand(q, k, v), rtol=1e-10, atol=1e-12)


def test_padded_keys_beyond_the_first_chunk_are_excluded(monkeypatch):
    """Keys zeroed at padding (as favor_attention zeroes them) drop out of every later chunk."""
    monkeypatch.setattr(performer, "CAUSAL_CHUNK", 4)
    q, k = features((1, 1, 12, 4), 3), features((1, 1, 12, 4), 4)
    v = torch.randn(1, 1, 12, 3, dtype=torch.float64)
    k[..., 2, :] = 0.0  # a padded key in the first chunk
    expected = causal_by_hand(q, k, v)
    torch.testing.assert_close(linear_attention(q, k, v, causal=True), expected)
    # Position 2's value then reaches no output (with its key zero it has weight 0).
    v2 = v.clone()
    v2[..., 2, :] += 100.0
    torch.testing.assert_close(linear_attention(q, k, v2, causal=True), expected)


def test_causal_performer_is_the_same_model_whatever_the_chunk(monkeypatch):
    """A whole causal Performer at T = 16: chunk 4 (four chunks) and the default 128
    (one chunk, where no state is carried) give the same hidden states."""
    model = build(Performer, causal=True, token_outputs=True)
    g = torch.Generator().manual_seed(5)
    tokens = torch.randint(1, 17, (2, 16), generator=g)
    mask = torch.ones_like(tokens, dtype=torch.bool)
    with torch.no_grad():
        one_chunk = model(tokens, mask).hidden
        monkeypatch.setattr(performer, "CAUSAL_CHUNK", 4)
        four_chunks = model(tokens, mask).hidden
    torch.testing.assert_close(four_chunks, one_chunk, rtol=1e-5, atol=1e-6)


def test_default_chunk_beyond_one_chunk():
    """T = 200 > CAUSAL_CHUNK = 128 with the module's own chunk."""
    assert performer.CAUSAL_CHUNK == 128
    q, k = features((1, 2, 200, 4), 6), features((1, 2, 200, 4), 7)
    v = torch.randn(1, 2, 200, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    got = linear_attention(q, k, v, causal=True)
    torch.testing.assert_close(got, causal_by_hand(q, k, v), rtol=1e-10, atol=1e-12)


def favor_error(features, causal, seeds=4):
    torch.manual_seed(0)
    q, k, v = (0.5 * torch.randn(2, 2, 16, 8) for _ in range(3))
    mask = torch.ones(2, 16, dtype=torch.bool)
    mask[1, 11:] = False
    exact_mask = mask[:, None, None, :]
    if causal:
        exact_mask = exact_mask & torch.ones(16, 16, dtype=torch.bool).tril()
    exact = F.scaled_dot_product_attention(q, k, v, attn_mask=exact_mask)
    errors = [
        (favor_attention(q, k, v, orthogonal_features(features, 8, s), mask, causal) - exact)
        .abs().mean() / exact.abs().mean()
        for s in range(seeds)
    ]
    return sum(errors).item() / seeds


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_favor_approaches_softmax_attention_as_features_grow(causal):
    errors = [favor_error(m, causal) for m in (16, 128, 1024, 8192)]
    assert all(a > b for a, b in zip(errors[:-1], errors[1:], strict=True)), errors
    assert errors[-1] < 0.05, errors


def test_performer_features_are_a_seeded_buffer():
    model = build(Performer)
    projection = model.blocks[0].attention.branch.projection
    assert "blocks.0.attention.branch.projection" in dict(model.named_buffers())
    assert projection.shape == (model.cfg.extra["features"], model.cfg.width // model.cfg.heads)
    assert torch.equal(projection, build(Performer).blocks[0].attention.branch.projection)
    assert not torch.equal(projection, model.blocks[1].attention.branch.projection)
    rows = orthogonal_features(16, 8, 0)[:8]
    gram = rows @ rows.T
    torch.testing.assert_close(gram, torch.diag(gram.diagonal()), atol=1e-5, rtol=0)
