"""MLP-Mixer (models/mixer.py): token mixing tied to max_len, padding."""

import pytest
import torch
import torch.nn.functional as F

from scalestudy.models.mixer import Mixer

from tests.support.model_checks import MAX_LEN, batch, build


def test_mixer_token_mixing_is_tied_to_max_len():
    for max_len in (MAX_LEN, 24):
        model = build(Mixer, max_len=max_len)
        mixing = model.blocks[0].token_mixing.branch
        assert mixing.up.weight.shape == (model.cfg.extra["d_tokens"], max_len)
        assert mixing.down.weight.shape == (max_len, model.cfg.extra["d_tokens"])
    tokens, mask = batch(length=MAX_LEN + 4)
    with pytest.raises(ValueError, match=f"exceeds max_len {MAX_LEN}"):
        build(Mixer)(tokens, mask)


@pytest.mark.parametrize("causal", [False, True])
def test_mixer_short_inputs_equal_padded_ones(causal):
    model = build(Mixer, causal=causal, token_outputs=True)
    tokens, mask = batch(length=10)
    out = model(tokens, mask)
    assert out.hidden.shape[1] == 10
    padded = model(F.pad(tokens, (0, MAX_LEN - 10)), F.pad(mask, (0, MAX_LEN - 10)))
    torch.testing.assert_close(out.hidden[mask], padded.hidden[:, :10][mask])
