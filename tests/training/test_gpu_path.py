"""The GPU and cluster path, as far as a CPU can check it: FLOPs
counted at one micro-batch and once, machine errors failing the job, causal
attention without a T x T mask, the global batch, the gradient scaler in the
checkpoint, uneven evaluation shards, the host-side work of a step, the
kernel settings, a workstation's GPUs, the cluster's accelerator, and the
GPU-memory estimate against what autograd saves. The two-process checks are
in tests/training/test_ddp.py; tools/gpu_check.py is what a GPU runs."""

import contextlib
import copy
import fcntl
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
import yaml

from scalestudy import tasks
from scalestudy.architectures import ARCHITECTURES
from scalestudy.cli.parser import run_command
from scalestudy.models import build_backbone, layers, memory
from scalestudy.models.heads import ClassifierHead
from scalestudy.records import read_records
from scalestudy.study import ConfigError, ConfigWarning, costs, resources, validate
from scalestudy.study.specs import RunSpec, TrainConfig, TrainerConfig
from scalestudy.training import data as data_module
from scalestudy.training import devices, loop, run
from scalestudy.training.flops import flops_per_step
from scalestudy.training.masked_lm import MaskedLM
from scalestudy.training.modules import Classifier, fused_adamw
from scalestudy.training.task_run import build_classifier
from scalestudy.training.task_run import run as train

from tests.support import ROOT, built_in
from tests.support.cells import TASK
from tests.support.studies import DECLARED_STUDY, typed

TIMING = {"wall_seconds", "tokens_per_second"}


def spec_dict(train=None, **trainer) -> dict:
    return {"study": "t", "task": "listops", "arch": "transformer", "size": "xxs",
            "prior": "random", "seed": 7, "task_config": TASK,
            "train": {"max_steps": 6, "batch_size": 8, "warmup_steps": 2, "val_every": 3,
                      "protocol": "default", **(train or {})},
            "trainer": {"accelerator": "cpu", "threads": 1, **trainer}}


def spec(train=None, **trainer) -> RunSpec:
    return RunSpec.from_dict(spec_dict(train, **trainer))


def comparable(record) -> dict:
    return {k: ("nan" if isinstance(v, float) and math.isnan(v) else v)
            for k, v in dict(record).items() if k not in TIMING}


def config(**sections) -> dict:
    """The default grid, every option at its declaration, with sections replaced
    key by key."""
    study = copy.deepcopy(DECLARED_STUDY)
    for section, values in sections.items():
        study[section] = {**study[section], **values}
    return study


def merge(base, over):
    """`over` merged into `base` as Snakemake merges a preset over config/config.yaml."""
    if not (isinstance(base, dict) and isinstance(over, dict)):
        return over
    return {**base, **{key: merge(base.get(key), value) for key, value in over.items()}}


def preset(study: str) -> dict:
    """The default study with config/studies/<study>.yaml over it."""
    return merge(config(), yaml.safe_load((ROOT / f"config/studies/{study}.yaml").read_text()))


# --- 1. FLOPs: at one micro-batch, on the device, once ------------------------------

def test_flops_are_counted_at_one_micro_batch_and_its_memory_is_one_micro_batchs(
        data_dir, tmp_path, monkeypatch):
    """batch 16 in micro-batches of 4: the count is 4 x one micro-batch's (the
    transformer's FLOPs are linear in the batch, so also the whole batch's),
    and the counting keeps one micro-batch's activations, not the batch's."""
    data = tasks.load("listops", TASK, data_dir)
    model, _ = build_classifier(spec(), spec().train, data, None)
    rows = data.splits["train"]
    whole = flops_per_step(model, tuple(t[:16].long() for t in rows))
    micro = tuple(t[:4].long() for t in rows)
    one_micro = memory.saved_bytes(model, lambda: model.training_loss(micro))
    counted = []

    def measured(module, batch):
        flops = []
        kept = memory.saved_bytes(module, lambda: flops.append(flops_per_step(module, batch)))
        counted.append((len(batch[0]), kept))
        return flops[0]

    monkeypatch.setattr(run, "flops_per_step", measured)
    record = train(spec({"batch_size": 16}, micro_batch=4), data_dir, tmp_path / "run")
    assert record["flops_per_step"] == 4 * flops_per_step(model, micro) == whole
    assert [rows for rows, _ in counted] == [4]  # once, on one micro-batch
    assert counted[0][1] <= 1.05 * one_micro
    assert (record["batch_size"], record["batch_per_device"], record["micro_batch"]) == (16, 16, 4)


def test_only_rank_0_counts_and_every_rank_gets_its_count(monkeypatch):
    calls = []
    monkeypatch.setattr(run, "flops_per_step", lambda module, batch: calls.append(1) or 10)
    model = Classifier(build_backbone("transformer", "xxs", 17, 8), None, 3)
    rows = (torch.ones(8, 8, dtype=torch.uint16), torch.zeros(8, dtype=torch.int64))
    for rank in (1, 0):
        fabric = SimpleNamespace(world_size=2, is_global_zero=rank == 0,
                                 device=torch.device("cpu"), to_device=lambda batch: batch,
                                 autocast=contextlib.nullcontext,
                                 broadcast=lambda obj, src: 10 if obj is None else obj)
        # Rank 1 gets rank 0's count (10 here); rank 0 counts one micro-batch of 2:
        # 2 devices x 2 micro-batches of it.
        assert run.step_flops(fabric, model, rows, 8, 2) == (10 if rank else 2 * 2 * 10)
    assert len(calls) == 1  # rank 1 counted nothing


