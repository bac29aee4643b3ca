"""The one configuration every backbone is built from."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

NORMS = ("pre", "post", "none")


@dataclass(frozen=True)
class BackboneConfig:
    """Shape and options of a backbone, as built.

    `extra` carries architecture-specific knobs (experts, features, kernel
    sizes...) so the common fields stay the same for every architecture.
    """

    arch: str
    vocab_size: int
    max_len: int
    depth: int
    width: int
    heads: int
    d_ff: int
    dropout: float = 0.0
    norm: str = "pre"
    causal: bool = False
    # True when every input position needs an output (masked-LM heads): a
    # backbone that shortens the sequence (funnel) must then upsample back.
    token_outputs: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_shape(cls, arch: str, shape, **fields) -> BackboneConfig:
        """A config of the size ladder's `shape` (sizes.Shape: depth, width, heads,
        d_ff); `fields` give the rest and override what the architecture changes."""
        return cls(arch=arch, **{**asdict(shape), **fields})

    def __post_init__(self) -> None:
        if self.norm not in NORMS:
            raise ValueError(f"norm: got {self.norm!r}, accepted values: {', '.join(NORMS)}")
        if self.width % self.heads:
            raise ValueError(f"width {self.width} is not divisible by heads {self.heads}")


@dataclass
class BackboneOutput:
    """What every backbone returns.

    hidden: [B, T', D] states (T' < T for backbones that pool the sequence);
    mask: [B, T'] True at real positions; aux_loss: a scalar added to the
    training loss (the Switch load-balancing loss), 0 for most backbones.
    """

    hidden: Any
    mask: Any
    aux_loss: Any = 0.0
