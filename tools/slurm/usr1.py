"""slurm-test's preemption check: a training step that SLURM sends USR1 (what
`--signal=USR1@<seconds>` sends before the time limit) saves last.ckpt and
stops; the same command run again resumes from that step and finishes.

    python tools/slurm/usr1.py spec <study name>            # the run's spec, as JSON
    python tools/slurm/usr1.py step <run dir>               # last.ckpt's global step
    python tools/slurm/usr1.py check <run dir> <first log> <second log> <stopped step>
"""

import json
import sys
from pathlib import Path

import pandas as pd
import torch

STEPS = 3000  # ~1 min at xs on one thread: long enough to be stopped mid-way


def spec(name: str) -> None:
    manifest = json.loads(Path(f"results/{name}/data/listops/manifest.json").read_text())
    print(json.dumps({
        "study": name, "task": "listops", "arch": "transformer", "size": "xs",
        "prior": "random", "seed": 0, "task_config": manifest["config"],
        "train": {"max_steps": STEPS, "batch_size": 32, "warmup_steps": 10,
                  "val_every": 100, "protocol": "default"},
        "trainer": {"accelerator": "cpu", "threads": 1},
    }))


def step(run_dir: str) -> None:
    ckpt = torch.load(Path(run_dir) / "last.ckpt", map_location="cpu", weights_only=False)
    print(ckpt["global_step"])


def check(run_dir: str, first_log: str, second_log: str, stopped: str) -> None:
    first, second = Path(first_log).read_text(), Path(second_log).read_text()
    assert f"stopped by SIGUSR1 at step {stopped}" in first, first[-2000:]
    assert "resuming from" in second, second[-2000:]
    record = pd.read_parquet(Path(run_dir) / "record.parquet").iloc[0]
    assert record["status"] == "ok" and record["steps"] == STEPS, record
    print(f"slurm-test: USR1 stopped the run at step {stopped} of {STEPS} with last.ckpt "
          f"saved; run again, it resumed there and finished (status ok, {STEPS} steps)")


if __name__ == "__main__":
    {"spec": spec, "step": step, "check": check}[sys.argv[1]](*sys.argv[2:])