# --- 4. machine errors fail the job; model errors are failed records ------------------

def cli(spec: dict, data_dir: Path, run_dir: Path) -> int:
    return run_command(["train", "--spec", json.dumps(spec), "--data-dir", str(data_dir),
                        "--run-dir", str(run_dir)])


@pytest.mark.parametrize("error", [
    torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"),
    RuntimeError("CUDA error: an illegal memory access was encountered"),
    RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes"),
    RuntimeError("cuDNN Frontend error: [cudnn_frontend] Error: No execution plans support "
                 "the graph."),
    RuntimeError("Deterministic behavior was enabled with either "
                  "`torch.use_deterministic_algorithms(True)` or "
                  "`at::Context::setDeterministicAlgorithms(true)`, but this operation is not "
                  "deterministic because it uses CuBLAS and you have CUDA >= 10.2. To enable "
                  "deterministic behavior in this case, you must set an environment variable "
                  "before running your PyTorch application: CUBLAS_WORKSPACE_CONFIG=:4096:8 or "
                  "CUBLAS_WORKSPACE_CONFIG=:16:8."),
], ids=["cuda-oom", "cuda-error", "cpu-oom", "cudnn-frontend", "cublas-deterministic"])
def test_out_of_memory_and_accelerator_errors_fail_the_job_with_no_record(
        error, data_dir, tmp_path, monkeypatch):
    def fails(self, batch):
        raise error

    monkeypatch.setattr(Classifier, "training_loss", fails)
    with pytest.raises(SystemExit) as failed:
        cli(spec_dict(), data_dir, tmp_path / "run")
    assert failed.value.code == 1
    assert not (tmp_path / "run" / "record.parquet").exists()


