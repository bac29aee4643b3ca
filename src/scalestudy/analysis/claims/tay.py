"""The claims of Tay et al. 2022, "Scaling Laws vs Model Architectures: How does
Inductive Bias Influence Scaling?" (arXiv:2207.10551): each function measures
one claim on a study and decides each scope; the architectures and priors it is
about are its parameters (the claim registry's entry, claims/__init__.py).
"""

from __future__ import annotations

import pandas as pd

from ...architectures import ARCHITECTURES
from ..fits import size_order, task_runs, upstream_runs
from .check import (
    FAILS,
    HOLDS,
    NO_DATA,
    PREMISE_NOT_SHOWN,
    UNDECIDED,
    Evidence,
    Scope,
    above,
    all_of,
    below,
    by_task_arch,
    finished,
    given,
    ok,
    shown,
    stat_text,
    stats_text,
)
from .contrasts import Law, alpha, alpha_difference, contrast, leader_change, mean_difference

MAX_NAMED = 8  # crossings named in a measurement


def _archs(runs: pd.DataFrame) -> list[str]:
    return sorted(set(runs["arch"]), key=ARCHITECTURES.rank)


def _compared(study: Evidence, runs: pd.DataFrame, law: Law, first: str, others: list[str],
              what: str) -> tuple[str, list[str]]:
    """`first`'s exponent and its difference with each of `others` (their runs in
    `runs`): the measurement and each difference's verdict (interval above 0)."""
    cells = law.cells(runs)
    items = [(alpha(cells[first], law, first, **study.boot), f"{first} {what}")]
    verdicts = []
    for other in others:
        d = alpha_difference(cells[first], cells[other], law, (first, other), **study.boot)
        verdicts.append(above(d))
        items.append((d, f"minus {other}"))
    return stats_text(items), verdicts


def _upstream_and_tasks(study: Evidence, prior: str):
    """(scope suffix, runs, law) of alpha_U and of each task's alpha_D (runs of `prior`)."""
    tasks = task_runs(study.runs)
    tasks = tasks[tasks["prior"] == prior]
    yield "upstream alpha_U", upstream_runs(study.runs), Law("upstream_loss", study.x_axis)
    for task in sorted(tasks["task"].unique()):
        yield (f"{task} alpha_D ({prior} prior)", tasks[tasks["task"] == task],
               Law("error", study.x_axis))


def _each_against(study: Evidence, archs: tuple[str, ...], reference: str, prior: str):
    """(scope, law, cells, missing) per architecture of `archs` and per law of
    _upstream_and_tasks: the law's cells by architecture, or None with the
    architectures missing from its runs."""
    for arch in archs:
        for what, runs, law in _upstream_and_tasks(study, prior):
            missing = ", ".join(sorted({arch, reference} - set(runs["arch"])))
            yield arch, f"{arch}: {what}", law, None if missing else law.cells(runs), missing


def vanilla_scales_best_upstream(study: Evidence, *, reference: str) -> list[Scope]:
    up = upstream_runs(study.runs)
    if reference not in set(up["arch"]):
        return [Scope("upstream", f"no upstream runs of {reference}", NO_DATA)]
    others = [a for a in _archs(up) if a != reference]
    if not others:
        return [Scope("upstream", f"no upstream runs of an architecture but {reference}",
                      NO_DATA)]
    text, verdicts = _compared(study, up, Law("upstream_loss", study.x_axis), reference,
                               others, "alpha_U")
    text += f"; {reference} above {verdicts.count(HOLDS)} of {len(others)}"
    return [Scope("upstream", text, all_of(*verdicts))]


def archs_scale_worse(study: Evidence, *, archs: tuple[str, ...], reference: str,
                      prior: str) -> list[Scope]:
    out = []
    for arch, scope, law, cells, missing in _each_against(study, archs, reference, prior):
        if missing:
            out.append(Scope(scope, f"no runs of {missing}", NO_DATA))
            continue
        d = alpha_difference(cells[arch], cells[reference], law, (arch, reference),
                             **study.boot)
        out.append(Scope(scope, stat_text(d, f"{arch} minus {reference}"), below(d)))
    return out


