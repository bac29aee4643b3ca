"""What a plugin imports to add an architecture, a task or a prior to
scalestudy: the one public module, whose names stay stable (everything else
in the package is free to change). docs/extending.md is the tutorial.

A plugin is a module that makes entries and either exports them as entry
points of an installed distribution::

    [project.entry-points."scalestudy.architectures"]
    hyena = "my_lab.plugin:HYENA"        # an entry, or a list of entries

or, for a module that is not installed, registers them when imported and is
named by the study (`plugins: [my_lab.plugin]`, scalestudy.plugins)::

    from scalestudy import extend
    extend.register(extend.architecture("hyena", "my_lab.hyena:Hyena"))

The registration module imports no torch: the DAG, the analysis and the
config checks read the registries on machines without it; a backbone's own
module is imported only when a run builds it.

**An architecture** (`architecture`): a torch `nn.Module` class that takes a
`BackboneConfig` and maps token ids [B, T] (long) and a padding mask `real`
[B, T] (bool, True at real tokens) to a `BackboneOutput` whose `hidden` is
[B, T', width] (T' = T unless it pools); it has a static
`config_for(size, protocol, **common) -> BackboneConfig` mapping a named size
of the ladder (`SIZES`; `shape_for(size, protocol)` gives the vanilla shape
to match) to its own hyper-parameters, `common` being vocab_size, max_len,
causal, norm, dropout, token_outputs. Parameters and FLOPs are counted on the
built model (training/flops.py, no formula of yours); its GPU memory is
measured on a probe batch unless you state `activation_bytes` (bytes a token
keeps per layer per unit of width, fp32 and bf16). Before any run, the study
check builds it at each size of the grid on a probe batch and refuses it,
naming it and why, when its output has the wrong shape, it has no trainable
parameter, its parameter count does not grow along the ladder, or its
outputs at real tokens depend on the padding.

What the built-in priors ask of a backbone, checked on the probe for each
prior of the grid (scalestudy.priors.contract): the pretraining priors (spt,
upstream and their variants) tie a masked-LM head to its token table, found
as `embed` (an nn.Embedding, or a module whose `token` is one); T-Fixup and
DT-Fixup need `norm: none` honoured (no LayerNorm), the input tables under
`embed`, and each residual branch module stating `fixup_weights()`: the
weights they scale (attention's value and output projections, the MLP's two
weights, or the analogue). A backbone without them takes the random and
compute-matched priors only; the check refuses the others, naming the prior.

**A task** (`task`): a module with `SOURCES` (its `source` values),
`VOCAB_NAME`, `VOCAB_SIZE`, `build(cfg) -> {"train"|"val"|"test": Split}`
(`make_split`; token ids as `byte_ids` makes them for byte text, 0 the
padding), `standin(cfg)` (None for real data, else what it stands in for),
`n_classes(cfg)`, `release_files(cfg)` and `release_source(cfg)` (files it
needs on disk, and where to get them; [] and (None, "") for none), and a
config dataclass whose fields are declared with `option` (a `source`, and a
`seq_len`). The study check builds its splits and refuses them where they
break the data contract (tasks/contract.py).

**A prior** (`Prior`): a subclass of Prior overriding the hooks it needs
(`schedule`, `load`, `initialise`, `match_compute`, `check_until`; their
docstrings say when each runs), registered as an instance.

How a plugin's runs are told apart when its code changes: a run's spec (its
hash, its record's config_hash) states the version of every plugin whose
architecture, task or prior it uses (`plugin_versions`: an installed
distribution's version, else a hash of its module's source), so a changed
plugin reruns its runs and no record of the old code is reused.
"""

from __future__ import annotations

import inspect

from .architectures import ARCHITECTURES, Architecture, free_style
from .ladder import SIZES, shape_for
from .models.config import BackboneConfig, BackboneOutput
from .options import option
from .priors import PRIORS, Prior
from .registry import PluginError
from .tasks import TASKS, Task
from .tasks.contract import BYTE_VOCAB, BYTES, Split, byte_ids, make_split

__all__ = [
    "BYTES", "BYTE_VOCAB", "BackboneConfig", "BackboneOutput", "PluginError", "Prior", "SIZES",
    "Split", "architecture", "byte_ids", "make_split", "option", "register", "shape_for", "task",
]


def architecture(name: str, backbone: str, *, color: str | None = None,
                 marker: str | None = None, causal: bool = True,
                 causal_weights_bidirectional: bool = True,
                 activation_bytes: tuple[float, float] | None = None,
                 kernel_bytes: float = 0.0, params_factor: float = 1.0,
                 attention: bool = False) -> Architecture:
    """An architecture entry: `backbone` is "package.module:Class"; a colour and
    marker no other architecture has are chosen where none is given; the
    rest as scalestudy.architectures.Architecture documents them."""
    module, _, cls = backbone.partition(":")
    if not module or not cls:
        raise PluginError(f"arch {name!r}: backbone {backbone!r}; accepted: 'module:Class'")
    if color is None or marker is None:
        free_colour, free_marker = free_style()
        color, marker = color or free_colour, marker or free_marker
    return Architecture(name, module, cls, color, marker, causal=causal,
                        causal_weights_bidirectional=causal_weights_bidirectional,
                        activation_bytes=activation_bytes, kernel_bytes=kernel_bytes,
                        params_factor=params_factor, attention=attention)


def task(name: str, module, config: type, mask_ratio: float, documents: int = 1) -> Task:
    """A task entry: its module (the contract above), its config dataclass, the
    masked fraction of its self-pretraining, and the documents an example
    puts through the backbone (2 for a pair task)."""
    return Task(name, module, config, mask_ratio=mask_ratio, documents=documents)


def register(*entries) -> None:
    """Add entries (architectures, tasks, priors) to their registries, named
    as the calling module's, refused where the name is taken."""
    caller = inspect.stack()[1].frame.f_globals.get("__name__", "?")
    registries = ((Architecture, ARCHITECTURES), (Task, TASKS), (Prior, PRIORS))
    for entry in entries:
        for kind, registry in registries:
            if isinstance(entry, kind):
                registry.register(entry, f"plugin {caller}")
                break
        else:
            raise PluginError(f"plugin {caller}: {entry!r} is no architecture, task or prior "
                              f"entry (scalestudy.extend.architecture, task, Prior)")
