"""Batches for the loop: a split's tensors as a data loader, this rank's shard."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from lightning.fabric import Fabric
from torch.utils.data import DistributedSampler, TensorDataset, default_collate
from torchdata.stateful_dataloader import StatefulDataLoader


def has_padding(token_tensors: Iterable[torch.Tensor], pad_id: int = 0) -> bool:
    """Whether any row of these [N, T] id tensors is padded (read on the host,
    a slice at a time)."""
    return any(bool((rows == pad_id).any()) for tokens in token_tensors
               for rows in tokens.split(1024))


def collate(examples: list) -> tuple:
    """A batch as the models take it: int64 ids and labels. A split stays in
    its cache's compact dtype (uint16 token ids: a Path-X example is 32 KB,
    not 128), and only a batch is widened."""
    return tuple(t.long() for t in default_collate(examples))


def loader(tensors: tuple, batch_size: int, seed: int, shuffle: bool, rank: int = 0,
           replicas: int = 1) -> StatefulDataLoader:
    """Batches of `batch_size` (this rank's) of `tensors`, this rank's shard of
    them. Shuffled, each epoch's order is a function of (seed, epoch) alone
    (DistributedSampler's; the loop sets the epoch) and a checkpoint keeps the
    loader's place in its epoch (torchdata's StatefulDataLoader), so a resumed
    run sees the batches it would have seen. Not shuffled (evaluation), the
    split in order; under DDP each rank takes every replicas-th example from
    its rank on, the shards differing by one example at most and never
    padded with repeats, so the reduced sums count each example once."""
    dataset = TensorDataset(*tensors)
    order = None
    if shuffle:
        order = DistributedSampler(dataset, num_replicas=replicas, rank=rank, seed=seed)
    elif replicas > 1:
        order = range(rank, len(dataset), replicas)
    # Its own generator: creating an iterator draws a seed from it, not from
    # torch's global RNG (dropout's), which a resumed run restores.
    return StatefulDataLoader(dataset, batch_size=batch_size, sampler=order, collate_fn=collate,
                              generator=torch.Generator().manual_seed(seed),
                              drop_last=shuffle and len(dataset) > batch_size * replicas)


def shard(fabric: Fabric, tensors: tuple, batch_size: int, seed: int,
          shuffle: bool) -> StatefulDataLoader:
    """`loader` for this rank of the run's Fabric; `batch_size` is the global
    batch, each rank loading its share (study.specs.batch_shares checks that
    it divides)."""
    return loader(tensors, batch_size // fabric.world_size, seed, shuffle, fabric.global_rank,
                  fabric.world_size)
