"""Training one grid cell on its task, ending in one run record.

The cell's `RunSpec` (study/specs.py) is everything the run depends on; its
prior (priors/) says how the backbone starts (its own init, Fixup, or a
pretraining stage's checkpoint) and how long it trains (compute matching);
training/run.py does the rest that every run does.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .. import tasks
from ..models import backbone_class, backbone_config
from ..models.heads import ClassifierHead
from ..models.layers import fixed_length
from ..priors import PRIORS
from ..records import data_checksum, read_records
from ..study.specs import RunSpec, TrainConfig
from .branches import budgeted
from .data import has_padding, shard
from .loop import evaluate
from .modules import Classifier
from .run import job_errors, start, step_flops, train_and_record


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
    bcfg = backbone_config(spec.arch, spec.size, data.vocab_size, max_len, norm=cfg.norm,
                           dropout=cfg.dropout, protocol=cfg.protocol, causal=cfg.causal)
    backbone = backbone_class(spec.arch)(bcfg)
    if not has_padding((t for tensors in data.splits.values() for t in tensors[:-1]),
                       data.pad_id):
        fixed_length(backbone)  # the labels aside
    report = prior.initialise(backbone, data, checkpoint)
    head = ClassifierHead(backbone, data.n_classes, cfg.pooling, pair=data.pair)
    return Classifier(backbone, head, data.n_classes, data.pad_id), report


@job_errors
def run(spec: RunSpec, data_dir: Path, run_dir: Path, pretrained: Path | None = None,
        trunk: Path | None = None) -> dict:
    """Train one cell and write run_dir/record.parquet; returns the record.

    `pretrained`: the directory of the pretraining stage the prior needs (its
    best.ckpt and record.parquet), for spt, upstream and scratch_matched;
    `trunk`: a wsd branch's trunk directory (training/branches.py).
    """
    prior = PRIORS[spec.prior]
    if prior.needs and pretrained is None:
        raise ValueError(f"prior {spec.prior!r} needs the {prior.needs} "
                         "pretraining directory (--pretrained)")
    pretrained = Path(pretrained) if pretrained else None
    pretrain_record = read_records(pretrained / "record.parquet").iloc[0] if pretrained else None
    if pretrain_record is not None and pretrain_record["status"] != "ok":
        raise ValueError(f"{pretrained}: its {prior.needs} pretraining run "
                         f"{pretrain_record['status']}, so there is nothing to start from")
    fabric = start(spec, run_dir)
    data = tasks.load(spec.task, spec.task_config, data_dir)
    cfg = prior.schedule(spec.train, spec.arch)
    model, report = build_classifier(spec, cfg, data, pretrained)
    if report:
        print(f"prior {spec.prior}: {report}")
    # The steps it trains, from a step's FLOPs counted on the built model.
    flops = step_flops(fabric, model, data.splits["train"], cfg.batch_size,
                       spec.trainer.micro_batch)
    cfg = budgeted(cfg, flops, data.seq_len, f"{spec.arch} at size {spec.size} on {spec.task}")
    cfg = prior.match_compute(cfg, flops, pretrain_record)
    record = {"task": spec.task, "task_data": data.label, "prior": spec.prior,
              "stage": prior.stage, "seq_len": data.seq_len,
              "data_checksum": data_checksum(data_dir)}
    if prior.pretrain:
        record.update(pretrain_flops=float(pretrain_record["train_flops"]),
                      upstream_loss=float(pretrain_record["upstream_loss"]),
                      # null for a pretraining record written before the field
                      pretrain_causal=(None if pd.isna(pretrain_record["causal"])
                                       else bool(pretrain_record["causal"])),
                      pretrain_seed=int(pretrain_record["seed"]),
                      # a budgeted pretraining's budget (null before the field)
                      budget=(None if pd.isna(pretrain_record["budget"])
                              else float(pretrain_record["budget"])))

    def after_training(loop) -> dict:
        test = shard(fabric, data.splits["test"], cfg.batch_size, spec.seed, False)
        return {**loop.final_validation(), **evaluate(fabric, model, test, "test")}

    return train_and_record(fabric, spec, model, cfg, data.splits, run_dir, record,
                            after_training, flops=flops, trunk=trunk)
