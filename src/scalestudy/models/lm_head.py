"""The masked-LM head for pretraining (BERT, Devlin et al. 2019; ALBERT, Lan et
al. 2019): a dense + GELU + LayerNorm transform, then an output layer whose
weight is the backbone's token embedding (tied) with its own bias.

Faithful: BERT's `cls.predictions` head (transform, tied decoder, free bias).
ALBERT: its token table has width E < D, and its own MLM head maps D -> E in
the dense layer before the tied E-wide decoder; this head does the same for
every backbone (the dense layer maps D -> E, the embedding width, which is D
everywhere but ALBERT), so the tying needs no extra projection.
The output layer is the one the backbone asks for (heads.output_layer): a
linear decoder, or the MoS transformer's `MixtureOfSoftmaxes` (Yang et al.
2018) over the transformed E-wide state, its shared decoder W tied to the
token embedding (shapes always agree, [V, E]), returning log-probabilities,
which cross-entropy takes as logits unchanged. An output layer that keeps its
own initialisation (`keeps_own_init`: MoS) is reset after the head's
standard init, and one with a `tied_projection` ties that layer.

The tied parameter is registered in both the backbone and the head (as Hugging
Face heads do): `parameters()` yields it once, and a state dict holds it under
both names with the same value.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .heads import output_layer
from .layers import standard_init


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
        self.out = output_layer(backbone, embed_dim, vocab_size)
        self.apply(standard_init)  # before tying: it would re-draw the embedding
        if getattr(self.out, "keeps_own_init", False):
            self.out.reset_parameters()
        # Tied: the output layer's weight IS the embedding parameter (each layer keeps its bias).
        self.tied_layer.weight = table.weight

    @property
    def tied_layer(self) -> nn.Linear:
        """The [vocab, E] layer tied to the token embedding (MoS: its shared decoder W)."""
        project = getattr(self.out, "tied_projection", None)
        return project() if project is not None else self.out

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm(F.gelu(self.dense(hidden))))
