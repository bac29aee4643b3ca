"""tools/wsd_check.py on hand-built records: the wsd-minus-cosine difference per
cell, and what the trunk and its branches cost against a run per budget."""

import importlib.util

import numpy as np
import pandas as pd
import pytest

from tests.support import ROOT

spec = importlib.util.spec_from_file_location("wsd_check", ROOT / "tools/wsd_check.py")
wsd_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wsd_check)


def runs(losses, fork=None, steps=(10, 30), wall=(1.0, 3.0)):
    """Records of one size at two budgets (1e10, 3e10) and two seeds; a wsd
    study's smaller budget is a branch forked at `fork` of its trunk."""
    rows = []
    for seed in (0, 1):
        for i, budget in enumerate((1e10, 3e10)):
            branch = fork is not None and i == 0
            rows.append({"arch": "s4", "size": "xs", "budget": budget, "seed": seed,
                         "upstream_loss": losses[seed][i], "steps": steps[i],
                         "flops_per_step": 1e9, "train_flops": steps[i] * 1e9,
                         "fork_step": fork if branch else np.nan,
                         "wall_seconds": wall[i], "fork_seconds": 0.6 if branch else np.nan})
    return pd.DataFrame(rows)


def test_the_difference_per_cell_with_its_spread_and_the_seed_noise():
    wsd = runs({0: (2.0, 1.5), 1: (2.2, 1.7)}, fork=8)
    cosine = runs({0: (2.1, 1.5), 1: (2.1, 1.9)})
    table = wsd_check.compare(wsd, cosine).set_index("budget")
    assert table.loc[1e10, "diff_mean"] == pytest.approx(0.0)  # -0.1 and +0.1
    assert table.loc[1e10, "diff_sd"] == pytest.approx(np.std([-0.1, 0.1], ddof=1))
    assert table.loc[3e10, "diff_mean"] == pytest.approx(-0.1)
    assert table.loc[3e10, "seed_sd"] == pytest.approx(np.std([1.5, 1.9], ddof=1))
    assert (table["seeds"] == 2).all()


def test_a_branch_costs_only_its_own_cooldown():
    wsd = runs({0: (2, 1), 1: (2, 1)}, fork=8)
    cosine = runs({0: (2, 1), 1: (2, 1)})
    c = wsd_check.costs(wsd, cosine)
    # Per seed: the trunk's 30 steps plus the branch's 10 - 8; cosine runs 10 + 30.
    assert c["wsd_flops"] == pytest.approx(2 * 32 * 1e9)
    assert c["cosine_flops"] == pytest.approx(2 * 40 * 1e9)
    assert c["wsd_wall"] == pytest.approx(2 * (3.0 + 1.0 - 0.6))
    assert c["cosine_wall"] == pytest.approx(2 * 4.0)
