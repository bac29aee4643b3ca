"""grid.budgets in any order: under train.schedule wsd the
trunk is the largest budget and the branches every smaller one, whether the
config lists the budgets smallest or largest first (study/grid.py trunk_of,
forks_of; the specs' forks and branch_of)."""

import copy

import pytest
from test_configs import DEFAULT_STUDY

from scalestudy.study import grid, specs

ASCENDING, DESCENDING = [1e11, 3e11, 1e12], [1e12, 3e11, 1e11]


def wsd_study(budgets) -> dict:
    config = copy.deepcopy(DEFAULT_STUDY)
    config["grid"]["budgets"] = list(budgets)
    config["train"]["schedule"] = "wsd"
    return config


@pytest.mark.parametrize("order", [ASCENDING, DESCENDING, [3e11, 1e12, 1e11]])
def test_the_largest_budget_is_the_trunk_in_any_listed_order(order):
    g = wsd_study(order)["grid"]
    assert grid.budgets(g) == ASCENDING
    for cell in (grid.Cell("listops", "s4", "xs", "random", 0, 0.0),
                 grid.PretrainCell("upstream", None, "s4", "xs", None, 0.0)):
        trunk = cell.__class__(**{**vars(cell), "budget": 1e12})
        assert grid.trunk_of(trunk, g) is None
        assert grid.forks_of(trunk, g) == [1e11, 3e11]
        for small in (1e11, 3e11):
            branch = cell.__class__(**{**vars(cell), "budget": small})
            assert grid.trunk_of(branch, g) == trunk
            assert grid.forks_of(branch, g) == []


def test_descending_budgets_give_the_ascending_specs():
    up, down = wsd_study(ASCENDING), wsd_study(DESCENDING)
    for budget in ASCENDING:
        pre = [specs.pretrain_spec(c, "upstream", None, "s4", "xs", None, budget)["train"]
               for c in (up, down)]
        task = [specs.run_spec(c, "listops", "s4", "xs", "random", 0, budget)["train"]
                for c in (up, down)]
        assert pre[0] == pre[1] and task[0] == task[1]
    trunk = specs.pretrain_spec(down, "upstream", None, "s4", "xs", None, 1e12)["train"]
    branch = specs.pretrain_spec(down, "upstream", None, "s4", "xs", None, 1e11)["train"]
    assert trunk["forks"] == [1e11, 3e11] and "branch_of" not in trunk
    assert branch["branch_of"] == 1e12 and "forks" not in branch
