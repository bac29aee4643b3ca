"""Experiment trackers: where a run's curves go besides its record (the study
config's `trainer.loggers`; docs/trackers.md says which to use when).

- `csv`: run_dir/metrics.csv (Fabric's CSVLogger; the default);
- `tensorboard`: event files in run_dir (Fabric's own TensorBoardLogger), so
  `tensorboard --logdir results` names each run by its study and cell
  (`default/runs/listops/transformer/xs/random/s0`);
- `mlflow`: a run in the study's MLflow experiment ($MLFLOW_TRACKING_URI,
  else the SQLite store results/<study>/mlflow.db, made with the experiment
  when the workflow starts: `prepare`);
- `wandb`: a Weights & Biases run in project $WANDB_PROJECT (else
  `scalestudy`), grouped by study; offline (results/<study>/wandb, for `wandb
  sync`) unless $WANDB_MODE says otherwise.

MLflow and W&B go through their own clients, by Lightning's loggers for them.
Each tracker run is named `<study>/<the run's directory>` and gets the run's
spec as its hyperparameters at the start and the record's headline numbers at
the end. A resumed run continues its tracker runs: run_dir/trackers.json keeps
their ids for the spec's config hash, and TensorBoard's purge step hides the
killed attempt's events past the checkpoint it resumed from (a fresh start
hides every earlier event, as the CSV logger replaces metrics.csv; the files
stay).

The workflow hands the jobs `trainer.loggers` in $SCALESTUDY_LOGGERS (not in the
spec, so that adding a tracker reruns nothing). This module imports neither
torch nor Lightning until a run opens its trackers: the config check
(`require`) runs before any job.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import math
import os
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .atomic import naming, write_text
from .registry import Registry

ENV = "SCALESTUDY_LOGGERS"
STATE = "trackers.json"
# The record's numbers every tracker run ends with (as record/<name>).
HEADLINE = ("test_acc", "val_acc", "val_loss", "train_loss", "upstream_loss", "steps",
            "tokens_seen", "train_flops", "wall_seconds", "n_params", "n_params_nonembed")


@dataclass(frozen=True)
class Run:
    """What a tracker needs to open its run: the run's directory, its name, the
    study's results directory, its hyperparameters, the step it resumes at
    (None: a fresh start) and the tracker ids it had."""

    run_dir: Path
    name: str
    study: str
    study_dir: Path
    hparams: dict
    resumed_step: int | None
    ids: dict


def _csv(run: Run):
    from lightning.fabric.loggers import CSVLogger

    return CSVLogger(run.run_dir, name="", version="")


def _tensorboard(run: Run):
    from lightning.fabric.loggers import TensorBoardLogger

    # TensorBoard hides the earlier events from this step on: a fresh start's all,
    # a resumed run's past its checkpoint (it logs them again).
    purge = 0 if run.resumed_step is None else run.resumed_step + 1
    return TensorBoardLogger(run.run_dir, name="", version="", default_hp_metric=False,
                             purge_step=purge)


def mlflow_uri(study_dir: Path) -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or (
        f"sqlite:///{(Path(study_dir) / 'mlflow.db').resolve()}")


def mlflow_experiment(uri: str, study: str) -> None:
    """The study's experiment in the store at `uri` (the store made on first use)."""
    import mlflow

    client = mlflow.MlflowClient(uri)
    if client.get_experiment_by_name(study) is None:
        # Two jobs starting at once may both create it: the loser finds it.
        with contextlib.suppress(mlflow.exceptions.MlflowException):
            client.create_experiment(study)


def prepare(names, study: str, study_dir: Path) -> None:
    """Before a study's jobs run (the workflow's start): the stores its
    trackers share, so that parallel jobs do not race to make them."""
    if "mlflow" in names:
        Path(study_dir).mkdir(parents=True, exist_ok=True)
        mlflow_experiment(mlflow_uri(study_dir), study)


def _mlflow(run: Run):
    from lightning.pytorch.loggers import MLFlowLogger

    uri = mlflow_uri(run.study_dir)
    mlflow_experiment(uri, run.study)
    logger = MLFlowLogger(experiment_name=run.study, run_name=run.name, tracking_uri=uri,
                          run_id=run.ids.get("mlflow"))
    if run.ids.get("mlflow") is None:
        logger.log_hyperparams(run.hparams)
    else:  # the killed attempt left it KILLED
        logger.experiment.update_run(logger.run_id, status="RUNNING")
    return logger


