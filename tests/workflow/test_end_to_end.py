"""The workflow, run for real through `snakemake` in a temporary directory."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from scalestudy.analysis.figures import Grid, grid_figures
from scalestudy.analysis.figures.output import DATA_COLUMNS
from scalestudy.analysis.tables import TABLE_FILES
from scalestudy.priors import PRIORS

from tests.support import ROOT
from tests.support.figure_checks import check_error_vs_compute_data, check_upstream_loss_data
from tests.support.studies import LRA_TASKS


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        # Job descriptions on: these tests read the job blocks the default
        # profile's console leaves out (quiet: rules).
        [sys.executable, "-m", "snakemake", "--cores", "2", "--quiet", "host", *args],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=900,
    )


@pytest.fixture
def workdir(tmp_path):
    for name in ("Snakefile", "workflow", "config", "profiles"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    return tmp_path


def test_smoke_study_runs_end_to_end_and_then_has_nothing_to_do(workdir):
    done = snakemake(workdir, "--configfile", "config/studies/smoke.yaml")
    assert done.returncode == 0, done.stderr[-3000:]
    out = workdir / "results/smoke"
    every_run = pd.read_parquet(out / "runs.parquet")
    assert set(every_run["status"]) == {"ok"}
    # Every other LRA task trains one tiny cell on its offline stand-in, so labelled.
    others = every_run[~every_run["task"].isin(["listops", "upstream"])]
    assert sorted(others["task"]) == sorted(set(LRA_TASKS) - {"listops"})
    assert (others["prior"] == "random").all() and (others["size"] == "xxs").all()
    assert others["task_data"].str.startswith("stand-in for LRA").all()
    for task in LRA_TASKS:
        manifest = json.loads((out / f"data/{task}/manifest.json").read_text())
        assert manifest["task"] == task and manifest["standin"].startswith("stand-in for LRA")
    runs = every_run[every_run["task"].isin(["listops", "upstream"])]
    assert set(runs["size"]) == {"xxs", "xs", "s"}
    # Every prior ran on the task, after the pretraining stages it needs:
    # one spt checkpoint per arch x size x task, one upstream per arch x size.
    task_runs = runs[runs["stage"].isin(["scratch", "finetune"])]
    assert sorted(task_runs["prior"].unique()) == sorted(PRIORS)
    assert len(task_runs) == 3 * len(PRIORS)
    assert sorted(runs.loc[runs["stage"] == "spt", "size"]) == ["s", "xs", "xxs"]
    assert sorted(runs.loc[runs["stage"] == "upstream", "size"]) == ["s", "xs", "xxs"]
    finetuned = task_runs[task_runs["prior"].isin(["spt", "upstream"])]
    assert (finetuned["stage"] == "finetune").all() and (finetuned["pretrain_flops"] > 0).all()
    upstream_runs = task_runs[task_runs["prior"] == "upstream"]
    assert upstream_runs["upstream_loss"].notna().all()
    fixup = task_runs[task_runs["prior"].isin(["tfixup", "dtfixup"])]
    assert (fixup["norm"] == "none").all() and (fixup["warmup_steps"] == 0).all()
    fits = pd.read_parquet(out / "fits.parquet")
    fits = fits[fits["task"].isin(["listops", "upstream"]) | fits["task"].isna()]
    assert set(fits["metric"]) == {"alpha_U", "alpha_D", "alpha_UD", "alpha_D/alpha_U"}
    alpha_d = fits[fits["metric"] == "alpha_D"]
    assert sorted(alpha_d["prior"]) == sorted(PRIORS)
    assert (alpha_d["n_sizes"] == 3).all() and (alpha_d["status"] == "ok").all()
    alpha_u = fits[fits["metric"] == "alpha_U"].set_index("form")
    assert alpha_u.loc["loglog", "status"] == "ok"
    assert alpha_u.loc["saturating", "status"] == "not enough sizes: 3 < 4"
    for stage, sub_dir in (("spt", "spt/listops"), ("upstream", "upstream")):
        for size in ("xxs", "xs", "s"):
            assert (out / f"pretrain/{sub_dir}/transformer/{size}/best.ckpt").exists(), stage
    smoke_figures = grid_figures(Grid.of(LRA_TASKS, ["transformer"], ["xxs", "xs", "s"], PRIORS))
    assert {"error_vs_compute", "spt_vs_matched", "upstream_loss_vs_compute"} <= set(
        smoke_figures)
    for name in smoke_figures:
        for ext in ("png", "pdf"):
            assert (out / f"figures/{name}.{ext}").stat().st_size > 1000, name
        data = pd.read_csv(out / f"figures/{name}.csv")
        assert list(data.columns) == DATA_COLUMNS and len(data) > 0, name
    # What the figures plot is what the runs and fits say (their source data).
    every_fit = pd.read_parquet(out / "fits.parquet")
    errors = pd.read_csv(out / "figures/error_vs_compute.csv")
    for prior in ("random", "spt", "upstream", "tfixup"):
        check_error_vs_compute_data(errors, every_run, every_fit, "listops", prior, "transformer")
    check_upstream_loss_data(pd.read_csv(out / "figures/upstream_loss_vs_compute.csv"),
                             every_run, every_fit, "transformer")
    for name in TABLE_FILES:
        assert (out / f"tables/{name}").stat().st_size > 0, name
    assert "## SPT beats the compute-matched control" in (out / "claims.md").read_text()
    for size in ("xxs", "xs", "s"):
        run_dir = out / f"runs/listops/transformer/{size}/random/s0"
        assert {"record.parquet", "metrics.csv", "last.ckpt"} <= {p.name for p in run_dir.iterdir()}
        assert (out / f"logs/train/listops/transformer/{size}/random/s0.log").exists()

    again = snakemake(workdir, "-n", "--configfile", "config/studies/smoke.yaml")
    assert again.returncode == 0
    assert "Nothing to be done" in again.stdout + again.stderr

    # The report embeds every figure, table and claims.md, with its caption:
    # made by the README's command as written, for this study, which is not
    # config/config.yaml's (the config it reads is the one the study ran with).
    (command,) = [line.split("#")[0].split() for line in (ROOT / "README.md").open()
                  if line.startswith("snakemake --report ")]
    assert command == ["snakemake", "--report", "results/<study>/report.html"]
    report = snakemake(workdir, *[arg.replace("<study>", "smoke") for arg in command[1:]])
    assert report.returncode == 0, report.stderr[-3000:]
    assert "the report of the study smoke" in report.stderr
    html = (out / "report.html").read_text()
    for name in [*smoke_figures, "alpha.csv", "lra_accuracy.csv", "claims.md"]:
        assert name in html, name
    for caption in ("Upstream loss against compute", "SPT against the compute-matched control",
                    "Claim checks", "Test accuracy per prior"):
        assert caption in html, caption
    # Another study's config given for this report: one message, no report.
    wrong = snakemake(workdir, "--configfile", "config/studies/workstation.yaml",
                      "--report", "results/smoke/report.html")
    assert wrong.returncode != 0
    assert "leave out --configfile and --config" in wrong.stderr, wrong.stderr[-2000:]


def test_dry_run_of_the_default_study_prints_the_job_count(workdir):
    from tests.support.studies import expected_jobs, job_counts

    done = snakemake(workdir, "-n")
    assert done.returncode == 0, done.stderr[-3000:]
    counts = job_counts(done.stdout)
    expected = expected_jobs({})  # config/config.yaml alone
    assert expected["train"] > 0
    assert {job: counts.get(job, 0) for job in expected} == expected
    assert not (workdir / "results").exists()
    # The workflow profile (keep-going, rerun-incomplete) is loaded by a plain run.
    assert "Using workflow specific profile profiles/default" in done.stdout + done.stderr
    check_longest_first(job_priorities(done.stdout))


def job_priorities(dry_run: str) -> dict[tuple, int]:
    """(rule, wildcards...) -> priority, from the job blocks of a dry run."""
    found, rule, wildcards = {}, None, ()
    for line in dry_run.splitlines():
        line = line.strip()
        if line.startswith(("rule ", "localrule ")):
            rule, wildcards = line.split()[1].rstrip(":"), ()
        elif line.startswith("wildcards:"):
            wildcards = tuple(sorted(kv.split("=") for kv in line[10:].strip().split(", ")))
        elif line.startswith("priority:"):
            found[(rule, *map(tuple, wildcards))] = int(line.split()[1])
    return found


def check_longest_first(priorities: dict[tuple, int]) -> None:
    """A pretraining run comes before every run that waits for it; a larger size
    before a smaller one; the compute-matched run before the random one."""
    from scalestudy.priors import PRIORS

    train = {tuple(v for _, v in key[1:]): p for key, p in priorities.items() if key[0] == "train"}
    pretrain = {}  # stage -> [(wildcards, priority)]
    for key, p in priorities.items():
        if key[0].startswith("pretrain"):
            w = dict(key[1:])
            pretrain.setdefault(w.get("stage", "upstream"), []).append((w, p))
    assert train and pretrain
    for (arch, prior, seed, size, task), p in train.items():
        stage = PRIORS[prior].needs
        if stage:
            # the run's own pretraining: per seed (pretrain.seeds: per_seed) or shared
            (before,) = [q for w, q in pretrain[stage] if (w["arch"], w["size"]) == (arch, size)
                         and w.get("task", task) == task and w.get("seed", seed) == seed]
            assert before > p, (arch, size, prior)
        larger = {"xxs": "xs", "xs": "s"}.get(size)
        if larger:
            assert train[arch, prior, seed, larger, task] > p
        if prior == "scratch_matched":
            assert p > train[arch, "random", seed, size, task]


@pytest.mark.parametrize(
    "bad, message",
    [
        ("grid: {archs: [transformer, nope]}", r"'nope' is not one of \['transformer', 'glu'"),
        ("grid: {priors: [magic]}",
         r"'magic' is not one of \['random', 'random_noln', 'random_causal'"),
        ("grid: {tasks: [imdb]}", r"'imdb' is not one of \['listops'"),
        ("grid: {sizes: [huge]}", r"'huge' is not one of \['xxxs', 'xxs'"),
        ("train: {max_steps: ten}", r"'ten' is not of type 'integer'"),
        ("train: {epochs: 3}", r"'epochs' was unexpected"),
        ("colour: red", r"'colour' was unexpected"),
        ("grid: {per_task: {text: {sizes: [xxs]}}}", r"grid.per_task: text not in grid.tasks"),
        ("grid: {archs: [transformer, funnel]}\ntrain: {causal: true}",
         r"grid.archs: funnel has no causal mode"),
    ],
)
def test_bad_config_stops_before_any_job(workdir, bad, message):
    (workdir / "bad.yaml").write_text(bad + "\n")
    done = snakemake(workdir, "--configfile", "bad.yaml")
    assert done.returncode != 0
    import re

    assert re.search(message, done.stderr + done.stdout), done.stderr[-2000:]
    assert not (workdir / "results").exists()


def finished_outputs(workdir: Path) -> list[str]:
    """The outputs of every job that Snakemake's log (its newest) says finished."""
    import re

    log = max((workdir / ".snakemake/log").glob("*.snakemake.log"), key=os.path.getmtime)
    text = log.read_text()
    outputs = {jobid: out for out, jobid in
               re.findall(r"^\s+output: (.+?)\n(?:\s+\w+: .*\n)*?\s+jobid: (\d+)$", text, re.M)}
    done = re.findall(r"^Finished jobid: (\d+)", text, re.M)
    return [path for jobid in done for path in outputs.get(jobid, "").split(", ") if path]


