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
    # bidirectionally (priors/: spt_causal). Not the SSMs: a bidirectional
    # layer holds a second kernel, and its FFN width is matched to that.
    causal_weights_bidirectional: bool = True
    # The vanilla baseline the others are compared with (the architecture gap).
    reference: bool = False
    # What training it costs in GPU memory (study/costs.gpu_memory), measured
    # on a CPU by training/memory.py (the bytes autograd saves for backward, T5
    # sizes tiny to base at 64 to 256 tokens, dropout 0, the largest seen;
    # tests/training/test_gpu_path.py re-measures them):
    # bytes a token keeps per layer per unit of width of the size's vanilla
    # shape, in 32-true and under bf16 or fp16 autocast (Performer's float32
    # random features, m = d ln d = 266 a head at head dim 64, are in its);
    # bytes a position keeps per layer per unit of width whatever the batch
    # (S4's kernel: Abar^l, [D, N/2, T] complex64); and the parameters
    # relative to the vanilla transformer's (Switch's experts; the shared
    # layers of ALBERT and the Universal Transformer).
    activation_bytes: tuple[float, float] = (66.0, 42.0)
    kernel_bytes: float = 0.0
    params_factor: float = 1.0
    # Softmax attention through SDPA (its score matrix materialises only on
    # the math path: study/costs.gpu_memory).
    attention: bool = True

    def load(self) -> type:
        """The backbone class (imports torch)."""
        return getattr(importlib.import_module(f"scalestudy.models.{self.module}"), self.cls)

    @property
    def style(self) -> dict:
        return {"color": self.color, "marker": self.marker}


A = Architecture
ARCHITECTURES: Registry[Architecture] = Registry("arch", [
    A("transformer", "transformer", "Transformer", "#000000", "o", reference=True),
    A("glu", "glu", "GLUTransformer", "#E69F00", "s", activation_bytes=(77.0, 50.0)),
    A("mos", "mos", "MoSTransformer", "#56B4E9", "^"),
    A("evolved", "evolved", "EvolvedTransformer", "#009E73", "D", activation_bytes=(74.0, 45.0)),
    A("universal", "universal", "UniversalTransformer", "#0072B2", "v", params_factor=0.2),
    A("switch", "switch", "SwitchTransformer", "#D55E00", "P", activation_bytes=(84.0, 55.0),
      params_factor=3.0),
    A("performer", "performer", "Performer", "#CC79A7", "X", activation_bytes=(172.0, 154.0),
      attention=False),
    # Pooling merges positions t and t+1: no causal mode.
    A("funnel", "funnel", "Funnel", "#882255", "<", causal=False,
      activation_bytes=(46.0, 30.0)),
    A("albert", "albert", "Albert", "#999933", "p", activation_bytes=(70.0, 43.0),
      params_factor=0.2),
    A("mixer", "mixer", "Mixer", "#332288", "h", activation_bytes=(86.0, 48.0), attention=False),
    A("lconv", "convolutions", "LightConv", "#44AA99", ">", activation_bytes=(70.0, 40.0),
      attention=False),
    A("dconv", "convolutions", "DynamicConv", "#8C564B", "d", activation_bytes=(222.0, 116.0),
      attention=False),
    A("s4", "s4", "S4", "#E8384F", "*", causal_weights_bidirectional=False,
      activation_bytes=(88.0, 61.0), kernel_bytes=272.0, attention=False),
    # Amos et al.'s unstructured SSM (the diagonal linear RNN), and a milder ablation.
    A("dlr", "s4", "DLR", "#117733", "H", causal_weights_bidirectional=False,
      activation_bytes=(88.0, 61.0), kernel_bytes=17.0, attention=False),
    A("s4_random_a", "s4", "S4RandomA", "#AA4499", "8", causal_weights_bidirectional=False,
      activation_bytes=(88.0, 61.0), kernel_bytes=272.0, attention=False),
])
