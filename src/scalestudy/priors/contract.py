"""What the study check asks of a plugin's backbone for each prior of the
grid, before any run (scalestudy.extend says what each prior needs): a prior
whose runs start from a pretraining stage pretrains the backbone under a
masked-LM head tied to its token table (`embed`); every other prior
initialises the probe backbone with its own `initialise` hook (T-Fixup and
DT-Fixup: the `embed` tables and the residual branches' `fixup_weights()`),
built as the prior's schedule builds it (its LayerNorm placement, causal
where it forces it). A refusal is one ValueError naming the prior, the
architecture and what the prior missed. Imports torch (the check runs it only
for architectures of plugins)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from ..models import build_backbone
from ..models.contract import probe_batch
from ..models.lm_head import MaskedLMHead
from ..stages import STAGES
from . import PRIORS


def check_prior(prior: str, arch: str, size: str, vocab_size: int, max_len: int, train,
                protocol: str = "default") -> None:
    """Raises ValueError where `prior` cannot start a run of `arch` at `size`
    on a task of `vocab_size` tokens and `max_len` positions, trained by
    `train` (the study's TrainConfig)."""
    entry = PRIORS[prior]
    cfg = entry.schedule(train, arch)
    try:
        if entry.pretrain is not None:  # its stage pretrains the backbone under an LM head
            causal = cfg.causal or STAGES[entry.pretrain].causal
            backbone = build_backbone(arch, size, vocab_size, max_len, protocol=protocol,
                                      causal=causal, norm=cfg.norm, token_outputs=True)
            MaskedLMHead(backbone, vocab_size)
        else:
            torch.manual_seed(0)
            backbone = build_backbone(arch, size, vocab_size, max_len, protocol=protocol,
                                      causal=cfg.causal, norm=cfg.norm)
            tokens, _ = probe_batch(vocab_size, max_len)
            data = SimpleNamespace(splits={"train": (tokens,)}, pad_id=0, vocab_size=vocab_size)
            entry.initialise(backbone, data, None)
    except Exception as err:
        raise ValueError(f"prior {prior} cannot start a run of arch {arch} ({type(err).__name__}: "
                         f"{err}); what each prior needs of a backbone: scalestudy.extend"
                         ) from None