def transfers_best(study: Evidence, *, arch: str, prior: str) -> list[Scope]:
    tasks = task_runs(study.runs)
    tasks = tasks[tasks["prior"] == prior]
    law = Law("error", "upstream_loss", sign=1)
    out = []
    for task in sorted(tasks["task"].unique()):
        runs = tasks[tasks["task"] == task]
        others = [a for a in _archs(runs) if a != arch]
        if arch not in set(runs["arch"]) or not others:
            out.append(Scope(task, f"no {prior}-prior runs of {arch} and another "
                                   "architecture", NO_DATA))
            continue
        text, verdicts = _compared(study, runs, law, arch, others, "alpha_U,D")
        out.append(Scope(task, text + f"; {arch} above {verdicts.count(HOLDS)} of "
                                      f"{len(others)}", all_of(*verdicts)))
    return out or [Scope("all", f"no runs of the {prior} prior", NO_DATA)]


def best_arch_changes_with_scale(study: Evidence) -> list[Scope]:
    runs_t = finished(task_runs(study.runs))
    several = runs_t["protocol"].nunique() > 1  # runs of two studies collected together
    measured = []
    for (task, prior, protocol), r in sorted(runs_t.groupby(["task", "prior", "protocol"]),
                                             key=lambda kv: kv[0]):
        scope = f"{task} / {prior}" + (f" / {protocol} protocol" if several else "")
        order = size_order(r)
        if len(order) < 2:
            measured.append((scope, f"sizes: {', '.join(order) or 'none'} (< 2)", None))
            continue
        small, large = order[0], order[-1]
        cells = {(a, s): g["test_acc"].to_numpy(float)
                 for (a, s), g in r[r["size"].isin([small, large])].groupby(["arch", "size"])}
        archs = [a for a in _archs(r) if (a, small) in cells and (a, large) in cells]
        if len(archs) < 2:
            measured.append((scope, f"{len(archs)} architecture(s) with runs at both {small} "
                                    f"and {large} (< 2)", None))
            continue
        change = leader_change([cells[a, small] for a in archs],
                               [cells[a, large] for a in archs], ci=study.ci)
        lead_s, lead_l = (archs[i] for i in change["leaders"])
        text = f"best at {small}: {lead_s}, at {large}: {lead_l}"
        if lead_s != lead_l:
            text += (f"; {stat_text(change['d_small'], f'{lead_s} - {lead_l} at {small}')}; "
                     f"{stat_text(change['d_large'], f'{lead_l} - {lead_s} at {large}')}")
        if change["status"] != "ok":
            measured.append((scope, f"{text}; {change['status']}", None))
            continue
        text += "; " + _crossings(archs, cells, small, large, study)
        measured.append((scope, text, change))
    if not measured:
        return [Scope("all", "no task runs", NO_DATA)]
    # Bonferroni over the scopes judged: each at the study's one-sided level / m.
    m = sum(c is not None for _, _, c in measured)
    level = (1 - study.ci) / 2 / max(m, 1)
    out = []
    for scope, text, change in measured:
        if change is None:
            out.append(Scope(scope, text, NO_DATA))
            continue
        shown, stays = change["ahead"](level), change["stays"](level)
        text += (f"; each leader ahead of every other architecture at its size (one-sided "
                 f"{level:.4f}, {m} scope(s)): {'yes' if shown or stays else 'no'}")
        if stays:
            text += f" ({lead_s} leads at both sizes)"
        out.append(Scope(scope, text, HOLDS if shown else FAILS if stays else UNDECIDED))
    return out


def _crossings(archs, cells, small, large, study: Evidence) -> str:
    """The pairs whose order flips between the two sizes with both differences
    outside their intervals (the study's level)."""
    found = []
    for i, a in enumerate(archs):
        for b in archs[i + 1:]:
            d_s = mean_difference(cells[a, small], cells[b, small], ci=study.ci)
            d_l = mean_difference(cells[a, large], cells[b, large], ci=study.ci)
            if ok(d_s) and ok(d_l) and ((d_s["low"] > 0 and d_l["high"] < 0)
                                        or (d_s["high"] < 0 and d_l["low"] > 0)):
                found.append(f"{a}/{b}")
    n_pairs = len(archs) * (len(archs) - 1) // 2
    named = ", ".join(found[:MAX_NAMED]) + (f" (and {len(found) - MAX_NAMED} more)"
                                            if len(found) > MAX_NAMED else "")
    return f"{len(found)} of {n_pairs} pairs cross outside their intervals: {named or 'none'}"


