"""The backbones: `backbone_config` (a named size's hyper-parameters for an
architecture) and `backbone_class` (its registry entry's class) build every
model; `build_backbone` does both in one call.

Which backbones exist is the architecture registry's (scalestudy.architectures:
name -> module and class). Importing the package imports no torch (the
backbones' own modules do), so that scalestudy.extend, which a plugin's
registry entry imports, is torch-free. Every backbone class takes a `BackboneConfig`,
maps token ids [B, T] plus a padding mask to a `BackboneOutput`, and has a
static `config_for(size, protocol, **common)` that maps a named size of the
ladder (scalestudy.ladder) to its own hyper-parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..architectures import ARCHITECTURES
from .config import BackboneConfig, BackboneOutput

if TYPE_CHECKING:  # the package imports no torch: a plugin's entry reads BackboneConfig
    from torch import nn


def backbone_class(arch: str) -> type[nn.Module]:
    return ARCHITECTURES[arch].load()


def backbone_config(
    arch: str, size: str, vocab_size: int, max_len: int, *,
    causal: bool = False, norm: str = "pre", dropout: float = 0.0, protocol: str = "default",
    token_outputs: bool = False,
) -> BackboneConfig:
    if causal and not ARCHITECTURES[arch].causal:
        raise ValueError(f"causal: {arch!r} has no causal mode")
    return backbone_class(arch).config_for(
        size, protocol, vocab_size=vocab_size, max_len=max_len, causal=causal, norm=norm,
        dropout=dropout, token_outputs=token_outputs,
    )


def build_backbone(
    arch: str, size: str, vocab_size: int, max_len: int, *,
    causal: bool = False, norm: str = "pre", dropout: float = 0.0, protocol: str = "default",
    token_outputs: bool = False,
) -> nn.Module:
    cfg = backbone_config(
        arch, size, vocab_size, max_len, causal=causal, norm=norm, dropout=dropout,
        protocol=protocol, token_outputs=token_outputs,
    )
    return backbone_class(arch)(cfg)


__all__ = ["BackboneConfig", "BackboneOutput", "backbone_class", "backbone_config",
           "build_backbone"]
