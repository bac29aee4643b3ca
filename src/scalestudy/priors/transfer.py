"""Start a finetuning run from a pretraining checkpoint's backbone.

The `spt` and `upstream` priors pretrain backbone + masked-LM head; finetuning
then loads every backbone weight and builds a fresh task head (heads are never
transferred: their shapes and meaning differ between the stages).

The training module (train.StudyModule) stores its backbone under the
attribute `backbone`, so a checkpoint's state dict names its weights
`backbone.<name>`; keys outside that prefix (the head) are ignored. The
check is strict: every backbone tensor must come from the checkpoint, with its
shape, or nothing is loaded and the error lists what is missing, unexpected or
mis-shaped.

One allowed difference: a Funnel pretrained with token outputs has an
upsampling decoder (`decoder.*`) that its classifier lacks (the encoder shapes
are the same, see models/funnel.py); those keys are dropped, per
`UNUSED_AFTER_PRETRAINING`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch import nn

PREFIX = "backbone."
# Source keys (after the prefix) a finetuning backbone may legitimately lack, by arch.
UNUSED_AFTER_PRETRAINING: dict[str, tuple[str, ...]] = {"funnel": ("decoder.",)}


def load_checkpoint(path) -> dict:
    """A run's checkpoint (training/loop.py), read without executing code from
    the file (`weights_only`: tensors and plain containers only)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise FileNotFoundError(f"pretraining checkpoint {path} is missing") from None
    except Exception as err:  # truncated, corrupt, or holding code
        raise ValueError(f"pretraining checkpoint {path} cannot be read: {err}") from None


def backbone_state(source: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The backbone part of a state dict (or of a whole checkpoint dict),
    prefix stripped."""
    if "state_dict" in source and isinstance(source["state_dict"], Mapping):
        source = source["state_dict"]  # a whole checkpoint (training/loop.py)
    return {k[len(PREFIX):]: v for k, v in source.items() if k.startswith(PREFIX)}


def _listed(names: Iterable[str], limit: int = 20) -> str:
    names = sorted(names)
    more = f" ... and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def transfer_backbone(
    source_state_dict: Mapping[str, torch.Tensor],
    backbone: nn.Module,
    *,
    drop_prefixes: tuple[str, ...] | None = None,
    fresh: tuple[nn.Module, ...] = (),
) -> None:
    """Load every weight of `backbone` from a pretraining state dict, strictly.

    source_state_dict: the training module's state dict (keys `backbone.*`;
    other keys are ignored), or a whole checkpoint dict holding one under
    "state_dict". drop_prefixes: source keys (prefix stripped) the backbone may
    lack; default per `UNUSED_AFTER_PRETRAINING` for the backbone's arch.
    fresh: sub-modules of `backbone` that keep their own initialisation (the
    token table, when the pretraining vocabulary differs from the task's).
    Raises ValueError naming every missing, unexpected or mis-shaped key, and
    then loads nothing.
    """
    source = backbone_state(source_state_dict)
    if not source:
        raise ValueError(f"transfer: the source state dict has no '{PREFIX}*' keys")
    if drop_prefixes is None:
        arch = getattr(getattr(backbone, "cfg", None), "arch", "")
        drop_prefixes = UNUSED_AFTER_PRETRAINING.get(arch, ())
    keep = {
        f"{name}.{key}" if name else key
        for name, module in backbone.named_modules() if any(module is m for m in fresh)
        for key in module.state_dict()
    }
    source = {k: v for k, v in source.items() if k not in keep}
    target = {k: v for k, v in backbone.state_dict().items() if k not in keep}
    missing = set(target) - set(source)
    unexpected = {k for k in set(source) - set(target) if not k.startswith(drop_prefixes)}
    mismatched = [
        f"{k} {tuple(source[k].shape)} -> {tuple(target[k].shape)}"
        for k in sorted(set(source) & set(target))
        if source[k].shape != target[k].shape
    ]
    problems = []
    if missing:
        problems.append(f"missing from the source: {_listed(missing)}")
    if unexpected:
        problems.append(f"unexpected in the source: {_listed(unexpected)}")
    if mismatched:
        problems.append(f"shape mismatch: {_listed(mismatched)}")
    if problems:
        raise ValueError(
            f"transfer: the checkpoint does not fit the {type(backbone).__name__} backbone; "
            + "; ".join(problems)
        )
    backbone.load_state_dict({k: source[k] for k in target}, strict=not keep)
