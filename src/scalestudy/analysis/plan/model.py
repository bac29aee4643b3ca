"""What a study's runs are expected to show, `Model`: per cell (task,
architecture, prior) the law of its downstream error, per architecture the law
of its upstream loss, both against the ladder's non-embedding parameters of
each size (study/ladder.py: what a size is, whatever the architecture), and
the runs' noise: a log-normal scatter `sd` per run, correlated `rho` between
the architectures' runs of the same task, prior, size and seed (they share
data order and initial draws; the default cache's residuals correlate 0.5-0.65
so). `Model.from_pilot` estimates them from a pilot's records (each cell's
least-squares line; the pooled residual sd; the mean correlation of residuals
between architectures), or they are stated.

`draw` simulates many studies of a design at once as arrays (the fast rules,
rules.py); `records` one study as run records, which the claims themselves
read (claims/: the slow path, and the check of the fast one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...ladder import shape_for
from ...priors import PRIORS
from ...stages import STAGES
from ..fits import UPSTREAM_STAGES, task_runs, upstream_runs
from .design import Design

# Stated noise (no pilot, or --noise): the default cache's (issue 49's second
# opinion: the residual sd of log error 0.027, residuals correlated 0.5-0.65
# across architectures at the same size and seed).
STATED_SD, STATED_RHO = 0.027, 0.5
REFERENCE_SIZE = "xs"  # a law's level is stated at this size's parameters
UPSTREAM = UPSTREAM_STAGES[0]  # the pretraining stage whose runs' loss is the upstream loss


def ladder_params(size: str, protocol: str = "default") -> float:
    """The vanilla transformer's non-embedding parameters at `size`: L (4 D^2 + 2 D F)."""
    shape = shape_for(size, protocol)
    return float(shape.depth * (4 * shape.width**2 + 2 * shape.width * shape.d_ff))


@dataclass(frozen=True)
class Law:
    """log y = log_y - alpha (log N - log N at REFERENCE_SIZE)."""

    log_y: float
    alpha: float

    def log_at(self, log_n):
        reference = math.log(ladder_params(REFERENCE_SIZE))
        return self.log_y - self.alpha * (np.asarray(log_n) - reference)


@dataclass(frozen=True)
class Model:
    """Each cell's law and the runs' noise (module docstring)."""

    down: Mapping[tuple[str, str, str], Law]  # (task, arch, prior) -> error's law
    up: Mapping[str, Law] = field(default_factory=dict)  # arch -> upstream loss's law
    sd: float = STATED_SD  # of a task run's log error
    rho: float = STATED_RHO
    source: str = "stated"
    sd_up: float | None = None  # of an upstream run's log loss (None: sd)
    sizes: tuple[str, ...] = ()  # the pilot's sizes (its laws' span); () stated: none

    @property
    def up_sd(self) -> float:
        return self.sd if self.sd_up is None else self.sd_up

    def noise(self, sd: float | None = None, rho: float | None = None) -> Model:
        """The model with its noise stated (None: kept; a stated sd is both the
        error's and the upstream loss's)."""
        return Model(self.down, self.up, self.sd if sd is None else sd,
                     self.rho if rho is None else rho,
                     self.source + ("" if sd is None and rho is None else ", noise stated"),
                     self.sd_up if sd is None else None, self.sizes)

    @classmethod
    def from_pilot(cls, runs: pd.DataFrame, source: str = "pilot") -> Model:
        """The laws and noise of a pilot's finished runs (its budgeted runs left
        out): each cell's least-squares line of log y on log N (the ladder's
        parameters of its size, under the pilot's protocol); sd the residuals'
        pooled over the error's lines (their degrees of freedom), sd_up over the
        upstream loss's; rho the mean
        correlation of two architectures' residuals over the task, prior, size
        and seed they share (stated where the pilot has no such pairs)."""
        if "budget" in runs:
            runs = runs[runs["budget"].isna()]
        runs = runs[runs["status"] == "ok"]
        protocol = runs["protocol"].mode().iloc[0] if len(runs) else "default"
        log_n = {s: math.log(ladder_params(s, protocol)) for s in runs["size"].unique()}
        down, up, resid = {}, {}, []
        tasks = task_runs(runs)
        for (task, arch, prior), g in tasks.groupby(["task", "arch", "prior"]):
            law, r = _line(g, "error", log_n)
            if law is not None:
                down[task, arch, prior] = law
                resid.append(r.assign(task=task, arch=arch, prior=prior, law="error"))
        for arch, g in upstream_runs(runs).groupby("arch"):
            law, r = _line(g, "upstream_loss", log_n)
            if law is not None:
                up[arch] = law
                resid.append(r.assign(task="", arch=arch, prior="", law="loss"))
        if not resid:
            raise ValueError(f"{source}: no cell with finished runs at three sizes or more: "
                             "nothing to estimate laws from")
        r = pd.concat(resid, ignore_index=True)
        upstream = r["law"] == "loss"
        sd = _pooled(r[~upstream])
        sizes = tuple(sorted(log_n, key=log_n.get))
        return cls(down, up, STATED_SD if sd is None else sd, _correlation(r), source,
                   _pooled(r[upstream]), sizes)

    def draw(self, design: Design, n: int, rng: np.random.Generator) -> Draw:
        """`n` studies of `design` (module docstring), as arrays."""
        k, seeds = len(design.sizes), design.seeds
        lx = np.repeat([math.log(ladder_params(s, design.protocol)) for s in design.sizes], seeds)
        size_of = np.repeat(np.arange(k), seeds)
        a, b = math.sqrt(self.rho), math.sqrt(1 - self.rho)
        down = {}
        for task in design.tasks:
            for prior in design.priors:
                shared = rng.standard_normal((n, k * seeds))
                for arch in design.archs:
                    law = self.down.get((task, arch, prior))
                    if law is None:
                        continue
                    eps = self.sd * (a * shared + b * rng.standard_normal((n, k * seeds)))
                    down[task, arch, prior] = law.log_at(lx) + eps
        up = {}
        shared = rng.standard_normal((n, k * seeds))
        for arch in design.archs:
            law = self.up.get(arch)
            if law is not None and design.pretrains_upstream:
                eps = self.up_sd * (a * shared + b * rng.standard_normal((n, k * seeds)))
                up[arch] = law.log_at(lx) + eps
        return Draw(lx, size_of, down, up)

    def records(self, design: Design, rng: np.random.Generator) -> pd.DataFrame:
        """One study of `design` as run records: what the claims read (columns
        of records.py's schema that they use). Compute is 100 N a task run (plus
        1000 N of its pretraining), 1000 N an upstream run: the laws against N
        are then the fits' against compute."""
        drawn = self.draw(design, 1, rng)
        rows = []
        for i, (size, seed) in enumerate(design.runs()):
            n_params = ladder_params(size, design.protocol)
            shape = shape_for(size, design.protocol)
            base = {"study": "planned", "size": size, "seed": seed, "status": "ok",
                    "n_params_nonembed": n_params, "depth": shape.depth, "width": shape.width,
                    "protocol": design.protocol, "diverged_step": None, "error": "",
                    "budget": np.nan, "upstream_loss": np.nan}
            for arch, ly in drawn.up.items():
                if seed in design.upstream_seeds:
                    rows.append({**base, "task": STAGES[UPSTREAM].corpus(None), "arch": arch,
                                 "prior": UPSTREAM, "stage": UPSTREAM,
                                 "train_flops": 1000 * n_params,
                                 "pretrain_flops": 0.0, "test_acc": np.nan, "norm": "pre",
                                 "causal": False, "pretrain_causal": None, "pretrain_seed": None,
                                 "upstream_loss": float(np.exp(ly[0, i]))})
            for (task, arch, prior), ly in drawn.down.items():
                entry = PRIORS[prior]
                pretrained = entry.pretrain is not None
                row = {**base, "task": task, "arch": arch, "prior": prior, "stage": entry.stage,
                       "train_flops": 100 * n_params,
                       "pretrain_flops": 1000 * n_params if pretrained else 0.0,
                       "test_acc": 1 - float(np.exp(ly[0, i])), "norm": entry.norm or "pre",
                       "causal": bool(entry.causal), "pretrain_causal":
                           bool(STAGES[entry.pretrain].causal) if pretrained else None,
                       "pretrain_seed": (seed if design.per_seed else 0) if pretrained else None}
                if pretrained and arch in drawn.up:
                    j = design.runs().index((size, seed if design.per_seed else 0))
                    row["upstream_loss"] = float(np.exp(drawn.up[arch][0, j]))
                rows.append(row)
        return pd.DataFrame(rows)


