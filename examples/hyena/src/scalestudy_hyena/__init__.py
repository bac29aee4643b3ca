"""A Hyena-style long-convolution backbone (Poli et al. 2023) for scalestudy:
the registry entry its entry point exports. Torch-free: the backbone's own
module (backbone.py) is imported only when a run builds it."""

from scalestudy import extend

HYENA = extend.architecture("hyena", "scalestudy_hyena.backbone:Hyena")
