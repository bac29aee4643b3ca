"""Time the scaling fits: Chinchilla approach 3 on the reference data, and bootstraps.

    PYTHONPATH=src python benchmarks/bench_scaling.py [--full]

--full also times the literal 4,500-start Chinchilla procedure (a minute or two).
On a busy machine set OPENBLAS_NUM_THREADS=1: SciPy >= 1.15's L-BFGS-B is ~20x
slower with a multi-threaded OpenBLAS whose threads fight for the cores.
"""

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from scalestudy.analysis.scaling import fit_chinchilla, fit_loglog, fit_saturating

CSV = Path(__file__).resolve().parents[1] / "tests/data/chinchilla/svg_extracted_data.csv"


def timed(label, fn, repeat=1):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    print(f"{label:<48} {best:8.3f} s")
    return out


def show(fit):
    print(f"  A={fit.A:.2f} B={fit.B:.1f} E={fit.E:.5f} alpha={fit.alpha:.5f} "
          f"beta={fit.beta:.5f} loss={fit.loss:.10g}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="also run all 4,500 starts")
    args = parser.parse_args()
    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")

    df = pd.read_csv(CSV).sort_values("loss").iloc[:-5]
    N = df["Model Size"].to_numpy()
    D = df["Training FLOP"].to_numpy() / (6 * N)
    L = df["loss"].to_numpy()
    fit = timed("fit_chinchilla (256 best of 4,500 starts)", lambda: fit_chinchilla(N, D, L))
    show(fit)
    if args.full:
        full = timed(
            "fit_chinchilla (all 4,500 starts)", lambda: fit_chinchilla(N, D, L, n_polish=None)
        )
        show(full)

    rng = np.random.default_rng(0)
    for n_sizes, n_seeds in [(8, 5), (12, 10)]:
        x = np.repeat(np.logspace(15, 20, n_sizes), n_seeds)
        y = 2.0 * x**-0.1 * np.exp(rng.normal(0, 0.05, x.size))
        timed(f"fit_loglog n={x.size}, 1000 bootstraps", lambda x=x, y=y: fit_loglog(x, y), 5)
        y = (1.5 + 1e4 * x**-0.3) * np.exp(rng.normal(0, 0.01, x.size))
        timed(f"fit_saturating n={x.size}, 200 bootstraps",
              lambda x=x, y=y: fit_saturating(x, y, n_boot=200))


if __name__ == "__main__":
    main()
