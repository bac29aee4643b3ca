"""The architecture registry: every backbone a study can name.

An entry says where the backbone's class lives (a module path: the built-ins'
are `scalestudy.models.<module>`, a plugin's its own; scalestudy.extend),
whether the mechanism has a causal mode, and its colour and marker in every
figure. The class itself (a torch module) is imported only when a run builds
it (`Architecture.load`), so that the config checks, the DAG and the analysis
read this table without torch. Everything else about a backbone (its size
mapping, init, Fixup branches, optimiser hints on its parameters, its output
layer) lives in its own module.

Colours: the Okabe-Ito colour-blind-safe palette (Okabe & Ito 2008; its
yellow, too faint on white, left out) and five of Paul Tol's (2021) muted
colours, each with its own filled marker, so that no two architectures share a
colour or a marker. A plugin's architecture that states neither gets the next
of `PLUGIN_STYLES` that no entry has (Paul Tol's vibrant colours and the tri
markers), never a built-in's.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from .registry import Registry


@dataclass(frozen=True)
class Architecture:
    name: str
    module: str  # the module holding the backbone class
    cls: str  # the backbone class in it
    color: str
    marker: str
    causal: bool = True  # whether the mechanism has a causal mode (train.causal)
    # Whether its causal backbone has exactly the bidirectional one's weights (the
    # causal mode only masks), so that a causally pretrained checkpoint finetunes
    # bidirectionally (priors/: spt_causal). Not the SSMs: a bidirectional
    # layer holds a second kernel, and its FFN width is matched to that.
    causal_weights_bidirectional: bool = True
    # The vanilla baseline the others are compared with (the architecture gap).
    reference: bool = False
    # What training it costs in GPU memory (study/costs.gpu_memory), measured
    # on a CPU by models/memory.py (the bytes autograd saves for backward, T5
    # sizes tiny to base at 64 to 256 tokens, dropout 0, the largest seen;
    # tests/training/test_gpu_path.py re-measures them):
    # bytes a token keeps per layer per unit of width of the size's vanilla
    # shape, in 32-true and under bf16 or fp16 autocast (Performer's float32
    # random features, m = d ln d = 266 a head at head dim 64, are in its);
    # bytes a position keeps per layer per unit of width whatever the batch
    # (S4's kernel: Abar^l, [D, N/2, T] complex64); and the parameters
    # relative to the vanilla transformer's (Switch's experts; the shared
    # layers of ALBERT and the Universal Transformer).
    activation_bytes: tuple[float, float] | None = (66.0, 42.0)  # None: measured (a plugin's)
    kernel_bytes: float = 0.0
    params_factor: float = 1.0
    # Softmax attention through SDPA (its score matrix materialises only on
    # the math path: study/costs.gpu_memory).
    attention: bool = True

    def load(self) -> type:
        """The backbone class (imports torch)."""
        return getattr(importlib.import_module(self.module), self.cls)

    @property
    def style(self) -> dict:
        return {"color": self.color, "marker": self.marker}


A = Architecture
M = "scalestudy.models."
ARCHITECTURES: Registry[Architecture] = Registry("arch", group="scalestudy.architectures",
                                                 entries=[
    A("transformer", M + "transformer", "Transformer", "#000000", "o", reference=True),
    A("glu", M + "glu", "GLUTransformer", "#E69F00", "s", activation_bytes=(77.0, 50.0)),
    A("mos", M + "mos", "MoSTransformer", "#56B4E9", "^"),
    A("evolved", M + "evolved", "EvolvedTransformer", "#009E73", "D",
      activation_bytes=(74.0, 45.0)),
    A("universal", M + "universal", "UniversalTransformer", "#0072B2", "v", params_factor=0.2),
    A("switch", M + "switch", "SwitchTransformer", "#D55E00", "P", activation_bytes=(84.0, 55.0),
      params_factor=3.0),
    A("performer", M + "performer", "Performer", "#CC79A7", "X", activation_bytes=(172.0, 154.0),
      attention=False),
    # Pooling merges positions t and t+1: no causal mode.
    A("funnel", M + "funnel", "Funnel", "#882255", "<", causal=False,
      activation_bytes=(46.0, 30.0)),
    A("albert", M + "albert", "Albert", "#999933", "p", activation_bytes=(70.0, 43.0),
      params_factor=0.2),
    A("mixer", M + "mixer", "Mixer", "#332288", "h", activation_bytes=(86.0, 48.0),
      attention=False),
    A("lconv", M + "convolutions", "LightConv", "#44AA99", ">", activation_bytes=(70.0, 40.0),
      attention=False),
    A("dconv", M + "convolutions", "DynamicConv", "#8C564B", "d", activation_bytes=(222.0, 116.0),
      attention=False),
    A("s4", M + "s4", "S4", "#E8384F", "*", causal_weights_bidirectional=False,
      activation_bytes=(88.0, 61.0), kernel_bytes=272.0, attention=False),
    # Amos et al.'s unstructured SSM (the diagonal linear RNN), and a milder ablation.
    A("dlr", M + "s4", "DLR", "#117733", "H", causal_weights_bidirectional=False,
      activation_bytes=(88.0, 61.0), kernel_bytes=17.0, attention=False),
    A("s4_random_a", M + "s4", "S4RandomA", "#AA4499", "8", causal_weights_bidirectional=False,
      activation_bytes=(88.0, 61.0), kernel_bytes=272.0, attention=False),
])

# A plugin's colour and marker where it states none: none a built-in uses.
PLUGIN_STYLES = tuple(zip(("#EE7733", "#0077BB", "#33BBEE", "#EE3377", "#CC3311", "#009988",
                           "#DDAA33", "#BBBBBB"),
                          ("1", "2", "3", "4", r"$\clubsuit$", r"$\spadesuit$",
                           r"$\heartsuit$", r"$\diamondsuit$"), strict=True))


def free_style() -> tuple[str, str]:
    """The first colour and marker of PLUGIN_STYLES no registered architecture has."""
    colours = {a.color for a in ARCHITECTURES.values()}
    markers = {a.marker for a in ARCHITECTURES.values()}
    for colour, marker in PLUGIN_STYLES:
        if colour not in colours and marker not in markers:
            return colour, marker
    raise ValueError(f"arch: every plugin style is taken ({len(PLUGIN_STYLES)}); state a "
                     "color and a marker")
