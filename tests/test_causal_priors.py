"""The causal priors build causal backbones, and the records say so (issue 25,
item 4). random_causal is the control of "SPT works with both objectives": a
random_causal run whose backbone is not causal would compare spt_causal with
the bidirectional random prior."""

from __future__ import annotations

import pytest
import torch
from cells import TASK

from scalestudy import tasks
from scalestudy.priors import PRIORS
from scalestudy.records import read_records
from scalestudy.study.specs import PretrainSpec, RunSpec
from scalestudy.training.pretrain import run_pretrain
from scalestudy.training.task import build_classifier, run

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


def test_spt_causal_pretrains_and_finetunes_causal_and_records_it(data_dir, tmp_path):
    pre = PretrainSpec.from_dict({"study": "t", "kind": "spt_causal", "corpus": "listops",
                                  "arch": "transformer", "size": "xxs", "seed": 0,
                                  "corpus_config": TASK, "train": SHORT, "trainer": TRAINER})
    assert not pre.train.causal  # the prior makes it causal, not the study
    record = run_pretrain(pre, data_dir, tmp_path / "pre")
    assert record["status"] == "ok"
    assert read_records(tmp_path / "pre" / "record.parquet")["causal"].tolist() == [True]
    finetune = run(run_spec("spt_causal"), data_dir, tmp_path / "run", tmp_path / "pre")
    assert finetune["status"] == "ok"
    assert read_records(tmp_path / "run" / "record.parquet")["causal"].tolist() == [True]
    # The finetuned backbone is causal: its states do not depend on later tokens.
    data = tasks.load("listops", TASK, data_dir)
    spec = run_spec("spt_causal")
    model, _ = build_classifier(spec, PRIORS["spt_causal"].schedule(spec.train), data,
                                tmp_path / "pre")
    assert model.backbone.cfg.causal
    assert not sees_the_future(model.backbone, data.vocab_size, data.seq_len)