def _wandb(run: Run):
    from lightning.pytorch.loggers import WandbLogger

    resumed = run.ids.get("wandb")
    logger = WandbLogger(
        name=run.name, project=os.environ.get("WANDB_PROJECT", "scalestudy"),
        group=run.study, save_dir=str(run.study_dir), id=resumed or uuid.uuid4().hex[:12],
        resume="allow", offline=not os.environ.get("WANDB_MODE"),
        settings=_wandb_settings())
    # Every attempt: a killed one's service may have died before writing its config.
    logger.log_hyperparams(run.hparams)
    return logger


def _wandb_settings():
    import wandb

    # The job's console already goes to its log; no second copy, no prompts.
    return wandb.Settings(console="off", silent=True)


@dataclass(frozen=True)
class Tracker:
    name: str
    package: str | None  # the module it needs beyond scalestudy[train]
    open: Callable[[Run], Any]
    logger_class: str  # the class of the Lightning logger `open` makes
    # The tracker run's id to continue it by, once open (None: nothing to keep).
    run_id: Callable[[Any], str | None] = lambda logger: None

    @property
    def extra(self) -> str:
        return f"scalestudy[{self.name}]"

    def installed(self) -> bool:
        return self.package is None or importlib.util.find_spec(self.package) is not None


TRACKERS: Registry[Tracker] = Registry("tracker", [
    Tracker("csv", None, _csv, "CSVLogger"),
    Tracker("tensorboard", "tensorboard", _tensorboard, "TensorBoardLogger"),
    Tracker("mlflow", "mlflow", _mlflow, "MLFlowLogger", run_id=lambda logger: logger.run_id),
    Tracker("wandb", "wandb", _wandb, "WandbLogger", run_id=lambda logger: logger.version),
])
DEFAULT = ("csv",)


def configured() -> tuple[str, ...]:
    """The trackers this process's runs log to: $SCALESTUDY_LOGGERS (comma
    separated, as the workflow sets it from trainer.loggers), else csv."""
    names = tuple(n.strip() for n in os.environ.get(ENV, "").split(",") if n.strip())
    return names or DEFAULT


def require(names, field: str = "trainer.loggers") -> None:
    """Raise ValueError naming the extra to install for a tracker whose package
    is missing (or the accepted names, for an unknown one)."""
    for name in names:
        if name not in TRACKERS:
            raise ValueError(f"{field}: unknown tracker {name!r}; accepted values: "
                             f"{', '.join(TRACKERS)}")
        tracker = TRACKERS[name]
        if not tracker.installed():
            raise ValueError(f"{field}: {name} needs the {tracker.package} package, which is "
                             f"not installed; pip install '{tracker.extra}'")


def run_name(spec) -> tuple[str, str]:
    """The run's directory under its study's results (its cell's) and its
    tracker name, `<study>/<directory>`."""
    directory = spec.cell.directory
    return directory, f"{spec.study}/{directory}"


def study_directory(spec, run_dir: Path) -> Path:
    """The study's results directory, whose stores (mlflow.db, wandb/) every run
    of the study shares: the one holding run_dir as its cell's directory, else
    (a run outside a study's results) run_dir itself."""
    try:
        return spec.cell.study_directory(run_dir)
    except ValueError:
        return Path(run_dir)


def hyperparameters(spec) -> dict:
    """The spec, flattened (train/lr, task_config/seq_len, ...), with its hash."""
    flat = {}

    def add(prefix: str, value) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                add(f"{prefix}/{key}" if prefix else key, item)
        else:
            flat[prefix] = value if isinstance(value, int | float | str | bool) else str(value)

    add("", dataclasses.asdict(spec))
    flat["config_hash"] = spec.config_hash()
    return flat


def open_trackers(spec, run_dir: Path, names=None,
                  checkpoint_step: Callable[[Path, str], int | None] | None = None) -> list:
    """The Fabric loggers of a run (`names`: default `configured()`), its tracker
    runs opened, continued where run_dir's checkpoint will be resumed:
    `checkpoint_step(run_dir, config_hash)` is the step it resumes at (the
    training's training.resume.checkpoint_step, which reads the checkpoint with
    torch; None: no run resumes), asked only where a tracker keeps run ids."""
    from lightning.fabric.utilities.rank_zero import rank_zero_only

    names = tuple(configured() if names is None else names)
    require(names)
    run_dir = Path(run_dir)
    if rank_zero_only.rank != 0:  # DDP's other ranks log nothing
        return []
    _, name = run_name(spec)
    study_dir = study_directory(spec, run_dir)
    config_hash = spec.config_hash()
    trackers = [TRACKERS[n] for n in names]
    resumed_step = ids = None
    if checkpoint_step is not None and any(t.package for t in trackers):
        resumed_step = checkpoint_step(run_dir, config_hash)
        state = _read_state(run_dir)
        if resumed_step is not None and state.get("config_hash") == config_hash:
            ids = state.get("ids", {})
    run = Run(run_dir, name, spec.study, study_dir, hyperparameters(spec), resumed_step,
              ids or {})
    opened = {}
    for tracker in trackers:
        try:
            opened[tracker.name] = tracker.open(run)
        except Exception as err:  # the run matters more than a tracker: it goes on
            warn(tracker.name, "not logging to it", err)
    loggers = list(opened.values())
    kept = {name: TRACKERS[name].run_id(logger) for name, logger in opened.items()}
    kept = {k: v for k, v in kept.items() if v is not None}
    if kept:
        write_text(json.dumps({"config_hash": config_hash, "ids": kept}, indent=1) + "\n",
                   run_dir / STATE)
    return loggers


