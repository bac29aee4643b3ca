"""T-Fixup and DT-Fixup: initialisations that replace LayerNorm (and warm-up).

T-Fixup (Huang et al. 2020, "Improving Transformer Optimization Through Better
Initialization"): Xavier init, input embeddings N(0, d^-1/2), then the value and
output projections of every attention branch and both weights of every MLP
branch scaled by 0.67 N^(-1/4) (the paper's encoder rule), and the input
embeddings scaled by (9N)^(-1/4) (so their std is d^-1/2 (9N)^(-1/4)).

DT-Fixup (Xu et al. 2021, "Optimizing Deeper Transformers on Small Datasets"):
the same base init; mu = max_j ||x_j|| over the training set, the largest
per-token norm of the input to the block stack; then the same weights scaled by
(N (4 mu^2 + 2 mu + 2))^(-1/2). Queries, keys and biases are left alone.

Which weights: every residual-branch module of every backbone exposes
`fixup_weights()` (attention value + output, both MLP weights, and each
backbone's documented analogue: a GLU's value path, a convolution branch's
projections, an S4D output projection, a Mixer's token-mixing weights...).

The order (**contract** for DT-Fixup), as `dtfixup` runs it:
  1. `fixup_init`: Xavier on every Linear and dense conv weight, biases zero, the
     input embedding tables N(0, d^-1/2);
  2. `max_token_norm`: mu, measured on the backbone *as initialised in 1*, since
     the stack input is the embedding output (ALBERT: after its E -> D Linear,
     which step 1 re-initialises too);
  3. `apply_dtfixup(backbone, mu)`: the scaling only. It does not re-initialise,
     which would draw new embeddings and make mu stale.

Faithful: the formulas, the weight sets, N = the number of residual layers
applied (a shared ALBERT / Universal block counts every time it is applied),
mu measured in eval mode (no dropout) over real (non-padded) positions.
Chosen / simplified:
- Step 1 is T-Fixup's for both priors. DT-Fixup's paper Xaviers "all free
  parameters", but its inputs came from a pre-trained encoder; from scratch we
  give the input embeddings T-Fixup's N(0, d^-1/2), so the two priors differ
  only in the scale factor. Every table of the input embedding (tokens and the
  learned positions) gets it, so after step 1 the stack input has per-token
  norm about sqrt(2) (T-Fixup then scales it by (9N)^(-1/4), below).
- T-Fixup's input-embedding factor (9N)^(-1/4) comes from the paper's
  encoder-decoder analysis; we apply it to the encoder-only backbones as the
  paper's recipe does (the default). `apply_tfixup(..., scale_embeddings=False)`
  leaves the tables at N(0, d^-1/2), the ablation. DT-Fixup never scales them:
  its mu is measured on the unscaled tables.
- Xavier is plain (gain 1) on every projection, the query, key and value ones
  included (fairseq's attention uses gain 1/sqrt(2) for those); grouped (depthwise)
  convolutions, LightConv's softmax kernels and S4D's state-space parameters
  keep their own initialisation: they are position-mixing kernels, not
  projections.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import torch
from torch import nn

from ..models.layers import Residual

TFIXUP_GAIN = 0.67


@dataclass(frozen=True)
class FixupReport:
    """What a Fixup prior did, for the run record and the logs."""

    prior: str
    factor: float  # every fixup weight was multiplied by this
    n_blocks: int  # N in the formula
    mu: float  # DT-Fixup's max token norm; NaN for T-Fixup
    n_tensors: int  # distinct weight tensors scaled

    def as_dict(self) -> dict:
        return asdict(self)


# --- which modules and tensors -------------------------------------------------------


def _outermost_branches(backbone: nn.Module) -> list[tuple[nn.Module, nn.Module]]:
    """(branch, parent) for every module defining `fixup_weights` that has no
    ancestor defining it (Switch's experts sit inside the routed branch, which
    already returns their weights), each shared module once."""
    found: list[tuple[nn.Module, nn.Module]] = []
    seen: set[int] = {id(backbone)}

    def visit(module: nn.Module) -> None:
        for child in module.children():
            if id(child) in seen:
                continue  # a shared (ALBERT/Universal) module: once
            seen.add(id(child))
            if callable(getattr(child, "fixup_weights", None)):
                found.append((child, module))
            else:
                visit(child)

    visit(backbone)
    return found


def residual_branches(backbone: nn.Module) -> list[nn.Module]:
    """Every residual-branch module (one defining `fixup_weights`), shared ones once."""
    return [branch for branch, _ in _outermost_branches(backbone)]


def fixup_tensors(backbone: nn.Module) -> list[torch.Tensor]:
    """The distinct weight tensors the Fixup priors rescale."""
    tensors, seen = [], set()
    for branch in residual_branches(backbone):
        for weight in branch.fixup_weights():
            if id(weight) not in seen:
                seen.add(id(weight))
                tensors.append(weight)
    return tensors


def n_blocks(backbone: nn.Module) -> int:
    """N in the Fixup formulas: the number of residual layers applied, a layer
    being the vanilla pair of residual branches (attention + MLP).

    That is `backbone.cfg.depth` for every backbone built of such pairs; for
    ALBERT and the Universal Transformer the one shared block is applied depth
    times, so N = depth although its weights are held (and scaled) once. Where
    the backbone holds more than two branches per cfg.depth, N counts the
    branches / 2 instead: an Evolved Transformer block has four (GLU,
    convolutions, attention, MLP; "about two Transformer blocks deep", as its
    config_for counts it), and a Funnel with token outputs adds its decoder.
    """
    pairs = math.ceil(len(residual_branches(backbone)) / 2)
    return max(backbone.cfg.depth, pairs)


# --- initialisation ------------------------------------------------------------------


def xavier_init(backbone: nn.Module) -> None:
    """Xavier-uniform (Glorot & Bengio 2010) on every nn.Linear weight and every
    dense (groups == 1) Conv1d weight of the backbone, their biases zero.

    Depthwise convolutions, embeddings and other parameters are left as they are.
    """
    for module in backbone.modules():
        dense_conv = isinstance(module, nn.Conv1d) and module.groups == 1
        if isinstance(module, nn.Linear) or dense_conv:
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)


def input_embeddings(backbone: nn.Module) -> list[nn.Embedding]:
    """The embedding tables that feed the stack (token and position tables).

    Every backbone keeps them under `backbone.embed`: an `Embedding` (token +
    position), ALBERT's `FactorisedEmbedding` (tables of size E, then E -> D),
    or a bare nn.Embedding (Mixer, S4: no positions).
    """
    embed = getattr(backbone, "embed", None)
    if embed is None:
        raise ValueError(f"{type(backbone).__name__} has no `embed` module")
    return [m for m in embed.modules() if isinstance(m, nn.Embedding)]


def init_input_embeddings(backbone: nn.Module) -> None:
    """Input embedding tables ~ N(0, d^-1/2) (std d^-1/2, d = the table's width)."""
    for table in input_embeddings(backbone):
        nn.init.normal_(table.weight, std=table.embedding_dim**-0.5)


def fixup_init(backbone: nn.Module) -> None:
    """Step 1 of both priors: Xavier, then the input embeddings (in that order,
    so a seeded run draws the same Xavier weights as `xavier_init` alone)."""
    xavier_init(backbone)
    init_input_embeddings(backbone)


def _require_no_norm(backbone: nn.Module, prior: str) -> None:
    norm = backbone.cfg.norm
    if norm != "none":
        raise ValueError(f"{prior} needs norm none (LayerNorm removed); got norm {norm!r}")


@torch.no_grad()
def _scale(backbone: nn.Module, factor: float) -> int:
    tensors = fixup_tensors(backbone)
    if not tensors:  # a plugin's backbone without residual branches to scale
        raise ValueError(f"{type(backbone).__name__} has no module with fixup_weights")
    for weight in tensors:
        weight.mul_(factor)
    return len(tensors)


# --- T-Fixup -------------------------------------------------------------------------


def tfixup_factor(n: int) -> float:
    return TFIXUP_GAIN * n**-0.25


def apply_tfixup(backbone: nn.Module, *, scale_embeddings: bool = True) -> FixupReport:
    """T-Fixup: `fixup_init`, then every fixup weight x 0.67 N^(-1/4) and (the
    paper's recipe, the default) every input embedding table x (9N)^(-1/4).

    scale_embeddings=False: leave the input embeddings at N(0, d^-1/2), an
    ablation of the paper's recipe (see the module docstring).
    """
    _require_no_norm(backbone, "tfixup")
    fixup_init(backbone)
    n = n_blocks(backbone)
    factor = tfixup_factor(n)
    count = _scale(backbone, factor)
    if scale_embeddings:
        with torch.no_grad():
            for table in input_embeddings(backbone):
                table.weight.mul_((9 * n) ** -0.25)
    return FixupReport("tfixup", factor, n, math.nan, count)


# --- DT-Fixup ------------------------------------------------------------------------


class _Captured(Exception):
    """Raised by the capture hook to stop a forward pass once the input is seen."""


def _stack_entries(backbone: nn.Module) -> list[nn.Module]:
    """Modules whose first call in a forward receives the stack input: the residual
    wrappers (or bare branches).

    A branch wrapped in `Residual` sees LN(x) under pre-LN, so the hook goes on
    the wrapper, whose input is the residual stream itself.
    """
    branches = _outermost_branches(backbone)
    if not branches:
        raise ValueError(f"{type(backbone).__name__} has no module with fixup_weights")
    return [parent if isinstance(parent, Residual) else branch for branch, parent in branches]


def _batch_tokens(batch) -> torch.Tensor:
    return batch[0] if isinstance(batch, (tuple, list)) else batch


@torch.no_grad()
def max_token_norm(backbone: nn.Module, batches: Iterable, pad_id: int = 0) -> float:
    """mu: the largest per-token L2 norm of the input to the block stack over
    `batches` (token ids [B, T], or tuples whose first item is them), at real
    positions (tokens != pad_id), in eval mode.

    "The input to the stack" is what the first residual block receives, caught
    by a forward pre-hook on the residual wrappers and the forward stopped right
    there (so the whole split costs only embedding passes). That is the
    embedding output for most backbones; ALBERT's after the E -> D projection;
    the Universal Transformer's plus its step-1 timestep signal (the paper's
    coordinate embedding, norm sqrt(D/2), part of what the first step sees).
    """
    entries = _stack_entries(backbone)
    captured: list[torch.Tensor] = []

    def hook(module, args):
        captured.append(args[0])
        raise _Captured

    handles = [m.register_forward_pre_hook(hook) for m in entries]
    was_training = backbone.training
    backbone.eval()
    device = next(backbone.parameters()).device
    mu = 0.0
    try:
        for batch in batches:
            tokens = _batch_tokens(batch).to(device).long()  # a split's uint16 ids too
            mask = tokens != pad_id
            captured.clear()
            try:
                backbone(tokens, mask)
            except _Captured:
                pass
            if not captured:
                raise RuntimeError("max_token_norm: no residual block ran in the forward pass")
            x = captured[0]
            if x.shape[:2] != tokens.shape:
                raise RuntimeError(
                    f"max_token_norm: stack input has shape {tuple(x.shape)}, expected "
                    f"[B, T, D] with B, T = {tuple(tokens.shape)}"
                )
            if mask.any():
                mu = max(mu, float(x.float().norm(dim=-1)[mask].max()))
    finally:
        for handle in handles:
            handle.remove()
        backbone.train(was_training)
    return mu


def dtfixup_factor(n: int, mu: float) -> float:
    return (n * (4 * mu**2 + 2 * mu + 2)) ** -0.5


def apply_dtfixup(backbone: nn.Module, mu: float) -> FixupReport:
    """DT-Fixup step 3: every fixup weight x (N (4 mu^2 + 2 mu + 2))^(-1/2).

    Expects the backbone to hold `fixup_init`'s weights and mu measured on them
    (steps 1 and 2; see the module docstring). `dtfixup` runs all three.
    """
    _require_no_norm(backbone, "dtfixup")
    if not math.isfinite(mu) or mu < 0:
        raise ValueError(f"mu: got {mu}, must be a finite norm >= 0")
    n = n_blocks(backbone)
    factor = dtfixup_factor(n, mu)
    return FixupReport("dtfixup", factor, n, float(mu), _scale(backbone, factor))


def dtfixup(backbone: nn.Module, batches: Iterable, pad_id: int = 0) -> FixupReport:
    """The whole DT-Fixup prior, in order: init, measure mu on the train batches, scale."""
    _require_no_norm(backbone, "dtfixup")
    fixup_init(backbone)
    return apply_dtfixup(backbone, max_token_norm(backbone, batches, pad_id))