def depth_beats_width(study: Evidence, *, archs: tuple[str, ...],
                      protocols: tuple[str, str]) -> list[Scope]:
    deep, wide = protocols
    runs_t = task_runs(study.runs)
    runs_t = runs_t[runs_t["protocol"].isin(protocols)]
    out = []
    for (task, arch), r in by_task_arch(runs_t):
        if arch not in archs:
            continue
        for prior, rp in sorted(r.groupby("prior"), key=lambda kv: kv[0]):
            scope = f"{task} / {arch} / {prior}"
            present = set(rp["protocol"])
            if present != set(protocols):
                missing = (set(protocols) - present).pop()
                out.append(Scope(scope, f"no runs of the {missing} protocol", NO_DATA))
                continue
            shapes = rp.groupby(["size", "protocol"])[["depth", "width"]].first()
            distinct = [s for s in rp["size"].unique()
                        if (s, deep) in shapes.index and (s, wide) in shapes.index
                        and tuple(shapes.loc[(s, deep)]) != tuple(shapes.loc[(s, wide)])]
            c = contrast(rp[rp["size"].isin(distinct)],
                         {deep: ({"protocol": deep}, 1), wide: ({"protocol": wide}, -1)},
                         **study.boot)
            out.append(Scope(scope, stat_text(c, f"{deep} - {wide} accuracy"), above(c)))
    if not out:
        out.append(Scope("all", f"no runs of {', '.join(archs)} under the {deep} and {wide} "
                                "protocols", NO_DATA))
    return out


def _reference_scales(study: Evidence, cells, law: Law, reference: str) -> tuple[dict, str]:
    """The premise of a claim relative to the reference's exponent: that
    exponent's interval lies above 0 (it scales here)."""
    ref = alpha(cells[reference], law, reference, **study.boot)
    return ref, shown(above(ref))


def scale_like_reference(study: Evidence, *, archs: tuple[str, ...], reference: str,
                         prior: str, margin: float) -> list[Scope]:
    """Equivalence by two one-sided tests on bootstrapped contrasts: the
    variant's exponent above (1 - margin) x the reference's and below
    (1 + margin) x it, both estimated (the margin's noise included). Premise:
    the reference scales (its exponent above 0)."""
    out = []
    for arch, scope, law, cells, missing in _each_against(study, archs, reference, prior):
        if missing:
            out.append(Scope(scope, f"no runs of {missing}", NO_DATA))
            continue
        ref, premise = _reference_scales(study, cells, law, reference)
        pair = (cells[arch], cells[reference], law, (arch, reference))
        lower = alpha_difference(*pair, weights=(1.0, -(1 - margin)), **study.boot)
        upper = alpha_difference(*pair, weights=(-1.0, 1 + margin), **study.boot)
        text = stats_text([(ref, f"{reference}"), (lower, f"{arch} - {1 - margin:g} x {reference}"),
                           (upper, f"{1 + margin:g} x {reference} - {arch}")])
        if premise != HOLDS:
            text += f"; {PREMISE_NOT_SHOWN}: {reference}'s exponent is not shown above 0"
        out.append(Scope(scope, text, given(premise, all_of(above(lower), above(upper)))))
    return out


def flat_or_negative(study: Evidence, *, archs: tuple[str, ...], reference: str,
                     prior: str, margin: float) -> list[Scope]:
    """Flat: the architecture's exponent below `margin` x the reference's (a
    bootstrapped contrast, both estimated), where the reference scales (the
    premise: its exponent above 0)."""
    tasks = task_runs(study.runs)
    tasks = tasks[tasks["prior"] == prior]
    law = Law("error", study.x_axis)
    out = []
    for arch in archs:
        for task in sorted(tasks["task"].unique()):
            runs = tasks[tasks["task"] == task]
            scope = f"{arch}: {task} alpha_D ({prior} prior)"
            present = set(runs["arch"])
            if not {arch, reference} <= present:
                missing = ", ".join(sorted({arch, reference} - present))
                out.append(Scope(scope, f"no runs of {missing}", NO_DATA))
                continue
            cells = law.cells(runs)
            ref, premise = _reference_scales(study, cells, law, reference)
            own = alpha(cells[arch], law, arch, **study.boot)
            flat = alpha_difference(cells[arch], cells[reference], law, (arch, reference),
                                    weights=(-1.0, margin), **study.boot)
            text = stats_text([(ref, f"{reference} alpha_D"), (own, f"{arch} alpha_D"),
                               (flat, f"{margin:g} x {reference} - {arch}")])
            if premise != HOLDS:
                text += f"; {PREMISE_NOT_SHOWN}: {reference}'s alpha_D is not shown above 0"
            out.append(Scope(scope, text, given(premise, above(flat))))
    return out or [Scope("all", f"no alpha_D of the {prior} prior", NO_DATA)]
