"""A study whose warm server is killed mid-run, side by side with one whose is not.

The warm fork server (scalestudy.cli.fork_server) saves every job its imports; killed
(SIGKILL, as the kernel's OOM killer sends) the next job starts another at the
same socket, so the rest of the study keeps its warm start. This runs the
default study (or a preset) from scratch twice in fresh copies of the workflow:
once undisturbed, once with the server SIGKILLed when half of the training
records exist (`--kills N`: at each i/(N+1) of them), and prints both wall
times, the slowdown, the servers seen and the jobs that restarted one.

    python benchmarks/killed_server.py                     # the default study, 2 cores
    python benchmarks/killed_server.py --configfile config/studies/smoke.yaml
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchlib import study_copy

ROOT = Path(__file__).resolve().parents[1]


def servers_of(owner: int) -> list[int]:
    """The warm server of the study of process `owner`: the pid its socket's
    pid file names (the server's forked jobs share its argv, and once it is
    killed its jobs in flight, like a restarted server, have init for a parent)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"scalestudy.cli.fork_server" in argv and argv[-2:-1] == [str(owner).encode()]:
            try:
                pid = int(Path(argv[-3].decode() + ".pid").read_text())
                os.kill(pid, 0)
            except (OSError, ValueError):
                return []
            return [pid]
    return []


def killer(owner: int, results: Path, expected: int, kills: int, seen: set, log: list,
           done: threading.Event) -> None:
    """SIGKILL the study's server when each i/(kills+1) of `expected` records exist."""
    marks = [expected * (i + 1) // (kills + 1) for i in range(kills)]
    while not done.is_set():
        pids = servers_of(owner)
        seen.update(pids)
        count = len(list(results.glob("*/runs/**/record.parquet")))
        if marks and count >= marks[0] and pids:
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            log.append((time.perf_counter(), count, pids))
            marks.pop(0)
        time.sleep(0.5)


def run_study(configfile: str | None, cores: int, kills: int) -> dict:
    import pandas as pd

    sys.path.insert(0, str(ROOT / "src"))
    from scalestudy.study import grid as study_grid
    from scalestudy.study.config import StudyConfig

    with tempfile.TemporaryDirectory(prefix="scalestudy-killed-") as tmp:
        work = Path(tmp)
        env = study_copy(ROOT, work)
        args = [sys.executable, "-m", "snakemake", "--cores", str(cores)]
        if configfile:
            args += ["--configfile", configfile]
        import yaml

        config = yaml.safe_load((work / "config" / "config.yaml").read_text())
        if configfile:
            config.update(yaml.safe_load((ROOT / configfile).read_text()))
        expected = len(study_grid.cells(StudyConfig.from_dict(config).grid))
        seen: set[int] = set()
        kill_log: list = []
        done = threading.Event()
        start = time.perf_counter()
        with (work / "snakemake.log").open("w") as out:
            proc = subprocess.Popen(args, cwd=work, env=env, stdout=out,
                                    stderr=subprocess.STDOUT)
            watcher = threading.Thread(target=killer, args=(
                proc.pid, work / "results", expected, kills, seen, kill_log, done))
            watcher.start()
            proc.wait()
            done.set()
            watcher.join()
        wall = time.perf_counter() - start
        if proc.returncode:
            raise SystemExit(f"the study failed:\n{(work / 'snakemake.log').read_text()[-3000:]}")
        logs = list((work / "results").glob("*/logs/**/*.log"))
        restarted = sum("started another" in log.read_text(errors="replace") for log in logs)
        (runs_file,) = work.glob("results/*/runs.parquet")
        runs = pd.read_parquet(runs_file)
    return {"wall": wall, "runs": len(runs), "ok": int((runs["status"] == "ok").sum()),
            "servers": len(seen), "kills": [(round(t - start), n) for t, n, _ in kill_log],
            "restarted_by": restarted}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configfile", help="a study preset (default: the default study)")
    parser.add_argument("--cores", type=int, default=2, help="snakemake --cores")
    parser.add_argument("--kills", type=int, default=1, help="times the server is killed")
    parser.add_argument("--only", choices=("undisturbed", "killed"),
                        help="run one of the two studies only")
    args = parser.parse_args()
    print(f"study: {args.configfile or 'config/config.yaml'}, {args.cores} cores, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start\n")
    print("| server | study wall (s) | runs (ok) | servers seen | killed at (s, records) "
          "| jobs that restarted it |")
    print("|---|---:|---:|---:|---|---:|")
    walls = {}
    for name, kills in (("undisturbed", 0), ("killed", args.kills)):
        if args.only and name != args.only:
            continue
        r = run_study(args.configfile, args.cores, kills)
        walls[name] = r["wall"]
        print(f"| {name} | {r['wall']:.0f} | {r['runs']} ({r['ok']}) | {r['servers']} | "
              f"{r['kills'] or '-'} | {r['restarted_by']} |", flush=True)
    if len(walls) == 2:
        print(f"\nslowdown of the killed run: {walls['killed'] / walls['undisturbed']:.2f}x")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
