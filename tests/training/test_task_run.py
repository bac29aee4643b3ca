"""One training cell end to end: a valid record, counted FLOPs, determinism."""

import copy
import math

import pandas as pd
import pytest
import torch

from scalestudy import tasks
from scalestudy.architectures import ARCHITECTURES
from scalestudy.records import read_records
from scalestudy.study.specs import PretrainSpec, RunSpec
from scalestudy.training.pretrain import run_pretrain
from scalestudy.training.task_run import build_classifier, run

from tests.support import built_in
from tests.support.cells import TASK


def spec(prior="random", seed=7, arch="transformer", **train):
    return RunSpec.from_dict({
        "study": "t", "task": "listops", "arch": arch, "size": "xxs",
        "prior": prior, "seed": seed, "task_config": TASK,
        "train": {"max_steps": 6, "batch_size": 8, "warmup_steps": 2, "val_every": 3,
                  "protocol": "default", **train},
        "trainer": {"accelerator": "cpu", "threads": 1},
    })


def test_one_cell_writes_a_valid_record(data_dir, tmp_path):
    run(spec(), data_dir, tmp_path / "run")
    frame = read_records(tmp_path / "run" / "record.parquet")
    row = frame.iloc[0]
    assert row["status"] == "ok" and row["stage"] == "scratch" and row["steps"] == 6
    assert row["n_params"] > row["n_params_nonembed"] > 0
    assert row["flops_per_step"] > 0
    assert row["train_flops"] == pytest.approx(6 * row["flops_per_step"])
    assert 0.0 <= row["test_acc"] <= 1.0 and 0.0 <= row["val_acc"] <= 1.0
    assert row["train_loss"] > 0 and row["tokens_seen"] > 0
    assert (row["depth"], row["width"], row["heads"], row["d_ff"]) == (2, 16, 2, 64)
    assert row["config_hash"] == spec().config_hash() != spec(seed=8).config_hash()
    history = pd.read_csv(tmp_path / "run" / "metrics.csv")
    assert {"train_loss", "val_loss", "val_acc", "step"} <= set(history.columns)
    # last.ckpt is the trained model: after the last step, and it scores the
    # record's test accuracy when loaded into a fresh classifier.
    last = torch.load(tmp_path / "run" / "last.ckpt", weights_only=False)
    assert last["global_step"] == 6
    data = tasks.load("listops", TASK, data_dir)
    model, _ = build_classifier(spec(), spec().train, data, None)
    model.load_state_dict(last["state_dict"])
    tokens, labels = data.splits["test"]
    with torch.no_grad():
        logits, _ = model.eval()(tokens.long())
    assert row["test_acc"] == pytest.approx((logits.argmax(-1) == labels).float().mean().item())


def test_training_step_flops_are_the_analytic_count(data_dir, tmp_path):
    """The record's FLOPs per step: the analytic count of the vanilla transformer
    (tests/support/model_checks.py, exact in tests/training/test_flops.py) at the run's batch and
    padded length; a doubled forward or a missed backward is 33% off."""
    from tests.support.model_checks import analytic_transformer_step

    record = run(spec(max_steps=1), data_dir, tmp_path / "a")
    data = tasks.load("listops", TASK, data_dir)
    analytic = analytic_transformer_step("xxs", 8, data.seq_len, data.n_classes)
    assert record["flops_per_step"] == analytic
    assert record["train_flops"] == record["flops_per_step"] * record["steps"]


def test_same_config_and_seed_give_the_same_record_and_another_seed_does_not(data_dir,
                                                                             tmp_path):
    a = run(spec(), data_dir, tmp_path / "a")
    b = run(spec(), data_dir, tmp_path / "b")
    timing = {"wall_seconds", "tokens_per_second"}
    assert {k: v for k, v in a.items() if k not in timing} == {
        k: v for k, v in b.items() if k not in timing
    }
    # The seed reaches the initialisation and the data order: another seed, another run.
    c = run(spec(seed=8), data_dir, tmp_path / "c")
    assert c["train_loss"] != a["train_loss"]
    first = torch.load(tmp_path / "a" / "last.ckpt", weights_only=False)["state_dict"]
    other = torch.load(tmp_path / "c" / "last.ckpt", weights_only=False)["state_dict"]
    assert not torch.equal(first["backbone.blocks.0.mlp.branch.up.weight"],
                           other["backbone.blocks.0.mlp.branch.up.weight"])


