"""Where a study's time goes: training steps, or start-up and scheduling.

Runs a study from scratch in a fresh copy of the workflow (nothing cached),
times it, and reads its collected records:

- per-cell efficiency = sum of the records' `wall_seconds` (fit and evaluation
  of every training and pretraining run) / (study wall time x cores); the rest
  is process start-up, data loading, FLOP counting, Snakemake's scheduling and
  the analysis jobs (target: >= 0.85 for the default study);
- Snakemake's own CPU seconds (its scheduling and bookkeeping, not its jobs);
- compute efficiency = study wall time / (counted FLOPs of every run / the dense
  fp32 matmul peak measured in the same run) (target: <= 4 for the workstation
  study): how far the whole study is from the machine's roof.

`--cold` runs the study a second time with the warm fork server off
(SCALESTUDY_WARM=0: every job imports torch and Lightning itself), side by side.

    python benchmarks/study_efficiency.py                      # the default study
    python benchmarks/study_efficiency.py --configfile config/studies/smoke.yaml --cold
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch
from benchlib import make_clock, peak_matmul_flops, study_copy

ROOT = Path(__file__).resolve().parents[1]


def own_cpu_until_exit(proc: subprocess.Popen) -> float:
    """Wait for `proc`; return the CPU seconds it used itself (not its children):
    Snakemake's own scheduling and bookkeeping. Read from /proc (Linux); NaN elsewhere."""
    cpu = float("nan")
    while proc.poll() is None:
        try:
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
        time.sleep(0.5)
    return cpu


def run_study(configfile: str | None, cores: int, warm: bool, keep: Path | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="scalestudy-bench-") as tmp:
        work = Path(tmp)
        env = study_copy(ROOT, work)
        if not warm:
            env["SCALESTUDY_WARM"] = "0"
        args = [sys.executable, "-m", "snakemake", "--cores", str(cores)]
        if configfile:
            args += ["--configfile", configfile]
        start = time.perf_counter()
        log = work / "snakemake.log"
        with log.open("w") as out:
            proc = subprocess.Popen(args, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT)
            scheduler_cpu = own_cpu_until_exit(proc)
        wall = time.perf_counter() - start
        if proc.returncode:
            raise SystemExit(f"the study failed:\n{log.read_text()[-3000:]}")
        (runs_file,) = work.glob("results/*/runs.parquet")
        runs = pd.read_parquet(runs_file)
        if keep is not None:
            shutil.copytree(runs_file.parent, keep, dirs_exist_ok=True)
    return {"runs": len(runs), "wall": wall, "scheduler_cpu": scheduler_cpu,
            "record_seconds": float(runs["wall_seconds"].sum()),
            "flops": float(runs["train_flops"].sum())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configfile", help="a study preset (default: the default study)")
    parser.add_argument("--cores", type=int, default=2, help="snakemake --cores")
    parser.add_argument("--keep", type=Path,
                        help="copy the warm study's results here (figures, claims, runs)")
    parser.add_argument("--cold", action="store_true",
                        help="also run with the warm fork server off, for comparison")
    args = parser.parse_args()
    torch.set_num_threads(args.cores)
    peak, _ = peak_matmul_flops("cpu", make_clock("cpu", "wall"))
    modes = [("warm", True)] + ([("cold", False)] if args.cold else [])
    print(f"study: {args.configfile or 'config/config.yaml'}, {args.cores} cores, "
          f"torch {torch.__version__}, peak dense fp32 matmul {peak / 1e9:.1f} GFLOP/s\n")
    print("| jobs' start | runs | study wall (s) | records' wall (s) | per-cell efficiency "
          "| Snakemake's own CPU (s) | FLOPs/peak (s) | wall / (FLOPs/peak) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, warm in modes:
        r = run_study(args.configfile, args.cores, warm, args.keep if warm else None)
        roof = r["flops"] / peak
        print(f"| {name} | {r['runs']} | {r['wall']:.0f} | {r['record_seconds']:.0f} | "
              f"{r['record_seconds'] / (r['wall'] * args.cores):.2f} | "
              f"{r['scheduler_cpu']:.0f} | {roof:.0f} | "
              f"{r['wall'] / roof:.1f} |", flush=True)


if __name__ == "__main__":
    main()
