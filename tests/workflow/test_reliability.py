"""Fault injection through the real workflow: quoting, crafted targets, and a
SIGKILL in every stage (data, pretraining, training, collect, fit) of one small
study, each followed by the same command, which must finish the study without
retraining a finished run and with the records of an uninterrupted study."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from scalestudy.faults import ENV

from tests.support import ROOT


def snakemake(workdir: Path, *args: str, kill_at: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop(ENV, None)
    if kill_at:
        env[ENV] = kill_at
    # Job descriptions on (the default profile's console leaves them out).
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--quiet", "host",
                           *args],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=900)


def copy_workflow(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "workflow", "config", "profiles"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, path / name)
    return path


@pytest.fixture
def workdir(tmp_path):
    return copy_workflow(tmp_path / "wf")


# --------------------------------------------------------------------------- safety

def test_every_shell_field_is_quoted():
    """Every {field} of every shell command in the rules is quoted (`:q`)."""
    unquoted = []
    for smk in sorted((ROOT / "workflow" / "rules").glob("*.smk")):
        text = smk.read_text()
        for block in re.findall(r"shell:\n((?:\s+\".*\"\n)+)", text):
            for field in re.findall(r"(?<!\{)\{([^{}]+)\}(?!\})", block):
                if not field.endswith(":q"):
                    unquoted.append(f"{smk.name}: {{{field}}}")
    assert not unquoted, unquoted
    assert "shell:" in (ROOT / "workflow" / "rules" / "train.smk").read_text()


HOSTILE = "x'; touch PWNED; echo '$(touch PWNED2) `touch PWNED3` \"quoted\" \\ & | > <"


def test_hostile_config_strings_reach_commands_as_one_argument(workdir):
    """Config strings full of shell syntax arrive in each command as data: the
    printed commands parse back (shlex) to the exact config, and nothing ran."""
    (workdir / "hostile.yaml").write_text(
        f"study: hostile\n"
        f"grid: {{archs: [transformer], sizes: [xxs], priors: [random, upstream], seeds: [0]}}\n"
        f"tasks: {{listops: {{lra_dir: {json.dumps(HOSTILE)}}}}}\n"
        f"upstream: {{path: {json.dumps(HOSTILE)}}}\n")
    done = snakemake(workdir, "-n", "-p", "--configfile", "hostile.yaml")
    assert done.returncode == 0, done.stderr[-3000:]
    output = done.stdout + done.stderr
    commands = [line.split("Shell command: ", 1)[1] for line in output.splitlines()
                if line.startswith("Shell command: ")]
    argvs = [shlex.split(command) for command in commands if command != "None"]  # rule all
    argvs = [argv for argv in argvs if argv[1] in ("data", "corpus", "pretrain", "train")]
    assert sorted(argv[1] for argv in argvs) == ["corpus", "data", "pretrain", "train", "train"]
    for argv in argvs:
        option = "--config" if argv[1] in ("data", "corpus") else "--spec"
        value = json.loads(argv[argv.index(option) + 1])  # one argument, whole JSON
        section = {"data": value, "corpus": value, "pretrain": value.get("corpus_config"),
                   "train": value.get("task_config")}[argv[1]]
        assert HOSTILE in (section.get("lra_dir"), section.get("path")), argv
    assert not list(workdir.glob("PWNED*"))


CRAFTED = [
    "results/smoke/runs/listops/../../../../escape/transformer/xxs/random/s0/record.parquet",
    "results/smoke/data/listops/../../../../escape/basic_train.tsv",
    "results/smoke/pretrain/upstream/transformer/../../../../../escape/record.parquet",
    "results/smoke/runs/listops/transformer/xxs/random/s0x/record.parquet",
]


@pytest.mark.parametrize("target", [CRAFTED[0], pytest.param(CRAFTED[1], marks=pytest.mark.slow),
                                    pytest.param(CRAFTED[2], marks=pytest.mark.slow),
                                    pytest.param(CRAFTED[3], marks=pytest.mark.slow)])
def test_a_crafted_target_matches_no_rule(workdir, target):
    """Wildcards are constrained to the grid's names, so no target path with `..`
    (or any name outside the grid) is produced by any rule."""
    done = snakemake(workdir, "-n", target, "--configfile", "config/studies/smoke.yaml")
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert "MissingRuleException" in output or "No rule to produce" in output, output[-2000:]
    assert not (workdir / "escape").exists() and not (workdir / "results").exists()


def test_a_size_too_big_for_the_machine_stops_the_workflow_before_any_job(workdir):
    (workdir / "huge.yaml").write_text("grid: {sizes: [xs, l]}\n"
                                       "train: {batch_size: 10000, protocol: depth}\n"
                                       "trainer: {accelerator: cpu}\n")
    done = snakemake(workdir, "-n", "--configfile", "huge.yaml")
    assert done.returncode != 0
    assert re.search(r"grid\.sizes: l needs about [\d.]+ GiB to train .* batch 10000 x "
                     r"seq_len 48\), more than this machine's [\d.]+ GiB; accepted sizes here: "
                     r"xs", done.stdout + done.stderr), done.stderr[-2000:]
    assert not (workdir / "results").exists()


def test_a_cluster_study_is_not_refused_by_the_memory_of_the_machine_that_submits_it(workdir):
    """The same study, dry-run for SLURM (--executor, or the profile): its jobs
    train on the nodes, so this machine's memory refuses none of its sizes
    (Snakemake has not chosen its executor while it parses the Snakefile)."""
    (workdir / "huge.yaml").write_text("grid: {sizes: [xs, l]}\n"
                                       "train: {batch_size: 10000, protocol: depth}\n"
                                       "trainer: {accelerator: cpu}\n")
    for how in (["--executor", "slurm", "--jobs", "2"], ["--profile", "profiles/slurm"]):
        done = snakemake(workdir, "-n", *how, "--configfile", "huge.yaml")
        assert done.returncode == 0, done.stderr[-2000:]
        assert "more than this machine's" not in done.stdout + done.stderr


ONE_CELL = """study: heal
grid: {tasks: [listops], archs: [transformer], sizes: [xxs], priors: [random], seeds: [0],
       per_task: {}, budgets: []}