def test_tokens_seen_counts_every_real_token_trained_on(data_dir, tmp_path):
    # 8 steps of 8 sequences: exactly one epoch of the 64 training sequences.
    record = run(spec(max_steps=8, val_every=4), data_dir, tmp_path / "run")
    data = tasks.load("listops", TASK, data_dir)
    tokens = data.splits["train"][0]
    assert record["tokens_seen"] == int((tokens != data.pad_id).sum())


def test_the_seed_reaches_the_initialisation_itself(data_dir, tmp_path, monkeypatch):
    """Not only the data order or dropout: the initial weights (as the prior left
    them, before any step) are the same for the same seed and differ for another."""
    from scalestudy.training import task_run as train

    initial = []

    def spy(*args, **kwargs):
        model, report = build_classifier(*args, **kwargs)
        initial.append({k: v.clone() for k, v in model.state_dict().items()})
        return model, report

    monkeypatch.setattr(train, "build_classifier", spy)
    for seed, name in ((7, "a"), (7, "b"), (8, "c")):
        run(spec(seed=seed, max_steps=1, val_every=1), data_dir, tmp_path / name)
    a, b, c = initial
    assert a.keys() == c.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    weights = [k for k in a if k.endswith("weight") and a[k].dim() == 2]
    assert weights and not any(torch.equal(a[k], c[k]) for k in weights)


def test_warmup_cosine_schedule_values():
    """Linear warm-up to the peak over `warmup_steps`, then cosine decay to 10% of
    it at `max_steps`, as the optimiser sees it (values written out by hand)."""
    from scalestudy.models import build_backbone
    from scalestudy.models.heads import ClassifierHead
    from scalestudy.study.specs import TrainConfig
    from scalestudy.training.modules import Classifier

    cfg = TrainConfig(lr=0.01, warmup_steps=4, max_steps=20, weight_decay=0.0)
    backbone = build_backbone("transformer", "xxs", 17, 16)
    model = Classifier(backbone, ClassifierHead(backbone, 3), 3)
    optimizer, schedule = model.configure_optimizer(cfg)  # the loop steps it every step
    lrs = []
    for _ in range(21):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    assert lrs[:5] == pytest.approx([0.0025, 0.005, 0.0075, 0.01, 0.01])
    assert lrs[12] == pytest.approx(0.01 * 0.55)  # half-way through the decay
    assert lrs[20] == pytest.approx(0.001)  # the floor: 10% of the peak
    assert all(a >= b for a, b in zip(lrs[4:], lrs[5:], strict=False))


def test_s4_state_space_parameters_have_their_own_group():
    """A and dt: their own learning rate (ssm_lr, if below the peak) and no weight
    decay; every other parameter in the main group, each parameter in one group."""
    from scalestudy.models import build_backbone
    from scalestudy.models.heads import ClassifierHead
    from scalestudy.study.specs import TrainConfig
    from scalestudy.training.modules import Classifier

    cfg = TrainConfig(lr=0.01, weight_decay=0.05)
    backbone = build_backbone("s4", "xxs", 17, 16)
    model = Classifier(backbone, ClassifierHead(backbone, 3), 3)
    optimizer, _ = model.configure_optimizer(cfg)
    main, ssm = optimizer.param_groups
    ssm_lr = backbone.cfg.extra["ssm_lr"]
    assert ssm_lr < cfg.lr
    # The peak rates (the schedule scales both groups from there).
    assert (main["initial_lr"], main["weight_decay"]) == (cfg.lr, 0.05)
    assert (ssm["initial_lr"], ssm["weight_decay"]) == (ssm_lr, 0.0)
    assert ssm["lr"] / main["lr"] == pytest.approx(ssm_lr / cfg.lr)
    special = {id(getattr(m, name)) for m in backbone.modules()
               for name in getattr(m, "optim_hints", dict)()}
    names = {id(p): n for n, p in model.named_parameters()}
    assert special and {id(p) for p in ssm["params"]} == special
    assert {names[i].rsplit(".", 1)[-1] for i in special} == {"log_A_real", "A_imag", "log_dt"}
    assert sorted(map(id, main["params"] + ssm["params"])) == sorted(names)
    # A transformer has none: one group.
    other = build_backbone("transformer", "xxs", 17, 16)
    single, _ = Classifier(other, ClassifierHead(other, 3), 3).configure_optimizer(cfg)
    assert len(single.param_groups) == 1


