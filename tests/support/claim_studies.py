"""Synthetic run records for the claim tests: task runs with accuracies set
outright, scaling studies with known exponents, and null studies (no effect
anywhere) on a preset's grid. No training: records only."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pandas as pd

from scalestudy.analysis.claims import CLAIMS
from scalestudy.analysis.claims.check import Evidence
from scalestudy.analysis.frontier.stage import study_frontier
from scalestudy.analysis.options import ClaimsOptions
from scalestudy.priors import PRIORS
from scalestudy.stages import STAGES
from scalestudy.study.config import load_study
from scalestudy.study.specs import TrainConfig

from tests.support import ROOT

PARAMS = {"xxs": 1e4, "xs": 4e4, "s": 1.6e5, "m": 6.4e5}
# (depth, width) of each size under each protocol (xs: the depth/width anchor).
SHAPES = {"depth": {"xxs": (1, 32), "xs": (2, 32), "s": (8, 32), "m": (36, 32)},
          "width": {"xxs": (2, 16), "xs": (2, 32), "s": (2, 64), "m": (2, 136)},
          "default": {"xxs": (2, 16), "xs": (2, 32), "s": (2, 64), "m": (4, 96)}}
BOOT = {"n_boot": 300, "seed": 0}


def study(runs: pd.DataFrame, **boot) -> Evidence:
    return Evidence(runs, **{**BOOT, **boot})


def frontier_study(runs: pd.DataFrame, **boot) -> Evidence:
    """The study of budgeted `runs` with the frontier the frontier stage fits on
    them, which its claims read (a claim never fits one): approach 2 alone, the
    one they read (each approach draws its own random stream, so alone it is
    the stage's), with the claims' bootstrap settings."""
    options = ClaimsOptions(**boot)
    frontier = study_frontier(runs, n_boot=options.n_boot, ci=options.ci, seed=options.seed,
                              methods=("approach2",), quiet=True)
    return Evidence.of(runs, pd.DataFrame(), frontier, options)


def scopes(name: str, runs: pd.DataFrame, **params):
    """A registered claim's scopes on `runs`, its params overridden by `params`."""
    claim = CLAIMS[name]
    return claim.check(study(runs), **{**claim.params, **params})


def verdicts(scopes_) -> list[str]:
    return [s.verdict for s in scopes_]


def _row(task, arch, size, prior, seed, protocol, **values) -> dict:
    depth, width = SHAPES[protocol][size]
    pretrained = PRIORS[prior].pretrain is not None
    row = dict(study="synthetic", task=task, arch=arch, size=size, prior=prior, seed=seed,
               stage=PRIORS[prior].stage, status="ok", n_params_nonembed=PARAMS[size],
               depth=depth, width=width, protocol=protocol,
               norm=PRIORS[prior].norm or "pre", diverged_step=None, error="",
               causal=PRIORS[prior].schedule(TrainConfig(), arch).causal,
               pretrain_causal=bool(STAGES[PRIORS[prior].pretrain].causal) if pretrained
               else None, pretrain_seed=seed if pretrained else None,
               train_flops=100 * PARAMS[size], pretrain_flops=0.0, upstream_loss=np.nan)
    return {**row, **values}


def runs(acc, archs=("transformer",), sizes=("xxs", "xs", "s"), priors=("random",),
         seeds=(0, 1), protocols=("default",), status=None, spread=0.005) -> pd.DataFrame:
    """Task runs of listops: test accuracy acc(arch, size, prior, protocol) plus
    +-`spread` by seed parity; `status(arch, size, prior)` (default "ok")."""
    rows = []
    for arch, size, prior, protocol, seed in itertools.product(archs, sizes, priors,
                                                               protocols, seeds):
        row = _row("listops", arch, size, prior, seed, protocol,
                   test_acc=acc(arch, size, prior, protocol) + (spread if seed % 2 else -spread))
        row["status"] = status(arch, size, prior) if status else "ok"
        rows.append(row)
    return pd.DataFrame(rows)


def scaling(alpha_u=None, alpha_d=None, archs=("transformer",), sizes=("xxs", "xs", "s", "m"),
            seeds=(0, 1), noise=0.01, paired=True, prior="upstream") -> pd.DataFrame:
    """Upstream runs (one per arch x size x seed: pretrain.seeds per_seed) with
    loss 4 (N/1e4)^-alpha_u[arch], and finetuned runs of `prior` with error
    0.8 x^-alpha_d[arch] (x = train + pretrain FLOPs, proportional to N), each
    times exp(+-noise): + for even seeds, - for odd ones at even sizes and the
    other way round at odd sizes. `paired`: every architecture has the same sign
    pattern (their noise shares the run's seed); else the pattern is shifted by
    one for every other architecture. Exact exponents; intervals from the noise."""
    alpha_u, alpha_d = alpha_u or {}, alpha_d or {}
    rows = []
    for a_i, arch in enumerate(archs):
        for s_i, size in enumerate(sizes):
            n = PARAMS[size]
            for seed in seeds:
                sign = (-1) ** (seed + s_i + (0 if paired else a_i))
                loss = 4.0 * (n / 1e4) ** -alpha_u.get(arch, 0.1) * np.exp(sign * noise)
                up = _row("upstream", arch, size, "upstream", seed, "default", test_acc=np.nan)
                up.update(stage="upstream", prior="upstream", train_flops=1000 * n,
                          upstream_loss=loss, pretrain_causal=None, pretrain_seed=None)
                rows.append(up)
                x = 1100 * n
                err = 0.8 * (x / 1.1e7) ** -alpha_d.get(arch, 0.05) * np.exp(sign * noise)
                rows.append(_row("listops", arch, size, prior, seed, "default",
                                 test_acc=1 - err, upstream_loss=loss, pretrain_flops=1000 * n,
                                 train_flops=100 * n))
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- null studies


def _preset(name: str) -> dict:
    return load_study(*([] if name == "default" else [ROOT / f"config/studies/{name}.yaml"]))


def preset_grid(name: str) -> tuple[dict, str, bool]:
    """A preset's grid over the default study's, its protocol and whether its
    pretraining is per seed (name "default": config/config.yaml itself)."""
    study = _preset(name)
    return study["grid"], study["train"]["protocol"], study["pretrain"]["seeds"] == "per_seed"


def preset_norm(name: str) -> str | None:
    """The preset's train.norm where it states one (a LayerNorm-free study: "none")."""
    return _preset(name)["train"].get("norm")


def null_study(grid: dict, protocol: str, per_seed: bool, rng, *, noise: float = 0.03,
               alpha: float = 0.05, variant_alpha: dict | None = None,
               downstream_alpha: dict | None = None,
               acc_shift: Callable[[str, str, str], float] | None = None,
               status: Callable[[str, str, str, int], str] | None = None,
               norm: str | None = None) -> pd.DataFrame:
    """Records of a study with no effect anywhere: every architecture and prior
    has the same law, error 0.8 (N/1e4)^-alpha and upstream loss 4 (N/1e4)^-alpha
    with log-normal noise `noise` per run, compute proportional to N (so the same
    exponent on every x axis), every run ok. `variant_alpha` (arch -> alpha)
    changes named architectures' exponent (the equivalence claim's null).

    Planted effects (tests/analysis/claims/test_power.py), none by default:
    `downstream_alpha` (arch -> alpha) sets named architectures' exponent of
    their task runs' error only (their upstream loss keeps `variant_alpha`'s or
    `alpha`), `acc_shift(arch, prior, size)` is added to every task run's
    test accuracy (after the noise; the same draws of `rng` either way), and
    `status(arch, prior, size, seed)` sets a task run's status ("diverged":
    its accuracy stays, unread). `norm`: the study's train.norm (a prior's own
    wins), "none" for a LayerNorm-free study."""
    variant_alpha = variant_alpha or {}
    downstream_alpha = downstream_alpha or {}

    def task_grid(grid: dict, task: str) -> dict:  # a task's grid.per_task over the grid
        own = (grid.get("per_task") or {}).get(task, {})
        return {key: own.get(key, grid[key]) for key in ("archs", "sizes", "priors", "seeds")}

    rows = []
    for task in grid["tasks"]:
        own = task_grid(grid, task)
        for arch, size, prior, seed in itertools.product(own["archs"], own["sizes"],
                                                         own["priors"], own["seeds"]):
            n = PARAMS[size] / 1e4
            a = downstream_alpha.get(arch, variant_alpha.get(arch, alpha))
            stage = PRIORS[prior].needs
            shift = acc_shift(arch, prior, size) if acc_shift else 0.0
            row = _row(task, arch, size, prior, seed, protocol,
                       test_acc=1 - 0.8 * n ** -a * np.exp(rng.normal(0, noise)) + shift)
            if status is not None:
                row["status"] = status(arch, prior, size, seed)
            if norm is not None and PRIORS[prior].norm is None:
                row["norm"] = norm
            if stage is not None:
                row["pretrain_flops"] = 1000 * PARAMS[size]
                row["pretrain_seed"] = seed if per_seed else 0
            rows.append(row)
    # Upstream pretraining runs: one per arch x size (x seed when per seed).
    up_archs = {a for task in grid["tasks"] for a in task_grid(grid, task)["archs"]
                if "upstream" in task_grid(grid, task)["priors"]}
    for arch in sorted(up_archs):
        a = variant_alpha.get(arch, alpha)
        for size in grid["sizes"]:
            for seed in (grid["seeds"] if per_seed else [0]):
                up = _row("upstream", arch, size, "upstream", seed, protocol, test_acc=np.nan)
                up.update(stage="upstream", train_flops=1000 * PARAMS[size],
                          upstream_loss=4.0 * (PARAMS[size] / 1e4) ** -a
                          * np.exp(rng.normal(0, noise)), pretrain_causal=None,
                          pretrain_seed=None)
                rows.append(up)
    frame = pd.DataFrame(rows)
    # A finetuned run carries its upstream pretraining run's loss.
    up = frame[frame["stage"] == "upstream"].set_index(["arch", "size", "seed"])["upstream_loss"]
    tuned = (frame["prior"] == "upstream") & (frame["stage"] != "upstream")
    keys = zip(frame.loc[tuned, "arch"], frame.loc[tuned, "size"],
               frame.loc[tuned, "pretrain_seed"], strict=True)
    frame.loc[tuned, "upstream_loss"] = [up[k] for k in keys]
    return frame
