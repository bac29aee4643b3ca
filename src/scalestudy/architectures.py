"""The architecture registry: every backbone a study can name.

An entry says where the backbone's class lives (`scalestudy.models.<module>`),
whether the mechanism has a causal mode, and its colour and marker in every
figure. The class itself (a torch module) is imported only when a run builds
it (`Architecture.load`), so that the config checks, the DAG and the analysis
read this table without torch. Everything else about a backbone (its size
mapping, init, Fixup branches, optimiser hints on its parameters, its output
layer) lives in its own module.

Colours: the Okabe-Ito colour-blind-safe palette (Okabe & Ito 2008; its
yellow, too faint on white, left out) and five of Paul Tol's (2021) muted
colours, each with its own filled marker, so that no two architectures share a
colour or a marker.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from .registry import Registry


@dataclass(frozen=True)
class Architecture:
    name: str
    module: str  # scalestudy.models.<module>
    cls: str  # the backbone class in it
    color: str
    marker: str
    causal: bool = True  # whether the mechanism has a causal mode (train.causal)
    # Whether its causal backbone has exactly the bidirectional one's weights (the
    # causal mode only masks), so that a causally pretrained checkpoint finetunes
    # bidirectionally (priors.py: spt_causal). Not the SSMs: a bidirectional
    # layer holds a second kernel, and its FFN width is matched to that.
    causal_weights_bidirectional: bool = True
    # The vanilla baseline the others are compared with (the architecture gap).
    reference: bool = False

    def load(self) -> type:
        """The backbone class (imports torch)."""
        return getattr(importlib.import_module(f"scalestudy.models.{self.module}"), self.cls)

    @property
    def style(self) -> dict:
        return {"color": self.color, "marker": self.marker}


A = Architecture
ARCHITECTURES: Registry[Architecture] = Registry("arch", [
    A("transformer", "transformer", "Transformer", "#000000", "o", reference=True),
    A("glu", "glu", "GLUTransformer", "#E69F00", "s"),
    A("mos", "mos", "MoSTransformer", "#56B4E9", "^"),
    A("evolved", "evolved", "EvolvedTransformer", "#009E73", "D"),
    A("universal", "universal", "UniversalTransformer", "#0072B2", "v"),
    A("switch", "switch", "SwitchTransformer", "#D55E00", "P"),
    A("performer", "performer", "Performer", "#CC79A7", "X"),
    # Pooling merges positions t and t+1: no causal mode.
    A("funnel", "funnel", "Funnel", "#882255", "<", causal=False),
    A("albert", "albert", "Albert", "#999933", "p"),
    A("mixer", "mixer", "Mixer", "#332288", "h"),
    A("lconv", "convolutions", "LightConv", "#44AA99", ">"),
    A("dconv", "convolutions", "DynamicConv", "#8C564B", "d"),
    A("s4", "s4", "S4", "#E8384F", "*", causal_weights_bidirectional=False),
    # Amos et al.'s unstructured SSM (the diagonal linear RNN), and a milder ablation.
    A("dlr", "s4", "DLR", "#117733", "H", causal_weights_bidirectional=False),
    A("s4_random_a", "s4", "S4RandomA", "#AA4499", "8", causal_weights_bidirectional=False),
])