tasks: {listops: {n_train: 256, n_val: 64, n_test: 64, max_depth: 4, min_length: 5,
                  max_length: 32}}
train: {max_steps: 12, batch_size: 16, warmup_steps: 2, val_every: 6}
fit: {n_boot: 100}
"""


def test_a_truncated_record_is_set_aside_and_its_run_written_again(workdir):
    """A record cut short after its study ran: a dry run names it and changes
    nothing; the run sets it aside (kept), trains the cell's record again
    (resuming from its last checkpoint) and collects and analyses anew, the
    same runs as before."""
    (workdir / "heal.yaml").write_text(ONE_CELL)
    args = ("--configfile", "heal.yaml")
    assert snakemake(workdir, *args).returncode == 0
    out = workdir / "results" / "heal"
    before = pd.read_parquet(out / "runs.parquet").drop(columns=TIMING)
    record = out / "runs/listops/transformer/xxs/random/s0/record.parquet"
    record.write_bytes(record.read_bytes()[:200])

    dry = snakemake(workdir, "-n", *args)
    assert f"{record.relative_to(workdir)}: not a readable Parquet file" in dry.stdout
    assert "snakemake without -n sets it aside" in dry.stdout
    assert record.exists() and (out / "runs.parquet").exists()

    done = snakemake(workdir, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "set aside as" in done.stdout
    assert record.with_name("record.parquet.corrupt").read_bytes() != record.read_bytes()
    after = pd.read_parquet(out / "runs.parquet").drop(columns=TIMING)
    pd.testing.assert_frame_equal(after, before)
    assert (out / "claims.md").stat().st_mtime_ns > record.stat().st_mtime_ns
    assert "Nothing to be done" in snakemake(workdir, "-n", *args).stdout


# --------------------------------------------------------------------------- kills

STUDY = """study: kills
grid: {archs: [transformer], sizes: [xxs, xs], priors: [random, spt], seeds: [0]}
"""
TIMING = ["wall_seconds", "tokens_per_second"]


def records_of(workdir: Path) -> dict[Path, int]:
    """Every ListOps run record of the study (its pretraining and training runs)
    and its modification time. The smoke preset's other tasks train one cell each
    on their own data, untouched by the ListOps kills (keep-going)."""
    out = workdir / "results" / "kills"
    return {p: p.stat().st_mtime_ns
            for p in [*out.glob("pretrain/**/record.parquet"),
                      *out.glob("runs/listops/**/record.parquet")]}


def final_runs(workdir: Path) -> pd.DataFrame:
    runs = pd.read_parquet(workdir / "results" / "kills" / "runs.parquet")
    keys = ["stage", "task", "arch", "size", "prior", "seed"]
    return runs.drop(columns=TIMING).sort_values(keys).reset_index(drop=True)


@pytest.mark.slow
def test_a_kill_in_every_stage_then_the_same_command_finishes_the_study(tmp_path):
    """SIGKILL (scalestudy.faults) in data preparation, then in a pretraining and a
    training run, then in collect, then in fit; after each the same command. The
    study finishes, no finished run is retrained, and its records equal those of
    an uninterrupted study (CPU, deterministic)."""
    faulty = copy_workflow(tmp_path / "faulty")
    (faulty / "kills.yaml").write_text(STUDY)
    args = ("--configfile", "config/studies/smoke.yaml", "kills.yaml")
    out = faulty / "results" / "kills"

    done = snakemake(faulty, *args, kill_at="data@listops")
    assert done.returncode != 0
    # No half-prepared task: its files appear together, when the staged data is swapped in.
    assert not list((out / "data").glob("listops/*.npz"))
    assert not (out / "data" / "listops" / "manifest.json").exists()
    assert not records_of(faulty)

    done = snakemake(faulty, *args, kill_at="fit@pretrain/spt/listops/transformer/xs,"
                                            "fit@runs/listops/transformer/xxs/random")
    assert done.returncode != 0
    finished = records_of(faulty)
    names = {str(p.relative_to(out).parent) for p in finished}
    assert "pretrain/spt/listops/transformer/xs" not in names
    assert "runs/listops/transformer/xxs/random/s0" not in names
    assert {"pretrain/spt/listops/transformer/xxs", "runs/listops/transformer/xs/random/s0",
            "runs/listops/transformer/xxs/spt/s0"} <= names

    done = snakemake(faulty, *args, kill_at="write@runs.parquet")
    assert done.returncode != 0
    assert not (out / "runs.parquet").exists()
    assert len(records_of(faulty)) == 6  # 2 pretraining + 4 task runs
    assert {p: records_of(faulty)[p] for p in finished} == finished  # none retrained
    finished = records_of(faulty)

    done = snakemake(faulty, *args, kill_at="write@fits.parquet")
    assert done.returncode != 0
    assert (out / "runs.parquet").exists() and not (out / "fits.parquet").exists()

    done = snakemake(faulty, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    assert records_of(faulty) == finished  # no finished run trained again
    assert (out / "claims.md").exists()
    again = snakemake(faulty, "-n", *args)
    assert "Nothing to be done" in again.stdout + again.stderr

    clean = copy_workflow(tmp_path / "clean")
    (clean / "kills.yaml").write_text(STUDY)
    done = snakemake(clean, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    faulted, reference = final_runs(faulty), final_runs(clean)
    # 2 pretraining + 4 ListOps runs, and the other 5 tasks' one cell each.
    assert (faulted["status"] == "ok").all() and len(faulted) == 6 + 5
    pd.testing.assert_frame_equal(faulted, reference)


def test_a_failed_job_shows_its_error_on_the_console(tmp_path):
    """A full disk while collecting: the default console (no job descriptions)
    still shows the job's own error line, not only "check log file(s)"."""
    from scalestudy.faults import FAIL_ENV

    wf = copy_workflow(tmp_path / "wf")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           FAIL_ENV: "write@runs.parquet"}
    env.pop(ENV, None)
    done = subprocess.run([sys.executable, "-m", "snakemake", "--configfile",
                           "config/studies/smoke.yaml"], cwd=wf, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode != 0
    console = done.stdout + done.stderr
    assert "collect: error: results/smoke/runs.parquet: no space left on device" in console, \
        console[-3000:]
    assert not (wf / "results/smoke/runs.parquet").exists()
