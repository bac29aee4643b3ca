"""The causal priors build causal backbones, and the records say so.
spt_causal pretrains causally and finetunes as
Amos et al.'s README recipe does, with the study's (bidirectional) backbone,
except where the causal backbone lacks weights of the bidirectional one (S4);
spt_causal_causal finetunes causally too. A finetuning record says both causal
flags (causal, pretrain_causal) and its pretraining run's seed."""

from __future__ import annotations

import pytest
import torch

from scalestudy import tasks
from scalestudy.priors import PRIORS
from scalestudy.records import read_records
from scalestudy.study.specs import PretrainSpec, RunSpec
from scalestudy.training.pretrain import run_pretrain
from scalestudy.training.task_run import build_classifier, run

from tests.support.cells import TASK

TRAINER = {"accelerator": "cpu", "threads": 1}
SHORT = {"max_steps": 2, "batch_size": 8, "warmup_steps": 1, "val_every": 2,
         "protocol": "default"}


def run_spec(prior: str, arch: str = "transformer") -> RunSpec:
    return RunSpec.from_dict({"study": "t", "task": "listops", "arch": arch, "size": "xxs",
                              "prior": prior, "seed": 0, "task_config": TASK, "train": SHORT,
                              "trainer": TRAINER})


def sees_the_future(backbone, vocab_size: int, length: int) -> bool:
    """Whether changing the second half of a sequence changes any state of its first half."""
    backbone.eval()
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(3, vocab_size, (2, length), generator=g)
    changed = tokens.clone()
    half = length // 2
    changed[:, half:] = 3 + (changed[:, half:] - 2) % (vocab_size - 3)
    mask = torch.ones_like(tokens, dtype=torch.bool)
    with torch.no_grad():
        a, b = backbone(tokens, mask).hidden, backbone(changed, mask).hidden
    return not torch.allclose(a[:, :half], b[:, :half], atol=1e-6)


@pytest.mark.parametrize("prior, causal", [("random_causal", True), ("random", False)])
def test_random_causal_builds_a_causal_backbone(data_dir, prior, causal):
    spec = run_spec(prior)
    data = tasks.load("listops", TASK, data_dir)
    model, _ = build_classifier(spec, PRIORS[prior].schedule(spec.train), data, None)
    assert model.backbone.cfg.causal is causal
    assert sees_the_future(model.backbone, data.vocab_size, data.seq_len) is not causal


@pytest.mark.parametrize("prior, causal", [("random_causal", True), ("random", False)])
def test_the_record_carries_the_causal_flag(data_dir, tmp_path, prior, causal):
    record = run(run_spec(prior), data_dir, tmp_path / "run")
    assert record["status"] == "ok"
    assert read_records(tmp_path / "run" / "record.parquet")["causal"].tolist() == [causal]


def pretrain(data_dir, out, arch="transformer", seed=0):
    spec = PretrainSpec.from_dict({"study": "t", "kind": "spt_causal", "corpus": "listops",
                                   "arch": arch, "size": "xxs", "seed": seed,
                                   "corpus_config": TASK, "train": SHORT, "trainer": TRAINER})
    assert not spec.train.causal  # the stage makes it causal, not the study
    record = run_pretrain(spec, data_dir, out)
    assert record["status"] == "ok"
    assert read_records(out / "record.parquet")["causal"].tolist() == [True]
    return out


def test_spt_causal_pretrains_causal_then_finetunes_the_transformer_bidirectionally(data_dir,
                                                                                      tmp_path):
    pre = pretrain(data_dir, tmp_path / "pre", seed=3)
    finetune = run(run_spec("spt_causal"), data_dir, tmp_path / "run", pre)
    assert finetune["status"] == "ok"
    record = read_records(tmp_path / "run" / "record.parquet").iloc[0]
    assert (record["causal"], record["pretrain_causal"], record["pretrain_seed"]) == (
        False, True, 3)
    # The finetuned backbone sees the whole sequence: its states depend on later tokens.
    data = tasks.load("listops", TASK, data_dir)
    spec = run_spec("spt_causal")
    model, report = build_classifier(spec, PRIORS["spt_causal"].schedule(spec.train, "transformer"),
                                     data, pre)
    assert not model.backbone.cfg.causal and report["loaded"] == "spt_causal"
    assert sees_the_future(model.backbone, data.vocab_size, data.seq_len)


def test_spt_causal_causal_finetunes_causally_and_records_it(data_dir, tmp_path):
    pre = pretrain(data_dir, tmp_path / "pre")
    finetune = run(run_spec("spt_causal_causal"), data_dir, tmp_path / "run", pre)
    assert finetune["status"] == "ok"
    record = read_records(tmp_path / "run" / "record.parquet").iloc[0]
    assert (record["causal"], record["pretrain_causal"]) == (True, True)
    data = tasks.load("listops", TASK, data_dir)
    spec = run_spec("spt_causal_causal")
    model, _ = build_classifier(spec, PRIORS["spt_causal_causal"].schedule(spec.train), data,
                                pre)
    assert model.backbone.cfg.causal
    assert not sees_the_future(model.backbone, data.vocab_size, data.seq_len)


@pytest.mark.parametrize("arch, finetune_causal", [("transformer", False), ("s4", True),
                                                   ("dlr", True), ("performer", False)])
def test_spt_causal_finetunes_bidirectionally_where_the_weights_allow(arch, finetune_causal):
    """Every architecture whose causal backbone has the bidirectional one's
    weights finetunes bidirectionally (the checkpoint then fills it: the
    parameter shapes of the two modes are compared here, built); the SSMs, whose
    bidirectional layer holds a second kernel, finetune causally."""
    from scalestudy.architectures import ARCHITECTURES
    from scalestudy.models import build_backbone
    from scalestudy.study.specs import TrainConfig

    cfg = PRIORS["spt_causal"].schedule(TrainConfig(), arch)
    assert cfg.causal is finetune_causal
    shapes = [{k: v.shape for k, v in build_backbone(arch, "xxs", 20, 24, causal=c)
               .state_dict().items()} for c in (False, True)]
    assert (shapes[0] == shapes[1]) is ARCHITECTURES[arch].causal_weights_bidirectional
    assert (shapes[0] == shapes[1]) is not finetune_causal