def test_adamw_is_fused_on_a_cpu_and_torchs_choice_elsewhere():
    """The fused kernel where every parameter is on a CPU; elsewhere torch's own
    default (None: foreach on a GPU). The fused step
    is AdamW's: it matches the per-parameter loop to rounding."""
    from scalestudy.models import build_backbone
    from scalestudy.models.heads import ClassifierHead
    from scalestudy.study.specs import TrainConfig
    from scalestudy.training.modules import Classifier, fused_adamw

    meta = [{"params": [torch.nn.Parameter(torch.empty(2, device="meta"))]}]
    assert fused_adamw(meta) is None
    torch.manual_seed(0)
    backbone = build_backbone("transformer", "xxs", 17, 16)
    fused = Classifier(backbone, ClassifierHead(backbone, 3), 3)
    loop = Classifier(*copy.deepcopy((fused.backbone, fused.head)), 3)
    optimizers = [m.configure_optimizer(TrainConfig())[0] for m in (fused, loop)]
    assert [o.param_groups[0]["fused"] for o in optimizers] == [True, True]
    optimizers[1].param_groups[0].update(fused=False, foreach=False)
    tokens, labels = torch.randint(1, 17, (4, 16)), torch.tensor([0, 1, 2, 0])
    for model, optimizer in zip((fused, loop), optimizers, strict=True):
        for _ in range(3):
            loss, _ = model.training_loss((tokens, labels))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    for a, b in zip(fused.parameters(), loop.parameters(), strict=True):
        torch.testing.assert_close(a, b)


def test_a_crash_during_training_is_recorded_as_failed(data_dir, tmp_path, monkeypatch):
    from scalestudy.training.modules import Classifier

    def crash(self, batch):
        raise RuntimeError("out of memory (simulated)")

    monkeypatch.setattr(Classifier, "training_loss", crash)
    monkeypatch.setattr("scalestudy.training.run.flops_per_step", lambda module, batch: 1000)
    record = run(spec(), data_dir, tmp_path / "run")  # no exception: the crash is data
    row = read_records(tmp_path / "run" / "record.parquet").iloc[0]
    for got in (record, row):
        assert got["status"] == "failed"
        assert got["error"] == "RuntimeError: out of memory (simulated)"
        assert got["steps"] == 0 and got["train_flops"] == 0
        assert pd.isna(got["test_acc"]) and pd.isna(got["diverged_step"])


def test_non_finite_loss_is_recorded_as_diverged(data_dir, tmp_path):
    record = run(spec(lr=1e30, grad_clip=0.0), data_dir, tmp_path / "run")
    assert record["status"] == "diverged"
    assert record["diverged_step"] is not None and record["diverged_step"] < 6


class NaNGradient(torch.autograd.Function):
    """The identity, whose gradient is NaN: a finite loss with non-finite gradients."""

    @staticmethod
    def forward(ctx, loss):
        return loss.clone()

    @staticmethod
    def backward(ctx, grad):
        return torch.full_like(grad, math.nan)


