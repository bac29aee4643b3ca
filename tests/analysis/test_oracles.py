"""Analysis checks against independent oracles:

- the alpha_D/alpha_U interval on *noisy* data, where only paired bootstrap
  replicates give the exact answer;
- the LRA table's Avg column, from hand values;
- the SPT-vs-control figure's points as (control, SPT) pairs, not sorted apart;
- the held-out prediction against a refit written here with numpy.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from scalestudy.analysis.figures import FIGURES, output, spt_vs_matched
from scalestudy.analysis.fits import fit_study, select
from scalestudy.analysis.tables import lra_markdown, lra_table

SIZES = ("xxs", "xs", "s", "m")
PARAMS = dict(zip(SIZES, (1e4, 4e4, 1.6e5, 6.4e5), strict=True))


def run(**values) -> dict:
    base = dict(study="t", task="listops", arch="transformer", prior="random", seed=0,
                stage="scratch", status="ok", batch_size=32, seq_len=128, steps=100,
                upstream_loss=np.nan, pretrain_flops=0.0)
    return {**base, **values}


# --------------------------------------------------------------------------- alpha_D/alpha_U


def transfer_runs(noise=0.05, seed=0) -> pd.DataFrame:
    """Upstream runs (three seeds a size): loss = 10 C^-0.2 x log-normal noise, C =
    1000 N. Each finetuning run of seed s starts from the upstream checkpoint of its
    size and seed and inherits its noise: error = 0.5 loss^0.6 exactly, at compute
    1.1 C (finetuning a tenth of pretraining). So alpha_D / alpha_U = 0.6 in every
    replicate that keeps each downstream run with its own upstream run."""
    rng = np.random.default_rng(seed)
    rows = []
    for size, s in itertools.product(SIZES, (0, 1, 2)):
        c = 1000 * PARAMS[size]
        loss = 10 * c ** -0.2 * np.exp(rng.normal(0, noise))
        model = dict(size=size, seed=s, n_params_nonembed=PARAMS[size])
        rows.append(run(task="upstream", prior="upstream", stage="upstream", train_flops=c,
                        upstream_loss=loss, flops_per_step=c / 100, **model))
        rows.append(run(prior="upstream", stage="finetune", train_flops=0.1 * c,
                        pretrain_flops=c, pretrain_seed=s, upstream_loss=loss,
                        flops_per_step=c / 1000,
                        test_acc=1 - 0.5 * loss ** 0.6, **model))
    return pd.DataFrame(rows)


def test_ratio_interval_on_noisy_data_comes_from_paired_replicates():
    fits = fit_study(transfer_runs(), n_boot=300, n_boot_saturating=0)
    ratio = select(fits, "alpha_D/alpha_U", prior="upstream").iloc[0]
    assert ratio["status"] == "ok"
    assert ratio["alpha"] == pytest.approx(0.6, rel=1e-9)
    # Paired: each replicate's two slopes come from the same runs, so their ratio is
    # 0.6 exactly although each slope is noisy.
    assert ratio["alpha_low"] == pytest.approx(0.6, rel=1e-9)
    assert ratio["alpha_high"] == pytest.approx(0.6, rel=1e-9)
    alpha_u = select(fits, "alpha_U", arch="transformer").iloc[0]
    assert alpha_u["alpha_high"] - alpha_u["alpha_low"] > 0.02  # the noise is there


# --------------------------------------------------------------------------- LRA table


def test_lra_table_avg_is_the_mean_over_tasks_of_the_largest_size():
    acc = {  # (arch, task, size) -> the two seeds' accuracies
        ("transformer", "listops", "xxs"): (0.10, 0.10),
        ("transformer", "listops", "xs"): (0.30, 0.40),
        ("transformer", "text", "xxs"): (0.50, 0.50),
        ("transformer", "text", "xs"): (0.60, 0.70),
        ("s4", "listops", "xxs"): (0.90, 0.90),
        ("s4", "listops", "xs"): (0.20, 0.30),
        ("s4", "text", "xxs"): (0.10, 0.10),
        ("s4", "text", "xs"): (0.80, 0.90),
        ("mixer", "listops", "xxs"): (0.20, 0.20),
        ("mixer", "listops", "xs"): (0.40, 0.40),
    }
    runs = pd.DataFrame([run(arch=arch, task=task, size=size, seed=s, test_acc=a,
                             n_params_nonembed=PARAMS[size], train_flops=1e9)
                         for (arch, task, size), pair in acc.items()
                         for s, a in enumerate(pair)])
    text = lra_markdown(lra_table(runs))
    rows = {cells[0]: cells for line in text.splitlines() if line.startswith("| ")
            for cells in [[c.strip() for c in line.strip("|").split("|")]]}
    assert rows["architecture"] == ["architecture", "listops", "text", "Avg"]
    # transformer: (0.35 + 0.65) / 2; s4: (0.25 + 0.85) / 2; the xxs runs ignored.
    assert rows["transformer"][3] == "50.0" and rows["s4"][3] == "55.0"
    assert rows["transformer"][1].startswith("35.0 ± 7.1 (xs)")
    assert rows["mixer"][3] == ""  # no text runs: no average


# --------------------------------------------------------------------------- SPT figure


def test_spt_vs_control_points_pair_each_size_with_itself(monkeypatch, tmp_path):
    """SPT's accuracy falls with size while the control's rises (so a point that
    paired one size's control with another size's SPT could not be told apart by
    comparing sorted x and sorted y)."""
    spt = {"xxs": 0.70, "xs": 0.60, "s": 0.50}
    control = {"xxs": 0.20, "xs": 0.30, "s": 0.45}
    rows = []
    for arch, size, s in itertools.product(("transformer", "s4"), spt, (0, 1)):
        bump = 0.05 if arch == "s4" else 0.0
        for prior, acc in (("spt", spt[size] + bump), ("scratch_matched", control[size])):
            rows.append(run(arch=arch, size=size, seed=s, prior=prior,
                            stage="finetune" if prior == "spt" else "scratch",
                            test_acc=acc + (0.01 if s else -0.01),
                            n_params_nonembed=PARAMS[size], train_flops=1e9))
    runs = pd.DataFrame(rows)
    figures = {}

    def keep(fig, out_dir, name, notes=(), title_notes=True):
        figures[name] = fig
        return output.Drawn([Path(out_dir) / f"{name}.png"], notes)

    monkeypatch.setattr(spt_vs_matched, "save", keep)
    try:
        spt_vs_matched.draw(runs, pd.DataFrame(), tmp_path, **FIGURES["spt_vs_matched"].params)
        (ax,) = [a for a in figures["spt_vs_matched"].axes if a.get_label() == "listops"]
        for arch in ("transformer", "s4"):
            (line,) = [ln for ln in ax.lines if ln.get_gid() == f"points:{arch}"]
            bump = 0.05 if arch == "s4" else 0.0
            expected = {(round(control[z], 9), round(spt[z] + bump, 9)) for z in spt}
            got = {(round(float(x), 9), round(float(y), 9))
                   for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)}
            assert got == expected, arch
    finally:
        plt.close("all")


# --------------------------------------------------------------------------- held out


def test_heldout_prediction_is_the_refit_without_the_largest_size():
    """Noisy error = 0.9 x^-0.1 (three seeds a size): the held-out columns of
    alpha_D are the log-log least-squares line through the three smaller sizes'
    runs (numpy's polyfit), evaluated at the largest size's mean x, against that
    size's mean error."""
    rng = np.random.default_rng(3)
    rows = [run(size=size, seed=s, n_params_nonembed=PARAMS[size], train_flops=x,
                flops_per_step=x / 100, test_acc=1 - 0.9 * x ** -0.1 * np.exp(rng.normal(0, 0.03)))
            for size in SIZES for s in (0, 1, 2) for x in [100 * PARAMS[size] * (1 + 0.1 * s)]]
    runs = pd.DataFrame(rows)
    row = select(fit_study(runs, n_boot=50, n_boot_saturating=0), "alpha_D").iloc[0]
    error = 1 - runs["test_acc"]
    train = runs["size"] != "m"
    slope, intercept = np.polyfit(np.log(runs.loc[train, "train_flops"]),
                                  np.log(error[train]), 1)
    x0 = runs.loc[~train, "train_flops"].mean()
    pred = np.exp(intercept + slope * np.log(x0))
    obs = error[~train].mean()
    assert row["heldout_status"] == "ok" and row["heldout_size"] == "m"
    assert row["heldout_x"] == pytest.approx(x0, rel=1e-12)
    assert row["heldout_obs"] == pytest.approx(obs, rel=1e-12)
    assert row["heldout_pred"] == pytest.approx(pred, rel=1e-9)
    assert row["heldout_rel_error"] == pytest.approx(pred / obs - 1, rel=1e-9, abs=1e-12)
    # The refit on every size (the held-out one included) predicts something else.
    slope_all, intercept_all = np.polyfit(np.log(runs["train_flops"]), np.log(error), 1)
    assert abs(np.exp(intercept_all + slope_all * np.log(x0)) / pred - 1) > 1e-3