def test_a_killed_study_finishes_when_run_again_keeping_finished_runs(workdir):
    """SIGKILL of the whole workflow (Snakemake and its jobs) mid-study; the same
    command again finishes it (the profile's rerun-incomplete), and no run that
    had finished is trained again."""
    import signal
    import time

    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    study = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--cores", "2", "--quiet", "host", "--configfile",
         "config/studies/smoke.yaml"], cwd=workdir, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs = workdir / "results/smoke/runs"
    deadline = time.monotonic() + 600
    while len(list(runs.glob("**/record.parquet"))) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(study.pid, signal.SIGKILL)
    study.wait()
    # A record can be whole while its job is still running (the kill may land
    # between the write and the job's exit): Snakemake reruns such a job. The
    # runs that had finished are those its log says finished.
    finished = {workdir / p: (workdir / p).stat().st_mtime_ns
                for p in finished_outputs(workdir) if p.endswith("record.parquet")}
    assert 2 <= len(finished) < 26, "the kill should land mid-study"

    again = snakemake(workdir, "--configfile", "config/studies/smoke.yaml")
    assert again.returncode == 0, again.stderr[-3000:]
    assert (workdir / "results/smoke/claims.md").exists()
    collected = pd.read_parquet(workdir / "results/smoke/runs.parquet")
    assert set(collected["status"]) == {"ok"}
    assert {p: p.stat().st_mtime_ns for p in finished} == finished  # none retrained


def test_the_default_console_shows_counts_not_job_descriptions(workdir):
    """The workstation profile (quiet: rules) prints the job counts and progress,
    not a description of every job (thousands of lines for a study)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-m", "snakemake", "-n"], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = (done.stdout + done.stderr).splitlines()
    assert any(line.startswith("Job stats") for line in lines)
    blocks = [line for line in lines if line.strip().startswith(("rule ", "localrule "))]
    assert not blocks, blocks[:3]
