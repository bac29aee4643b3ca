"""The masked-LM model of the pretraining stages: a backbone with a tied
masked-LM head (models/lm_head.py), trained to restore masked tokens, or, on a
causal backbone, to predict the next token.

Masked positions take the [MASK] id (Amos et al. 2023; no BERT 80/10/10).
Pixel tasks (Image, Pathfinder, Path-X) mask their intensity tokens with the
[MASK] id too (Amos et al. zero the pixel and flag it in an extra input
channel). The masks are drawn on the CPU from the model's own seeded
generators, the same on any accelerator, and a checkpoint keeps their state.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..models.lm_head import MaskedLMHead
from ..study.specs import TrainConfig
from .masking import IGNORE_INDEX, causal_lm_targets, mask_tokens
from .modules import StudyModule


class MaskedLM(StudyModule):
    """Backbone + tied masked-LM head, trained to restore masked tokens."""

    def __init__(self, backbone, cfg: TrainConfig, vocab_size: int, mask_ratio: float,
                 span: float | None, seed: int, pad_id: int = 0, mask_id: int = 1,
                 vocab: str = ""):
        super().__init__(backbone, cfg, pad_id)
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

    def predictions(self, tokens: torch.Tensor, generator: torch.Generator):
        """(logits [B, T, V], targets [B, T]: the original id where scored, -100
        elsewhere, aux_loss) of the backbone run on the masked (causal: unchanged)
        inputs."""
        real = tokens != self.pad_id
        if self.backbone.cfg.causal:  # a causal model learns to predict the next token
            inputs, targets = causal_lm_targets(tokens.cpu(), real.cpu())
        else:
            inputs, targets = mask_tokens(tokens.cpu(), real.cpu(), self.mask_ratio,
                                          self.mask_id, self.vocab_size, generator, self.span)
        inputs, targets = inputs.to(tokens.device), targets.to(tokens.device)
        out = self.backbone(inputs, real)
        return self.head(out.hidden), targets, out.aux_loss

    def masked_loss(self, tokens: torch.Tensor, generator: torch.Generator):
        logits, targets, aux_loss = self.predictions(tokens, generator)
        if not (targets != IGNORE_INDEX).any():  # nothing masked in this batch
            return logits.sum() * 0.0, aux_loss
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(),
                               ignore_index=IGNORE_INDEX)
        return loss, aux_loss

    def training_loss(self, batch):
        return self.masked_loss(batch[0], self.train_masks)

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
        logits, targets, _ = self.predictions(batch[0], self.val_masks)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(),
                               ignore_index=IGNORE_INDEX, reduction="sum")
        return {"loss": loss, "count": (targets != IGNORE_INDEX).sum()}
