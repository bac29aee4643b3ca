"""The GPU check (`make gpu-check`): what only a GPU can confirm of the GPU
path, measured, in one JSON report.

    python tools/gpu_check.py [--device cuda|cpu] [--tiny] [--out report.json]

`--device cuda` (the default, and `make gpu-check`'s) stops with one line, exit
2, where torch sees no GPU (a CPU build, no driver, CUDA_VISIBLE_DEVICES), so
that a GPU check never quietly runs its CPU form.

Sections (each one's `passed`, and what it measured):

- environment: torch, CUDA, cuDNN, the GPU, bf16 support;
- fork_safety: the warm server's imports leave CUDA uninitialised (a forked
  job may still start it), and a 30-step job through a live warm server
  records its device (cuda on a GPU);
- sdpa_backends: per mask form (none, is_causal, the [B, 1, 1, T] key mask,
  and the [B, 1, T, T] causal mask the attention built before), at 2,048 and
  16,384 tokens: the backend SDPA picks, deterministic or not, its forward and
  backward time and peak memory, and which backends accept the form;
- architectures: three steps of every backbone at 1,024 tokens in bf16-mixed
  and 32-true, deterministic; then as the GPU presets train (deterministic
  off, TF32, dropout 0.1): paper.yaml's backbones at 2,000 padded tokens and
  lra.yaml's Path-X backbones at 16,384 unpadded ones. Each: no determinism
  error, a finite loss, every sync of each step and where it came from
  (torch.cuda.set_sync_debug_mode("warn")), the SDPA backends picked (a
  preset's never the math path), the last step's time and the peak memory;
- full_float32: Performer's features and S4's kernel under matmul_precision
  high against float64, as the models compute them (TF32 kept out) and with
  TF32 let in: kept out, the error is float32's;
- flops: each backbone's counted FLOPs of one step on the CPU (float32)
  against the training device under autocast: equal;
- resume: a run stopped by USR1 and resumed against the unbroken run, under
  16-mixed on a GPU (the gradient scaler's state), bf16-mixed on a CPU;
- ladder: step time and peak memory of the transformer ladder at 2,000 tokens
  as the paper preset trains it (depth protocol, its micro-batches,
  bf16-mixed), against the GPU-memory estimate and the preset's runtimes;
- mfu: the transformer at paper.yaml's base (27 x 512) as it trains it
  (bf16-mixed, dropout 0.1, micro-batches of 8 x 2,000 tokens, unpadded so
  that flash attention runs), counted FLOPs over step time, against the GPU's
  nominal bf16 peak and a measured matmul peak (the goal: 40%);
- ddp_ends_together: where there are two GPUs, two ranks on NCCL: rank 0's
  failed record ends rank 1 at once, and a collective that times out ends
  the run (skipped on one GPU; tests/training/test_ddp.py has the gloo form).

About 4 minutes on one H100 or H200, and at most 8 (twice that), estimated
from FLOPs: the sections' steps are about 1.6 PFLOP in all
(study.costs.step_flops_estimate of each shape and batch, times its steps:
the ladder 0.78, the architectures 0.41, the SDPA forms 0.25, MFU 0.11),
5 s at a third of an H100's dense bf16 peak (2 s more for the float32
steps); the rest is fixed costs, about 1.5 s a model built and stepped (70
models), 20 s a subprocess (3), 30 s of FLOP counting on the CPU and 15 s of
imports. Two GPUs add the DDP section's 3 minutes.

`--device cpu` runs it without a GPU, asked for by name, skipping only what
needs CUDA (the SDPA backends, MFU); `--tiny` shrinks every shape (the fast
test suite runs `--device cpu --tiny`, which skips the two-rank section too).
The report's `passed` is every section's.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMING = {"wall_seconds", "tokens_per_second"}
# Dense bf16 tensor-core peaks (FLOP/s) from the vendors' datasheets, by the
# words of torch's device name ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"):
# the entry with the most words that all appear wins, so "H100 PCIe" is not
# the SXM part and "L40" is not "L4" (`nominal_peak`).
NOMINAL_BF16 = ((("H100", "PCIe"), 756e12), (("H100", "NVL"), 835e12),
                (("H200", "NVL"), 835e12), (("H100",), 989e12), (("H200",), 989e12),
                (("GH200",), 989e12), (("A100",), 312e12), (("L40S",), 362e12),
                (("L40",), 181e12), (("L4",), 121e12), (("A10",), 125e12))
LISTOPS = {"n_train": 256, "n_val": 32, "n_test": 32, "max_depth": 3, "max_args": 3,
           "min_length": 3, "max_length": 48}


@dataclass
class Context:
    device: str  # "cuda" or "cpu"
    tiny: bool
    work: Path
    fabrics: dict = field(default_factory=dict)  # TrainerConfig -> Fabric

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    @property
    def accelerator(self) -> str:
        return "gpu" if self.cuda else "cpu"


# --- helpers -------------------------------------------------------------------------

def sync(ctx: Context) -> None:
    import torch

    if ctx.cuda:
        torch.cuda.synchronize()


def peak_reset(ctx: Context) -> None:
    import torch

    if ctx.cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_gb(ctx: Context) -> float | None:
    import torch

    return torch.cuda.max_memory_allocated() / 1e9 if ctx.cuda else None


def timed(ctx: Context, fn, repeats: int = 3) -> float:
    """Seconds of one call of `fn` (the median of `repeats`, after one warm-up)."""
    fn()
    sync(ctx)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync(ctx)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def nominal_peak(name: str) -> float | None:
    """The dense bf16 peak (FLOP/s) of the GPU torch names `name`; None for a
    GPU not in NOMINAL_BF16."""
    words = {word.upper() for word in re.split(r"[\s_-]+", name) if word}
    for keys, peak in sorted(NOMINAL_BF16, key=lambda entry: -len(entry[0])):
        if all(key.upper() in words for key in keys):
            return peak
    return None


def src_first(environ) -> dict:
    """`environ` with this checkout's src first on PYTHONPATH, the
    environment's own entries after it."""
    paths = [str(ROOT / "src"), *(p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    return {**environ, "PYTHONPATH": os.pathsep.join(paths)}


def where(filename: str, lineno: int) -> str:
    """A warning's place, file:line, relative to the checkout or to site-packages."""
    path = Path(filename)
    with contextlib.suppress(ValueError):
        return f"{path.relative_to(ROOT)}:{lineno}"
    parts = path.parts
    start = parts.index("site-packages") + 1 if "site-packages" in parts else max(0, len(parts) - 3)
    return f"{'/'.join(parts[start:])}:{lineno}"


def step_syncs(ctx: Context, step):
    """(where each device synchronisation of `step()` came from, one entry a
    sync, its result): torch.cuda.set_sync_debug_mode("warn") warns at every
    synchronising call, and every warning is kept ("always"), its file:line
    naming the Python line that asked for it. On a CPU: none."""
    import torch

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if ctx.cuda:
            torch.cuda.set_sync_debug_mode("warn")
        try:
            result = step()
        finally:
            if ctx.cuda:
                torch.cuda.set_sync_debug_mode(0)
    return [where(w.filename, w.lineno) for w in caught if "synchroniz" in str(w.message)], result


@contextlib.contextmanager
def sdpa_picks():
    """Within it, how many calls of SDPA picked each backend (its name: FLASH_ATTENTION,
    EFFICIENT_ATTENTION, CUDNN_ATTENTION, MATH...), as torch's dispatcher picks it
    for the call's tensors, mask, dropout and causality."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend

    real, picked = F.scaled_dot_product_attention, collections.Counter()

    def recording(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, **kwargs):
        choice = torch._fused_sdp_choice(q, k, v, attn_mask, dropout_p, is_causal)
        picked[SDPBackend(choice).name] += 1
        return real(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                    **kwargs)

    F.scaled_dot_product_attention = recording
    try:
        yield picked
    finally:
        F.scaled_dot_product_attention = real


def listops_data(ctx: Context) -> Path:
    from scalestudy import tasks

    path = ctx.work / "data" / "listops"
    if not (path / "manifest.json").exists():
        tasks.prepare("listops", LISTOPS, path)
    return path


def run_spec(ctx: Context, steps: int, **trainer) -> dict:
    return {"study": "gpu_check", "task": "listops", "arch": "transformer",
            "size": "xxs" if ctx.tiny else "xs", "prior": "random", "seed": 0,
            "task_config": LISTOPS,
            "train": {"max_steps": steps, "batch_size": 8, "warmup_steps": 2,
                      "val_every": max(2, steps // 3), "protocol": "default", "dropout": 0.1},
            "trainer": {"accelerator": ctx.accelerator, "threads": 1, **trainer}}


def comparable(record: dict) -> dict:
    return {k: ("nan" if isinstance(v, float) and math.isnan(v) else v)
            for k, v in record.items() if k not in TIMING}


def classifier(arch: str, size: str, seq_len: int, protocol: str = "default",
               dropout: float = 0.0):
    from scalestudy.models import backbone_class, backbone_config
    from scalestudy.models.heads import ClassifierHead
    from scalestudy.training.modules import Classifier

    bcfg = backbone_config(arch, size, 259, seq_len, norm="pre", dropout=dropout,
                           protocol=protocol, causal=False)
    backbone = backbone_class(arch)(bcfg)
    return Classifier(backbone, ClassifierHead(backbone, 10), 10)


def batch_of(n: int, seq_len: int, seed: int = 0, pad: bool = True) -> tuple:
    """n ListOps-like rows: lengths from a quarter of seq_len to all of it."""
    import torch

    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(3, 259, (n, seq_len), generator=g)
    if pad:
        lengths = torch.randint(seq_len // 4, seq_len + 1, (n,), generator=g)
        tokens[torch.arange(seq_len)[None, :] >= lengths[:, None]] = 0
    return tokens, torch.randint(0, 10, (n,), generator=g)


def loop_for(ctx: Context, model, name: str, batch: int, seq_len: int, precision: str,
             micro: int = 0, deterministic: bool = True, steps: int = 3, pad: bool = True):
    """A TrainingLoop of `model` on synthetic rows (`pad` False: every row
    seq_len long, as images and Pathfinder's), its Fabric from the study's
    factory (the training step is the study's own); deterministic runs
    `highest` matmuls, the others `high` (TF32), as the GPU presets do."""
    import torch
    from torch.utils.data import DataLoader

    from scalestudy.study.specs import TrainConfig, TrainerConfig
    from scalestudy.training.loop import TrainingLoop, make_fabric

    hw = TrainerConfig(accelerator=ctx.accelerator, devices=1, precision=precision,
                       deterministic=deterministic,
                       matmul_precision="highest" if deterministic else "high")
    run_dir = ctx.work / "loops" / name
    if hw not in ctx.fabrics:  # one Fabric per setting: each costs a second to make
        ctx.fabrics[hw] = make_fabric(hw, run_dir)
    fabric = ctx.fabrics[hw]
    torch.use_deterministic_algorithms(deterministic)  # the last Fabric made set its own
    torch.set_float32_matmul_precision(hw.matmul_precision)
    cfg = TrainConfig(max_steps=steps, batch_size=batch, warmup_steps=1, val_every=steps)
    rows = batch_of(batch, seq_len, pad=pad)
    loader = DataLoader(list(zip(*rows, strict=True)), batch_size=batch)
    return TrainingLoop(fabric, model, cfg, run_dir, "gpu_check", loader, loader,
                        micro_batch=micro), rows


# --- sections ------------------------------------------------------------------------

def environment(ctx: Context) -> dict:
    import lightning
    import torch

    out = {"torch": torch.__version__, "lightning": lightning.__version__,
           "cuda_available": torch.cuda.is_available()}
    if ctx.cuda:
        props = torch.cuda.get_device_properties(0)
        out.update(cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                   gpu=props.name,
                   capability=".".join(map(str, torch.cuda.get_device_capability())),
                   memory_gb=round(props.total_memory / 1e9, 1),
                   bf16=torch.cuda.is_bf16_supported(), gpus=torch.cuda.device_count())
        out["passed"] = out["bf16"]  # the GPU presets train in bf16-mixed
    else:
        out["passed"] = True
    return out


def fork_safety(ctx: Context) -> dict:
    from scalestudy.cli import fork_server as warm
    from scalestudy.records import read_records

    probe = ("import importlib, torch; from scalestudy.cli import fork_server as warm; "
             "[importlib.import_module(m) for m in warm.PRELOAD]; "
             "print(int(torch.cuda.is_initialized()))")
    env = src_first(os.environ)
    env.pop(warm.SOCKET_ENV, None)
    imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                              env=env, timeout=300)
    initialised = imported.stdout.strip().splitlines()[-1:] != ["0"]
    data = listops_data(ctx)
    saved = os.environ.pop(warm.SOCKET_ENV, None)
    server = warm.start()
    socket_path = os.environ.pop(warm.SOCKET_ENV)
    run_dir = ctx.work / "warm_job"
    try:
        job = subprocess.run(
            [sys.executable, "-m", "scalestudy.cli", "train", "--spec",
             json.dumps(run_spec(ctx, 30)), "--data-dir", str(data), "--run-dir", str(run_dir)],
            capture_output=True, text=True, timeout=600,
            env={**env, warm.SOCKET_ENV: socket_path, "SCALESTUDY_WARM": "1"})
    finally:
        server.terminate()
        server.wait(timeout=10)
        if saved is not None:
            os.environ[warm.SOCKET_ENV] = saved
    record = read_records(run_dir / "record.parquet").iloc[0] if job.returncode == 0 else None
    device = None if record is None else record["device"]
    return {"cuda_initialised_by_preloads": initialised, "job_exit": job.returncode,
            "job_device": device, "job_status": None if record is None else record["status"],
            "log_tail": (job.stdout + job.stderr)[-1500:] if job.returncode else "",
            "passed": (not initialised and job.returncode == 0
                       and str(device).startswith(ctx.device) and record["steps"] == 30)}


def sdpa_backends(ctx: Context) -> dict:
    if not ctx.cuda:
        return {"skipped": "needs CUDA", "passed": True}
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out, b, h, d = {}, 2, 8, 64
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}
    for t in (2048, 16384):
        q, k, v = (torch.randn(b, h, t, d, device="cuda", dtype=torch.bfloat16,
                               requires_grad=True) for _ in range(3))
        real = torch.ones(b, t, dtype=torch.bool, device="cuda")
        real[-1, t // 2:] = False
        causal_mask = real[:, None, None, :] & torch.ones(t, t, dtype=torch.bool,
                                                          device="cuda").tril()
        forms = {"no mask": (None, False), "is_causal": (None, True),
                 "key mask [B,1,1,T]": (real[:, None, None, :], False),
                 "causal mask [B,1,T,T]": (causal_mask, False)}
        for name, (mask, causal) in forms.items():
            row = {}

            def step(q=q, k=k, v=v, mask=mask, causal=causal):
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
                y.sum().backward()

            for deterministic in (False, True):
                torch.use_deterministic_algorithms(deterministic)
                key = "deterministic" if deterministic else "default"
                try:
                    choice = torch._fused_sdp_choice(q, k, v, mask, 0.0, causal)
                    peak_reset(ctx)
                    seconds = timed(ctx, step)
                    row[key] = {"picks": SDPBackend(choice).name, "ms": round(1e3 * seconds, 2),
                                "peak_gb": round(peak_gb(ctx), 2)}
                except Exception as err:  # an unsupported form is a finding, not a failure
                    row[key] = {"error": f"{type(err).__name__}: {str(err)[:200]}"}
            torch.use_deterministic_algorithms(False)
            accepted = {}
            for backend_name, backend in backends.items():
                try:
                    with sdpa_kernel([backend]):
                        peak_reset(ctx)
                        seconds = timed(ctx, step, repeats=1)
                    accepted[backend_name] = {"ms": round(1e3 * seconds, 2),
                                              "peak_gb": round(peak_gb(ctx), 2)}
                except Exception as err:
                    accepted[backend_name] = f"{type(err).__name__}: {str(err)[:120]}"
            row["backends"] = accepted
            out[f"T={t}, {name}"] = row
    # What the study needs: a fused backend for every form the attention now passes.
    fused = all(isinstance(out[f"T={t}, {form}"]["default"], dict)
                and out[f"T={t}, {form}"]["default"].get("picks") not in (None, "MATH")
                for t in (2048, 16384) for form in ("no mask", "is_causal", "key mask [B,1,1,T]"))
    return {"forms": out, "passed": fused}


def trained_steps(ctx: Context, key: str, arch: str, size: str, seq_len: int, batch: int,
                  precision: str, *, deterministic: bool = True, dropout: float = 0.0,
                  pad: bool = True, protocol: str = "default", steps: int = 3) -> dict:
    """`steps` training steps of `arch` on synthetic rows: finite losses, each
    step's syncs (how many, and from where), the SDPA backends its attention
    picked, the last step's time and the peak memory."""
    import torch

    from scalestudy.models.layers import fixed_length

    peak_reset(ctx)
    torch.manual_seed(0)
    model = classifier(arch, size, seq_len, protocol, dropout)
    if not pad:
        fixed_length(model)  # what a run on data that never pads declares
    training, rows = loop_for(ctx, model, key, batch, seq_len, precision,
                              deterministic=deterministic, pad=pad)
    syncs, losses, seconds = [], [], 0.0
    with sdpa_picks() as picked:
        for _ in range(steps):
            sync(ctx)
            start = time.perf_counter()
            step_sources, loss = step_syncs(ctx, lambda: training.training_step(rows))
            sync(ctx)
            seconds = time.perf_counter() - start
            syncs.append(step_sources)
            losses.append(loss)
    sources = collections.Counter(place for step in syncs for place in step)
    return {"finite": all(bool(torch.isfinite(loss)) for loss in losses),
            "loss": float(losses[-1]), "syncs_per_step": [len(step) for step in syncs],
            "sync_sources": dict(sources.most_common()), "sdpa": dict(picked),
            "last_step_ms": round(1e3 * seconds, 2), "peak_gb": peak_gb(ctx)}


def preset(name: str) -> dict:
    import yaml

    return yaml.safe_load((ROOT / f"config/studies/{name}.yaml").read_text())


def architectures(ctx: Context) -> dict:
    """Every backbone deterministic, padded, in bf16-mixed and 32-true; then
    as the GPU presets train (deterministic off, TF32, dropout 0.1 in the
    attention too, the depth protocol): paper.yaml's backbones on padded rows
    at its ListOps length (SDPA's key mask), and lra.yaml's Path-X backbones on
    unpadded rows of 16,384 tokens at its micro-batch (no mask: flash or
    cuDNN attention)."""
    from scalestudy.architectures import ARCHITECTURES

    paper, lra = preset("paper"), preset("lra")
    pathx_size = lra["grid"]["per_task"]["pathx"]["sizes"][-1]
    if ctx.tiny:
        size, seq_len, batch = "xxs", 16, 2
        listops, pathx, pathx_batch, pathx_size = (32, 2), 64, 2, "xxs"
    else:
        size, seq_len, batch = "small", 1024, 8
        listops = (paper["tasks"]["listops"]["max_length"], 8)
        pathx = lra["tasks"]["pathx"]["image_size"] ** 2
        pathx_batch = lra["resources"]["tasks"]["pathx"]["sizes"][pathx_size]["micro_batch"]
    runs = {f"{arch} {precision}": dict(arch=arch, size=size, seq_len=seq_len, batch=batch,
                                        precision=precision)
            for arch in ARCHITECTURES for precision in ("bf16-mixed", "32-true")}
    presets = dict(precision="bf16-mixed", deterministic=False, dropout=0.1, protocol="depth")
    for arch in paper["grid"]["archs"]:
        runs[f"{arch} as paper.yaml trains it"] = dict(
            arch=arch, size=size, seq_len=listops[0], batch=listops[1], **presets)
    for arch in lra["grid"]["archs"]:
        runs[f"{arch} as lra.yaml trains Path-X"] = dict(
            arch=arch, size=pathx_size, seq_len=pathx, batch=pathx_batch, pad=False, **presets)
    results, passed = {}, True
    for key, run in runs.items():
        settings = {k: v for k, v in run.items() if k != "arch"}
        try:
            results[key] = {**settings, **trained_steps(ctx, key, **run)}
            passed &= results[key]["finite"]
            # The presets' attention runs a fused kernel on a GPU: the math path
            # keeps the T x T scores (17 GB a layer for Path-X's micro-batch).
            if ctx.cuda and not run.get("deterministic", True):
                passed &= "MATH" not in results[key]["sdpa"]
        except Exception as err:
            results[key] = {**settings, "error": f"{type(err).__name__}: {str(err)[:300]}"}
            passed = False
    return {"runs": results, "passed": passed}


def full_float32(ctx: Context) -> dict:
    """What the models compute in float32 on purpose, under the GPU presets'
    matmul_precision high (TF32 elsewhere), against float64: Performer's
    features (exp of logits from a matmul: a logit's absolute error is the
    feature's relative error; head dim 64 and its 266 features) and S4's
    kernel at 16,384 positions (a complex64 matmul), width 512. Each as the
    models compute it (layers.full_float32_matmuls), with TF32 let in (the
    context a no-op), and at `highest`: with the context the error is
    float32's."""
    import torch

    from scalestudy.models import performer, s4

    torch.manual_seed(0)
    dim, rows, length = 64, (256 if ctx.tiny else 4096), (256 if ctx.tiny else 16384)
    projection = performer.orthogonal_features(performer.default_features(dim), dim, 0)
    projection = projection.to(ctx.device)
    q = torch.randn(2, 8, rows, dim, device=ctx.device) * dim**-0.25  # as favor_attention scales
    kernel = s4.S4DKernel(512, 64, 2, 1e-3, 1e-1).to(ctx.device)
    kernel.reset_parameters()
    exact_kernel = s4.S4DKernel(512, 64, 2, 1e-3, 1e-1).to(ctx.device, torch.float64)
    exact_kernel.load_state_dict(kernel.state_dict())

    def exact_features() -> torch.Tensor:  # positive_features' formula, in float64
        x, w = q.double(), projection.double()
        logits = x @ w.T - x.pow(2).sum(-1, keepdim=True) / 2 + w.pow(2).sum(-1) / 2
        return (logits - logits.amax(-1, keepdim=True)).exp() / math.sqrt(w.shape[0])

    features, k_exact = exact_features(), exact_kernel(length)
    seen = features > 1e-30  # below it, float32 holds no digits of a feature

    def errors() -> dict:
        got = performer.positive_features(q, projection, is_query=True).double()
        k = kernel(length).double()
        return {"performer_max_log_error": float((got[seen].log() - features[seen].log())
                                                 .abs().max()),
                "s4_kernel_relative_error": float((k - k_exact).abs().max()
                                                  / k_exact.abs().max())}

    saved = torch.get_float32_matmul_precision()
    out = {}
    try:
        for name, precision, context in (
                ("highest", "highest", None), ("high", "high", None),
                ("high, TF32 let in", "high", contextlib.nullcontext)):
            torch.set_float32_matmul_precision(precision)
            with contextlib.ExitStack() as patches:
                if context is not None:
                    for module in (performer, s4):
                        real = module.full_float32_matmuls
                        module.full_float32_matmuls = context
                        patches.callback(setattr, module, "full_float32_matmuls", real)
                out[name] = errors()
    finally:
        torch.set_float32_matmul_precision(saved)
    passed = all(out["high"][key] <= 2 * out["highest"][key] + 1e-6 for key in out["high"])
    return {"errors": out, "passed": passed}


# A two-rank run whose rank 0 fails (a model error: a failed record) or hangs
# outside any collective at step 2, while rank 1 goes on into the next step's
# collectives (tests/training/test_ddp.py has the gloo form).
RANKS = """
import os, sys, time
from datetime import timedelta
from pathlib import Path
from scalestudy.cli.parser import run_command
from scalestudy.training import loop

rank, mode = os.environ.get("LOCAL_RANK", "0"), sys.argv[1]
loop.COLLECTIVE_TIMEOUT = timedelta(seconds=int(sys.argv[2]))

def after_step(self):
    if rank == "1" and self.step == 1:
        Path("rank1.pid").write_text(str(os.getpid()))
    if rank == "0" and self.step == 2:
        time.sleep(5)  # rank 1 is waiting in a collective by now
        if mode == "fails":
            raise RuntimeError("an error of the model on rank 0")
        time.sleep(600)

loop.TrainingLoop.after_step = after_step
sys.exit(run_command(sys.argv[3:]))
"""
DDP_TIMEOUT = 90  # seconds: a collective's timeout here; rank 1's start-up must fit in it


def ddp_ends_together(ctx: Context) -> dict:
    """Two ranks on NCCL (two GPUs): rank 0's failed record ends rank 1, which
    waits in a collective, at once (not after NCCL's 30 minutes); rank 0 hung
    outside any collective ends the run after the collective's timeout
    (NCCL's watchdog aborts rank 1, and Lightning's watcher then rank 0)."""
    import torch

    from scalestudy.cli import fork_server as warm
    from scalestudy.records import read_records

    if ctx.cuda and torch.cuda.device_count() < 2:
        return {"skipped": "needs 2 GPUs", "passed": True}
    if ctx.tiny:  # the fast suite's: tests/training/test_ddp.py has the gloo form (slow)
        return {"skipped": "two ranks take minutes", "passed": True}
    data = listops_data(ctx)
    env = src_first(os.environ)
    env.pop(warm.SOCKET_ENV, None)
    out = {}
    for mode, bound in (("fails", 120), ("hangs", DDP_TIMEOUT + 120)):
        work = ctx.work / f"ddp_{mode}"
        work.mkdir()
        (work / "ranks.py").write_text(RANKS)
        spec = run_spec(ctx, 12, devices=2, strategy="ddp")
        start = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, "ranks.py", mode, str(DDP_TIMEOUT), "train", "--spec",
                 json.dumps(spec), "--data-dir", str(data), "--run-dir", str(work / "run")],
                capture_output=True, text=True, timeout=bound + 60, env=env, cwd=work)
            code, log = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as late:
            code, log = None, str(late.stdout or "") + str(late.stderr or "")
        seconds = time.perf_counter() - start
        rank1 = int((work / "rank1.pid").read_text()) if (work / "rank1.pid").exists() else None
        alive = rank1 is not None and Path(f"/proc/{rank1}").exists()
        if alive:
            os.kill(rank1, signal.SIGKILL)
        record = work / "run" / "record.parquet"
        status = read_records(record).iloc[0]["status"] if record.exists() else None
        ended = code == 0 and status == "failed" if mode == "fails" else (
            code not in (0, None) and status is None)
        out[f"rank 0 {mode}"] = {"seconds": round(seconds, 1), "exit": code, "record": status,
                                 "rank1_left_running": alive,
                                 "log_tail": "" if ended else log[-1500:],
                                 "passed": ended and not alive and seconds < bound}
    return {"collective_timeout_s": DDP_TIMEOUT, "runs": out,
            "passed": all(run["passed"] for run in out.values())}


def flops(ctx: Context) -> dict:
    import torch

    from scalestudy.architectures import ARCHITECTURES
    from scalestudy.training.flops import flops_per_step

    size, seq_len, batch = ("xxs", 16, 2) if ctx.tiny else ("small", 1024, 2)
    counts, passed = {}, True
    for arch in ARCHITECTURES:
        torch.manual_seed(0)
        model = classifier(arch, size, seq_len)
        rows = batch_of(batch, seq_len)
        on_cpu = flops_per_step(model, rows)
        model.to(ctx.device)
        with torch.autocast(ctx.device, torch.bfloat16):
            on_device = flops_per_step(model, tuple(t.to(ctx.device) for t in rows))
        counts[arch] = {"cpu_float32": on_cpu, f"{ctx.device}_bf16_autocast": on_device,
                        "equal": on_cpu == on_device}
        passed &= on_cpu == on_device
    return {"size": size, "seq_len": seq_len, "batch": batch, "counts": counts,
            "passed": passed}


def resume(ctx: Context) -> dict:
    import torch

    from scalestudy.study.specs import RunSpec
    from scalestudy.training import loop
    from scalestudy.training.task_run import run

    data = listops_data(ctx)
    precision = "16-mixed" if ctx.cuda else "bf16-mixed"
    steps = 12 if ctx.tiny else 60
    stop_at = steps * 3 // 4
    spec = RunSpec.from_dict(run_spec(ctx, steps, precision=precision))
    unbroken = run(spec, data, ctx.work / "resume" / "unbroken")
    original = loop.TrainingLoop.after_step

    def usr1(self):
        original(self)
        if self.step == stop_at:
            os.kill(os.getpid(), signal.SIGUSR1)

    loop.TrainingLoop.after_step = usr1
    try:
        run(spec, data, ctx.work / "resume" / "stopped")
        stopped = None
    except SystemExit as stop:
        stopped = stop.code
    finally:
        loop.TrainingLoop.after_step = original
    saved = torch.load(ctx.work / "resume" / "stopped" / "last.ckpt", weights_only=True)
    resumed = run(spec, data, ctx.work / "resume" / "stopped")
    a, b = comparable(unbroken), comparable(resumed)
    differing = sorted(k for k in a if a[k] != b.get(k))
    scaler = saved.get("precision", {})
    return {"precision": unbroken["precision"], "stopped_exit": stopped,
            "stopped_at": saved["global_step"], "scaler_state": scaler,
            "differing_fields": differing,
            "passed": (stopped == 143 and saved["global_step"] == stop_at and not differing
                       and (bool(scaler.get("scale")) or precision != "16-mixed"))}


def ladder(ctx: Context) -> dict:
    import torch

    from scalestudy.study import costs

    sizes_cfg = preset("paper")["resources"]["sizes"]
    if ctx.tiny:
        sizes, seq_len, protocol = ("xxs", "xs", "s"), 64, "default"
    else:
        sizes, seq_len, protocol = ("tiny", "small", "base", "large"), 2000, "depth"
    out, passed = {}, True
    for size in sizes:
        micro = sizes_cfg.get(size, {}).get("micro_batch", 0) if not ctx.tiny else 0
        peak_reset(ctx)
        try:
            torch.manual_seed(0)
            training, rows = loop_for(ctx, classifier("transformer", size, seq_len, protocol, 0.1),
                                      f"ladder {size}", 32 if not ctx.tiny else 8, seq_len,
                                      "bf16-mixed", micro=micro, deterministic=False, steps=100)
            seconds = timed(ctx, lambda training=training, rows=rows: training.training_step(rows),
                            repeats=2)
            peak = peak_gb(ctx)
            estimate = costs.gpu_memory("transformer", size, protocol,
                                        training.micro_batch, seq_len, "bf16-mixed", 0.1) / 1e9
            minutes = seconds * 20000 / 60
            out[size] = {"micro_batch": training.micro_batch, "step_seconds": round(seconds, 4),
                         "peak_gb": peak, "estimated_gb": round(estimate, 1),
                         "estimate_covers_peak": peak is None or estimate >= peak,
                         "minutes_for_20k_steps": round(minutes, 1),
                         "preset_runtime_minutes": sizes_cfg.get(size, {}).get("runtime")}
            passed &= out[size]["estimate_covers_peak"]
            del training
        except Exception as err:
            out[size] = {"error": f"{type(err).__name__}: {str(err)[:300]}"}
            passed = False
    return {"seq_len": seq_len, "protocol": protocol, "sizes": out, "passed": passed}


def mfu(ctx: Context) -> dict:
    """The transformer at paper.yaml's base (the depth protocol: 27 x 512), as
    it trains: bf16-mixed, deterministic off, dropout 0.1, its micro-batch of
    8 rows of 2,000 tokens, unpadded (no mask: flash attention). Counted FLOPs
    over step time, against the GPU's nominal bf16 peak and a measured matmul
    peak (the goal: 40%)."""
    if not ctx.cuda:
        return {"skipped": "needs CUDA", "passed": True}
    import torch

    from scalestudy.models.layers import fixed_length
    from scalestudy.training.flops import flops_per_step

    paper = preset("paper")
    name = torch.cuda.get_device_name()
    nominal = nominal_peak(name)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    matmul = timed(ctx, lambda: a @ a, repeats=10)
    measured_peak = 2 * 8192**3 / matmul
    seq_len = paper["tasks"]["listops"]["max_length"]
    micro = paper["resources"]["sizes"]["base"]["micro_batch"]
    torch.manual_seed(0)
    model = classifier("transformer", "base", seq_len, "depth", paper["train"]["dropout"])
    fixed_length(model)
    training, rows = loop_for(ctx, model, "mfu", micro, seq_len, "bf16-mixed",
                              deterministic=False, steps=100, pad=False)
    with torch.autocast("cuda", torch.bfloat16):
        counted = flops_per_step(model, tuple(t[:micro].cuda() for t in rows))
    with sdpa_picks() as picked:
        training.training_step(rows)
    seconds = timed(ctx, lambda: training.training_step(rows), repeats=5)
    achieved = counted / seconds
    shape = model.backbone.cfg
    out = {"gpu": name, "shape": f"{shape.depth} x {shape.width}", "rows": micro,
           "seq_len": seq_len, "sdpa": dict(picked), "counted_flops_per_step": counted,
           "step_seconds": round(seconds, 4), "achieved_tflops": round(achieved / 1e12, 1),
           "matmul_peak_tflops": round(measured_peak / 1e12, 1),
           "mfu_of_matmul_peak": round(achieved / measured_peak, 3)}
    if nominal:
        out.update(nominal_peak_tflops=nominal / 1e12, mfu=round(achieved / nominal, 3),
                   goal_met=achieved / nominal >= 0.40)
    out["passed"] = True  # a measurement; the 40% goal is `goal_met`
    return out


SECTIONS = (environment, fork_safety, sdpa_backends, architectures, full_float32, flops, resume,
            ladder, mfu, ddp_ends_together)


def no_gpu() -> str | None:
    """Why this torch cannot train on a GPU, in one line (None: it can)."""
    import torch

    if torch.cuda.is_available():
        return None
    if torch.version.cuda is None:
        return (f"torch {torch.__version__} is a CPU build; build the virtualenv with a CUDA "
                f"torch: make TORCH=torch gpu-check")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return (f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU (no driver or "
            f"no device{'' if visible is None else f'; CUDA_VISIBLE_DEVICES={visible!r}'})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="the training device (default: cuda; cpu: the CPU form)")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes (the test suite's)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "gpu_check.json")
    parser.add_argument("--only", nargs="*", help="run only these sections")
    args = parser.parse_args(argv)
    # Before torch: it reads CUBLAS_WORKSPACE_CONFIG at its first cuBLAS call
    # (sdpa_backends), and the deterministic sections after it need it.
    import scalestudy.training  # noqa: F401

    device = args.device
    why = no_gpu() if device == "cuda" else None
    if why:
        print(f"gpu_check: --device cuda, but {why}; the CPU form: --device cpu",
              file=sys.stderr)
        return 2
    warnings.filterwarnings("ignore", message=r".*'set_vital' is deprecated")
    report = {"device": device, "tiny": args.tiny, "started": time.strftime("%Y-%m-%d %H:%M:%S"),
              "sections": {}}
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as work:
        ctx = Context(device, args.tiny, Path(work))
        for section in SECTIONS:
            if args.only and section.__name__ not in args.only:
                continue
            start = time.perf_counter()
            print(f"gpu_check: {section.__name__} ...", flush=True)
            try:
                result = section(ctx)
            except Exception as err:
                result = {"passed": False, "error": f"{type(err).__name__}: {err}",
                          "traceback": traceback.format_exc()[-3000:]}
            result["passed"] = bool(result["passed"])
            result["seconds"] = round(time.perf_counter() - start, 1)
            report["sections"][section.__name__] = result
            verdict = ("skipped" if result.get("skipped") else
                       "passed" if result["passed"] else "FAILED")
            print(f"gpu_check: {section.__name__}: {verdict} ({result['seconds']} s)", flush=True)
    report["passed"] = all(s["passed"] for s in report["sections"].values())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(f"gpu_check: {'passed' if report['passed'] else 'FAILED'}; report in {args.out}")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    importlib.invalidate_caches()
    sys.exit(main())
