"""What a training step keeps for backward, measured on any device: the
bytes of the tensors autograd saves in a forward pass (each storage once,
the parameters aside). The GPU-memory estimate's coefficients
(architectures.py, study/costs.gpu_memory) are these bytes per token per
layer per unit of width; tests/training/test_gpu_path.py measures them again, and
tools/gpu_check.py sets them beside a GPU's peak."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch

from ..ladder import shape_for


@contextlib.contextmanager
def saved_tensors() -> Iterator[dict[int, int]]:
    """Within it, autograd's saved tensors by storage: {data_ptr: bytes}."""
    seen: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        yield seen


def saved_bytes(module: torch.nn.Module, step: Callable[[], object]) -> int:
    """Bytes autograd saves for backward while `step()` runs (a forward), the
    module's parameters aside (they are the weights, counted apart)."""
    params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    with saved_tensors() as seen:
        step()
    return sum(size for ptr, size in seen.items() if ptr not in params)


def per_token_layer(module: torch.nn.Module, make_batch: Callable[[int, int], tuple],
                    size: str, protocol: str = "default", length: int = 128,
                    autocast: torch.dtype | None = None) -> tuple[float, float]:
    """(bytes a token keeps per layer per unit of width, bytes a position
    keeps per layer per unit of width whatever the batch) of `module`'s
    training loss, from three forwards: batch 1 and 2 at `length`, batch 1 at
    twice it; widths and layers the vanilla shape's of `size`.
    `make_batch(batch, length)` makes a batch; `autocast` a CPU autocast dtype
    (bf16: what mixed precision saves)."""
    shape = shape_for(size, protocol)
    units = shape.depth * shape.width

    def measure(batch: int, tokens: int) -> int:
        with torch.autocast("cpu", autocast or torch.bfloat16, enabled=autocast is not None):
            return saved_bytes(module, lambda: module.training_loss(make_batch(batch, tokens)))

    one, two, longer = measure(1, length), measure(2, length), measure(1, 2 * length)
    per_token = (two - one) / length
    per_position = (longer - one) / length - per_token
    return per_token / units, per_position / units


def backbone_bytes(arch: str, size: str = "xs", protocol: str = "default",
                   length: int = 64) -> tuple[float, float]:
    """(fp32, bf16) bytes a token keeps per layer per unit of width of the
    backbone `arch` (its registry entry's `activation_bytes`, measured: a
    plugin that states none), from its forward and a loss on its hidden
    states (a head's own activations aside), on a probe batch of random
    tokens."""
    from . import build_backbone

    backbone = build_backbone(arch, size, 32, 2 * length)

    class Probe(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = backbone

        def training_loss(self, batch):
            tokens, real = batch
            return self.backbone(tokens, real).hidden.float().square().mean()

    def make_batch(batch: int, tokens: int):
        ids = torch.randint(3, 32, (batch, tokens), generator=torch.Generator().manual_seed(0))
        return ids, torch.ones(batch, tokens, dtype=torch.bool)

    probe = Probe().train()
    fp32, _ = per_token_layer(probe, make_batch, size, protocol, length)
    bf16, _ = per_token_layer(probe, make_batch, size, protocol, length, torch.bfloat16)
    return fp32, bf16
