"""What the Snakemake workflow does besides running its rules, called from
workflow/rules/common.smk with Snakemake's `workflow` object and `config`:

- `prepare`, while the Snakefile is parsed (every invocation, dry runs too):
  stale locks removed, the SIGUSR1 disposition of cluster jobs, the jobs'
  environment, the config of the study a report names (`reported_study`),
  the config check, the local GPUs as a resource;
- `start_study` (onstart) and `end_study` (onsuccess, onerror): the study's
  lock, its saved config, the trackers' shared stores, GPU slots and the warm
  server;
- the specs and inputs the rules' functions hand each job, from its
  wildcards, which name its grid cell (`run_cell`, `pretrain_run_cell`: the
  cell the job's spec is, `spec.cell`, once placed in its directory).

Torch-free: the DAG imports it on every invocation.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import signal
import sys
import threading
from pathlib import Path

from .study import grid, resources, specs

# The Snakefile's `workflow` object: where Snakemake runs its jobs.
#   local_exec: jobs on this machine; remote_exec: this process is a cluster
#   job; subprocess_exec: a job's own Snakemake on this machine.


def prepare(workflow, config: dict, argv: list[str] | None = None):
    """Everything the workflow does while it is parsed (`argv`: Snakemake's
    command line); returns the study's typed config (study.config.StudyConfig),
    which everything below the workflow reads, `config` itself completed for
    the rules."""
    from . import plugins, trackers
    from .study import check_memory, machine_memory, trains_in_host_memory, validate
    from .tasks import check_releases

    clear_stale_locks(workflow)
    ignore_usr1(workflow)
    os.environ.setdefault("SCALESTUDY_ROOT", workflow.basedir)
    reported_study(workflow, config, sys.argv[1:] if argv is None else argv)
    # What the study's plugins add joins the registries before the schema reads
    # them; their names reach every job (scalestudy.plugins).
    plugins.load(config.get("plugins") or [], root=workflow.basedir)
    # One clear error naming the field and what it accepts, before any job
    # runs: the schema and what it cannot express (scalestudy.study), which
    # completes `config` with the options the study does not state; then, for
    # jobs on this machine's RAM, each size's estimated training memory.
    study = validate(config, os.path.join(workflow.basedir, "config", "schema.yaml"))
    if jobs_run_here(workflow) and trains_in_host_memory(study):
        check_memory(study, machine_memory())
    # A task read from LRA's release (source: lra) needs its files before any job.
    check_releases(study.tasks)
    # The jobs' trackers (trainer.loggers): by the environment, not the spec,
    # so that adding one reruns no job (scalestudy.trackers).
    os.environ[trackers.ENV] = ",".join(study.trainer.loggers)
    return study


def planned_powers(workflow, study) -> None:
    """A dry run's warning of a claim the study's plan section lists that its grid
    is unlikely to decide: per such claim whose planned power (cli/plan.py, the
    planner's fast rules on the plan's pilot) is below 0.5, one line; not an
    error. Nothing outside a dry run, or without a plan."""
    if not study.plan.claims or workflow.remote_exec or not dry_run():
        return
    from .cli.plan import planned_lines

    try:
        lines = planned_lines(study, Path(workflow.basedir))
    except (ValueError, OSError) as err:
        lines = [f"plan: its claims' power not checked: {err}"]
    for line in lines:
        print(line)


def heal_records(workflow, records, collected) -> None:
    """A run record (`records`) that cannot be read (truncated by a crash of
    the file system, a copy cut short) is set aside as record.parquet.corrupt,
    and the runs.parquet collected from it (`collected`) removed, so that this
    invocation plans its job again (a finished run resumes from its
    last.ckpt and writes its record again) and collects and analyses the
    study anew; an unreadable runs.parquet is set aside likewise. Each is
    named on the console. A dry run changes nothing and says what the run
    will do; a cluster job's own parse leaves the study's files alone."""
    from .records import set_aside, unreadable

    if workflow.remote_exec or workflow.subprocess_exec:
        return
    broken = [(path, reason) for path in records
              if os.path.exists(path) and (reason := unreadable(path))]
    if os.path.exists(collected) and (reason := unreadable(collected, one_run=False)):
        broken.append((collected, reason))
    if not broken:
        return
    dry = dry_run()
    for path, reason in broken:
        if dry:
            print(f"{path}: {reason}; snakemake without -n sets it aside and runs its job again")
        else:
            print(f"{path}: {reason}; set aside as {set_aside(path)}, so its job runs again")
    if not dry and os.path.exists(collected):
        os.remove(collected)
        print(f"{collected}: collected from a record set aside, so removed and collected again")


@functools.cache
def command_line():
    """This Snakemake's options as its own command line parses them (profiles
    applied), or None where it was not started from that command line (the
    tests, the API). While the Snakefile is parsed Snakemake has not chosen its
    executor yet: `workflow.local_exec` reads True then even under
    --executor slurm, and no dry run is known; the command line says both."""
    from snakemake.cli import parse_args

    started = Path(sys.argv[0])  # the snakemake script, or snakemake/__main__.py (-m)
    if "snakemake" not in (started.name, started.parent.name):
        return None
    try:  # the parser prints which profile it uses: once is enough
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return parse_args(sys.argv[1:])[1]
    except (SystemExit, Exception):
        return None


def dry_run() -> bool:
    """Whether this Snakemake was asked for a dry run (-n)."""
    args = command_line()
    return bool(args is not None and args.dryrun)


def jobs_run_here(workflow) -> bool:
    """Whether this Snakemake runs the jobs on this machine (its local executor),
    as opposed to submitting them (a cluster) or being a cluster job itself."""
    if workflow.remote_exec:
        return False
    args = command_line()
    if args is None:
        return workflow.local_exec
    return args.executor in (None, "local")


def report_target(argv: list[str]) -> str | None:
    """The path of `snakemake --report PATH` in Snakemake's arguments (its own
    default, report.html, for a bare --report), or None without --report."""
    for i, arg in enumerate(argv):
        if arg.startswith("--report="):
            return arg.split("=", 1)[1]
        if arg == "--report":
            following = argv[i + 1] if i + 1 < len(argv) else ""
            return following if following and not following.startswith("-") else "report.html"
    return None


def reported_study(workflow, config: dict, argv: list[str]) -> None:
    """`snakemake --report results/<study>/report.html` reports the study its
    path names, whatever the config: without --configfile or --config, the
    config that study ran with (results/<study>/study.yaml, saved as its run
    started) replaces config/config.yaml's, so that the command works as
    written for any study run here; a config given that is another study's is
    refused, naming both, rather than reporting the wrong study's files as
    missing. A report elsewhere is the config's study's, as Snakemake makes it."""
    target = report_target(argv)
    if target is None:
        return
    from .study.status import CONFIG

    parts = Path(os.path.relpath(target)).parts
    if len(parts) < 3 or parts[0] != "results" or parts[1] == config.get("study"):
        return
    study, saved = parts[1], Path("results", parts[1], CONFIG)
    settings = getattr(workflow, "config_settings", None)
    if settings is not None and (settings.configfiles or settings.config):
        raise ValueError(
            f"--report {target}: the report of the study {study}, but the config given is "
            f"the study {config.get('study')}'s: leave out --configfile and --config (the "
            f"report then reads {saved}, the config {study} ran with)")
    if not saved.is_file():
        presets = [str(path.relative_to(workflow.basedir))
                   for path in sorted(Path(workflow.basedir, "config", "studies").glob("*.yaml"))
                   if _study_of(path) == study]
        run = (f": snakemake --configfile {presets[0]}" if presets else "")
        raise ValueError(f"--report {target}: the study {study} has not run here ({saved}, "
                         f"which a run saves as it starts, is missing); run it first{run}")
    import yaml

    ran = yaml.safe_load(saved.read_text())
    config.clear()
    config.update(ran)
    print(f"the report of the study {study}, with the config it ran with: {saved}",
          file=sys.stderr)


def _study_of(preset: Path) -> str | None:
    import yaml

    try:
        return (yaml.safe_load(preset.read_text()) or {}).get("study")
    except (OSError, yaml.YAMLError):
        return None


def clear_stale_locks(workflow) -> None:
    """A study killed mid-run (SIGKILL, OOM, power loss) left its lock behind:
    the same command must finish it, so a lock whose holder is gone is removed
    (not inside a cluster job, which holds no lock)."""
    from .locks import clear_stale

    if not workflow.remote_exec:
        stale = clear_stale()
        if stale:
            print(stale)


def ignore_usr1(workflow) -> None:
    """In a cluster job, SLURM's warning before the time limit
    (--signal=USR1@<s>, profiles/slurm) reaches every process of the job step:
    the job's own Snakemake and its shell ignore it (and the shell passes the
    run the ignored disposition, which the run replaces), so only the run
    acts: it checkpoints and exits for a retry to resume
    (scalestudy.training.resume)."""
    if workflow.remote_exec or workflow.subprocess_exec:
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)


def conda_env(workflow) -> str | None:
    """The jobs' software (`conda:` in every rule; --software-deployment-method
    conda): the package installed from this checkout. Named only when conda
    deploys it: an unused env still costs every job's bookkeeping time at its
    end, which widened the window in which a killed study's finished job counts
    as incomplete (tests/workflow/test_end_to_end.py). Hence `snakemake --lint` ("Specify
    a conda environment ... for each rule") flags each rule unless run with
    --software-deployment-method conda (deliberate)."""
    from snakemake.settings.types import DeploymentMethod

    deploys = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
    return "../envs/scalestudy.yaml" if deploys else None


def register_gpus(workflow, study) -> int:
    """A local GPU study runs no more GPU jobs at once than this process may
    use (or --resources gpu=N). Registered while the workflow is parsed:
    Snakemake builds its scheduler's limits from the resources it has then, and
    one registered later (at onstart) changes the count it shows, not the
    limit. Returns the local GPUs."""
    gpus = resources.local_gpus()
    if (jobs_run_here(workflow) and gpus and resources.trains_on_gpus(study, gpus)
            and "gpu" not in workflow.global_resources):
        workflow.register_resource("gpu", gpus)
    return gpus


def start_study(workflow, config: dict, study, out: str, gpus) -> None:
    """Claim the study's lock. On a cluster (here, at onstart, Snakemake knows
    its executor) a study names its accelerator. Jobs that run on this machine
    fork from one warm process that has torch, Lightning and the analysis
    stack imported (scalestudy.cli.fork_server), instead of each paying seconds of
    imports, and a GPU study's jobs take GPUs no other job holds: the `gpu`
    resource (`register_gpus`) and a lock file per GPU
    (scalestudy.training.devices). Cluster jobs run their command directly,
    on the GPUs SLURM gave them."""
    import yaml

    from . import trackers
    from .atomic import write_text
    from .locks import claim
    from .study import check_cluster
    from .study import status as study_status

    if not workflow.local_exec:
        check_cluster(study)
    claim()  # this process holds locks (see scalestudy.locks)
    # The study's config as it runs, for `scalestudy status` (scalestudy.study.status).
    write_text(yaml.safe_dump(json.loads(json.dumps(config)), sort_keys=False),
               os.path.join(out, study_status.CONFIG))
    trackers.prepare(study.trainer.loggers, study.study, out)
    if not workflow.local_exec:
        return
    if gpus and resources.trains_on_gpus(study, gpus):
        slots = resources.write_slots(Path(".snakemake") / "scalestudy-gpus", gpus)
        os.environ[resources.SLOTS_ENV] = str(slots.resolve())
    from .cli import fork_server

    fork_server.start()


def end_study() -> None:
    """This process no longer holds the study's locks (Snakemake removes them
    as it ends), and its scheduler's wake-ups stop."""
    from .locks import release

    release()
    stop_rescheduling_timers()