def test_non_finite_gradients_under_clipping_are_recorded_as_diverged(data_dir, tmp_path,
                                                                      monkeypatch):
    """Clipping does not check the gradients itself (that check would wait on a
    GPU every step): the NaN update makes the next step's loss non-finite, and
    the loop's own check records the run diverged there."""
    from scalestudy.training.loop import TrainingLoop

    training_step = TrainingLoop.training_step

    def nan_gradients_at_step_2(self, batch):
        if self.step != 2:
            return training_step(self, batch)
        losses = self.module.training_loss

        def nan_gradients(batch):
            loss, aux_loss = losses(batch)
            return NaNGradient.apply(loss), aux_loss

        self.module.training_loss = nan_gradients
        try:
            return training_step(self, batch)
        finally:
            del self.module.training_loss

    monkeypatch.setattr(TrainingLoop, "training_step", nan_gradients_at_step_2)
    record = run(spec(grad_clip=1.0), data_dir, tmp_path / "run")
    assert record["status"] == "diverged" and record["error"] == ""
    assert record["diverged_step"] == 3  # the step after the NaN gradients of step 2


def test_plateau_rule_judges_the_best_loss_over_the_last_fifth():
    from scalestudy.study.plateau import plateaued

    improving = [(10 * i, 2.0 - 0.1 * i) for i in range(1, 11)]  # 5% per interval
    assert not plateaued(improving, val_every=10)
    flat = [(10 * i, 1.0) for i in range(1, 6)]
    assert plateaued(flat, val_every=10)
    assert not plateaued(flat[:4], val_every=10)  # under 5 validation intervals: never
    # At step 100 the window is steps 80-100: a best of 1.0 at step 80 (in the
    # earlier four fifths) against 0.985 now is a 1.5% gain, a plateau; a bad
    # last validation does not hide the best, and overfitting is no gain.
    history = [(10 * i, 3.0 - 0.25 * i) for i in range(1, 9)] + [(90, 0.985), (100, 1.4)]
    assert plateaued(history, val_every=10)
    assert not plateaued(history[:-2] + [(90, 0.97), (100, 1.4)], val_every=10)  # 3%
    assert plateaued(flat + [(60, 1.2)], val_every=10)
    assert plateaued(flat + [(60, math.nan)], val_every=10)


def test_a_run_until_plateau_stops_there_and_says_so(data_dir, tmp_path):
    # A learning rate too small to learn anything: the loss is flat from the
    # start, so the plateau comes at the first step the rule judges (5 x
    # val_every = 15), and its cooldown, ceil(0.2 x 15) = 3 steps, ends the run.
    frozen = spec(until="plateau", lr=1e-12, max_steps=300, val_every=3)
    record = run(frozen, data_dir, tmp_path / "run")
    assert (record["status"], record["stopped_by"], record["steps"]) == ("ok", "plateau", 18)
    assert record["plateau_step"] == 15
    assert record["train_flops"] == pytest.approx(18 * record["flops_per_step"])
    history = pd.read_csv(tmp_path / "run" / "metrics.csv")
    # The last training row is step 18's, logged (the record's train_loss), and
    # the plateau was judged on step 15's validation.
    assert history.dropna(subset=["train_loss"])["step"].max() == 18
    assert 15 in set(history.dropna(subset=["val_loss"])["step"])
    # A run the rule cannot judge before its cap ends there.
    capped = run(spec(until="plateau"), data_dir, tmp_path / "capped")
    assert (capped["stopped_by"], capped["steps"]) == ("max_steps", 6)
    assert run(spec(), data_dir, tmp_path / "fixed")["stopped_by"] == "max_steps"