@dataclass(frozen=True)
class Draw:
    """Simulated studies as arrays: log N of each run (sizes x seeds, size-major),
    its size's index, and log y (studies x runs) per cell and per upstream
    architecture."""

    lx: np.ndarray
    size_of: np.ndarray
    down: dict
    up: dict


def _line(g: pd.DataFrame, y: str, log_n: dict) -> tuple[Law | None, pd.DataFrame]:
    values = g[y].to_numpy(float)
    keep = np.isfinite(values) & (values > 0)
    g, values = g[keep], values[keep]
    if g["size"].nunique() < 3:
        return None, pd.DataFrame()
    lx = g["size"].map(log_n).to_numpy(float)
    ly = np.log(values)
    slope, intercept = np.polyfit(lx, ly, 1)
    ref = math.log(ladder_params(REFERENCE_SIZE))
    law = Law(float(intercept + slope * ref), float(-slope))
    return law, pd.DataFrame({"size": g["size"].to_numpy(), "seed": g["seed"].to_numpy(),
                              "r": ly - intercept - slope * lx})


def _pooled(r: pd.DataFrame) -> float | None:
    """The residuals' sd pooled over their lines (their degrees of freedom); None
    without any."""
    dof = sum(max(len(g) - 2, 0) for _, g in r.groupby(["law", "task", "arch", "prior"]))
    return float(np.sqrt((r["r"] ** 2).sum() / dof)) if dof else None


def _correlation(r: pd.DataFrame) -> float:
    """The mean correlation of two architectures' residuals over the keys (task,
    prior, size, seed) both have; STATED_RHO without two architectures sharing
    three keys."""
    wide = r.pivot_table(index=["law", "task", "prior", "size", "seed"], columns="arch",
                         values="r")
    found = []
    for _, g in wide.groupby(level=["law", "task", "prior"]):
        g = g.dropna(axis=1, how="all")
        cols = list(g.columns)
        for i, a in enumerate(cols):
            for b in cols[i + 1:]:
                pair = g[[a, b]].dropna()
                if len(pair) >= 3 and pair[a].std() > 0 and pair[b].std() > 0:
                    found.append(float(np.corrcoef(pair[a], pair[b])[0, 1]))
    return float(np.clip(np.mean(found), 0.0, 0.95)) if found else STATED_RHO
