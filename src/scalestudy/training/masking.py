"""Denoising targets for self-pretraining (SPT) and upstream pretraining.

Masked denoising as in Amos et al. 2023, "Never Train from Scratch: Fair
Comparison of Long-Sequence Models Requires Data-Driven Priors": every real
token is masked independently with probability `ratio` (per task, in the
task registry: ListOps 10%, text and retrieval 15%, image, pathfinder and
path-x 50%), the model predicts the original token at masked positions, and
the loss ignores the rest (targets -100, cross-entropy's ignore_index).
Causal models get next-token prediction instead (`causal_lm_targets`).

Faithful: independent per-token masking at the paper's ratios; loss on masked
positions only; plain replacement. Amos et al.'s code replaces every masked
token with one fixed value (it zeroes the input and marks the position in an
extra mask channel), with no BERT 80/10/10 split, so `replace="mask"` (every
masked token becomes `mask_id`) is the default; `replace="bert"` gives Devlin et
al.'s 80% [MASK] / 10% random token / 10% unchanged.
Changed: padded positions are never masked (their code masks the whole padded
length); the [MASK] id is a dedicated special token (theirs, 0, doubles as the
padding id). Span masking: their code masks non-overlapping spans of a fixed
length; here span lengths are geometric with mean `span` (SpanBERT-like), made
by a two-state Markov chain (below) so that every real position is still
masked with probability exactly `ratio`.
"""

from __future__ import annotations

import math

import torch

IGNORE_INDEX = -100
REPLACEMENTS = ("mask", "bert")


def bernoulli_mask(
    shape: torch.Size, ratio: float, generator: torch.Generator, device=None
) -> torch.Tensor:
    """[B, T] bool, each entry True with probability `ratio`, independently."""
    return torch.rand(shape, generator=generator, device=device) < ratio


def _geometric(shape, p: float, generator: torch.Generator, device=None) -> torch.Tensor:
    """Integers >= 1 with P(k) = (1-p)^(k-1) p (mean 1/p), by inversion."""
    if p >= 1.0:
        return torch.ones(shape, dtype=torch.long, device=device)
    u = torch.rand(shape, generator=generator, device=device).clamp_min(1e-12)
    return (torch.log(u) / math.log1p(-p)).floor().long() + 1


def span_mask(
    shape: torch.Size, ratio: float, span: float, generator: torch.Generator, device=None
) -> torch.Tensor:
    """[B, T] bool masking spans of geometric length (mean `span`), each position
    masked with probability exactly `ratio`.

    Each row is a two-state Markov chain (masked / kept) started in its
    stationary distribution (masked with probability ratio): a masked run ends
    with probability 1/span per step (runs are geometric, mean span) and a kept
    run with probability ratio / (span (1 - ratio)), which makes (ratio,
    1 - ratio) stationary. The chain is drawn as alternating run lengths, not
    step by step.
    """
    b, t = shape
    if ratio <= 0.0:
        return torch.zeros(shape, dtype=torch.bool, device=device)
    if ratio >= 1.0:
        return torch.ones(shape, dtype=torch.bool, device=device)
    if span < 1:
        raise ValueError(f"span: got {span}, the mean span length must be >= 1")
    leave_kept = ratio / (span * (1.0 - ratio))
    if leave_kept > 1.0:
        raise ValueError(
            f"span: mean {span} is too short for ratio {ratio}: needs span >= "
            f"ratio / (1 - ratio) = {ratio / (1 - ratio):.3g}"
        )
    starts_masked = torch.rand(b, generator=generator, device=device) < ratio
    runs = max(4, int(2 * t * min(1.0, leave_kept + 1.0 / span)) + 4)
    while True:  # draw enough runs to cover T; rarely repeats
        masked_len = _geometric((b, runs), 1.0 / span, generator, device)
        kept_len = _geometric((b, runs), leave_kept, generator, device)
        # Run j is masked when j is even and the row starts masked, or j odd and not.
        run_masked = (torch.arange(runs, device=device) % 2 == 0) == starts_masked[:, None]
        lengths = torch.where(run_masked, masked_len, kept_len)
        ends = lengths.cumsum(1)
        if bool((ends[:, -1] >= t).all()):
            break
        runs *= 2
    positions = torch.arange(t, device=device).expand(b, t).contiguous()
    run_of = torch.searchsorted(ends, positions, right=True)  # first run ending after t
    return torch.gather(run_masked, 1, run_of)


def mask_tokens(
    tokens: torch.Tensor,
    pad_mask: torch.Tensor,
    ratio: float,
    mask_id: int,
    vocab_size: int,
    generator: torch.Generator,
    span: float | None = None,
    *,
    replace: str = "mask",
    n_special: int = 3,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked-denoising inputs and targets for token ids [B, T].

    pad_mask: [B, T] bool, True at real positions (the backbones' mask
    convention); only those are masked. Each is masked with probability
    `ratio` (exactly, in expectation), independently, or in geometric spans of
    mean length `span` when it is given. Returns (inputs, targets): inputs with
    masked tokens replaced (`replace`: "mask" -> all mask_id; "bert" -> 80%
    mask_id, 10% a random id in [n_special, vocab_size), 10% unchanged);
    targets the original id at masked positions and -100 elsewhere (unmasked
    and padded). Deterministic given the generator's state.
    """
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"ratio: got {ratio}, must be in [0, 1]")
    if replace not in REPLACEMENTS:
        raise ValueError(f"replace: got {replace!r}, accepted values: {', '.join(REPLACEMENTS)}")
    if pad_mask.shape != tokens.shape:
        raise ValueError(f"pad_mask shape {tuple(pad_mask.shape)} != tokens {tuple(tokens.shape)}")
    device = tokens.device
    if span is None:
        chosen = bernoulli_mask(tokens.shape, ratio, generator, device)
    else:
        chosen = span_mask(tokens.shape, ratio, span, generator, device)
    chosen &= pad_mask.bool()
    targets = torch.where(chosen, tokens, torch.full_like(tokens, IGNORE_INDEX))
    inputs = tokens.clone()
    if replace == "mask":
        inputs[chosen] = mask_id
        return inputs, targets
    # BERT: draw the 80/10/10 split and the random ids for every position, so the
    # generator advances the same way whatever was masked.
    roll = torch.rand(tokens.shape, generator=generator, device=device)
    random_ids = torch.randint(
        n_special, vocab_size, tokens.shape, generator=generator, device=device
    )
    inputs = torch.where(chosen & (roll < 0.8), torch.full_like(tokens, mask_id), inputs)
    inputs = torch.where(chosen & (roll >= 0.8) & (roll < 0.9), random_ids, inputs)
    return inputs, targets


def causal_lm_targets(
    tokens: torch.Tensor, pad_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Next-token prediction for a causal model: (inputs, targets), both [B, T].

    inputs are the tokens unchanged; targets[:, t] = tokens[:, t + 1] where both
    positions are real, -100 at the last position and wherever either is padding.
    """
    real = pad_mask.bool()
    targets = torch.full_like(tokens, IGNORE_INDEX)
    valid = real[:, :-1] & real[:, 1:]
    targets[:, :-1] = torch.where(valid, tokens[:, 1:], targets[:, :-1])
    return tokens.clone(), targets