def test_no_gpu_on_a_cpu_build_fails_the_job_with_no_record(data_dir, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(SystemExit) as failed:
        cli(spec_dict(accelerator="gpu"), data_dir, tmp_path / "run")
    assert failed.value.code == 1
    assert not (tmp_path / "run" / "record.parquet").exists()


def test_importing_the_training_package_sets_the_cublas_workspace_before_any_matmul():
    """torch reads CUBLAS_WORKSPACE_CONFIG once, at the process's first cuBLAS
    call: anything that trains imports scalestudy.training first, so it is set
    there, in a fresh interpreter whose environment lacks it."""
    env = {k: v for k, v in os.environ.items() if k != "CUBLAS_WORKSPACE_CONFIG"}
    probe = ("import os, sys; import scalestudy.training; "
             "print(os.environ.get('CUBLAS_WORKSPACE_CONFIG')); "
             "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == [":4096:8", "False"]  # and the workflow's imports stay torch-free
    kept = {**env, "CUBLAS_WORKSPACE_CONFIG": ":16:8"}
    out = subprocess.run([sys.executable, "-c", probe], env=kept, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == [":16:8", "False"]  # a value the user set stands


def test_a_model_error_stays_a_failed_record_and_the_job_succeeds(data_dir, tmp_path,
                                                                  monkeypatch):
    def fails(self, batch):
        raise ValueError("a shape the model cannot take")

    monkeypatch.setattr(Classifier, "training_loss", fails)
    assert cli(spec_dict(), data_dir, tmp_path / "run") == 0
    row = read_records(tmp_path / "run" / "record.parquet").iloc[0]
    assert row["status"] == "failed" and row["error"].startswith("ValueError")


# --- 5, 12. attention masks ------------------------------------------------------------

def explicit_mask(mask, causal, padded=True):
    """The earlier attention mask: [B, 1, T, T] padding & causal."""
    allowed = mask[:, None, None, :]
    if causal:
        t = mask.shape[1]
        allowed = allowed & torch.ones(t, t, dtype=torch.bool).tril()
    return allowed, False


def padded_rows(lengths, t, vocab=17, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(3, vocab, (len(lengths), t), generator=g)
    for row, n in enumerate(lengths):
        tokens[row, n:] = 0
    return tokens


@pytest.mark.parametrize("arch", sorted(a for a, e in built_in(ARCHITECTURES).items() if e.causal))
def test_causal_attention_with_is_causal_equals_the_padding_and_causal_mask(arch,
                                                                             monkeypatch):
    """Right-padded batches: at real positions the outputs, and so the
    classifier's and the next-token model's losses, are the explicit mask's."""
    torch.manual_seed(0)
    tokens = padded_rows([16, 11, 5, 1], 16)
    real = tokens != 0
    backbone = build_backbone(arch, "xxs", 17, 16, causal=True, token_outputs=True).eval()
    lm = MaskedLM(backbone, 17, 0.1, None, seed=0).eval()
    head = ClassifierHead(backbone, 3)
    classifier = Classifier(backbone, head, 3).eval()
    labels = torch.tensor([0, 1, 2, 1])

    def outputs():
        with torch.no_grad():
            hidden = backbone(tokens, real).hidden
            return (hidden[real], lm.training_loss(lm.masked(tokens, torch.Generator()))[0],
                    classifier.training_loss((tokens, labels))[0])

    fused = outputs()
    assert layers.attention_mask(real, causal=True) == (None, True)  # no T x T mask
    monkeypatch.setattr(layers, "attention_mask", explicit_mask)
    masked = outputs()
    for got, want in zip(fused, masked, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_inputs_without_padding_pass_no_mask_and_padded_ones_a_key_mask(tmp_path):
    real = torch.ones(2, 8, dtype=torch.bool)
    assert layers.attention_mask(real, causal=False, padded=False) == (None, False)
    real[1, 5:] = False
    mask, causal = layers.attention_mask(real, causal=False)
    assert mask.shape == (2, 1, 1, 8) and not causal  # broadcast, never T x T
    # A task whose data never pads (the image stand-in) builds attention that
    # passes SDPA no mask (CUDA's flash kernel takes none); padded data keeps it.
    for task, cfg, padded in (("image", {"image_size": 8}, False), ("listops", TASK, True)):
        tasks.prepare(task, cfg, tmp_path / task)
        data = tasks.load(task, cfg, tmp_path / task)
        run_spec = RunSpec.from_dict({**spec_dict(), "task": task, "task_config": cfg})
        model, _ = build_classifier(run_spec, run_spec.train, data, None)
        flags = {m.padded for m in model.modules() if isinstance(m, layers.SelfAttention)}
        assert flags == {padded}, task


# --- 8. the global batch ---------------------------------------------------------------

def test_batch_size_is_the_global_batch_and_must_split_evenly():
    with pytest.raises(ValueError, match=r"train.batch_size: 16 does not split over the run's "
                                         r"3 devices.*accepted: a multiple of 3"):
        spec({"batch_size": 16}, devices=3, strategy="ddp")
    with pytest.raises(ValueError, match=r"trainer.micro_batch: 3 does not divide the 8"):
        spec({"batch_size": 16}, devices=2, strategy="ddp", micro_batch=3)
    with pytest.raises(ConfigError, match=r"train.batch_size: 30 does not split"):
        validate(config(train={"batch_size": 30}, trainer={"devices": 4, "strategy": "ddp"}))
    with pytest.raises(ConfigError, match=r"micro_batch: 5 does not divide.*listops runs"):
        validate(config(resources={"tasks": {"listops": {"sizes": {"xs": {"micro_batch": 5}}}}}))


def test_micro_batches_accumulate_to_the_step_of_the_whole_batch(data_dir, tmp_path):
    """Micro-batches of 2 sum to the 8-example step's gradient: the same
    weights to float rounding (dropout 0, a batch mean of equal parts)."""
    whole = train(spec({"max_steps": 3, "val_every": 3}), data_dir, tmp_path / "whole")
    parts = train(spec({"max_steps": 3, "val_every": 3}, micro_batch=2), data_dir,
                  tmp_path / "parts")
    assert (whole["micro_batch"], parts["micro_batch"]) == (8, 2)
    a, b = (torch.load(tmp_path / name / "last.ckpt", weights_only=True)["state_dict"]
            for name in ("whole", "parts"))
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-5)
    assert parts["flops_per_step"] == whole["flops_per_step"]
    assert parts["tokens_seen"] == whole["tokens_seen"]


# --- 9. the gradient scaler in the checkpoint ----------------------------------------

def scaled_fabric(hw, run_dir, loggers=None):
    """A 16-mixed Fabric on a CPU (Lightning would make it bf16-mixed), its
    gradient scaler growing every 2 steps from 2^125: the scaled gradients
    overflow (in float32: CPU autocast's float16 does not overflow at the usual
    scales) and skip a step whenever the scale climbs back to 2^126, so the
    scale, and which steps are skipped, move all run long."""
    from lightning.fabric import Fabric
    from lightning.fabric.loggers import CSVLogger
    from lightning.fabric.plugins import MixedPrecision
    from lightning.fabric.plugins.environments import LightningEnvironment

    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**125, growth_interval=2)
    fabric = Fabric(accelerator="cpu", devices=1,
                    plugins=[MixedPrecision("16-mixed", "cpu", scaler), LightningEnvironment()],
                    loggers=loggers or CSVLogger(run_dir, name="", version=""))
    fabric.launch()
    return fabric


def test_a_16_mixed_run_resumes_with_its_scaler_to_the_uninterrupted_record(
        data_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(run, "make_fabric", scaled_fabric)
    schedule = {"max_steps": 12, "val_every": 4}
    unbroken = train(spec(schedule), data_dir, tmp_path / "unbroken")
    assert unbroken["precision"] == "16-mixed" and unbroken["status"] == "ok"

    def stop(self):
        if self.step == 10:
            os.kill(os.getpid(), signal.SIGTERM)

    with monkeypatch.context() as killed:
        killed.setattr(loop.TrainingLoop, "after_step", stop)
        with pytest.raises(SystemExit):
            train(spec(schedule), data_dir, tmp_path / "run")
    saved = torch.load(tmp_path / "run" / "last.ckpt", weights_only=True)
    assert saved["global_step"] == 10 and saved["precision"]["scale"] > 0  # the scaler, saved
    resumed = train(spec(schedule), data_dir, tmp_path / "run")
    assert comparable(resumed) == comparable(unbroken)


# --- 10. uneven evaluation shards ------------------------------------------------------

@pytest.mark.parametrize("n, world", [(17, 2), (15, 2), (10, 3), (2, 3)])
def test_evaluation_shards_hold_every_example_once(n, world):
    split = (torch.arange(n), torch.zeros(n, dtype=torch.int64))
    seen = [int(x) for rank in range(world)
            for batch in data_module.loader(split, 4, 0, False, rank, world)
            for x in batch[0]]
    assert sorted(seen) == list(range(n))


def test_a_rank_with_an_empty_shard_reduces_zeros():
    """2 examples over 3 ranks: rank 2 evaluates nothing and still takes part
    in the reduction, with zeros (here the other ranks' sums stand in)."""
    model = Classifier(build_backbone("transformer", "xxs", 17, 8), None, 3)
    others = torch.tensor([1.0, 2.0, 3.0])  # acc, count, loss: sorted by name
    fabric = SimpleNamespace(device=torch.device("cpu"), autocast=contextlib.nullcontext,
                             to_device=lambda batch: batch,
                             all_reduce=lambda sums, reduce_op: sums + others)
    empty = data_module.loader((torch.ones(2, 8, dtype=torch.uint16),
                                torch.zeros(2, dtype=torch.int64)), 4, 0, False, 2, 3)
    assert len(list(empty)) == 0
    assert loop.evaluate(fabric, model, empty, "val") == {"val_acc": 0.5, "val_loss": 1.5}


# --- 11. what a step does on the host --------------------------------------------------

def test_the_loop_reads_the_device_only_at_its_logging_and_validation_steps():
    checks = loop.TrainingLoop.checks_after
    cfg = TrainConfig(max_steps=95, val_every=45)
    gpu = SimpleNamespace(fabric=SimpleNamespace(device=torch.device("meta")), cfg=cfg,
                          log_every=10, last_step=cfg.max_steps)
    cpu = SimpleNamespace(fabric=SimpleNamespace(device=torch.device("cpu")), cfg=cfg,
                          log_every=10, last_step=cfg.max_steps)
    assert [s for s in range(1, 96) if checks(gpu, s)] == [10, 20, 30, 40, 45, 50, 60, 70,
                                                          80, 90, 95]
    assert all(checks(cpu, s) for s in range(1, 96))


def test_pretraining_masks_and_evaluation_counts_are_made_on_the_host():
    backbone = build_backbone("transformer", "xxs", 17, 8, token_outputs=True)
    lm = MaskedLM(backbone, 17, 0.5, None, seed=0)
    prepared = lm.prepare((padded_rows([8, 4], 8),), training=True)
    assert {t.device.type for t in prepared} == {"cpu"}
    assert prepared.targets.ne(-100).any() and prepared.inputs.eq(1).any()
    classifier = Classifier(backbone, ClassifierHead(backbone, 3), 3)
    sums = classifier.evaluation_sums((padded_rows([8, 4], 8), torch.tensor([0, 1])))
    assert sums["count"] == 2 and isinstance(sums["count"], int)


def test_switch_routes_as_the_per_expert_nonzero_loop_did():
    """One device sync a layer (the experts' counts) for the same dispatch."""
    from scalestudy.models.switch import SwitchFeedForward

    torch.manual_seed(0)
    moe = SwitchFeedForward(16, 32, experts=4, capacity_factor=1.0, alpha=0.01)
    x, mask = torch.randn(3, 10, 16), padded_rows([10, 7, 3], 10) != 0
    got = moe(x, mask)
    # The loop it replaces, written out.
    flat = x.transpose(0, 1).reshape(30, 16)
    kept = moe.last_kept
    gate = F.linear(flat, moe.router.weight).softmax(-1).max(-1).values
    want = torch.zeros_like(flat)
    for i, expert in enumerate(moe.experts):
        rows = kept[:, i].nonzero().squeeze(1)
        want = want.index_add(0, rows, expert(flat[rows]) * gate[rows, None])
    assert torch.equal(got, want.view(10, 3, 16).transpose(0, 1))


# --- 12. kernel settings, recorded ------------------------------------------------------

def test_determinism_and_matmul_precision_are_settings_and_recorded(data_dir, tmp_path):
    before = (torch.are_deterministic_algorithms_enabled(),
              torch.get_float32_matmul_precision())
    try:
        record = train(spec(deterministic=False, matmul_precision="high"), data_dir,
                       tmp_path / "run")
        assert (record["deterministic"], record["matmul_precision"]) == (False, "high")
        assert record["precision"] == "32-true"  # "auto" on a CPU
        record = train(spec(), data_dir, tmp_path / "default")
        assert (record["deterministic"], record["matmul_precision"]) == (True, "highest")
    finally:
        torch.use_deterministic_algorithms(before[0])
        torch.set_float32_matmul_precision(before[1])


@pytest.mark.parametrize("arch", sorted(built_in(ARCHITECTURES)))
def test_the_residual_stream_stays_float32_under_bf16_autocast(arch):
    """The input of every residual branch is float32 under autocast, as each
    backbone's embedding starts it: the branches' sums are not rounded to
    bf16 layer after layer (ALBERT's embedding ends in a Linear)."""
    from scalestudy.models import backbone_class, backbone_config

    for causal in (False, True) if ARCHITECTURES[arch].causal else (False,):
        torch.manual_seed(0)
        bcfg = backbone_config(arch, "xxs", 259, 16, norm="pre", dropout=0.0,
                               protocol="default", causal=causal)
        backbone = backbone_class(arch)(bcfg)
        streams = []
        for module in backbone.modules():
            if isinstance(module, layers.Residual):
                module.register_forward_hook(lambda _module, args, out, streams=streams:
                                             streams.append((args[0].dtype, out.dtype)))
        with torch.autocast("cpu", torch.bfloat16):
            backbone(torch.randint(3, 259, (2, 16)), torch.ones(2, 16, dtype=torch.bool))
        assert streams and set(streams) == {(torch.float32, torch.float32)}, (causal, streams)


@pytest.fixture
def tf32_allowed():
    """matmul_precision high, as the GPU presets set it (restored after)."""
    saved = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    yield
    torch.set_float32_matmul_precision(saved)


def test_full_float32_matmuls_turns_tf32_off_within_and_restores_it(tf32_allowed):
    with layers.full_float32_matmuls():
        assert torch.get_float32_matmul_precision() == "highest"
        assert not torch.backends.cuda.matmul.allow_tf32
    assert torch.get_float32_matmul_precision() == "high"
    assert torch.backends.cuda.matmul.allow_tf32
    with pytest.raises(ZeroDivisionError), layers.full_float32_matmuls():
        raise ZeroDivisionError
    assert torch.get_float32_matmul_precision() == "high"


class MatmulPrecisions(torch.overrides.TorchFunctionMode):
    """The float32 matmul precision each matmul and einsum ran under."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if any(name in getattr(func, "__name__", "") for name in ("matmul", "einsum")):
            self.seen.append(torch.get_float32_matmul_precision())
        return func(*args, **(kwargs or {}))


def test_performer_feature_logits_and_ssm_kernels_run_without_tf32(tf32_allowed):
    """What is float32 on purpose stays full float32 where the study allows
    TF32 (matmul_precision high); tools/gpu_check.py measures the error on a GPU."""
    from scalestudy.models import performer, s4

    projection = performer.orthogonal_features(16, 8, seed=0)
    s4d, dlr = s4.S4DKernel(8, 4, 2, 1e-3, 1e-1), s4.DLRKernel(8, 2, 2, 1e-3, 1e-1)
    s4d.reset_parameters()
    dlr.reset_parameters()
    for name, compute in (
            ("performer", lambda: performer.positive_features(torch.randn(2, 4, 8), projection,
                                                              is_query=True)),
            ("s4", lambda: s4d(16)), ("dlr", lambda: dlr(16))):
        with MatmulPrecisions() as precisions:
            compute()
        assert precisions.seen and set(precisions.seen) == {"highest"}, (name, precisions.seen)


def test_adamw_is_fused_unless_a_gradient_scaler_unscales_for_clipping():
    params = [{"params": [torch.nn.Parameter(torch.zeros(2))]}]
    assert fused_adamw(params) is True
    assert fused_adamw(params, scaled=True) is None
    assert fused_adamw([{"params": [torch.nn.Parameter(torch.empty(2, device="meta"))]}]) is None


def test_splits_stay_uint16_and_batches_are_int64(data_dir):
    data = tasks.load("listops", TASK, data_dir)
    assert data.splits["train"][0].dtype == torch.uint16
    batch = next(iter(data_module.loader(data.splits["train"], 4, 0, True)))
    assert [t.dtype for t in batch] == [torch.int64, torch.int64]


# --- 13. a workstation's GPUs, one set per job -----------------------------------------

def test_local_jobs_take_gpus_no_other_job_holds(tmp_path):
    slots = resources.write_slots(tmp_path / "gpus", 3)
    one, two = (TrainerConfig(accelerator="gpu", devices=n) for n in (1, 2))
    first = {resources.SLOTS_ENV: str(slots)}
    second = {resources.SLOTS_ENV: str(slots), "CUDA_VISIBLE_DEVICES": "4,5,6"}
    assert devices.claim(one, first) == ["0"] and first["CUDA_VISIBLE_DEVICES"] == "0"
    assert resources.SLOTS_ENV not in first  # its DDP ranks claim nothing more
    assert devices.claim(two, second) == ["5", "6"]  # the visible ids of slots 1 and 2
    with pytest.raises(devices.NoFreeGPU):
        devices.claim(one, {resources.SLOTS_ENV: str(slots)})
    assert devices.claim(TrainerConfig(accelerator="cpu"), {resources.SLOTS_ENV: "x"}) is None
    assert devices.claim(one, {}) is None  # a cluster job: SLURM chose its GPUs


def test_a_claim_past_the_visible_gpus_is_a_job_error(tmp_path):
    """Inside `salloc` CUDA_VISIBLE_DEVICES may list fewer GPUs than the slots:
    a claim that cannot be met fails the job (retried), never an IndexError."""
    one, two = (TrainerConfig(accelerator="gpu", devices=n) for n in (1, 2))
    slots = str(resources.write_slots(tmp_path / "gpus", 3))
    assert devices.claim(one, {resources.SLOTS_ENV: slots, "CUDA_VISIBLE_DEVICES": "7"}) == ["7"]
    with pytest.raises(devices.NoFreeGPU):  # its one visible GPU (slot 0) is held
        devices.claim(one, {resources.SLOTS_ENV: slots, "CUDA_VISIBLE_DEVICES": "7"})
    with pytest.raises(devices.NoFreeGPU, match="may use 1"):
        devices.claim(two, {resources.SLOTS_ENV: slots, "CUDA_VISIBLE_DEVICES": "5"})
    with pytest.raises(devices.NoFreeGPU, match="may use 0"):
        devices.claim(one, {resources.SLOTS_ENV: slots, "CUDA_VISIBLE_DEVICES": ""})


def test_a_run_whose_gpus_cannot_be_claimed_fails_the_job_with_no_record(
        data_dir, tmp_path, monkeypatch):
    slots = resources.write_slots(tmp_path / "gpus", 2)
    held = os.open(slots / "0", os.O_RDWR)  # another job's GPU
    fcntl.flock(held, fcntl.LOCK_EX)
    monkeypatch.setenv(resources.SLOTS_ENV, str(slots))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    try:
        with pytest.raises(SystemExit) as failed:
            cli(spec_dict(accelerator="gpu", devices=1), data_dir, tmp_path / "run")
    finally:
        os.close(held)
    assert failed.value.code == 1
    assert not (tmp_path / "run" / "record.parquet").exists()


def fake_machine(monkeypatch, tmp_path, driver_gpus=None, device_files=(), visible=None):
    """/proc/driver/nvidia/gpus with `driver_gpus` entries (None: absent), /dev
    with `device_files`, and CUDA_VISIBLE_DEVICES (None: unset)."""
    proc, dev = tmp_path / "proc", tmp_path / "dev"
    shutil.rmtree(proc, ignore_errors=True)
    shutil.rmtree(dev, ignore_errors=True)
    dev.mkdir()
    if driver_gpus is not None:
        proc.mkdir()
        for index in range(driver_gpus):
            (proc / f"0000:{index:02x}:00.0").mkdir()
    for name in device_files:
        (dev / name).touch()
    monkeypatch.setattr(resources, "NVIDIA_GPUS", proc)
    monkeypatch.setattr(resources, "NVIDIA_DEVICES", dev, raising=False)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    return resources.local_gpus()


def test_local_gpus_counts_the_gpus_this_process_may_use(monkeypatch, tmp_path):
    assert fake_machine(monkeypatch, tmp_path, driver_gpus=4) == 4
    assert fake_machine(monkeypatch, tmp_path, driver_gpus=4, visible="1,3") == 2  # salloc
    assert fake_machine(monkeypatch, tmp_path, driver_gpus=4, visible="GPU-a1,GPU-b2") == 2
    assert fake_machine(monkeypatch, tmp_path, driver_gpus=4, visible="") == 0
    # CUDA stops at the first entry it cannot use.
    assert fake_machine(monkeypatch, tmp_path, driver_gpus=4, visible="0,-1,2") == 1
    assert fake_machine(monkeypatch, tmp_path, driver_gpus=4, visible="2,3,4,5") == 2
    # A container without the driver's list: its device files.
    assert fake_machine(monkeypatch, tmp_path, device_files=(
        "nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-modeset")) == 2
    assert fake_machine(monkeypatch, tmp_path, device_files=("nvidia0", "nvidia1"),
                        visible="1") == 1
    # No driver: no GPUs, whatever the environment says.
    assert fake_machine(monkeypatch, tmp_path) == 0
    assert fake_machine(monkeypatch, tmp_path, visible="0") == 0


# The workflow's own set-up (common.smk, its onstart) on a machine whose driver
# lists one GPU, and four jobs that each take one, recording when they ran.
ONE_GPU_WORKFLOW = """
from pathlib import Path
from scalestudy.study import resources

resources.NVIDIA_GPUS = Path("fake-driver")

configfile: "config/config.yaml"

include: "workflow/rules/common.smk"

onstart:
    start_study()

onsuccess:
    end_study()

onerror:
    end_study()

rule all:
    input:
        expand("ran/{i}", i=range(4)),

rule gpu_job:
    output:
        "ran/{i}",
    resources:
        gpu=TRAINING_RESOURCES["gpu"],
    shell:
        "python -c 'import time; print(time.time())' > {output}; sleep 1;"
        " python -c 'import time; print(time.time())' >> {output}"
"""


def test_a_local_gpu_study_runs_no_more_gpu_jobs_at_once_than_gpus(tmp_path):
    for name in ("workflow", "config"):
        shutil.copytree(ROOT / name, tmp_path / name)
    (tmp_path / "Snakefile").write_text(ONE_GPU_WORKFLOW)
    (tmp_path / "fake-driver" / "0000:01:00.0").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    done = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "4", "--config",
                           'trainer={"accelerator": "gpu"}'], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "gpu=1" in done.stderr  # Snakemake's "Provided resources"
    spans = sorted(tuple(map(float, (tmp_path / f"ran/{i}").read_text().split()))
                   for i in range(4))
    ends, starts = [end for _, end in spans[:-1]], [start for start, _ in spans[1:]]
    assert all(end <= start for end, start in zip(ends, starts, strict=True)), spans


def test_gpu_runs_ask_for_the_gpu_resource_on_a_workstation_with_gpus():
    def asked(gpus=0, **trainer):
        return resources.training_resources(typed(config(trainer=trainer)), gpus=gpus)

    assert asked(2, accelerator="auto")["gpu"] == 1
    assert "gpu" not in asked(2, accelerator="cpu")
    assert "gpu" not in asked(0)
    assert asked(accelerator="gpu", devices=2, strategy="ddp")["gpu"] == 2


def test_resources_per_task_and_size():
    study = typed(config(resources={"runtime": 30, "sizes": {"s": {"runtime": 60}},
                                    "tasks": {"pathx": {"runtime": 600,
                                                        "sizes": {"s": {"runtime": 900}}}}}))
    runtime = resources.sized(study, "runtime")
    cases = {("listops", "xs"): 30, ("listops", "s"): 60, ("pathx", "xs"): 600,
             ("pathx", "s"): 900, (None, "s"): 60}
    for (task, size), minutes in cases.items():
        given = {"task": task, "size": size}
        wildcards = SimpleNamespace(size=size, get=lambda key, given=given: given.get(key))
        assert runtime(wildcards, 2) == 2 * minutes, (task, size)


def wildcards_of(**given):
    return SimpleNamespace(size=given["size"], get=lambda key: given.get(key))


def test_max_runtime_caps_every_attempt_and_warns_of_the_jobs_it_caps():
    """lra.yaml asks 1,600 minutes for retrieval at base (3,200 on its first
    retry, which SLURM refuses under a 24-hour partition)."""
    lra = preset("lra")
    lra["resources"]["max_runtime"] = 1440
    with pytest.warns(ConfigWarning) as caught:
        capped = validate(lra, cluster=True)
    (warning,) = [str(w.message) for w in caught if w.category is ConfigWarning]
    assert warning.startswith("resources.max_runtime: 1440 minutes caps every attempt")
    assert "the retrieval runs at size base: 1600 minutes, 2 attempts" in warning
    assert "the text runs" not in warning  # 800 minutes: not capped
    runtime = resources.sized(capped, "runtime")
    retrieval = wildcards_of(task="retrieval", size="base", arch="s4", prior="random")
    assert [runtime(retrieval, attempt) for attempt in (1, 2, 3)] == [1440, 1440, 1440]
    text = wildcards_of(task="text", size="base", arch="s4", prior="random")
    assert [runtime(text, attempt) for attempt in (1, 2, 3)] == [800, 1440, 1440]
    # A study's pretraining jobs too (spt's stage on the task), and 0 caps nothing.
    pretraining = resources.sized(capped, "runtime", "pretrain")
    assert pretraining(wildcards_of(task="retrieval", size="base", arch="s4",
                                    stage="spt"), 2) == 1440
    lra["resources"]["max_runtime"] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigWarning)
        uncapped = validate(lra, cluster=True)
    assert resources.sized(uncapped, "runtime")(retrieval, 2) == 3200


def test_a_ddp_job_asks_for_every_ranks_threads_and_memory():
    """Each rank is a process with trainer.threads threads that loads the whole splits."""
    one = typed(config(trainer={"threads": 4}, resources={"mem_mb": 8000}))
    two = typed(config(trainer={"threads": 4, "devices": 2, "strategy": "ddp"},
                       resources={"mem_mb": 8000}))
    xs = wildcards_of(task="listops", size="xs", arch="transformer", prior="random")
    assert resources.job_threads(one) == 4 and resources.job_threads(two) == 8
    assert resources.sized(one, "mem_mb")(xs, 1) == 8000
    assert resources.sized(two, "mem_mb")(xs, 1) == 16000
    assert resources.sized(two, "mem_mb")(xs, 2) == 32000
    assert resources.sized(two, "runtime")(xs, 1) == 30  # the run's length, not its ranks'


# --- 7. the cluster names its accelerator -----------------------------------------------

def test_auto_is_refused_on_a_cluster():
    with pytest.raises(ConfigError, match=r"trainer.accelerator: auto on a cluster.*accepted "
                                          r"with the SLURM profile: gpu \(or cuda\).*cpu"):
        validate(config(), cluster=True)
    validate(config(trainer={"accelerator": "cpu"}), cluster=True)
    validate(config())  # a workstation: auto picks what is there


def presets_sent_to_a_cluster() -> set[str]:
    """The presets the docs (and the presets' own comments) tell users to run with
    the SLURM profile, and the one `make slurm-test` submits."""
    docs = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"),
            *(ROOT / "config/studies").glob("*.yaml")]
    told = r"--profile profiles/slurm\b.*--configfile config/studies/([\w-]+)\.yaml"
    found = {name for path in docs for name in re.findall(told, path.read_text())}
    script = (ROOT / "tools/slurm/slurm-test.sh").read_text()
    found |= set(re.findall(r"STUDY=\$\{STUDY:-config/studies/([\w-]+)\.yaml\}", script))
    return found


def test_every_preset_the_docs_send_to_a_cluster_passes_the_cluster_check():
    sent = presets_sent_to_a_cluster()
    assert {"smoke", "paper", "lra", "spt_gpu"} <= sent  # slurm-test's, and the docs'
    for study in sorted(sent):
        validate(preset(study), cluster=True)


# --- 6. GPU memory ----------------------------------------------------------------------

def test_gpu_memory_is_checked_run_by_run_against_gpu_mem_gb():
    base = {"grid": {"archs": ["transformer"], "sizes": ["base"], "priors": ["random"],
                     "tasks": ["pathx"], "seeds": [0], "per_task": {}},
            "tasks": {"pathx": {"image_size": 128}}, "trainer": {"accelerator": "gpu"},
            "train": {"protocol": "default"}}
    study = config(**base, resources={"gpu_mem_gb": 80})
    with pytest.raises(ConfigError, match=r"resources.gpu_mem_gb: transformer at size base on "
                                          r"tasks.pathx \(32 sequences of 16384 tokens.*"
                                          r"resources.tasks.pathx.sizes.base.micro_batch"):
        validate(study)
    fits = config(**base, resources={"gpu_mem_gb": 80,
                                     "tasks": {"pathx": {"sizes": {"base": {"micro_batch": 4}}}}})
    validate(fits)
    validate(config(**base, resources={"gpu_mem_gb": 0}))  # unchecked


def probe_batch(arch: str, model, pair: bool = False):
    def make(batch, length):
        tokens = torch.randint(3, 259, (batch * (2 if pair else 1), length),
                               generator=torch.Generator().manual_seed(batch * length))
        if isinstance(model, MaskedLM):
            return (tokens,)
        return (tokens, torch.zeros(batch, dtype=torch.int64))
    return make


@pytest.mark.parametrize("arch", sorted(built_in(ARCHITECTURES)))
def test_the_registrys_activation_bytes_bound_what_autograd_saves(arch):
    """Measured at T5 tiny, 64 and 128 tokens (the coefficients were measured at
    tiny-base, 128 and 256), 32-true and bf16 autocast: the estimate is at or
    above the measurement and within 40% of it; S4's kernel likewise."""
    from scalestudy.models import backbone_class, backbone_config

    entry = ARCHITECTURES[arch]
    torch.manual_seed(0)
    bcfg = backbone_config(arch, "tiny", 259, 128, norm="pre", dropout=0.0,
                           protocol="default", causal=False)
    backbone = backbone_class(arch)(bcfg)
    model = Classifier(backbone, ClassifierHead(backbone, 10), 10)
    for mixed, autocast in ((0, None), (1, torch.bfloat16)):
        per_token, per_position = memory.per_token_layer(model, probe_batch(arch, model),
                                                         "tiny", length=64, autocast=autocast)
        assert per_token <= entry.activation_bytes[mixed] <= 1.4 * per_token, (mixed, per_token)
        if entry.kernel_bytes:
            assert per_position <= entry.kernel_bytes <= 1.1 * per_position, per_position


def test_the_gpu_memory_estimate_adds_weights_activations_kernel_and_logits():
    shape = costs.shape_for("small")
    params = costs.training_memory("small", "default", 0, 1024)[1]
    got = costs.gpu_memory("s4", "small", "default", 8, 1024, "bf16-mixed")
    s4 = ARCHITECTURES["s4"]
    want = (params * 18 + 8 * 1024 * shape.depth * shape.width * s4.activation_bytes[1]
            + shape.depth * shape.width * 1024 * s4.kernel_bytes + costs.GPU_RESERVE)
    assert got == pytest.approx(want, rel=1e-9)
    # fp32 keeps more a token; a masked-LM head adds its logits.
    assert costs.gpu_memory("s4", "small", "default", 8, 1024, "32-true") > got
    assert (costs.gpu_memory("s4", "small", "default", 8, 1024, "bf16-mixed", vocab=512)
            - got == 8 * 1024 * 512 * 12)


@pytest.mark.parametrize("study", ["lra", "paper", "spt_gpu"])
def test_the_gpu_presets_fit_their_gpus(study):
    merged = preset(study)
    assert merged["resources"]["gpu_mem_gb"] > 0
    validate(merged, cluster=True)  # every run's estimate fits


# --- the GPU check's CPU form ------------------------------------------------------------

def test_the_gpu_check_runs_on_a_cpu_at_tiny_shapes(tmp_path):
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, str(ROOT / "tools/gpu_check.py"), "--device", "cpu",
                           "--tiny", "--out", str(report)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    checks = json.loads(report.read_text())
    assert checks["device"] == "cpu" and checks["passed"], json.dumps(checks, indent=1)[-3000:]
    assert {"environment", "fork_safety", "sdpa_backends", "architectures", "full_float32",
            "flops", "resume", "ladder", "mfu", "ddp_ends_together"} <= set(checks["sections"])
    skipped = {name for name, section in checks["sections"].items() if section.get("skipped")}
    assert skipped <= {"sdpa_backends", "mfu", "ddp_ends_together"}  # CUDA's; two ranks



def makefile_copy(tmp_path: Path, built_with: str | None) -> Path:
    """The Makefile in a directory whose virtualenv is up to date, built with
    the torch spec `built_with` (None: a virtualenv from before the record)."""
    tmp_path.mkdir()
    for name in ("Makefile", "pyproject.toml", "requirements/lock.txt"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text((ROOT / name).read_text())
    (tmp_path / "tools").symlink_to(ROOT / "tools")
    venv = tmp_path / ".venv"
    venv.mkdir()
    if built_with is not None:
        (venv / ".torch").write_text(built_with + "\n")
    (venv / ".installed").touch()
    newer = max((tmp_path / name).stat().st_mtime
                for name in ("pyproject.toml", "requirements/lock.txt")) + 1
    os.utime(venv / ".installed", (newer, newer))
    return tmp_path


def make(workdir: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(["make", "--no-print-directory", *args], cwd=workdir,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PATH": path, "PYTHONPATH": str(ROOT / "src")})


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_the_gpu_check_without_a_gpu_stops_with_one_line_and_never_runs_the_cpu_form(
        tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "tools/gpu_check.py"), "--device", "cuda",
                           "--out", str(tmp_path / "report.json")], capture_output=True,
                          text=True, timeout=120, env={**os.environ,
                                                       "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode != 0 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("gpu_check: --device cuda, but torch ")
    assert "make TORCH=torch gpu-check" in done.stderr and "--device cpu" in done.stderr
    assert not (tmp_path / "report.json").exists()
    # make gpu-check asks for CUDA: here it stops at once, with that line.
    made = make(makefile_copy(tmp_path / "checkout", built_with=None), "gpu-check")
    assert made.returncode != 0
    assert "gpu_check: --device cuda, but torch " in made.stderr, made.stdout + made.stderr
    assert "gpu_check: environment" not in made.stdout  # no section ran


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_the_virtualenv_is_built_again_when_torch_changes(tmp_path):
    default = make(ROOT, "--eval", "default-torch: ; @echo $(TORCH)",
                   "default-torch").stdout.strip()

    def rebuilds(built_with, *args):
        workdir = makefile_copy(tmp_path / str(len(list(tmp_path.iterdir()))), built_with)
        planned = make(workdir, "-n", *args, "test").stdout
        return "rm -rf .venv" in planned and "python3 -m venv .venv" in planned

    assert not rebuilds(None)  # a virtualenv from before the record: the default's
    assert not rebuilds(default)
    assert rebuilds(None, "TORCH=torch")  # the CUDA torch over the CPU build
    assert rebuilds(default, "TORCH=torch")
    assert not rebuilds("torch", "TORCH=torch")
    assert rebuilds("torch")  # and back
