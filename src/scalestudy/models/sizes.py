"""The named size ladder of the vanilla transformer.

CPU sizes (`xxs` .. `l`, about 1e4 to 1e6 non-embedding parameters) run on a
laptop; the T5 sizes (`tiny` .. `xl`) follow the encoder of Tay et al. 2022,
"Scaling Laws vs Model Architectures" (Table 1). Other architectures map a size
name to their own hyper-parameters so that their non-embedding parameter count
tracks this ladder.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    depth: int
    width: int
    heads: int
    d_ff: int


LADDER: dict[str, Shape] = {
    # CPU ladder: every step roughly doubles to quadruples the parameters.
    "xxs": Shape(depth=2, width=16, heads=2, d_ff=64),
    "xs": Shape(depth=2, width=32, heads=2, d_ff=128),
    "s": Shape(depth=2, width=64, heads=4, d_ff=256),
    "m": Shape(depth=4, width=96, heads=4, d_ff=384),
    "l": Shape(depth=4, width=128, heads=4, d_ff=512),
    # T5-scale encoders (Tay et al. 2022).
    "tiny": Shape(depth=4, width=256, heads=4, d_ff=1024),
    "small": Shape(depth=6, width=512, heads=8, d_ff=2048),
    "base": Shape(depth=12, width=768, heads=12, d_ff=3072),
    "large": Shape(depth=24, width=1024, heads=16, d_ff=4096),
    "xl": Shape(depth=24, width=2048, heads=32, d_ff=5120),
}

SIZES = tuple(LADDER)


def shape_for(size: str) -> Shape:
    """The vanilla shape of a named size; a clear error for an unknown name."""
    try:
        return LADDER[size]
    except KeyError:
        raise ValueError(f"size: unknown {size!r}, accepted values: {', '.join(SIZES)}") from None
