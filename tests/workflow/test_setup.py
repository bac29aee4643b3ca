"""scalestudy.workflow, what common.smk runs besides its rules, without
Snakemake: the parse-time set-up (stale locks, SIGUSR1, the jobs'
environment, the config check, the GPU resource), the study's start and end
(lock, saved config, GPU slots, warm server, Snakemake's timers), and the
inputs each job gets from its wildcards (named by its spec's cell)."""

from __future__ import annotations

import copy
import os
import signal
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from scalestudy import locks, trackers
from scalestudy import workflow as study_workflow
from scalestudy.cli import fork_server as warm
from scalestudy.study import resources
from scalestudy.study import status as study_status

from tests.support import ROOT
from tests.support.studies import DECLARED_STUDY, typed


class FakeWorkflow(SimpleNamespace):
    """Snakemake's `workflow` object, as much of it as scalestudy.workflow reads."""

    def __init__(self, where: str = "local", **more):
        super().__init__(**{"local_exec": where == "local", "remote_exec": where == "remote",
                            "subprocess_exec": where == "subprocess", "basedir": str(ROOT),
                            "global_resources": {}, "registered": {}, **more})

    def register_resource(self, name, value):
        self.registered[name] = value


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("SCALESTUDY_ROOT", trackers.ENV, resources.SLOTS_ENV):
        monkeypatch.delenv(name, raising=False)
    yield
    for name in ("SCALESTUDY_ROOT", trackers.ENV, resources.SLOTS_ENV):
        os.environ.pop(name, None)


def test_parsing_checks_the_config_and_sets_the_jobs_environment(clean_env, monkeypatch):
    monkeypatch.setattr(resources, "local_gpus", lambda: 0)
    config = copy.deepcopy(DECLARED_STUDY)
    config["trainer"]["loggers"] = ["csv", "tensorboard"]
    study = study_workflow.prepare(FakeWorkflow(), config)
    assert study == typed(config) and study.trainer.loggers == ("csv", "tensorboard")
    assert os.environ[trackers.ENV] == "csv,tensorboard"
    assert os.environ["SCALESTUDY_ROOT"] == str(ROOT)
    config["grid"]["archs"] = ["no_such_arch"]
    with pytest.raises(ValueError, match="no_such_arch"):
        study_workflow.prepare(FakeWorkflow(), config)


@pytest.mark.parametrize("where, refused", [("local", True), ("cluster", False),
                                             ("remote", False)])
def test_only_a_study_whose_jobs_run_here_is_refused_by_this_machine_s_memory(
        clean_env, monkeypatch, where, refused):
    """A CPU study parsed on a machine of 1 MiB: its jobs would train in this
    machine's RAM only under the local executor; a cluster study's Snakemake
    (parsing on a login node) and a cluster job's own (on its node, with the memory
    SLURM gave it) check no size against this machine's memory."""
    from scalestudy import study

    monkeypatch.setattr(resources, "local_gpus", lambda: 0)
    monkeypatch.setattr(study, "machine_memory", lambda: 2**20)
    config = copy.deepcopy(DECLARED_STUDY)
    config["trainer"]["accelerator"] = "cpu"
    workflow = FakeWorkflow(where)
    if refused:
        with pytest.raises(study.ConfigError, match=r"grid.sizes: .* more than this machine's"):
            study_workflow.prepare(workflow, config)
    else:
        assert study_workflow.prepare(workflow, config) == typed(config)
    roomy = copy.deepcopy(config)
    monkeypatch.setattr(study, "machine_memory", lambda: 1024 * study.GIB)
    assert study_workflow.prepare(FakeWorkflow(where), roomy) == typed(roomy)


@pytest.mark.parametrize("where, clears", [("local", True), ("subprocess", True),
                                           ("remote", False)])
def test_stale_locks_are_cleared_except_inside_a_cluster_job(monkeypatch, capsys, where, clears):
    calls = []
    monkeypatch.setattr(locks, "clear_stale", lambda: calls.append(1) or "removed the locks")
    study_workflow.clear_stale_locks(FakeWorkflow(where))
    assert bool(calls) == clears
    assert ("removed the locks" in capsys.readouterr().out) == clears


@pytest.mark.parametrize("where, ignored", [("local", False), ("subprocess", True),
                                            ("remote", True)])
