"""The Funnel Transformer (models/funnel.py): pooling and its parameter match with vanilla."""

import math

import pytest
import torch

from scalestudy.ladder import SIZES
from scalestudy.models.funnel import Funnel, mean_pool

from tests.support.model_checks import batch, build, nonembed_params, vanilla_params


def test_funnel_token_output_model_also_tracks_vanilla():
    for size in SIZES:
        ratio = nonembed_params(Funnel, size, token_outputs=True) / vanilla_params(size)
        assert 0.75 <= ratio <= 1.25, (size, ratio)


def group_lengths(model, tokens, mask):
    lengths = []
    for group in model.groups:
        group[-1].register_forward_hook(
            lambda m, i, out: lengths.append((out[0] if isinstance(out, tuple) else out).shape[1])
        )
    out = model(tokens, mask)
    return lengths, out


@pytest.mark.parametrize("length", [16, 15])
def test_funnel_length_halves_at_each_pooling(length):
    model = build(Funnel, extra={"groups": [1, 1, 1]})
    tokens, mask = batch(length=length)
    lengths, out = group_lengths(model, tokens, mask)
    expected = [length, math.ceil(length / 2), math.ceil(length / 4)]
    assert lengths == expected
    assert out.hidden.shape[1] == out.mask.shape[1] == expected[-1]
    # A pooled position is real when any of the positions it covers is real.
    real = mask.sum(1)
    assert out.mask.sum(1).tolist() == [math.ceil(n / 4) for n in real.tolist()]
    wide = build(Funnel, extra={"groups": [1, 1, 1]}, token_outputs=True)
    lengths, out = group_lengths(wide, tokens, mask)
    assert lengths == expected and out.hidden.shape[1] == length
    assert torch.equal(out.mask, mask)


def test_funnel_mean_pool_averages_real_positions_only():
    x = torch.tensor([[1.0, 3.0, 5.0, 100.0, 7.0]]).unsqueeze(-1)
    mask = torch.tensor([[True, True, True, False, True]])
    pooled, pooled_mask = mean_pool(x.masked_fill(~mask.unsqueeze(-1), 0), mask)
    assert pooled.squeeze(-1).tolist() == [[2.0, 5.0, 7.0]]
    assert pooled_mask.tolist() == [[True, True, True]]


def test_funnel_default_groups_and_decoder():
    model = build(Funnel, token_outputs=True)
    assert [len(g) for g in model.groups] == [1, 1] and len(model.decoder) == 1
    assert len(build(Funnel).decoder) == 0
    assert Funnel.config_for("base", vocab_size=17, max_len=16).extra == {
        "groups": [4, 4, 4], "decoder_depth": 2,
    }
