"""Batches for the loop: a split's tensors as a data loader, this rank's shard."""

from __future__ import annotations

import torch
from lightning.fabric import Fabric
from torch.utils.data import DistributedSampler, TensorDataset
from torchdata.stateful_dataloader import StatefulDataLoader


def loader(tensors: tuple, batch_size: int, seed: int, shuffle: bool, rank: int = 0,
           replicas: int = 1) -> StatefulDataLoader:
    """Batches of `tensors`, this rank's shard of them. Shuffled, each epoch's
    order is a function of (seed, epoch) alone (DistributedSampler's; the loop
    sets the epoch) and a checkpoint keeps the loader's place in its epoch
    (torchdata's StatefulDataLoader), so a resumed run sees the batches it would
    have seen. Not shuffled, the split in order (under DDP each rank a strided
    shard, the last padded by repeats, as Lightning's Trainer shards it)."""
    dataset = TensorDataset(*tensors)
    order = None
    if shuffle or replicas > 1:
        order = DistributedSampler(dataset, num_replicas=replicas, rank=rank, seed=seed,
                                   shuffle=shuffle)
    # Its own generator: creating an iterator draws a seed from it, not from
    # torch's global RNG (dropout's), which a resumed run restores.
    return StatefulDataLoader(dataset, batch_size=batch_size, sampler=order,
                              generator=torch.Generator().manual_seed(seed),
                              drop_last=shuffle and len(dataset) > batch_size * replicas)


def shard(fabric: Fabric, tensors: tuple, batch_size: int, seed: int,
          shuffle: bool) -> StatefulDataLoader:
    """`loader` for this rank of the run's Fabric."""
    return loader(tensors, batch_size, seed, shuffle, fabric.global_rank, fabric.world_size)