def test_a_job_s_own_snakemake_ignores_sigusr1(where, ignored):
    before = signal.getsignal(signal.SIGUSR1)
    try:
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        study_workflow.ignore_usr1(FakeWorkflow(where))
        assert (signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN) == ignored
    finally:
        signal.signal(signal.SIGUSR1, before)


def test_the_conda_env_is_named_only_when_conda_deploys():
    from snakemake.settings.types import DeploymentMethod

    def deploying(*methods):
        return FakeWorkflow(deployment_settings=SimpleNamespace(deployment_method=set(methods)))

    assert study_workflow.conda_env(deploying()) is None
    assert study_workflow.conda_env(deploying(DeploymentMethod.CONDA)) == \
        "../envs/scalestudy.yaml"


def test_a_local_gpu_study_registers_its_gpus_unless_given(monkeypatch):
    monkeypatch.setattr(resources, "local_gpus", lambda: 2)
    gpu = copy.deepcopy(DECLARED_STUDY)
    gpu["trainer"]["accelerator"] = "gpu"
    gpu = typed(gpu)
    local = FakeWorkflow()
    assert study_workflow.register_gpus(local, gpu) == 2 and local.registered == {"gpu": 2}
    given = FakeWorkflow(global_resources={"gpu": 1})
    study_workflow.register_gpus(given, gpu)
    assert given.registered == {}
    cluster = FakeWorkflow("remote")
    study_workflow.register_gpus(cluster, gpu)
    cpu = copy.deepcopy(DECLARED_STUDY)
    cpu["trainer"]["accelerator"] = "cpu"
    study_workflow.register_gpus(local := FakeWorkflow(), typed(cpu))
    assert cluster.registered == {} and local.registered == {}


@pytest.mark.parametrize("gpus", [2, 0])
def test_an_auto_study_registers_the_gpus_of_a_machine_that_has_them(monkeypatch, gpus):
    """accelerator: auto (the default) trains on the GPUs where there are some:
    their jobs share them as the gpu resource, as a gpu study's do."""
    monkeypatch.setattr(resources, "local_gpus", lambda: gpus)
    auto = typed(DECLARED_STUDY)
    assert auto.trainer.accelerator == "auto"
    local = FakeWorkflow()
    assert study_workflow.register_gpus(local, auto) == gpus
    assert local.registered == ({"gpu": gpus} if gpus else {})


def test_the_study_starts_with_its_lock_config_slots_and_warm_server(tmp_path, monkeypatch,
                                                                     clean_env):
    monkeypatch.chdir(tmp_path)
    started = []
    monkeypatch.setattr(warm, "start", lambda: started.append(1))
    config = copy.deepcopy(DECLARED_STUDY)
    config["trainer"]["accelerator"] = "gpu"
    study_workflow.start_study(FakeWorkflow(), config, typed(config), "results/default", 2)
    assert started == [1]
    assert locks.holders(Path(".snakemake"))  # this process holds the study's locks
    saved = yaml.safe_load((Path("results/default") / study_status.CONFIG).read_text())
    assert saved["grid"] == config["grid"]
    slots = Path(os.environ[resources.SLOTS_ENV])
    assert sorted(p.name for p in slots.iterdir()) == ["0", "1"]
    timer = threading.Timer(600, lambda: None)
    timer.start()
    study_workflow.end_study()
    assert not locks.holders(Path(".snakemake"))
    timer.join(5)
    assert not timer.is_alive()  # cancelled: the run's end does not wait for it


def test_a_cluster_study_starts_no_warm_server(tmp_path, monkeypatch, clean_env):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(warm, "start", lambda: pytest.fail("a warm server on a cluster"))
    config = copy.deepcopy(DECLARED_STUDY)
    with pytest.raises(ValueError, match="auto on a cluster"):  # it names its accelerator
        study_workflow.start_study(FakeWorkflow("remote"), config, typed(config),
                                   "results/default", 0)
    config["trainer"]["accelerator"] = "cpu"
    study_workflow.start_study(FakeWorkflow("remote"), config, typed(config), "results/default",
                               0)
    assert resources.SLOTS_ENV not in os.environ
    study_workflow.end_study()


def budgeted(schedule: str, seeds: str):
    config = copy.deepcopy(DECLARED_STUDY)
    config["grid"]["budgets"] = [1e11, 3e11, 1e12]
    config["train"]["schedule"] = schedule
    config["pretrain"]["seeds"] = seeds
    return typed(config)


