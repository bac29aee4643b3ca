"""One training cell end to end: a valid record, counted FLOPs, determinism."""

import pandas as pd
import pytest
import torch

from scalestudy import tasks
from scalestudy.models import ARCHITECTURES
from scalestudy.pretrain import PretrainSpec, run_pretrain
from scalestudy.records import read_records
from scalestudy.train import RunSpec, build_classifier, run

TASK = {"n_train": 64, "n_val": 16, "n_test": 16, "max_depth": 3, "max_args": 3,
        "min_length": 3, "max_length": 24}


def spec(prior="random", **train):
    return RunSpec.from_dict({
        "study": "t", "task": "listops", "arch": "transformer", "size": "xxs",
        "prior": prior, "seed": 7, "task_config": TASK,
        "train": {"max_steps": 6, "batch_size": 8, "warmup_steps": 2, "val_every": 3,
                  "protocol": "default", **train},
        "trainer": {"accelerator": "cpu", "threads": 1},
    })


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "listops"
    tasks.prepare("listops", TASK, path)
    return path


def test_one_cell_writes_a_valid_record(data_dir, tmp_path):
    record = run(spec(), data_dir, tmp_path / "run")
    frame = read_records(tmp_path / "run" / "record.parquet")
    row = frame.iloc[0]
    assert row["status"] == "ok" and row["stage"] == "scratch" and row["steps"] == 6
    assert row["n_params"] > row["n_params_nonembed"] > 0
    assert row["flops_per_step"] > 0
    assert row["train_flops"] == pytest.approx(6 * row["flops_per_step"])
    assert 0.0 <= row["test_acc"] <= 1.0 and 0.0 <= row["val_acc"] <= 1.0
    assert row["train_loss"] > 0 and row["tokens_seen"] > 0
    assert (row["depth"], row["width"], row["heads"], row["d_ff"]) == (2, 16, 2, 64)
    assert row["config_hash"] == record["config_hash"]
    history = pd.read_csv(tmp_path / "run" / "metrics.csv")
    assert {"train_loss", "val_loss", "val_acc", "step"} <= set(history.columns)
    assert (tmp_path / "run" / "last.ckpt").exists()


def test_counted_flops_are_close_to_6nd(data_dir, tmp_path):
    small = run(spec(max_steps=1), data_dir, tmp_path / "a")
    # Counted FLOPs include attention; the 6 N D rule of thumb ignores it.
    tokens = 8 * 24
    assert 0.8 < small["flops_per_step"] / (6 * small["n_params_nonembed"] * tokens) < 2.5


def test_same_config_and_seed_give_the_same_record(data_dir, tmp_path):
    a = run(spec(), data_dir, tmp_path / "a")
    b = run(spec(), data_dir, tmp_path / "b")
    timing = {"wall_seconds", "tokens_per_second"}
    assert {k: v for k, v in a.items() if k not in timing} == {
        k: v for k, v in b.items() if k not in timing
    }


def test_non_finite_loss_is_recorded_as_diverged(data_dir, tmp_path):
    record = run(spec(lr=1e30, grad_clip=0.0), data_dir, tmp_path / "run")
    assert record["status"] == "diverged"
    assert record["diverged_step"] is not None and record["diverged_step"] < 6


def test_unknown_train_key_names_the_field():
    with pytest.raises(ValueError, match=r"train: unknown keys \['epochs'\]"):
        RunSpec.from_dict({"study": "t", "task": "listops", "arch": "transformer",
                           "size": "xxs", "prior": "random", "seed": 0,
                           "train": {"epochs": 3}})


# Priors: the Fixup initialisations, and runs that start from a pretraining stage.

PRETRAIN = {"protocol": "default", "max_steps": 4, "batch_size": 8, "warmup_steps": 1,
            "val_every": 2}


def pretrain(kind, corpus_config, data_dir, out_dir):
    spec = PretrainSpec.from_dict({
        "study": "t", "kind": kind, "corpus": "listops" if kind == "spt" else "upstream",
        "arch": "transformer", "size": "xxs", "seed": 0, "corpus_config": corpus_config,
        "train": PRETRAIN, "trainer": {"accelerator": "cpu", "threads": 1},
    })
    return run_pretrain(spec, data_dir, out_dir)


