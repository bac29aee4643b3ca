"""Fault injection, fast: divergence, crashes, kills at the named points
(scalestudy.faults), corrupt inputs, provenance and reproducibility. The
whole-workflow kill in every stage is tests/workflow/test_reliability.py."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from scalestudy import cli, faults, records, tasks
from scalestudy.analysis.claims import write_claims
from scalestudy.analysis.figures import accuracy_vs_size, draw, error_vs_compute
from scalestudy.analysis.fits import fit_study, select
from scalestudy.records import read_records, write_record
from scalestudy.study.specs import RunSpec
from scalestudy.training.modules import Classifier
from scalestudy.training.run import git_rev
from scalestudy.training.task_run import run

from tests.support.cells import TASK
from tests.support.figure_checks import keep_figures
from tests.support.runs import make_runs

TIMING = {"wall_seconds", "tokens_per_second"}


def spec_dict(prior="random", **train) -> dict:
    return {"study": "t", "task": "listops", "arch": "transformer", "size": "xxs",
            "prior": prior, "seed": 7, "task_config": TASK,
            "train": {"max_steps": 6, "batch_size": 8, "warmup_steps": 2, "val_every": 3,
                      "protocol": "default", **train},
            "trainer": {"accelerator": "cpu", "threads": 1}}


@pytest.fixture(scope="module")
def reference(data_dir, tmp_path_factory):
    """An uninterrupted run: the record every rerun after a fault must equal."""
    return run(RunSpec.from_dict(spec_dict()), data_dir, tmp_path_factory.mktemp("ref"))


def same_record(a: dict, b: dict) -> bool:
    def clean(r):
        return {k: v for k, v in r.items() if k not in TIMING}

    a, b = clean(a), clean(b)
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (isinstance(a[k], float) and math.isnan(a[k]) and math.isnan(b[k]))
        for k in a)


def train_cli(spec: dict, data_dir: Path, run_dir: Path, *extra: str) -> int:
    return cli.run_command(["train", "--spec", json.dumps(spec), "--data-dir", str(data_dir),
                            "--run-dir", str(run_dir), *extra])


# --------------------------------------------------------------------------- divergence

def test_a_diverging_run_stops_at_once_is_recorded_and_its_job_succeeds(data_dir, tmp_path,
                                                                        capsys):
    code = train_cli(spec_dict(lr=1e30, grad_clip=0.0), data_dir, tmp_path / "run")
    assert code == 0  # the study goes on
    row = read_records(tmp_path / "run" / "record.parquet").iloc[0]
    assert row["status"] == "diverged" and row["error"] == ""
    assert 0 < row["diverged_step"] < 6
    # Stopped at once: no optimiser step after the non-finite loss, no evaluation.
    assert row["steps"] == row["diverged_step"]
    assert math.isnan(row["test_acc"]) and math.isnan(row["val_acc"])
    step = row["diverged_step"]
    assert f"diverged: non-finite loss at step {step}" in capsys.readouterr().out  # the log


def unfinished_study() -> pd.DataFrame:
    """Three sizes x two seeds; one random run diverged, one failed before training."""
    runs = make_runs(sizes=("xxs", "xs", "s"), priors=("random", "spt"), seeds=(0, 1),
                     alpha_d={("transformer", "random"): 0.07})
    diverged = (runs["prior"] == "random") & (runs["size"] == "s") & (runs["seed"] == 1)
    runs.loc[diverged, ["status", "diverged_step", "test_acc", "steps"]] = ("diverged", 40,
                                                                            np.nan, 40)
    failed = (runs["prior"] == "random") & (runs["size"] == "xs") & (runs["seed"] == 0)
    runs.loc[failed, ["status", "error"]] = ("failed", "ValueError: injected")
    runs.loc[failed, ["train_flops", "n_params", "n_params_nonembed", "test_acc"]] = np.nan
    return runs


def test_diverged_and_failed_runs_are_explicit_in_fits_figures_and_claims(monkeypatch,
                                                                          tmp_path):
    runs = unfinished_study()
    fits = fit_study(runs, n_boot=20, n_boot_saturating=0)
    row = select(fits, "alpha_D", prior="random").iloc[0]
    # Excluded from the fit, counted in it.
    assert (row["n_runs"], row["n_failed"], row["n_diverged"], row["n_points"]) == (6, 2, 1, 4)
    assert row["alpha"] == pytest.approx(0.07, rel=1e-6)
    # Markers in the figures, at the run's compute (or its size's, without one).
    figures = keep_figures(monkeypatch)
    error_vs_compute.draw(runs, fits, tmp_path)
    accuracy_vs_size.draw(runs, fits, tmp_path, "listops")
    for name in ("error_vs_compute", "accuracy_vs_size_listops"):
        lines = [ln for ax in figures[name].axes for ln in ax.lines]
        gids = sorted(ln.get_gid() for ln in lines if ln.get_gid() in
                      ("diverged:random", "failed:random"))
        assert gids == ["diverged:random", "failed:random"], name
        legend = [t.get_text() for leg in figures[name].legends for t in leg.get_texts()]
        assert {"diverged (top edge)", "failed (top edge)"} <= set(legend), name
    mark = [ln for ax in figures["error_vs_compute"].axes for ln in ax.lines
            if ln.get_gid() == "diverged:random"][0]
    s_run = runs[(runs["prior"] == "random") & (runs["size"] == "s") & (runs["seed"] == 1)]
    assert mark.get_xdata()[0] == pytest.approx(s_run["train_flops"].iloc[0])
    plt.close("all")
    # Counted and listed in claims.md.
    write_claims(runs, fits, tmp_path / "claims.md", n_boot=20)
    text = (tmp_path / "claims.md").read_text()
    assert "10 ok, 1 diverged, 1 failed; only `ok` runs enter the fits and claims." in text
    assert "| s | random | 1 | diverged | at step 40 |" in text
    assert "| xs | random | 0 | failed | ValueError: injected |" in text


def test_a_whole_study_with_unfinished_runs_analyses_end_to_end(monkeypatch, tmp_path):
    """Every figure, table and claim of a study with a diverged run and a run that
    failed before training (no parameters, no compute)."""
    from scalestudy.analysis.tables import write_tables

    runs = unfinished_study()
    fits = fit_study(runs, n_boot=20, n_boot_saturating=0)
    keep_figures(monkeypatch)
    index = draw.plot_all(runs, fits, tmp_path / "figures")
    drawn = {name for name, entry in index.entries.items() if entry.drawn}
    assert {"error_vs_compute", "accuracy_vs_size_listops", "loss_vs_depth"} <= drawn
    plt.close("all")
    assert write_tables(runs, fits, tmp_path / "tables")
    write_claims(runs, fits, tmp_path / "claims.md", n_boot=20)


# --------------------------------------------------------------------------- crashes

def test_a_run_that_raises_while_training_is_recorded_failed_with_its_error(
        data_dir, tmp_path, monkeypatch, capfd):
    original = Classifier.training_loss
    calls = []

    def crash(self, batch):
        calls.append(1)
        if len(calls) == 4:  # one call counts FLOPs; the third training step raises
            raise RuntimeError("injected fault\nsecond line")
        return original(self, batch)

    monkeypatch.setattr(Classifier, "training_loss", crash)
    assert train_cli(spec_dict(), data_dir, tmp_path / "run") == 0
    row = read_records(tmp_path / "run" / "record.parquet").iloc[0]
    assert row["status"] == "failed" and row["error"] == "RuntimeError: injected fault"
    assert row["steps"] == 2 and row["n_params"] > 0
    err = capfd.readouterr().err
    assert "Traceback" in err and "injected fault" in err  # the job's log keeps it


def test_a_run_that_raises_before_training_is_recorded_failed_too(data_dir, tmp_path):
    """A corrupt pretraining checkpoint: detected, named in the record, and the
    study goes on."""
    pretrained = tmp_path / "spt"
    pretrained.mkdir()
    row = {name: None for name in records.SCHEMA.names[1:]}
    row.update(study="t", task="listops", arch="transformer", size="xxs", prior="spt", seed=0,
               stage="spt", status="ok", train_flops=1.0, upstream_loss=math.nan)
    write_record(row, pretrained / "record.parquet")
    (pretrained / "best.ckpt").write_bytes(b"PK\x03\x04 truncated")
    assert train_cli(spec_dict("spt"), data_dir, tmp_path / "run",
                     "--pretrained", str(pretrained)) == 0
    rec = read_records(tmp_path / "run" / "record.parquet").iloc[0]
    assert rec["status"] == "failed" and rec["stage"] == "finetune" and rec["prior"] == "spt"
    assert rec["error"].startswith(f"ValueError: pretraining checkpoint {pretrained}/best.ckpt "
                                   "cannot be read")
    assert pd.isna(rec["steps"]) and pd.isna(rec["n_params"])


def test_a_failed_pretraining_run_fails_the_runs_that_need_it(data_dir, tmp_path):
    pretrained = tmp_path / "spt"
    identity = dict(study="t", task="listops", arch="transformer", size="xxs", prior="spt",
                    seed=0, stage="spt")
    write_record(records.failed_record(identity, MemoryError("out of memory")),
                 pretrained / "record.parquet")
    assert train_cli(spec_dict("scratch_matched"), data_dir, tmp_path / "run",
                     "--pretrained", str(pretrained)) == 0
    rec = read_records(tmp_path / "run" / "record.parquet").iloc[0]
    assert rec["status"] == "failed"
    assert rec["error"] == (f"ValueError: {pretrained}: its spt pretraining run failed, so "
                            "there is nothing to start from")


# --------------------------------------------------------------------------- kills

class Killed(BaseException):
    """Stands in for SIGKILL in-process: nothing catches it, nothing after it runs."""


@pytest.fixture
def kill_at(monkeypatch):
    def arm(where: str):
        monkeypatch.setenv(faults.ENV, where)

        def kill(pid, signum):
            assert pid == os.getpid() and signum == signal.SIGKILL
            raise Killed

        monkeypatch.setattr(faults.os, "kill", kill)

    return arm


@pytest.mark.parametrize("point", ["fit@run", "write@record.parquet"])
def test_a_run_killed_mid_training_or_mid_write_leaves_no_record_and_reruns_the_same(
        point, data_dir, tmp_path, kill_at, monkeypatch, reference):
    kill_at(point)
    with pytest.raises(Killed):
        run(RunSpec.from_dict(spec_dict()), data_dir, tmp_path / "run")
    assert not (tmp_path / "run" / "record.parquet").exists()  # nothing half-kept
    leftovers = [p.name for p in (tmp_path / "run").iterdir() if p.name.endswith(".tmp")]
    assert all(name.startswith(".record.parquet.") for name in leftovers)
    monkeypatch.delenv(faults.ENV)
    again = run(RunSpec.from_dict(spec_dict()), data_dir, tmp_path / "run")
    assert same_record(again, reference)


def test_data_preparation_killed_writes_no_task_cache(tmp_path, kill_at, monkeypatch, data_dir):
    kill_at("data@listops")
    with pytest.raises(Killed):
        tasks.prepare("listops", TASK, tmp_path / "listops")
    assert not (tmp_path / "listops").exists()
    monkeypatch.delenv(faults.ENV)
    tasks.prepare("listops", TASK, tmp_path / "listops")
    again, reference = tasks.load("listops", TASK, tmp_path / "listops"), tasks.load(
        "listops", TASK, data_dir)
    for split in ("train", "val", "test"):
        for a, b in zip(again.splits[split], reference.splits[split], strict=True):
            assert torch.equal(a, b)


def test_a_real_sigkill_before_the_rename_leaves_the_old_file_whole(tmp_path):
    """The environment variable, end to end: a process writing runs.parquet over
    an earlier one is SIGKILLed before its rename; the earlier file is intact."""
    path = tmp_path / "runs.parquet"
    records.write_frame(unfinished_study(), path)
    before = path.read_bytes()
    code = ("from scalestudy import records; "
            f"records.write_frame(records.read_records({str(path)!r}).head(3), {str(path)!r})")
    env = {**os.environ, faults.ENV: "write@runs.parquet"}
    done = subprocess.run([sys.executable, "-c", code], env=env, timeout=120)
    assert done.returncode == -signal.SIGKILL
    assert path.read_bytes() == before
    assert len(read_records(path)) == len(unfinished_study())


# --------------------------------------------------------------------------- corrupt inputs

def half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_a_truncated_record_is_named_by_collect(tmp_path, capsys):
    paths = []
    for seed in (0, 1):
        paths.append(tmp_path / f"s{seed}" / "record.parquet")
        records.write_frame(unfinished_study().head(1).assign(seed=seed), paths[-1])
    half(paths[1])
    assert cli.run_command(["collect", *map(str, paths), "--out", str(tmp_path / "r.pq")]) == 2
    assert f"{paths[1]}: not a readable Parquet file" in capsys.readouterr().err
    assert not (tmp_path / "r.pq").exists()


def test_a_truncated_or_corrupt_cached_study_is_named(tmp_path, capsys):
    cache = tmp_path / "cache.parquet"
    records.write_frame(unfinished_study(), cache)
    half(cache)
    out = tmp_path / "out"
    assert cli.run_command(["analyse", str(cache), "--out-dir", str(out)]) == 2
    assert f"{cache}: not a readable Parquet file" in capsys.readouterr().err
    assert not out.exists()
    pd.DataFrame({"x": [1]}).to_parquet(cache)
    assert cli.run_command(["analyse", str(cache), "--out-dir", str(out)]) == 2
    assert f"{cache}: not a scalestudy run record: missing columns" in capsys.readouterr().err


def cut_inside_a_row(path: Path) -> None:
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:10]) + lines[10].split("\t")[0])


@pytest.mark.parametrize("damage, message", [
    (cut_inside_a_row, r"basic_train\.tsv:11: expected 2 tab-separated fields, got 1"),
    (lambda p: p.write_bytes(b"Source\tTarget\n\x00\xff garbage"),
     r"basic_train\.tsv: not UTF-8 text"),
])
def test_a_truncated_or_corrupt_release_file_is_named(damage, message, tmp_path):
    from scalestudy.tasks import listops

    release = tmp_path / "release"
    release.mkdir()
    for split, examples in listops.generate(listops.ListOpsConfig(**TASK)).items():
        rows = "".join(f"{source}\t{label}\n" for source, label in examples)
        (release / f"basic_{split}.tsv").write_text("Source\tTarget\n" + rows)
    damage(release / "basic_train.tsv")
    with pytest.raises(ValueError, match=message):
        tasks.prepare("listops", {**TASK, "source": "lra", "lra_dir": str(release)},
                      tmp_path / "listops")
    assert not (tmp_path / "listops").exists()


def swap_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, name, message", [
    (half, "train.npz", r"train\.npz: not a readable task cache file"),
    (lambda p: p.write_bytes(b"\x00\xff garbage"), "val.npz",
     r"val\.npz: not a readable task cache file"),
    (half, "manifest.json", r"manifest\.json: not a readable task manifest"),
])
def test_a_truncated_or_corrupt_task_cache_is_named(damage, name, message, data_dir, tmp_path):
    copy = tmp_path / "listops"
    copy.mkdir()
    for p in data_dir.iterdir():
        (copy / p.name).write_bytes(p.read_bytes())
    damage(copy / name)
    with pytest.raises(ValueError, match=message):
        tasks.load("listops", TASK, copy)
    assert train_cli(spec_dict(), copy, tmp_path / "run") == 0
    row = read_records(tmp_path / "run" / "record.parquet").iloc[0]
    assert row["status"] == "failed" and name in row["error"]


def test_a_task_cache_whose_arrays_changed_fails_its_checksum(data_dir, tmp_path):
    """A bit flipped inside the stored arrays (a readable file, wrong data)."""
    import numpy as np

    copy = tmp_path / "listops"
    copy.mkdir()
    for p in data_dir.iterdir():
        (copy / p.name).write_bytes(p.read_bytes())
    with np.load(copy / "test.npz") as arrays:
        changed = {key: arrays[key].copy() for key in arrays.files}
    changed["labels"][0] = (changed["labels"][0] + 1) % 10
    np.savez(copy / "test.npz", **changed)
    with pytest.raises(ValueError, match="do not match the manifest's checksum"):
        tasks.load("listops", TASK, copy)


def test_a_truncated_checkpoint_is_named(tmp_path):
    from scalestudy.priors.transfer import load_checkpoint

    path = tmp_path / "best.ckpt"
    torch.save({"state_dict": {"w": torch.zeros(100)}}, path)
    half(path)
    with pytest.raises(ValueError, match=f"pretraining checkpoint {path} cannot be read"):
        load_checkpoint(path)


# --------------------------------------------------------------------------- provenance

def test_a_record_says_which_code_and_data_made_it(data_dir, reference):
    import scalestudy

    assert reference["package_version"] == scalestudy.__version__
    assert reference["torch_version"] == torch.__version__
    assert reference["git_rev"] is None or len(reference["git_rev"]) >= 7
    assert reference["config_hash"] == RunSpec.from_dict(spec_dict()).config_hash()
    assert reference["data_checksum"] == records.data_checksum(data_dir)
    assert len(reference["data_checksum"]) == 64


def test_the_data_checksum_is_the_task_caches_own(data_dir, tmp_path):
    """A task cache's checksum is its manifest's (the arrays'), so preparing the
    same data again gives the same checksum even though the .npz bytes differ."""
    again = tmp_path / "listops"
    tasks.prepare("listops", TASK, again)
    manifest = json.loads((data_dir / "manifest.json").read_text())
    assert records.data_checksum(data_dir) == manifest["checksum"] == records.data_checksum(again)
    other = tmp_path / "other"
    tasks.prepare("listops", {**TASK, "n_train": 65}, other)
    assert records.data_checksum(other) != records.data_checksum(data_dir)


def test_the_data_checksum_of_other_data_changes_with_any_file(tmp_path):
    """Data without a manifest (files as they are): every file counts, hidden
    and temporary ones aside."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "train.txt").write_text("some text")
    (corpus / "val.txt").write_text("more text")
    before = records.data_checksum(corpus)
    (corpus / ".train.txt.tmp").write_text("a temporary file is not data")
    assert records.data_checksum(corpus) == before
    (corpus / "val.txt").write_text("more text!")
    assert records.data_checksum(corpus) != before
    assert len(before) == 64


def test_without_git_the_revision_is_none(monkeypatch):
    def no_git(*args, **kwargs):
        raise FileNotFoundError("git")

    monkeypatch.setattr(subprocess, "run", no_git)
    assert git_rev() is None
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, 128, "", "fatal: not a git repository"))
    assert git_rev() is None


def test_records_written_before_the_data_checksum_still_read(tmp_path):
    frame = unfinished_study().drop(columns=["data_checksum"])
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp_path / "old.parquet")
    assert read_records(tmp_path / "old.parquet")["data_checksum"].isna().all()


def test_same_config_and_seed_give_identical_records_on_cpu(data_dir, tmp_path, reference):
    assert same_record(run(RunSpec.from_dict(spec_dict()), data_dir, tmp_path / "b"), reference)
