"""The next run of a finished IsoFLOP suite: the compute-optimal N and D at a
new budget, with their intervals, and a preset that runs the IsoFLOP at it.

A frontier fitted with `predict` budgets (stage.py) holds, per group and
method, N_opt(C) and D_opt(C) with their bootstrap intervals. At a budget the
suite never ran, the prediction is checked the way a ladder is grown: an
IsoFLOP group at that budget whose sizes bracket the predicted optimum, so
that the new budget's own parabola (approach 2) confirms or moves it. The
preset (`preset_text`) states only what changes (the study's name, the
architectures, the sizes and the budgets) and is layered on the suite's own
preset:

    snakemake --configfile config/studies/frontier.yaml results/next_run.yaml

Sizes are the named ladder's (study/ladder.py). A size the suite ran has its
measured non-embedding parameters (per architecture); any other its nearest
measured size's, scaled by the vanilla transformer's non-embedding count
(12 L D^2 + the feed-forward's, `vanilla_params`): an estimate, which the
architectures track within a few per cent on the committed caches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...atomic import refuse_overwrite, write_text
from ...ladder import SIZES, shape_for
from .. import MIN_SIZES  # approach 2's least sizes per budget
from ..inputs import read_runs
from .result import FrontierResult

METHOD = "approach2"  # the IsoFLOP parabolas: what a new budget's own group re-fits


def vanilla_params(size: str, protocol: str) -> int:
    """The vanilla transformer's non-embedding parameters at `size`."""
    shape = shape_for(size, protocol)
    return shape.depth * (4 * shape.width**2 + 2 * shape.width * shape.d_ff)


def ladder_params(measured: pd.Series, protocol: str) -> pd.Series:
    """Non-embedding parameters of every ladder size for one architecture:
    `measured` (size -> params) where the suite ran it, else the nearest
    measured size's scaled by the vanilla count (module docstring)."""
    known = {size: float(n) for size, n in measured.items() if size in SIZES}
    if not known:
        raise ValueError("next run: the runs name no size of the ladder "
                         f"(accepted: {', '.join(SIZES)})")
    out = {}
    for size in SIZES:
        if size in known:
            out[size] = known[size]
            continue
        ln_v = math.log(vanilla_params(size, protocol))
        near = min(known, key=lambda s: abs(math.log(vanilla_params(s, protocol)) - ln_v))
        out[size] = known[near] * vanilla_params(size, protocol) / vanilla_params(near, protocol)
    return pd.Series(out).sort_values()


def bracketing_sizes(params: pd.Series, n_low: float, n_opt: float,
                     n_high: float) -> tuple[list[str], str]:
    """The ladder sizes of an IsoFLOP group at a new budget: every size within
    N_opt's interval and the nearest one on each side of it (at least
    MIN_SIZES, nearest to N_opt in ln N first), in order of size; none, with
    the reason, when the interval reaches past the ladder's ends (the suite
    does not determine N_opt there)."""
    if not (math.isfinite(n_low) and math.isfinite(n_high)):
        n_low = n_high = n_opt
    if n_low < params.iloc[0] or n_high > params.iloc[-1]:
        return [], (f"N_opt's interval reaches past the ladder ({params.index[0]} "
                    f"{params.iloc[0]:.3g} to {params.index[-1]} {params.iloc[-1]:.3g}): "
                    "not determined by the suite, left out")
    inside = params[(params >= n_low) & (params <= n_high)].index.tolist()
    below, above = params[params < n_low], params[params > n_high]
    chosen = set(inside)
    if len(below):
        chosen.add(below.index[-1])
    if len(above):
        chosen.add(above.index[0])
    by_distance = (params.apply(math.log) - math.log(n_opt)).abs().sort_values().index
    for size in by_distance:
        if len(chosen) >= MIN_SIZES:
            break
        chosen.add(size)
    return [s for s in params.index if s in chosen], ""


def flops_text(value: float) -> str:
    """A YAML float of FLOPs (a mantissa with a dot: YAML 1.1 reads 3e+12 as a string)."""
    return f"{value:.2e}"