def test_a_run_killed_after_its_plateau_ends_there_when_resumed(data_dir, tmp_path, capsys):
    frozen = spec(until="plateau", lr=1e-12, max_steps=300, val_every=3)
    first = run(frozen, data_dir, tmp_path / "run")
    (tmp_path / "run" / "record.parquet").unlink()  # killed before its record
    again = run(frozen, data_dir, tmp_path / "run")
    assert "resuming from" in capsys.readouterr().out
    assert (again["stopped_by"], again["steps"]) == ("plateau", first["steps"])
    assert again["test_acc"] == first["test_acc"]


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
    # The best checkpoint's validation loss: the lowest of the two validations in
    # the history (its last row is the re-validation of best.ckpt after the fit).
    validations = pd.read_csv(out / "metrics.csv").dropna(subset=["val_loss"])["val_loss"]
    assert len(validations) == 3
    assert record["upstream_loss"] == pytest.approx(validations.iloc[:2].min(), rel=1e-5)
    return out


def test_pretraining_keeps_the_checkpoint_of_lowest_validation_loss(data_dir, tmp_path,
                                                                    monkeypatch):
    """Three validations logging 3, 1, 2 (by step): best.ckpt is the step-4 one,
    last.ckpt the step-6 one, and the record's loss is best.ckpt's re-validated
    (the scripted loss follows the weights, so re-validating them gives it again)."""
    from scalestudy.training.masked_lm import MaskedLM

    # The validations' losses in order; each set of weights keeps the loss it
    # was first given (every batch of a validation, and the re-validation).
    scripted, by_weights = iter([3.0, 1.0, 2.0]), {}

    def evaluation_sums(self, batch):
        sums = real_sums(self, batch)
        weights = float(self.backbone.embed.token.weight.sum())
        if weights not in by_weights:
            by_weights[weights] = next(scripted)
        return {**sums, "loss": sums["count"] * by_weights[weights]}

    real_sums = MaskedLM.evaluation_sums
    monkeypatch.setattr(MaskedLM, "evaluation_sums", evaluation_sums)
    spec = PretrainSpec.from_dict({
        "study": "t", "kind": "spt", "corpus": "listops", "arch": "transformer", "size": "xxs",
        "seed": 0, "corpus_config": TASK,
        "train": {**PRETRAIN, "max_steps": 6, "val_every": 2},
        "trainer": {"accelerator": "cpu", "threads": 1},
    })
    record = run_pretrain(spec, data_dir, tmp_path)
    assert record["status"] == "ok" and record["val_loss"] == 1.0
    assert torch.load(tmp_path / "best.ckpt", weights_only=False)["global_step"] == 4
    assert torch.load(tmp_path / "last.ckpt", weights_only=False)["global_step"] == 6


@pytest.mark.parametrize("prior", ["tfixup", "dtfixup", "random_noln"])
def test_fixup_priors_drop_layernorm_and_warmup(data_dir, tmp_path, prior):
    from scalestudy.models import build_backbone
    from scalestudy.priors import PRIORS, fixup

    record = run(spec(prior=prior), data_dir, tmp_path / "run")
    assert record["status"] == "ok" and record["stage"] == "scratch"
    assert record["norm"] == "none" and record["warmup_steps"] == 0
    # The model the run builds: no LayerNorm, the prior's init, an optimiser at
    # its peak rate from the first step.
    run_spec = spec(prior=prior)
    cfg = PRIORS[prior].schedule(run_spec.train)
    data = tasks.load("listops", TASK, data_dir)
    torch.manual_seed(0)
    model, report = build_classifier(run_spec, cfg, data, None)
    assert not any(isinstance(m, torch.nn.LayerNorm) for m in model.modules())
    optimizer, _ = model.configure_optimizer(cfg)
    assert optimizer.param_groups[0]["lr"] == run_spec.train.lr
    torch.manual_seed(0)
    reference = build_backbone("transformer", "xxs", data.vocab_size, data.seq_len, norm="none",
                               protocol="default")
    if prior == "tfixup":
        expected = fixup.apply_tfixup(reference)
    elif prior == "dtfixup":
        expected = fixup.dtfixup(reference, data.splits["train"][0].split(256), data.pad_id)
    else:
        expected = None
    assert report == (expected.as_dict() if expected else {})
    for name, value in reference.state_dict().items():
        torch.testing.assert_close(model.backbone.state_dict()[name], value, msg=name)


