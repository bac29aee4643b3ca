"""`--select`: the method chosen by its error on the user's own ladder, with
every candidate's error reported (selection.csv).

The candidates are every combination of the choices the chain makes
(chain.Method): the loss law's form (Hoffmann et al.'s, or with an
irreducible-loss prior: loss.py), with a task loss its path (its own L(N, D),
or loss-to-loss from the general loss, Brandfonbrener et al. 2024:
loss_map.py), and with a metric its link (Bhagia et al.'s sigmoid with the
asymptote at the metric's best value, or a fitted asymptote: downstream.py).
Each is refitted without the ladder's largest size (point fits, no bootstrap)
and predicts that size's runs; the criterion is the error of the chain's last
quantity: the metric's mean absolute error where there is a metric, else the
task loss's mean absolute relative error, else the loss's. The lowest wins;
a tie goes to the earlier candidate, the defaults first. A ladder of fewer
than 4 sizes cannot be held out this way: the defaults are kept, and the
status says so.

One held-out size is little evidence (a ladder of four sizes scores each
candidate on that size's few runs): the table shows by how much the winner
won.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from .chain import Ladder, Method, Settings, enough_sizes, fit_chain
from .options import FORMS, LINKS, PATHS

SELECTION_COLUMNS = ["method", "form", "path", "link", "held_out_n", "n_runs", "loss_error",
                     "task_error", "metric_error", "criterion", "chosen", "status"]


def candidates(task: bool, metric: bool, default: Method | None = None) -> list[Method]:
    """Every method whose choices matter to the chain, the default first."""
    default = default or Method()
    paths = PATHS if task else (default.path,)
    links = LINKS if metric else (default.link,)
    methods = [Method(f, p, k) for f, p, k in itertools.product(FORMS, paths, links)]
    return [default] + [m for m in methods if m != default]


def select(ladder: Ladder, settings: Settings, rng: np.random.Generator,
           ) -> tuple[Method, pd.DataFrame]:
    """The method of lowest held-out error on `ladder`, and every candidate's row."""
    default = settings.method
    methods = candidates(ladder.task, ladder.metric, default)
    sizes = ladder.sizes()
    if not enough_sizes(ladder):
        rows = [_row(m, ladder, np.nan, 0, {}, f"{sizes.size} sizes: nothing to hold out")
                for m in methods]
        rows[0]["chosen"] = True
        return default, pd.DataFrame(rows, columns=SELECTION_COLUMNS)
    largest = float(sizes[-1])
    train, held = ladder.below(largest), ladder.at(largest)
    rows = []
    for method in methods:
        chain = fit_chain(train, method, settings, rng, n_boot=0)
        drawn = chain.predict(held["params"], held["tokens"], rng)
        errors = {}
        for quantity, column, relative in (("loss", "loss", True), ("task", "_task", True),
                                           ("metric", "_metric", False)):
            if drawn[quantity] is None or column not in held:
                continue
            observed = held[column].to_numpy(dtype=float)
            gap = drawn[quantity].point - observed
            errors[quantity] = float(np.nanmean(np.abs(gap / observed if relative else gap)))
        status = "; ".join(s for s in (chain.law.status, chain.task_status(),
                                       chain.mapping.status if chain.mapping else "")
                           if s and not s.startswith("ok"))
        rows.append(_row(method, ladder, largest, len(held), errors, status or "ok"))
    table = pd.DataFrame(rows, columns=SELECTION_COLUMNS)
    finite = table["criterion"].to_numpy(dtype=float)
    if not np.isfinite(finite).any():
        table.loc[0, "chosen"] = True
        return default, table
    best = int(np.nanargmin(finite))
    table.loc[best, "chosen"] = True
    return methods[best], table


def _row(method: Method, ladder: Ladder, held_out: float, n: int, errors: dict,
         status: str) -> dict:
    last = "metric" if ladder.metric else "task" if ladder.task else "loss"
    return {"method": method.label(ladder.task, ladder.metric), "form": method.form,
            "path": method.path if ladder.task else "", "link": method.link if ladder.metric
            else "", "held_out_n": held_out, "n_runs": n,
            "loss_error": errors.get("loss", np.nan), "task_error": errors.get("task", np.nan),
            "metric_error": errors.get("metric", np.nan),
            "criterion": errors.get(last, np.nan), "chosen": False, "status": status}