def _read_state(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / STATE).read_text())
    except (OSError, ValueError):
        return {}


def tracker_of(logger) -> str | None:
    """The tracker a logger of `open_trackers` belongs to."""
    return next((t.name for t in TRACKERS.values()
                 if type(logger).__name__ == t.logger_class), None)


def where(logger) -> Path:
    """The file or directory a logger writes, for a write error's message."""
    log_dir = Path(getattr(logger, "log_dir", None) or getattr(logger, "save_dir", None) or ".")
    return log_dir / "metrics.csv" if tracker_of(logger) == "csv" else log_dir


def save(loggers) -> None:
    """Flush every logger (a full disk is the WriteError of its file)."""
    for logger in loggers:
        with naming(where(logger)):
            logger.save()


def headline(record: dict) -> dict[str, float]:
    out = {}
    for key in HEADLINE:
        value = record.get(key)
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            out[f"record/{key}"] = float(value)
    return out


def finish(loggers, record: dict) -> None:
    """End every tracker run with the record's headline numbers and status. A
    tracker that fails here (a server gone) is reported in one line and the run
    goes on to its record; a full disk stops it (WriteError)."""
    numbers, status = headline(record), record["status"]
    step = int(record.get("steps") or 0)
    for logger in loggers:
        name = tracker_of(logger)
        try:
            with naming(where(logger)):
                if name == "tensorboard":  # the hparams dashboard: spec, status, numbers
                    logger.log_hyperparams({**_hparams_of(record), "status": status}, numbers)
                elif name in ("mlflow", "wandb"):
                    logger.log_metrics(numbers, step=step)
                    _status(name, logger, status, record.get("error") or "")
                close(logger, "success" if status == "ok" else "failed")
        except OSError:
            raise
        except Exception as err:  # the record matters more than a tracker
            warn(name, "its run may lack the record's numbers", err)


def warn(name: str, what: str, err: Exception) -> None:
    first = (str(err).strip().splitlines() or [""])[0]
    print(f"warning: tracker {name}: {type(err).__name__}: {first} ({what})", file=sys.stderr,
          flush=True)


def _hparams_of(record: dict) -> dict:
    keys = ("study", "task", "arch", "size", "prior", "seed", "stage", "lr", "batch_size",
            "depth", "width", "norm", "protocol", "config_hash")
    return {k: record[k] for k in keys if record.get(k) is not None}


def _status(name: str, logger, status: str, error: str) -> None:
    if name == "mlflow":
        logger.experiment.set_tag(logger.run_id, "status", status)
        if error:
            logger.experiment.set_tag(logger.run_id, "error", error)
    else:
        logger.experiment.summary.update({"status": status, **({"error": error} if error
                                                                else {})})


def close(logger, status: str) -> None:
    """Finalize a logger: MLflow's run FINISHED/FAILED/KILLED, W&B's finished
    (its own atexit hook never runs in a warm server's child, which leaves by
    os._exit)."""
    name = tracker_of(logger)
    if name == "mlflow":
        logger.finalize({"success": "FINISHED", "failed": "FAILED"}.get(status, "KILLED"))
    elif name == "wandb":
        logger.experiment.finish(exit_code=0 if status == "success" else 1)
    else:
        logger.finalize(status)


def stop(loggers, status: str, quiet: bool = False) -> None:
    """Finalize every logger of a run that ends without a record (stopped for a
    resume: status `killed`; a full disk: `failed`, `quiet`, since nothing more
    can be written and the one error has been raised already)."""
    for logger in loggers:
        try:
            with naming(where(logger)):
                close(logger, status)
        except Exception:
            if not quiet:
                raise
