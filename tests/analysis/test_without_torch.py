"""The analysis where torch is missing: its modules import, and
`make figures-from-cache` regenerates every figure, table and claim from a cache."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

from scalestudy.analysis.tables import TABLE_FILES
from scalestudy.records import read_records, write_frame

from tests.support import ROOT
from tests.support.figure_checks import (
    check_error_vs_compute_data,
    check_upstream_loss_data,
    index_rows,
    of_runs_and_fits,
)
from tests.support.runs import make_runs

# --------------------------------------------------------------------------- torch-free


def _no_torch_env(tmp_path: Path) -> dict:
    """An environment in which importing torch fails loudly."""
    fake = tmp_path / "no_torch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('torch imported by the analysis')\n")
    path = os.pathsep.join([str(fake.parent), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}


def test_analysis_modules_import_without_torch():
    code = ("import sys, scalestudy.study, scalestudy.analysis.fits, scalestudy.analysis.tables, "
            "scalestudy.analysis.figures.draw, scalestudy.analysis.claims, scalestudy.cli, "
            "scalestudy.architectures, scalestudy.priors, scalestudy.stages, scalestudy.tasks; "
            "assert 'torch' not in sys.modules and 'lightning' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_figures_from_cache_regenerates_everything_without_torch(tmp_path):
    cache = tmp_path / "cache" / "mini.parquet"
    cache.parent.mkdir()
    write_frame(make_runs(archs=("transformer", "s4"), sizes=("xxs", "xs", "s"),
                          priors=("random", "spt", "upstream", "scratch_matched")), cache)
    out = tmp_path / "results" / "mini"
    env = _no_torch_env(tmp_path)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    done = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "figures-from-cache",
         f"CACHE={cache}", f"OUT={out}"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    # Every figure of the runs and fits has data, so each is drawn (the runs have
    # no budgets: no frontier).
    rows = index_rows(out / "figures" / "index.md")
    drawn = [name for name, (file_col, _) in rows.items() if file_col != "not drawn"]
    assert drawn == of_runs_and_fits(["listops"])
    assert not (out / "frontier").exists()
    for name in drawn:
        for ext in ("png", "pdf"):
            assert (out / "figures" / f"{name}.{ext}").stat().st_size > 1000
        assert len(pd.read_csv(out / "figures" / f"{name}.csv")) > 0, name
    # The figures plot the cached runs and the fits made from them.
    runs, fits = read_records(cache), pd.read_parquet(out / "fits.parquet")
    errors = pd.read_csv(out / "figures" / "error_vs_compute.csv")
    for prior in ("random", "spt"):
        check_error_vs_compute_data(errors, runs, fits, "listops", prior, "s4")
    check_upstream_loss_data(pd.read_csv(out / "figures" / "upstream_loss_vs_compute.csv"),
                             runs, fits, "transformer")
    for name in TABLE_FILES:
        assert (out / "tables" / name).stat().st_size > 0
    assert (out / "claims.md").read_text().startswith("# Claims checked on study synthetic")
    assert len(pd.read_parquet(out / "fits.parquet")) > 0
    assert len(read_records(cache)) == 2 * 3 * 5  # archs x sizes x (4 priors + upstream)


def test_figures_from_cache_names_a_missing_cache(tmp_path):
    done = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT),
                           "figures-from-cache", f"CACHE={tmp_path}/nope.parquet",
                           f"OUT={tmp_path}/out"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert re.search(r"nope\.parquet", done.stderr + done.stdout)
    assert not (tmp_path / "out").exists()
