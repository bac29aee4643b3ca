"""A training or pretraining job as `scalestudy train|pretrain` runs it, and
its last line. Torch-free until the run starts: training/run.py's `execute`
runs it (its lock, its errors, its record)."""

from __future__ import annotations


def train(spec, data_dir, run_dir, pretrained=None, given_trunk=None) -> dict:
    """Train a grid cell (a RunSpec) in `run_dir`; its record (training/task_run.py)."""
    from .task_run import run

    return run(spec, data_dir, run_dir, pretrained, given_trunk)


def pretrain(spec, data_dir, out_dir, given_trunk=None) -> dict:
    """Pretrain a stage's backbone (a PretrainSpec) in `out_dir`; its record
    (training/pretrain.py)."""
    from .pretrain import run_pretrain

    return run_pretrain(spec, data_dir, out_dir, given_trunk)


def summary(record: dict, metric: str) -> str:
    """The job's last line: its status and `metric`, or why it has none."""
    if record["status"] == "failed" and record["steps"] is None:
        return f"failed: {record['error']}"
    if record["status"] == "diverged":
        return f"diverged: non-finite loss at step {record['diverged_step']}"
    return (f"{record['status']}: {metric}={record[metric]:.4f} steps={record['steps']} "
            f"wall={record['wall_seconds']:.1f}s")
