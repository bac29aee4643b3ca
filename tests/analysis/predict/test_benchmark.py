"""benchmarks/predict_ladders.py on every bundled ladder (benchmarks/data, and
Epoch's points in tests/data): `--select`'s held-out coverage, as
docs/analysis.md reports it. Slow: the whole benchmark of `--select` is some
ten minutes on two busy cores."""

import importlib.util
import sys

import numpy as np
import pytest

from tests.support import ROOT


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("predict_ladders",
                                                  ROOT / "benchmarks/predict_ladders.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["predict_ladders"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules["predict_ladders"]


def test_every_bundled_ladder_reads_as_a_ladder(bench):
    """Each ladder's cases prepare, and hold out a size with runs to judge."""
    for name, cases in bench.LADDERS.items():
        for case in cases():
            ladder = bench.ladder_of(case)
            assert ladder.sizes().size >= 4, (name, case.label)
            assert len(ladder.at(ladder.sizes().max())) >= 1


@pytest.mark.slow
def test_the_benchmark_runs_on_every_bundled_ladder(bench):
    """Every ladder judged; over the real ladders' held-out runs the loss's
    calibrated 95% interval holds at least 0.90 of them (measured: docs/analysis.md),
    and the chained metric's coverage is measured on the real and the synthetic
    downstream ladders."""
    runs, summary, pooled = bench.run(list(bench.LADDERS), n_boot=50, methods="select",
                                      log=lambda text: None)
    cases = [case.ladder for cases in bench.LADDERS.values() for case in cases()]
    assert set(summary["ladder"]) == set(cases)
    overall = pooled.set_index("method").loc["select"]
    assert overall["loss_coverage"] >= 0.90, pooled
    assert np.isfinite(overall["loss_width"])
    metric = summary[summary["metric_coverage"].notna()]
    assert {"synthetic"} < set(metric["ladder"]) and metric["real"].any()
