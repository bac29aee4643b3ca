"""The named size ladder of the vanilla transformer, and the scaling protocols.

CPU sizes (`xxxs` .. `l`, about 2e3 to 1e6 non-embedding parameters) run on a
laptop; the T5 sizes (`tiny` .. `xl`) follow the encoder of Tay et al. 2022,
"Scaling Laws vs Model Architectures" (Table 1). Other architectures map a size
name to their own hyper-parameters so that their non-embedding parameter count
tracks this ladder.

A scaling protocol chooses which dimension grows along the ladder (Tay et al.
2022, Section 4.3): `default` follows the table; `depth` holds the width of an
anchor size and grows depth; `width` holds the anchor's depth and grows width.
Both keep each size's non-embedding budget (~12 L D^2) of the default ladder,
so the three protocols span the same parameter range. The anchor is `xs` for
the CPU sizes and `small` for the T5 sizes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    depth: int
    width: int
    heads: int
    d_ff: int


LADDER: dict[str, Shape] = {
    # CPU ladder: every step roughly doubles to quadruples the parameters.
    # xxxs (about 2k parameters): the frontier's smallest budgets are optimal below xxs.
    "xxxs": Shape(depth=2, width=8, heads=2, d_ff=32),
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
CPU_SIZES = ("xxxs", "xxs", "xs", "s", "m", "l")
PROTOCOLS = ("default", "depth", "width")


def shape_for(size: str, protocol: str = "default") -> Shape:
    """The vanilla shape of a named size under a scaling protocol."""
    if size not in LADDER:
        raise ValueError(f"size: unknown {size!r}, accepted values: {', '.join(SIZES)}")
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol: unknown {protocol!r}, accepted values: {', '.join(PROTOCOLS)}")
    shape = LADDER[size]
    if protocol == "default":
        return shape
    anchor = LADDER["xs" if size in CPU_SIZES else "small"]
    budget = shape.depth * shape.width**2  # the ~12 L D^2 budget, without the 12
    if protocol == "depth":
        depth = max(1, round(budget / anchor.width**2))
        return Shape(depth, anchor.width, anchor.heads, anchor.d_ff)
    # Width: a multiple of 8 per head keeps head dimensions whole and even.
    step = 8 * anchor.heads
    width = max(step, step * round(math.sqrt(budget / anchor.depth) / step))
    return Shape(anchor.depth, width, anchor.heads, 4 * width)
