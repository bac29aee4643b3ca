"""The masked-LM model of the pretraining stages: a backbone with a tied
masked-LM head (models/lm_head.py), trained to restore masked tokens, or, on a
causal backbone, to predict the next token.

Masked positions take the [MASK] id (Amos et al. 2023; no BERT 80/10/10).
Pixel tasks (Image, Pathfinder, Path-X) mask their intensity tokens with the
[MASK] id too (Amos et al. zero the pixel and flag it in an extra input
channel). The masks are drawn on the CPU (`prepare`, on the host batch before
it moves to the device) from the model's own seeded generators, the same on
any accelerator, and a checkpoint keeps their state.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..models.lm_head import MaskedLMHead
from .masking import IGNORE_INDEX, causal_lm_targets, mask_tokens
from .modules import StudyModule


class Masked(NamedTuple):
    """A pretraining batch as the backbone takes it: the masked (causal:
    unchanged) ids, the original id where scored (-100 elsewhere) and the
    real positions, all [B, T]."""

    inputs: torch.Tensor
    targets: torch.Tensor
    real: torch.Tensor


class MaskedLM(StudyModule):
    """Backbone + tied masked-LM head, trained to restore masked tokens."""

    def __init__(self, backbone, vocab_size: int, mask_ratio: float, span: float | None,
                 seed: int, pad_id: int = 0, mask_id: int = 1, vocab: str = ""):
        super().__init__(backbone, pad_id)
        self.head = MaskedLMHead(backbone, vocab_size)
        self.vocab_size, self.mask_ratio, self.span = vocab_size, mask_ratio, span
        self.mask_id, self.seed = mask_id, seed
        # Masks are drawn on the CPU from seeded generators, the same on any
        # accelerator; validation redraws the same masks every time.
        self.train_masks = torch.Generator().manual_seed(seed)
        self.val_masks = torch.Generator()
        self.vocab = vocab

    def hyperparameters(self) -> dict:
        """What finetuning needs to rebuild a backbone this checkpoint fits.
        `vocab` names what the ids mean (bytes, pixels, listops: tasks.contract)."""
        bcfg = self.backbone.cfg
        return {"arch": bcfg.arch, "max_len": bcfg.max_len, "vocab_size": self.vocab_size,
                "vocab": self.vocab, "norm": bcfg.norm}

    def prepare(self, batch: tuple, training: bool) -> Masked:
        """The host batch masked (causal: unchanged) before it moves to the
        device, so that no mask makes a round trip through the host."""
        return self.masked(batch[0], self.train_masks if training else self.val_masks)

    def masked(self, tokens: torch.Tensor, generator: torch.Generator) -> Masked:
        """`tokens` (on the CPU) masked with draws from `generator`."""
        real = tokens != self.pad_id
        if self.backbone.cfg.causal:  # a causal model learns to predict the next token
            inputs, targets = causal_lm_targets(tokens, real)
        else:
            inputs, targets = mask_tokens(tokens, real, self.mask_ratio, self.mask_id,
                                          self.vocab_size, generator, self.span)
        return Masked(inputs, targets, real)

    def predictions(self, batch: Masked | tuple, training: bool):
        """(logits [B, T, V], targets [B, T], aux_loss) of the backbone on a
        prepared batch (a raw one, (tokens,) on a CPU, is prepared here)."""
        if not isinstance(batch, Masked):
            batch = self.prepare(batch, training)
        out = self.backbone(batch.inputs, batch.real)
        return self.head(out.hidden), batch.targets, out.aux_loss

    def training_loss(self, batch):
        """The mean NLL per scored token (0 where a batch has none), without
        asking the device whether it has any: the sum over the count, which
        equals cross-entropy's own mean bitwise on a CPU."""
        logits, targets, aux_loss = self.predictions(batch, training=True)
        nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(),
                              ignore_index=IGNORE_INDEX, reduction="sum")
        return nll / (targets != IGNORE_INDEX).sum().clamp_min(1), aux_loss

    def reseed(self, seed: int) -> None:
        self.train_masks.manual_seed(seed)

    def rng_state(self) -> dict:  # a resumed run draws the masks it would have
        return {**super().rng_state(), "train_masks": self.train_masks.get_state()}

    def set_rng_state(self, state: dict) -> None:
        super().set_rng_state(state)
        self.train_masks.set_state(state["train_masks"])

    def start_evaluation(self) -> None:
        self.val_masks.manual_seed(self.seed + 1)

    def evaluation_sums(self, batch):
        """The NLL summed over the batch's masked (causal: predicted) tokens and their
        number: the split's loss is the mean per masked token (upstream_loss, the
        held-out masked-token NLL in nats), not the mean of per-sequence means."""
        logits, targets, _ = self.predictions(batch, training=False)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(),
                               ignore_index=IGNORE_INDEX, reduction="sum")
        return {"loss": loss, "count": (targets != IGNORE_INDEX).sum()}
