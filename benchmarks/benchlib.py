"""What the benchmarks share: the clock, interleaved timing, the measured matmul
peak, the machine line, and writing one section of docs/benchmarks.md.

The clock. On a CPU the benchmarks time *CPU seconds of this process*
(`time.process_time`), with one torch thread by default (the study's own
setting, `trainer.threads: 1`): on a machine shared with other jobs, wall time
also counts the time the scheduler gives to others, and varies 2-10x from run
to run; CPU time of one thread is the work itself, stable to a few per cent.
Wall time (`--clock wall`) is the choice on an idle machine, and always on a GPU
(it then synchronises the device).

Side-by-side comparisons interleave their contenders round by round (A, B, B,
A, ...), so slow phases of a shared machine hit all of them alike. Each step is
timed on its own; a contender's ms/step is the median over all its timed steps
(robust to the bursts of other jobs), a ratio the median over rounds of the
per-round ratio of median steps.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

import torch


def make_clock(device: str, kind: str = "cpu") -> Callable[[], float]:
    """Seconds: CPU time of this process ("cpu"), or wall time ("wall")."""
    if device.startswith("cuda"):
        def wall_synced() -> float:
            torch.cuda.synchronize()
            return time.perf_counter()
        return wall_synced
    return time.process_time if kind == "cpu" else time.perf_counter


def matmul_timer(n: int, device: str, clock: Callable[[], float],
                 repeats: int) -> Callable[[], list[float]]:
    """A contender timing `repeats` dense fp32 n x n matmuls, one by one."""
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)

    def run() -> list[float]:
        a @ b
        seconds = []
        for _ in range(repeats):
            start = clock()
            a @ b
            seconds.append(clock() - start)
        return seconds

    return run


def peak_matmul_flops(device: str, clock: Callable[[], float],
                      rounds: int = 5) -> tuple[float, int]:
    """Dense fp32 matmul FLOP/s, the roof MFU is measured against: for square
    sizes 512, 1024 and 2048 the median over `rounds` rounds; the best size n
    and its FLOP/s."""
    best = (0.0, 0)
    for n in (512, 1024, 2048):
        run = matmul_timer(n, device, clock, max(2, 2 * (2048 // n) ** 2))
        seconds = statistics.median(step for _ in range(rounds) for step in run())
        best = max(best, (2 * n**3 / seconds, n))
    return best


def interleaved(contenders: dict[str, Callable[[], list[float]]],
                rounds: int) -> dict[str, list[list[float]]]:
    """Run each contender once per round, the order reversed every other round.

    A contender runs its own warm-up and returns the seconds of each of its
    timed steps; the result holds each contender's list of those, per round.
    """
    times: dict[str, list] = {name: [] for name in contenders}
    names = list(contenders)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            times[name].append(contenders[name]())
    return times


def step_median(rounds: list[list[float]]) -> float:
    """Median seconds per step over every timed step of every round."""
    return statistics.median(step for steps in rounds for step in steps)


def step_mean(rounds: list[list[float]]) -> float:
    return statistics.fmean(step for steps in rounds for step in steps)


def paired_ratio(num: list[list[float]], den: list[list[float]]) -> float:
    """Median over rounds of the ratio of the two contenders' median steps in
    that round (each round's pair ran back to back, under the same load)."""
    return statistics.median(statistics.median(a) / statistics.median(b)
                             for a, b in zip(num, den, strict=True))


def machine_line(device: str, clock_kind: str) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        text = Path("/proc/cpuinfo").read_text()
        cpu = re.search(r"model name\s*:\s*(.*)", text).group(1).strip()
    except (OSError, AttributeError):
        pass
    cores = os.cpu_count()
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    where = (torch.cuda.get_device_name() if device.startswith("cuda")
             else f"{cpu} ({cores} cores{load}, ISA {torch.backends.cpu.get_cpu_capability()})")
    clock = "wall time" if device.startswith("cuda") or clock_kind == "wall" else "CPU time"
    return (f"{date.today()}, {where}, {torch.get_num_threads()} torch thread(s), "
            f"device {device}, torch {torch.__version__}, timed by {clock}")


def write_section(path: Path, name: str, text: str) -> None:
    """Replace the `name` section of a Markdown file (between its start/end
    markers), or append it: each benchmark rewrites only its own results."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start}\n{text.rstrip()}\n{end}"
    old = path.read_text() if path.exists() else ""
    if start in old and end in old:
        head, rest = old.split(start, 1)
        new = head + block + rest.split(end, 1)[1]
    else:
        new = (old.rstrip() + "\n\n" if old.strip() else "") + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(new)


WORKFLOW_FILES = ("Snakefile", "workflow", "config", "profiles")


def study_copy(root: Path, work: Path) -> dict[str, str]:
    """Copy the workflow at `root` into `work` (a fresh study there) and return the
    environment its snakemake runs in: this interpreter's bin first on PATH, and no
    warm server inherited from the caller's session."""
    for name in WORKFLOW_FILES:
        source = root / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, work / name)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for name in ("SCALESTUDY_WARM_SOCKET", "SCALESTUDY_WARM_OWNER", "SCALESTUDY_WARM"):
        env.pop(name, None)
    return env
