"""A training or pretraining job as `scalestudy train|pretrain` runs it: one
process at a time in the run's directory (locks.run_lock), a wsd branch's
trunk found beside it, and a failed record in place of a run that raised
before it could train, so that the study goes on and the failure is visible in
it. Torch-free until the run itself starts."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

from ..study import grid


def run_recorded(work, identity: dict, record_path: Path) -> dict:
    """Run `work` (a training or pretraining run); if it raises before it could
    train (its data, its checkpoint, its model), write a failed record with the
    error (`identity`: the record fields that name the run) instead. The
    traceback goes to the job's log. One process at a time runs in the run's
    directory (locks.run_lock): a second one exits 1 with no record."""
    from ..atomic import no_space
    from ..locks import RunBusy, run_lock
    from ..records import failed_record, write_record

    try:
        with run_lock(record_path.parent):
            return work()
    except RunBusy as busy:
        print(busy.message, file=sys.stderr, flush=True)
        raise
    except Exception as err:
        full = no_space(err, record_path.parent)
        if full:  # a full disk: the command's one error line, no record
            raise full from None
        traceback.print_exc()
        record = failed_record(identity, err)
        write_record(record, record_path)
        return record


def trunk(given: Path | None, spec, run_dir) -> Path | None:
    """A wsd branch's trunk directory: `given` (--trunk), else the one beside
    its own (study.grid.trunk_beside); None for every other run."""
    return given if given is not None else grid.trunk_beside(run_dir, spec.cell,
                                                             spec.train.branch_of)


def train(spec, data_dir, run_dir, pretrained=None, given_trunk=None) -> dict:
    """Train a grid cell (a RunSpec) in `run_dir`; its record. The cell's
    identity is the one its directory names (Spec.placed)."""
    from .task import run

    spec = spec.placed(run_dir)
    start = trunk(given_trunk, spec, run_dir)
    return run_recorded(lambda: run(spec, data_dir, run_dir, pretrained, start),
                        spec.record_identity(), Path(run_dir) / "record.parquet")


def pretrain(spec, data_dir, out_dir, given_trunk=None) -> dict:
    """Pretrain a stage's backbone (a PretrainSpec) in `out_dir`; its record.
    Its identity is the one its directory names (Spec.placed)."""
    from .pretrain import run_pretrain

    spec = spec.placed(out_dir)
    start = trunk(given_trunk, spec, out_dir)
    return run_recorded(lambda: run_pretrain(spec, data_dir, out_dir, start),
                        spec.record_identity(), Path(out_dir) / "record.parquet")


def summary(record: dict, metric: str) -> str:
    """The job's last line: its status and `metric`, or why it has none."""
    if record["status"] == "failed" and record["steps"] is None:
        return f"failed: {record['error']}"
    if record["status"] == "diverged":
        return f"diverged: non-finite loss at step {record['diverged_step']}"
    return (f"{record['status']}: {metric}={record[metric]:.4f} steps={record['steps']} "
            f"wall={record['wall_seconds']:.1f}s")
