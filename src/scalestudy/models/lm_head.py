"""The masked-LM head for pretraining (BERT, Devlin et al. 2019; ALBERT, Lan et
al. 2019): a dense + GELU + LayerNorm transform, then an output layer whose
weight is the backbone's token embedding (tied) with its own bias.

Faithful: BERT's `cls.predictions` head (transform, tied decoder, free bias).
ALBERT: its token table has width E < D, and its own MLM head maps D -> E in
the dense layer before the tied E-wide decoder; this head does the same for
every backbone (the dense layer maps D -> E, the embedding width, which is D
everywhere but ALBERT), so the tying needs no extra projection.
Mixture of softmaxes (a backbone announcing `output = "mos"`): the output layer
is `MixtureOfSoftmaxes` (Yang et al. 2018) over the transformed E-wide state,
its shared decoder W tied to the token embedding (shapes always agree, [V, E]),
returning log-probabilities, which cross-entropy takes as logits unchanged.

The tied parameter is registered in both the backbone and the head (as Hugging
Face heads do): `parameters()` yields it once, and a state dict holds it under
both names with the same value.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .layers import standard_init
from .mos import MixtureOfSoftmaxes


def token_embedding(backbone: nn.Module) -> nn.Embedding:
    """The backbone's token table: `embed.token` (the shared `Embedding`),
    `embed.lookup.token` (ALBERT's factorised embedding) or `embed` itself (a
    bare nn.Embedding: Mixer, S4)."""
    embed = backbone.embed
    for candidate in (embed, getattr(embed, "token", None),
                      getattr(getattr(embed, "lookup", None), "token", None)):
        if isinstance(candidate, nn.Embedding):
            return candidate
    raise ValueError(f"{type(backbone).__name__}: no token embedding found under `embed`")


class MaskedLMHead(nn.Module):
    """Hidden [B, T, D] -> logits [B, T, vocab] (log-probabilities for MoS)."""

    def __init__(self, backbone: nn.Module, vocab_size: int):
        super().__init__()
        table = token_embedding(backbone)
        if table.num_embeddings != vocab_size:
            raise ValueError(
                f"vocab_size: got {vocab_size}, the backbone's token embedding has "
                f"{table.num_embeddings} rows (the output layer is tied to it)"
            )
        width, embed_dim = backbone.cfg.width, table.embedding_dim
        self.dense = nn.Linear(width, embed_dim)
        self.norm = nn.LayerNorm(embed_dim)
        if getattr(backbone, "output", None) == "mos":
            self.decoder = None
            self.mos = MixtureOfSoftmaxes(
                embed_dim, vocab_size, backbone.cfg.extra["mos_components"]
            )
        else:
            self.decoder = nn.Linear(embed_dim, vocab_size)
            self.mos = None
        self.apply(standard_init)  # before tying: it would re-draw the embedding
        if self.mos is not None:
            self.mos.reset_parameters()  # MoS keeps its own init (models/mos.py)
        # Tied: the output layer's weight IS the embedding parameter (each layer keeps its bias).
        self.output_layer.weight = table.weight

    @property
    def output_layer(self) -> nn.Linear:
        """The [vocab, E] layer tied to the token embedding (MoS: its shared decoder W)."""
        return self.mos.decoder if self.mos is not None else self.decoder

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        h = self.norm(F.gelu(self.dense(hidden)))
        return self.mos(h) if self.mos is not None else self.decoder(h)