def test_spt_finetune_loads_every_backbone_weight_and_puts_a_fresh_head(data_dir, spt_dir,
                                                                        tmp_path):
    run_spec = spec(prior="spt")
    data = tasks.load("listops", TASK, data_dir)
    model, report = build_classifier(run_spec, run_spec.train, data, spt_dir)
    state = torch.load(spt_dir / "best.ckpt", weights_only=False)["state_dict"]
    for name, value in model.backbone.state_dict().items():
        torch.testing.assert_close(value, state[f"backbone.{name}"])
    assert not report["token_table_fresh"]
    # The classifier head is new: none of its tensors comes from the checkpoint
    # (whose MLM head has a [16, 16] dense layer the classifier's hidden layer could take).
    pretrained_tensors = list(state.values())
    for name, value in model.head.state_dict().items():
        assert not any(v.shape == value.shape and torch.equal(v, value)
                       for v in pretrained_tensors), name
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
    assert model.backbone.embed.token.weight.shape[0] == data.vocab_size
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
    with pytest.raises(ValueError, match="sequence length 40 exceeds the pretrained"):
        build_classifier(run_spec, run_spec.train, data, upstream_dir)


def test_prior_that_needs_pretraining_says_so(data_dir, tmp_path):
    """Before the run starts: a failed record, and no Fabric, tracker or metrics."""
    record = run(spec(prior="spt"), data_dir, tmp_path / "run")
    assert record["status"] == "failed" and record["steps"] is None
    assert "'spt' needs the spt pretraining directory" in record["error"]
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["record.parquet"]


@pytest.mark.parametrize("arch", sorted(built_in(ARCHITECTURES)))
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
    from scalestudy.training.masked_lm import MaskedLM

    spec = PretrainSpec.from_dict({
        "study": "t", "kind": "spt", "corpus": "listops", "arch": "transformer", "size": "xxs",
        "seed": 0, "corpus_config": TASK, "train": {**PRETRAIN, "causal": True},
        "trainer": {"accelerator": "cpu", "threads": 1},
    })
    assert run_pretrain(spec, data_dir, tmp_path)["status"] == "ok"
    # The objective of a causal backbone is the next-token loss, with no masking.
    data = tasks.load("listops", TASK, data_dir)
    backbone = build_backbone("transformer", "xxs", data.vocab_size, data.seq_len, causal=True,
                              token_outputs=True)
    model = MaskedLM(backbone, data.vocab_size, 0.1, None, seed=0).eval()
    tokens = data.splits["train"][0][:4].long()
    loss, _ = model.training_loss(model.masked(tokens, torch.Generator().manual_seed(0)))
    real = tokens != 0
    logits = model.head(backbone(tokens, real).hidden)
    # Written out: position t predicts token t + 1, where both are real.
    losses = [F.cross_entropy(logits[b, t], tokens[b, t + 1])
              for b in range(len(tokens)) for t in range(tokens.shape[1] - 1)
              if real[b, t] and real[b, t + 1]]
    torch.testing.assert_close(loss, torch.stack(losses).mean())


def test_spt_causal_pretrains_and_finetunes_a_causal_s4(data_dir, tmp_path):
    """spt_causal makes the backbone causal for its stage, in a study whose
    train.causal is false: next-token self-pretraining (Amos et al.). S4's causal
    layer lacks the bidirectional one's second kernel, so S4 finetunes causally."""
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
    from scalestudy.priors import PRIORS

    cfg = PRIORS["spt_causal"].schedule(run_spec.train, "s4")
    assert cfg.causal and not run_spec.train.causal
    data = tasks.load("listops", TASK, data_dir)
    model, report = build_classifier(run_spec, cfg, data, tmp_path)
    assert model.backbone.cfg.causal and report["loaded"] == "spt_causal"
