"""The masked-LM objective of SPT and upstream pretraining (non-causal path),
checked against what the backbone receives and a hand-written cross-entropy.

`MaskedLM.training_loss` of a batch `MaskedLM.masked` made must feed the
backbone the *masked* inputs (every masked position the [MASK] id, Amos et
al.'s plain replacement; no 80/10/10), score the masked positions only, and
`evaluation_sums` must weight the held-out loss per masked token (the
record's `upstream_loss`: "held-out masked-token NLL (nats)"), not per
sequence.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from lightning.fabric import Fabric

from scalestudy.models import build_backbone
from scalestudy.training.data import loader
from scalestudy.training.loop import evaluate
from scalestudy.training.masked_lm import MaskedLM

VOCAB, LENGTH, PAD, MASK = 13, 16, 0, 1


def masked_lm(ratio=0.5, seed=0, **backbone):
    torch.manual_seed(seed)
    net = build_backbone("transformer", "xxs", VOCAB, LENGTH, token_outputs=True, **backbone)
    return MaskedLM(net, VOCAB, ratio, None, seed=seed, pad_id=PAD,
                    mask_id=MASK).eval()


def padded_tokens(lengths, seed=0) -> torch.Tensor:
    """Real ids in [3, VOCAB) (never the pad or mask id), right-padded with 0."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(3, VOCAB, (len(lengths), LENGTH), generator=g)
    real = torch.arange(LENGTH)[None] < torch.tensor(lengths)[:, None]
    return tokens.masked_fill(~real, PAD)


def backbone_inputs(model) -> list[torch.Tensor]:
    """The token ids of every backbone call from now on (a forward pre-hook)."""
    seen: list[torch.Tensor] = []
    model.backbone.register_forward_pre_hook(lambda module, args: seen.append(args[0].clone()))
    return seen


def token_nll(model, inputs, tokens, scored) -> torch.Tensor:
    """-log p(original token) at the `scored` positions, from the backbone run on
    `inputs`: the cross-entropy written out (log-softmax, gather)."""
    with torch.no_grad():
        logits = model.head(model.backbone(inputs, tokens != PAD).hidden)
    log_p = logits.float().log_softmax(-1)
    return -log_p.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)[scored]


def test_masked_positions_reach_the_backbone_as_the_mask_id():
    model = masked_lm()
    tokens = padded_tokens([16, 11, 6, 16])
    seen = backbone_inputs(model)
    with torch.no_grad():
        model.training_loss(model.masked(tokens, torch.Generator().manual_seed(3)))
    (inputs,) = seen
    real = tokens != PAD
    masked = inputs == MASK
    # Some real tokens are masked (ratio 0.5 over 49 real tokens), never padding.
    assert 10 < int(masked.sum()) < 40 and not (masked & ~real).any()
    # Everything else reaches the backbone unchanged; masked positions only as the mask id.
    assert torch.equal(inputs[~masked], tokens[~masked])
    assert (tokens[masked] != MASK).all()


def test_the_loss_is_the_cross_entropy_over_masked_positions_only():
    model = masked_lm()
    tokens = padded_tokens([16, 11, 6, 16])
    seen = backbone_inputs(model)
    with torch.no_grad():
        loss, aux = model.training_loss(model.masked(tokens, torch.Generator().manual_seed(3)))
    (inputs,) = list(seen)
    masked = inputs == MASK
    assert masked.any()
    expected = token_nll(model, inputs, tokens, masked).mean()
    torch.testing.assert_close(loss, expected, rtol=1e-6, atol=1e-7)
    assert aux == 0.0
    # Not the loss of the unmasked input at the same positions (what a model that
    # sees the answer scores), nor the loss over every real position.
    unmasked = token_nll(model, tokens, tokens, masked).mean()
    assert abs(loss.item() - unmasked.item()) > 1e-3
    every_real = token_nll(model, inputs, tokens, tokens != PAD).mean()
    assert abs(loss.item() - every_real.item()) > 1e-3


def test_nothing_masked_gives_a_zero_loss_that_still_backpropagates():
    """A batch in which no token is masked (ratio 0): loss exactly 0 (not NaN, the
    mean over no targets), on the graph, so backward runs and every gradient is 0."""
    model = masked_lm(ratio=0.0).train()
    tokens = padded_tokens([16, 9])
    seen = backbone_inputs(model)
    loss, aux = model.training_loss(model.masked(tokens, torch.Generator().manual_seed(0)))
    assert torch.equal(seen[0], tokens)  # nothing replaced
    assert loss.item() == 0.0 and loss.requires_grad
    (loss + aux).backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.equal(g, torch.zeros_like(g)) for g in grads)


def test_held_out_loss_is_the_mean_over_every_masked_token_of_the_split():
    """evaluate() on MaskedLM: the mean NLL over all masked tokens of the split
    (upstream_loss is 'held-out masked-token NLL (nats)'), recomputed here from the
    inputs the backbone saw. Batches of very different lengths make the
    per-sequence weighting (each batch's mean weighted by its sequence count) differ."""
    model = masked_lm(ratio=0.3)
    with torch.no_grad():  # token 3 likely everywhere: short rows of 3s cost little
        model.head.tied_layer.bias[3] = 4.0
    long_rows = padded_tokens([16] * 4, seed=1)
    short_rows = padded_tokens([4] * 4, seed=2).clamp(max=3)
    split = torch.cat([long_rows, short_rows])
    fabric = Fabric(accelerator="cpu", devices=1)
    val = loader((split,), batch_size=4, seed=0, shuffle=False)
    seen = backbone_inputs(model)
    got = evaluate(fabric, model, val, "val")["val_loss"]
    seen = list(seen)  # the two batches' inputs (the recomputation below adds calls)

    assert len(seen) == 2
    nll = torch.cat([token_nll(model, inputs, rows, inputs == MASK)
                     for inputs, rows in zip(seen, (long_rows, short_rows), strict=True)])
    per_token = nll.mean().item()
    assert math.isclose(got, per_token, rel_tol=1e-5)
    # The per-sequence weighting this replaces gives another number here.
    per_batch = [token_nll(model, inputs, rows, inputs == MASK).mean().item()
                 for inputs, rows in zip(seen, (long_rows, short_rows), strict=True)]
    assert abs(sum(per_batch) / 2 - per_token) > 0.3
    # Evaluating again redraws the same masks: the same number.
    assert evaluate(fabric, model, val, "val")["val_loss"] == got


def test_causal_path_scores_next_tokens_per_predicted_token():
    """The causal objective counts per predicted token too (evaluation_sums' count)."""
    model = masked_lm(causal=True)
    rows = padded_tokens([16, 16, 5, 5], seed=4)
    sums = model.evaluation_sums((rows,))
    real = rows != PAD
    predicted = real[:, :-1] & real[:, 1:]
    with torch.no_grad():
        logits = model.head(model.backbone(rows, real).hidden)[:, :-1]
    nll = F.cross_entropy(logits[predicted], rows[:, 1:][predicted], reduction="sum")
    assert int(sums["count"]) == int(predicted.sum()) == 15 + 15 + 4 + 4
    torch.testing.assert_close(sums["loss"], nll, rtol=1e-5, atol=1e-5)