def stop_rescheduling_timers() -> None:
    """Cancel Snakemake's pending scheduler wake-ups (threading.Timer, one per
    loop, max-jobs-per-timespan apart; profiles/default): they are not daemon
    threads, so the finished run would otherwise wait up to a timespan to exit."""
    for thread in threading.enumerate():
        if isinstance(thread, threading.Timer):
            thread.cancel()


# --- the jobs' cells, specs and inputs, from their wildcards ----------------------------

def run_cell(study, wildcards) -> grid.Cell:
    """A train job's grid cell, as its wildcards name it."""
    return grid.Cell(wildcards.get("task"), wildcards.get("arch"), wildcards.get("size"),
                     wildcards.get("prior"), int(wildcards.get("seed")),
                     grid.budget_of(study.grid, wildcards.get("budget")))


def pretrain_run_cell(study, wildcards) -> grid.PretrainCell:
    """A pretrain job's run, as its wildcards name it (its task only for a stage
    on the task's own data, its seed only per seed: the rules' patterns)."""
    seed = wildcards.get("seed")
    return grid.PretrainCell(wildcards.get("stage"), wildcards.get("task"), wildcards.get("arch"),
                             wildcards.get("size"), int(seed) if seed is not None else None,
                             grid.budget_of(study.grid, wildcards.get("budget")))