def test_a_job_s_inputs_are_its_cell_s_pretraining_and_trunk():
    out = "results/default"
    shared = budgeted("cosine", "shared")
    wildcards = {"task": "listops", "arch": "transformer", "size": "xxs",
                 "prior": "upstream", "seed": "1", "budget": "3e+11"}
    assert study_workflow.train_inputs(shared, out, wildcards) == {
        "pretrained": f"{out}/pretrain/upstream/transformer/xxs/b3e+11/record.parquet"}
    per_seed = budgeted("wsd", "per_seed")
    assert study_workflow.train_inputs(per_seed, out, wildcards) == {
        "pretrained": f"{out}/pretrain/upstream/transformer/xxs/b3e+11/s1/record.parquet"}
    # Under wsd a budgeted run from scratch branches from its largest budget's run.
    scratch = {**wildcards, "prior": "random"}
    assert study_workflow.train_inputs(per_seed, out, scratch) == {
        "trunk": f"{out}/runs/listops/transformer/xxs/b1e+12/random/s1/record.parquet"}
    assert study_workflow.train_inputs(per_seed, out, {**scratch, "budget": "1e+12"}) == {}
    pretraining = {"stage": "upstream", "arch": "transformer", "size": "xxs", "seed": "1",
                   "budget": "1e+11"}
    assert study_workflow.pretrain_inputs(per_seed, out, pretraining) == {
        "trunk": f"{out}/pretrain/upstream/transformer/xxs/b1e+12/s1/record.parquet"}


# --------------------------------------------------------------------------- the report


@pytest.mark.parametrize("argv, target", [
    (["--report", "results/smoke/report.html"], "results/smoke/report.html"),
    (["--cores", "2", "--report=results/x/r.html", "-n"], "results/x/r.html"),
    (["--report", "--configfile", "c.yaml"], "report.html"),  # Snakemake's default
    (["--report"], "report.html"),
    (["--report-stylesheet", "s.css", "--cores", "2"], None),
    (["--cores", "2"], None),
])
def test_the_report_s_path_is_read_from_snakemake_s_arguments(argv, target):
    assert study_workflow.report_target(argv) == target


def reporting(configfiles=(), config=None):
    return FakeWorkflow(config_settings=SimpleNamespace(configfiles=list(configfiles),
                                                        config=config or {}))


def test_a_report_of_a_study_that_ran_reads_the_config_it_ran_with(tmp_path, monkeypatch,
                                                                   capsys):
    """`snakemake --report results/<study>/report.html` as the README writes it:
    the study the path names, with the config its run saved, whatever the
    default; a config given that is another study's, or a study that has not
    run, stops with one message saying what to do; other reports are left alone."""
    monkeypatch.chdir(tmp_path)
    ran = {**copy.deepcopy(DECLARED_STUDY), "study": "smoke", "grid": {"sizes": ["xxs"]}}
    (tmp_path / "results/smoke").mkdir(parents=True)
    (tmp_path / "results/smoke" / study_status.CONFIG).write_text(yaml.safe_dump(ran))
    argv = ["--report", "results/smoke/report.html"]
    config = {"study": "default", "grid": {"sizes": ["s"]}}
    study_workflow.reported_study(reporting(), config, argv)
    assert config == ran
    assert "the report of the study smoke, with the config it ran with: " \
           "results/smoke/study.yaml" in capsys.readouterr().err
    # The config's own study, or a report elsewhere: as Snakemake makes it.
    for target in ("results/default/report.html", "report.html", "elsewhere/smoke/r.html"):
        config = {"study": "default"}
        study_workflow.reported_study(reporting(["c.yaml"]), config, ["--report", target])
        assert config == {"study": "default"}
    with pytest.raises(ValueError, match=r"the report of the study smoke, but the config "
                       r"given is the study default's: leave out --configfile and --config"):
        study_workflow.reported_study(reporting(["config/studies/x.yaml"]),
                                      {"study": "default"}, argv)
    with pytest.raises(ValueError, match=r"the study workstation has not run here \(results/"
                       r"workstation/study.yaml.*run it first: snakemake --configfile "
                       r"config/studies/workstation.yaml$"):
        study_workflow.reported_study(reporting(), {"study": "default"},
                                      ["--report", "results/workstation/report.html"])
