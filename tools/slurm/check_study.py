"""slurm-test's check: every run record of the study arrived, and the scheduler
ran and completed its jobs (squeue, and the job-completion log).

    python tools/slurm/check_study.py <study name> <preset.yaml>[,<overlay.yaml>] <jobcomp.log>
"""

import subprocess
import sys
from pathlib import Path

import pandas as pd

from scalestudy.study.config import StudyConfig, load_study
from scalestudy.study.grid import cells


def main(name: str, presets: str, jobcomp: Path) -> None:
    from scalestudy import plugins

    config = load_study(*presets.split(","))
    plugins.load(config.get("plugins") or [])
    expected = len(cells(StudyConfig.from_dict(config).grid))
    records = sorted(Path(f"results/{name}/runs").rglob("record.parquet"))
    assert len(records) == expected, f"{len(records)} run records, expected {expected}"
    runs = pd.read_parquet(f"results/{name}/runs.parquet")
    assert (runs["status"] == "ok").all(), runs[runs["status"] != "ok"]
    listed = subprocess.run(["squeue", "-h", "--states=all", "-o", "%i %T"],
                            capture_output=True, text=True, check=True).stdout.splitlines()
    states = [field.split("=", 1)[1] for line in jobcomp.read_text().splitlines()
              for field in line.split() if field.startswith("JobState=")]
    assert listed and states and set(states) == {"COMPLETED"}, (listed, states)
    print(f"slurm-test: {len(records)} of {expected} run records, {len(runs)} records "
          f"collected; squeue lists {len(listed)} jobs, the completion log {len(states)}, "
          "all COMPLETED")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
