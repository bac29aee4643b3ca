"""The classifier head's pooling: each pooling the schema
accepts (mean, max, first) against a hand-written masked reduction, and a
classifier's logits unchanged when only the padding length changes."""

from __future__ import annotations

import pytest
import torch

from scalestudy.architectures import ARCHITECTURES
from scalestudy.models import build_backbone
from scalestudy.models.heads import POOLINGS, ClassifierHead, pool
from scalestudy.training.modules import Classifier

from tests.support import built_in

VOCAB, MAX_LEN = 17, 16


def hidden_and_mask():
    """[3, 5, 2] states whose padded positions hold values far above and below the
    real ones (so a reduction that reads padding shows it), right-padded as every
    task's batches are."""
    hidden = torch.tensor([
        [[1.0, -2.0], [3.0, 0.5], [-1.0, 4.0], [900.0, -900.0], [900.0, 900.0]],
        [[0.0, 1.0], [-900.0, 900.0], [900.0, -900.0], [900.0, 900.0], [-900.0, -900.0]],
        [[2.0, 2.0], [-3.0, 1.0], [0.5, -0.5], [1.5, 7.0], [-2.0, 3.0]],
    ])
    lengths = [3, 1, 5]
    mask = torch.arange(5)[None, :] < torch.tensor(lengths)[:, None]
    return hidden, mask, lengths


def by_hand(hidden, lengths, how: str) -> torch.Tensor:
    rows = []
    for b, n in enumerate(lengths):
        real = [hidden[b, t].tolist() for t in range(n)]  # the real positions only
        if how == "mean":
            rows.append([sum(v[d] for v in real) / n for d in range(2)])
        elif how == "max":
            rows.append([max(v[d] for v in real) for d in range(2)])
        else:  # first: the first real position
            rows.append(real[0])
    return torch.tensor(rows)


def test_the_accepted_poolings_are_mean_max_and_first():
    assert POOLINGS == ("mean", "max", "first")


@pytest.mark.parametrize("how", POOLINGS)
def test_pooling_is_the_masked_reduction(how):
    hidden, mask, lengths = hidden_and_mask()
    expected = by_hand(hidden, lengths, how)
    assert torch.equal(pool(hidden, mask, how), expected) if how != "mean" else (
        torch.allclose(pool(hidden, mask, how), expected, rtol=1e-6, atol=1e-6))
    # Literal values of the first row, where padding holds +-900.
    first_row = {"mean": [1.0, 2.5 / 3], "max": [3.0, 4.0], "first": [1.0, -2.0]}[how]
    assert pool(hidden, mask, how)[0].tolist() == pytest.approx(first_row)


def classifier(arch: str, pooling: str) -> Classifier:
    torch.manual_seed(0)
    backbone = build_backbone(arch, "xxs", VOCAB, MAX_LEN).eval()
    head = ClassifierHead(backbone, 3, pooling)
    return Classifier(backbone, head, 3).eval()


def padded(lengths, length: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(3, VOCAB, (len(lengths), max(lengths)), generator=g)
    out = torch.zeros(len(lengths), length, dtype=torch.long)
    for b, n in enumerate(lengths):
        out[b, :n] = tokens[b, :n]
    return out


@pytest.mark.parametrize("pooling", POOLINGS)
@pytest.mark.parametrize("arch", sorted(built_in(ARCHITECTURES)))
def test_logits_do_not_change_with_the_padding_length(arch, pooling):
    model = classifier(arch, pooling)
    lengths = [5, 9, 3]
    tokens = padded(lengths, MAX_LEN)
    with torch.no_grad():
        short, _ = model(tokens[:, :10])
        long, _ = model(tokens)
    torch.testing.assert_close(short, long, rtol=1e-4, atol=1e-5)
    if arch == "switch":
        return  # expert capacity is shared by a batch (models/switch.py): not alone
    # The same sequence alone, unpadded, gets the same logits too.
    with torch.no_grad():
        alone, _ = model(tokens[2:, :3])
    torch.testing.assert_close(alone[0], long[2], rtol=1e-4, atol=1e-5)
