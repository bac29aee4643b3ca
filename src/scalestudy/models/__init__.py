"""The architecture registry and `build_backbone`, the one way to build a model.

Every backbone class takes a `BackboneConfig`, maps token ids [B, T] plus a
padding mask to a `BackboneOutput`, and has a static `config_for(size, **common)`
that maps a named size to its own hyper-parameters.
"""

from __future__ import annotations

from torch import nn

from .albert import Albert
from .config import NORMS, BackboneConfig, BackboneOutput
from .convolutions import DynamicConv, LightConv
from .evolved import EvolvedTransformer
from .funnel import Funnel
from .glu import GLUTransformer
from .mixer import Mixer
from .mos import MoSTransformer
from .performer import Performer
from .s4 import S4, S4Unstructured
from .sizes import LADDER, PROTOCOLS, SIZES, shape_for
from .switch import SwitchTransformer
from .transformer import Transformer
from .universal import UniversalTransformer

# In the order of names.ARCHITECTURES (figures keep one colour per name).
ARCHITECTURES: dict[str, type[nn.Module]] = {
    "transformer": Transformer,
    "glu": GLUTransformer,
    "mos": MoSTransformer,
    "evolved": EvolvedTransformer,
    "universal": UniversalTransformer,
    "switch": SwitchTransformer,
    "performer": Performer,
    "funnel": Funnel,
    "albert": Albert,
    "mixer": Mixer,
    "lconv": LightConv,
    "dconv": DynamicConv,
    "s4": S4,
    "s4_unstructured": S4Unstructured,
}


def backbone_class(arch: str) -> type[nn.Module]:
    try:
        return ARCHITECTURES[arch]
    except KeyError:
        accepted = ", ".join(ARCHITECTURES)
        raise ValueError(f"arch: unknown {arch!r}, accepted values: {accepted}") from None


def backbone_config(
    arch: str, size: str, vocab_size: int, max_len: int, *,
    causal: bool = False, norm: str = "pre", dropout: float = 0.0, protocol: str = "default",
    token_outputs: bool = False,
) -> BackboneConfig:
    cls = backbone_class(arch)
    if causal and not cls.causal_ok:
        raise ValueError(f"causal: {arch!r} has no causal mode")
    return cls.config_for(
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


__all__ = [
    "ARCHITECTURES", "NORMS", "LADDER", "PROTOCOLS", "SIZES", "BackboneConfig", "BackboneOutput",
    "backbone_config", "build_backbone", "shape_for",
]