@pytest.fixture(scope="module")
def spt_dir(data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("spt")
    record = pretrain("spt", TASK, data_dir, out)
    assert record["status"] == "ok" and record["stage"] == "spt"
    return out


UPSTREAM = {"seq_len": 24, "max_train_sequences": 64, "max_val_sequences": 16}


@pytest.fixture(scope="module")
def upstream_dir(tmp_path_factory):
    from scalestudy.tasks import upstream

    data = tmp_path_factory.mktemp("corpus")
    upstream.prepare(upstream.config_from(UPSTREAM), data)
    out = tmp_path_factory.mktemp("upstream")
    record = pretrain("upstream", UPSTREAM, data, out)
    assert record["status"] == "ok" and record["upstream_loss"] > 0
    assert record["upstream_loss"] == record["val_loss"]
    return out


@pytest.mark.parametrize("prior", ["tfixup", "dtfixup", "random_noln"])
def test_fixup_priors_drop_layernorm_and_warmup(data_dir, tmp_path, prior):
    record = run(spec(prior=prior), data_dir, tmp_path / "run")
    assert record["status"] == "ok" and record["stage"] == "scratch"
    assert record["norm"] == "none" and record["warmup_steps"] == 0


def test_spt_finetune_loads_every_backbone_weight_and_puts_a_fresh_head(data_dir, spt_dir,
                                                                        tmp_path):
    run_spec = spec(prior="spt")
    data = tasks.load("listops", TASK, data_dir)
    model, report = build_classifier(run_spec, run_spec.train, data, spt_dir)
    state = torch.load(spt_dir / "best.ckpt", weights_only=False)["state_dict"]
    for name, value in model.backbone.state_dict().items():
        torch.testing.assert_close(value, state[f"backbone.{name}"])
    assert not report["token_table_fresh"]
    assert not any(key.startswith("head.hidden") for key in state)  # the head is new
    record = run(run_spec, data_dir, tmp_path / "run", spt_dir)
    pretrained = read_records(spt_dir / "record.parquet").iloc[0]
    assert record["stage"] == "finetune" and record["status"] == "ok"
    assert record["pretrain_flops"] == pretrained["train_flops"] > 0


def test_scratch_matched_spends_the_compute_of_spt(data_dir, spt_dir, tmp_path):
    matched = run(spec(prior="scratch_matched"), data_dir, tmp_path / "m", spt_dir)
    scratch = run(spec(), data_dir, tmp_path / "r")
    pretrained = read_records(spt_dir / "record.parquet").iloc[0]
    target = pretrained["train_flops"] + scratch["train_flops"]
    assert matched["stage"] == "scratch" and matched["pretrain_flops"] == 0
    assert target <= matched["train_flops"] < target + matched["flops_per_step"]


def test_upstream_transfer_keeps_the_task_token_table_fresh(data_dir, upstream_dir, tmp_path):
    run_spec = spec(prior="upstream")
    data = tasks.load("listops", TASK, data_dir)
    model, report = build_classifier(run_spec, run_spec.train, data, upstream_dir)
    state = torch.load(upstream_dir / "best.ckpt", weights_only=False)["state_dict"]
    assert report["token_table_fresh"]
    assert model.backbone.embed.token.weight.shape[0] == len(data.vocab)
    for name, value in model.backbone.state_dict().items():
        if not name.startswith("embed.token."):
            torch.testing.assert_close(value, state[f"backbone.{name}"])
    record = run(run_spec, data_dir, tmp_path / "run", upstream_dir)
    pretrained = read_records(upstream_dir / "record.parquet").iloc[0]
    assert record["upstream_loss"] == pretrained["upstream_loss"]


def test_task_longer_than_the_upstream_backbone_is_refused(tmp_path, upstream_dir):
    longer = {**TASK, "max_length": 40}
    tasks.prepare("listops", longer, tmp_path / "d")
    data = tasks.load("listops", longer, tmp_path / "d")
    run_spec = spec(prior="upstream")
    with pytest.raises(ValueError, match="max_length = 40 exceeds the pretrained"):
        build_classifier(run_spec, run_spec.train, data, upstream_dir)


def test_prior_that_needs_pretraining_says_so(data_dir, tmp_path):
    with pytest.raises(ValueError, match="'spt' needs the spt pretraining directory"):
        run(spec(prior="spt"), data_dir, tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_every_backbone_pretrains_and_transfers_whole(arch, data_dir, tmp_path):
    """spt for every architecture: a masked-LM stage, then a strict transfer of
    every backbone weight into the task model (Funnel drops its decoder)."""
    spec = PretrainSpec.from_dict({
        "study": "t", "kind": "spt", "corpus": "listops", "arch": arch, "size": "xxs",
        "seed": 0, "corpus_config": TASK,
        "train": {"max_steps": 2, "batch_size": 8, "warmup_steps": 1, "val_every": 2},
        "trainer": {"accelerator": "cpu", "threads": 1},
    })
    assert run_pretrain(spec, data_dir, tmp_path)["status"] == "ok"
    run_spec = RunSpec.from_dict({
        "study": "t", "task": "listops", "arch": arch, "size": "xxs", "prior": "spt",
        "seed": 0, "task_config": TASK,
    })
    data = tasks.load("listops", TASK, data_dir)
    model, _ = build_classifier(run_spec, run_spec.train, data, tmp_path)
    state = torch.load(tmp_path / "best.ckpt", weights_only=False)["state_dict"]
    for name, value in model.backbone.state_dict().items():
        torch.testing.assert_close(value, state[f"backbone.{name}"])


def test_causal_backbone_pretrains_by_next_token_prediction(data_dir, tmp_path):
    import torch.nn.functional as F

    from scalestudy.models import build_backbone
    from scalestudy.pretrain import MaskedLM
    from scalestudy.priors.masking import causal_lm_targets

    spec = PretrainSpec.from_dict({
        "study": "t", "kind": "spt", "corpus": "listops", "arch": "transformer", "size": "xxs",
        "seed": 0, "corpus_config": TASK, "train": {**PRETRAIN, "causal": True},
        "trainer": {"accelerator": "cpu", "threads": 1},
    })
    assert run_pretrain(spec, data_dir, tmp_path)["status"] == "ok"
    # The objective of a causal backbone is the next-token loss, with no masking.
    data = tasks.load("listops", TASK, data_dir)
    backbone = build_backbone("transformer", "xxs", len(data.vocab), data.seq_len, causal=True,
                              token_outputs=True)
    model = MaskedLM(backbone, spec.train, len(data.vocab), 0.1, None, seed=0).eval()
    tokens = data.splits["train"][0][:4]
    loss, _ = model.masked_loss(tokens, torch.Generator().manual_seed(0))
    real = tokens != 0
    logits = model.head(backbone(tokens, real).hidden)
    _, targets = causal_lm_targets(tokens, real)
    expected = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
    torch.testing.assert_close(loss, expected)


def test_spt_causal_pretrains_and_finetunes_a_causal_backbone(data_dir, tmp_path):
    """spt_causal makes the backbone causal for its stage and its finetuning, in a
    study whose train.causal is false: next-token self-pretraining (Amos et al.)."""
    spec = PretrainSpec.from_dict({
        "study": "t", "kind": "spt_causal", "corpus": "listops", "arch": "s4", "size": "xxs",
        "seed": 0, "corpus_config": TASK, "train": PRETRAIN,
        "trainer": {"accelerator": "cpu", "threads": 1},
    })
    assert not spec.train.causal
    record = run_pretrain(spec, data_dir, tmp_path)
    assert (record["status"], record["stage"], record["prior"]) == ("ok", "spt_causal",
                                                                     "spt_causal")
    state = torch.load(tmp_path / "best.ckpt", weights_only=False)["state_dict"]
    # A causal S4 has one kernel (C) per layer, a bidirectional one two.
    assert state["backbone.blocks.0.ssm.branch.kernel.C"].shape[0] == 1
    run_spec = RunSpec.from_dict({
        "study": "t", "task": "listops", "arch": "s4", "size": "xxs", "prior": "spt_causal",
        "seed": 0, "task_config": TASK, "train": {"protocol": "default"},
    })
    from scalestudy.priors import get_prior

    cfg = get_prior("spt_causal").schedule(run_spec.train)
    assert cfg.causal and not run_spec.train.causal
    data = tasks.load("listops", TASK, data_dir)
    model, report = build_classifier(run_spec, cfg, data, tmp_path)
    assert model.backbone.cfg.causal and report["loaded"] == "spt_causal"