def train_spec(study, wildcards) -> dict:
    """A train job's RunSpec as the dict `scalestudy train` reads; as a rule
    param (JSON), a change to it (steps, lr, the task's data...) reruns exactly
    the runs it affects."""
    return specs.run_spec(study, run_cell(study, wildcards))


def pretraining_spec(study, wildcards) -> dict:
    """A pretrain job's PretrainSpec as the dict `scalestudy pretrain` reads."""
    return specs.pretrain_spec(study, pretrain_run_cell(study, wildcards))


def trunk_record(study, out: str, run) -> dict:
    """A wsd branch's trunk (`run`, a Cell or PretrainCell whose budget sets its
    own length): the trunk's record, whose job saved the fork checkpoint the
    branch starts from (training/branches.py); {} for every other run. The
    command finds the trunk's directory beside its own (study.grid.trunk_beside):
    the train and pretrain rules' shell commands and params stay those of the
    studies run before budgets, which Snakemake would otherwise rerun (its code
    and params rerun triggers)."""
    trunk = grid.trunk_of(run, study.grid) if run.trains_budget else None
    if study.train.schedule != "wsd" or trunk is None:
        return {}
    return {"trunk": f"{out}/{trunk.directory}/record.parquet"}


def pretrain_inputs(study, out: str, wildcards) -> dict:
    """A pretrain job's inputs besides its corpus: its trunk's record, if a branch."""
    return trunk_record(study, out, pretrain_run_cell(study, wildcards))


def train_inputs(study, out: str, wildcards) -> dict:
    """A train job's inputs besides its task's data: the pretraining record
    (and so its checkpoint) that the run's prior loads or matches, and its
    trunk's record, if a branch."""
    cell = run_cell(study, wildcards)
    inputs = {}
    needed = grid.pretrain_cell(cell, study.pretrain.per_seed)
    if needed:
        inputs["pretrained"] = f"{out}/{needed.directory}/record.parquet"
    return {**inputs, **trunk_record(study, out, cell)}