@dataclass
class NextRun:
    """Per group and budget, the predicted optimum and the sizes chosen
    (`table`), and what the preset states."""

    table: pd.DataFrame
    study: str
    budgets: list[float]
    method: str

    def preset_text(self) -> str:
        """The preset: the header says what was predicted, the keys what changes."""
        archs, sizes = self.grid
        lines = [f"{HEADER}{self.study!r}: the IsoFLOP group at each new "
                 f"budget, its sizes bracketing the optimum that {self.method_name} predicts there",
                 "# (scalestudy frontier --next-run; analysis/frontier/next_run.py). Layer it "
                 "on the study's own preset:",
                 f"#   snakemake --configfile <{self.study}'s preset> <this file>",
                 "# Predicted (N: non-embedding parameters, D: tokens; the interval is the "
                 "frontier's bootstrap):"]
        for row in self.table.itertuples():
            group = " ".join(str(getattr(row, c)) for c in self.table.columns[:self.groups])
            lines.append(
                f"#   {group} at {row.compute:.3g} FLOPs: N_opt {row.n_opt:.3g} "
                f"[{row.n_low:.3g}, {row.n_high:.3g}], D_opt {row.d_opt:.3g} "
                f"[{row.d_low:.3g}, {row.d_high:.3g}]; sizes {row.sizes or 'none'}"
                + (f" ({row.note})" if row.note else ""))
        return "\n".join([
            *lines,
            f"study: {self.study}_next",
            "grid:",
            f"  archs: [{', '.join(archs)}]",
            f"  sizes: [{', '.join(sizes)}]",
            f"  budgets: [{', '.join(map(flops_text, self.budgets))}]  # training FLOPs",
            ""])

    @property
    def method_name(self) -> str:
        return self.method.replace("approach", "approach ")

    @property
    def grid(self) -> tuple[list[str], list[str]]:
        """The preset's architectures and sizes: every group's that chose sizes,
        the sizes in the ladder's order."""
        chosen = self.table[self.table["sizes"] != ""]
        sizes = {size for row in chosen["sizes"] for size in row.split(",")}
        return list(dict.fromkeys(chosen["arch"])), [s for s in SIZES if s in sizes]

    def summary(self) -> str:
        """One line: the preset's study, architectures, sizes and budgets."""
        archs, sizes = self.grid
        return (f"{self.study}_next: {', '.join(archs) or 'no architecture'} at "
                f"{', '.join(sizes) or 'no size'}, budgets "
                f"{', '.join(map(flops_text, self.budgets))}")

    @property
    def groups(self) -> int:
        return list(self.table.columns).index("compute")


HEADER = "# The next run of study "


def check_next_run(from_runs: bool, predict, path, records) -> None:
    """ValueError, before any fit, for a next run the options cannot give, or a
    `path` that is not one to write the preset to (the runs file `records`, a
    directory, a file this command did not write)."""
    refuse_overwrite(path, "a next run's preset", [records], _is_next_run)
    if not from_runs:
        raise ValueError("--next-run: needs --from-runs (a study's run records name its sizes)")
    if not predict:
        raise ValueError("--next-run: needs --predict C [C ...], the next run's budgets (FLOPs)")


def _is_next_run(path: Path) -> bool:
    try:
        return Path(path).read_text(errors="replace").startswith(HEADER)
    except OSError:
        return False


def write_next_run(result: FrontierResult, records, path) -> NextRun:
    """The next run of the suite whose run records (a runs.parquet or a cached
    study) `result` fitted, its preset written to `path` whole or not at all."""
    planned = next_run(result, read_runs(records))
    write_text(planned.preset_text(), Path(path))
    return planned


def next_run(result: FrontierResult, runs: pd.DataFrame, method: str = METHOD) -> NextRun:
    """The next run of the suite `result` fitted, at its `predict` budgets.

    `runs`: the suite's run records (arch, size, n_params_nonembed, protocol,
    study). ValueError when the frontier predicted at no budget, or when the
    runs lack what a preset needs."""
    fits = result.fits[(result.fits["method"] == method) & result.fits["predict_compute"].notna()]
    if fits.empty:
        raise ValueError("next run: the frontier predicted at no budget; give --predict C "
                         "(FLOPs) for the next run's budgets")
    missing = {"arch", "size", "n_params_nonembed", "protocol", "study"} - set(runs.columns)
    if missing:
        raise ValueError(f"next run: the runs lack {sorted(missing)}: a study's run records "
                         "(--from-runs) are needed to name its sizes")
    protocols, studies = runs["protocol"].dropna().unique(), runs["study"].dropna().unique()
    if len(protocols) != 1 or len(studies) != 1:
        raise ValueError(f"next run: the runs must be one study of one protocol, got studies "
                         f"{list(studies)} and protocols {list(protocols)}")
    measured = runs.groupby(["arch", "size"])["n_params_nonembed"].first()
    by = [c for c in result.by]
    rows = []
    for fit in fits.itertuples(index=False):
        row = {c: getattr(fit, c) for c in by}
        row.update(compute=fit.predict_compute, n_opt=fit.n_opt_pred, n_low=fit.n_opt_low,
                   n_high=fit.n_opt_high, d_opt=fit.d_opt_pred, d_low=fit.d_opt_low,
                   d_high=fit.d_opt_high, sizes="", note="")
        if fit.status != "ok":
            row["note"] = f"no {method} fit: {fit.status}"
        else:
            params = ladder_params(measured.loc[fit.arch], protocols[0])
            chosen, row["note"] = bracketing_sizes(params, fit.n_opt_low, fit.n_opt_pred,
                                                   fit.n_opt_high)
            row["sizes"] = ",".join(chosen)
        rows.append(row)
    budgets = sorted(float(c) for c in fits["predict_compute"].unique())
    return NextRun(pd.DataFrame(rows), str(studies[0]), budgets, method)
