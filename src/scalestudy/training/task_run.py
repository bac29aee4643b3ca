"""Training one grid cell on its task, ending in one run record.

The cell's `RunSpec` (study/specs.py) is everything the run depends on; its
prior (priors/) says how the backbone starts (its own init, Fixup, or a
pretraining stage's checkpoint) and how long it trains (compute matching);
`run` builds the run's recipe (training/run.py's Recipe: its data, its model
under its prior, what it records of its pretraining, its evaluation on the
test split) and hands it to `execute`, which does the rest that every run
does.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .. import tasks
from ..models import build_backbone
from ..models.heads import ClassifierHead
from ..models.layers import fixed_length
from ..priors import PRIORS
from ..records import data_checksum, read_records
from ..study.specs import RunSpec, TrainConfig
from .data import has_padding, shard
from .loop import evaluate
from .modules import Classifier
from .run import Recipe, execute


def build_classifier(spec: RunSpec, cfg: TrainConfig, data: tasks.TaskData,
                     pretrained: Path | None) -> tuple[Classifier, dict]:
    """The task model under its prior, built to `cfg` (the prior's train
    config: norm, dropout, protocol, causal, pooling); returns it and the
    prior's report."""
    prior = PRIORS[spec.prior]
    checkpoint = prior.load(pretrained)
    max_len = data.seq_len
    if checkpoint is not None:
        # The pretrained backbone fixes the length (position table, Mixer's
        # token-mixing weights); the task's sequences must fit in it.
        max_len = checkpoint["hyper_parameters"]["max_len"]
        if data.seq_len > max_len:
            raise ValueError(
                f"tasks.{spec.task}: sequence length {data.seq_len} exceeds the pretrained "
                f"backbone's max_len {max_len} (upstream.seq_len)"
            )
    backbone = build_backbone(spec.arch, spec.size, data.vocab_size, max_len, norm=cfg.norm,
                              dropout=cfg.dropout, protocol=cfg.protocol, causal=cfg.causal)
    if not has_padding((t for tensors in data.splits.values() for t in tensors[:-1]),
                       data.pad_id):
        fixed_length(backbone)  # the labels aside
    report = prior.initialise(backbone, data, checkpoint)
    head = ClassifierHead(backbone, data.n_classes, cfg.pooling, pair=data.pair)
    return Classifier(backbone, head, data.n_classes, data.pad_id), report


def run(spec: RunSpec, data_dir: Path, run_dir: Path, pretrained: Path | None = None,
        trunk: Path | None = None) -> dict:
    """Train one cell and write run_dir/record.parquet; returns the record.

    `pretrained`: the directory of the pretraining stage the prior needs (its
    best.ckpt and record.parquet), for spt, upstream and scratch_matched;
    `trunk`: a wsd branch's trunk directory (training/branches.py), else the
    one beside run_dir.
    """
    pretrained = Path(pretrained) if pretrained else None
    return execute(spec, lambda: recipe(spec, data_dir, pretrained), run_dir, trunk,
                   check=lambda: pretraining(spec, pretrained))


def pretraining(spec: RunSpec, pretrained: Path | None) -> pd.Series | None:
    """The record of the pretraining run the cell's prior needs (None for a
    prior that needs none); ValueError where it is not given or did not
    finish ok."""
    prior = PRIORS[spec.prior]
    if prior.needs and pretrained is None:
        raise ValueError(f"prior {spec.prior!r} needs the {prior.needs} "
                         "pretraining directory (--pretrained)")
    record = read_records(pretrained / "record.parquet").iloc[0] if pretrained else None
    if record is not None and record["status"] != "ok":
        raise ValueError(f"{pretrained}: its {prior.needs} pretraining run "
                         f"{record['status']}, so there is nothing to start from")
    return record


def recipe(spec: RunSpec, data_dir: Path, pretrained: Path | None) -> Recipe:
    """The cell's recipe: its task's data, its model under its prior (which
    says its train config and lengthens it to match a pretraining's compute),
    what its record keeps of its pretraining, and its test accuracy."""
    prior = PRIORS[spec.prior]
    pretrain_record = pretraining(spec, pretrained)  # checked before the run started
    data = tasks.load(spec.task, spec.task_config, data_dir)
    cfg = prior.schedule(spec.train, spec.arch)
    model, report = build_classifier(spec, cfg, data, pretrained)
    if report:
        print(f"prior {spec.prior}: {report}")
    record = {"task_data": data.label, "data_checksum": data_checksum(data_dir)}
    if prior.pretrain:
        record.update(pretrain_flops=float(pretrain_record["train_flops"]),
                      upstream_loss=float(pretrain_record["upstream_loss"]),
                      # null for a pretraining record written before the field
                      pretrain_causal=(None if pd.isna(pretrain_record["causal"])
                                       else bool(pretrain_record["causal"])),
                      pretrain_seed=int(pretrain_record["seed"]))

    def evaluate_on_test(loop) -> dict:
        test = shard(loop.fabric, data.splits["test"], cfg.batch_size, spec.seed, False)
        return {**loop.final_validation(), **evaluate(loop.fabric, model, test, "test")}

    return Recipe(model, cfg, data.splits, data.seq_len, record, evaluate_on_test,
                  name=f"{spec.arch} at size {spec.size} on {spec.task}",
                  match_compute=lambda cfg, flops: prior.match_compute(cfg, flops,
                                                                       pretrain_record))
