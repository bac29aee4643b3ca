"""Every study preset validates and builds its DAG (snakemake dry run in a
fresh directory, so results already on disk do not hide the grid); the schema
and the default study cannot disagree on a default; a study on the LRA release
stops, naming what to download, when the release is missing."""

from pathlib import Path

import jsonschema
import pytest
import yaml

from scalestudy.study.schema import load_schema
from scalestudy.tasks import LRA_ARCHIVE, TASKS, MissingRelease, check_releases, task_config
from scalestudy.tasks.listops import split_files

from tests.support import ROOT
from tests.support.studies import (
    DEFAULT_STUDY,
    OVERLAYS,
    dry_run,
    expected_jobs,
    job_counts,
    workflow_copy,
)

STUDIES = sorted((ROOT / "config/studies").glob("*.yaml"))
# The schema as validation reads it: completed from the registries.
SCHEMA = load_schema(str(ROOT / "config/schema.yaml"))


def preset_config(study: Path) -> dict:
    """What a preset states, over the preset it overlays (OVERLAYS)."""
    preset = yaml.safe_load(study.read_text())
    if study.name not in OVERLAYS:
        return preset
    base = yaml.safe_load((study.parent / OVERLAYS[study.name]).read_text())
    return {**base, **preset, "train": {**base.get("train", {}), **preset.get("train", {})}}


def lra_tasks(study: Path) -> dict[str, dict]:
    """The config of each task the preset reads from the LRA release."""
    preset = preset_config(study)
    found = {}
    for task in preset["grid"]["tasks"]:
        cfg = {**DEFAULT_STUDY["tasks"][task], **preset.get("tasks", {}).get(task, {})}
        if cfg["source"] == "lra":
            found[task] = cfg
    return found


def lra_dirs(study: Path) -> list[str]:
    """The lra_dir of each task the preset reads from the LRA release."""
    return [cfg["lra_dir"] for cfg in lra_tasks(study).values()]


def write_release(lra_dir: Path) -> None:
    """A stand-in for the ListOps release: the three split files, one example each."""
    lra_dir.mkdir(parents=True, exist_ok=True)
    for path in split_files(lra_dir).values():
        path.write_text("Source\tTarget\n( [MAX 2 9 ] )\t9\n")


def touch_release(workdir: Path, task: str, cfg: dict) -> None:
    """The paths the workflow checks for a task's release, present but empty."""
    config = task_config(task, cfg)
    for name in TASKS[task].module.release_files(config):
        path = workdir / config.lra_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()


@pytest.mark.parametrize("study", STUDIES, ids=lambda p: p.stem)
def test_study_preset_validates_and_builds_its_dag(study, tmp_path):
    workdir = workflow_copy(tmp_path)
    for task, cfg in lra_tasks(study).items():  # paper, lra: the release is not here
        touch_release(workdir, task, cfg)
    done = dry_run(workdir, study.name)
    assert done.returncode == 0, done.stderr[-2000:]
    counts = job_counts(done.stdout)
    expected = expected_jobs(preset_config(study))
    assert {job: counts.get(job, 0) for job in expected} == expected
    assert counts["total"] == sum(c for job, c in counts.items() if job != "total")


def test_a_study_on_the_lra_release_says_where_to_put_it_when_it_is_missing(tmp_path):
    study = ROOT / "config/studies/paper.yaml"
    assert lra_dirs(study) == ["data/lra_release/listops-1000"]
    done = dry_run(workflow_copy(tmp_path), study.name)
    assert done.returncode != 0
    message = " ".join((done.stdout + done.stderr).split())
    assert "task listops reads the LRA release (tasks.listops.source: lra)" in message
    assert "data/lra_release/listops-1000" in message
    assert "basic_train.tsv, basic_val.tsv, basic_test.tsv" in message
    assert LRA_ARCHIVE in message and "google-research/long-range-arena" in message
    assert "Job stats" not in message  # stopped before planning any job


# --------------------------------------------------------------------------- LRA release


def lra_study(lra_dir, tasks=("listops",), source="lra") -> dict:
    return {"grid": {"tasks": list(tasks)},
            "tasks": {"listops": {"source": source, "lra_dir": str(lra_dir)}}}


def test_check_releases_names_the_task_the_directory_and_the_download(tmp_path):
    with pytest.raises(MissingRelease) as missing:
        check_releases(lra_study("lra/listops-1000"), root=tmp_path)
    message = str(missing.value)
    assert message.startswith("task listops reads the LRA release")
    assert f"lra/listops-1000 ({tmp_path / 'lra/listops-1000'}) does not exist" in message
    assert "basic_train.tsv, basic_val.tsv, basic_test.tsv" in message
    assert LRA_ARCHIVE in message and "google-research/long-range-arena" in message
    assert "tasks.listops.lra_dir" in message and "tasks.listops.source: generate" in message


def test_check_releases_names_the_missing_files(tmp_path):
    write_release(tmp_path)
    (tmp_path / "basic_val.tsv").unlink()
    with pytest.raises(MissingRelease, match=r"lacks basic_val.tsv\."):
        check_releases(lra_study(tmp_path))


def test_check_releases_passes_a_present_release_and_generated_tasks(tmp_path):
    write_release(tmp_path / "lra/listops-1000")
    check_releases(lra_study("lra/listops-1000"), root=tmp_path)
    check_releases(lra_study(tmp_path / "lra/listops-1000"))  # absolute
    check_releases(lra_study(tmp_path / "nowhere", source="generate"))
    check_releases(DEFAULT_STUDY)  # the default study generates its data


# --------------------------------------------------------------------------- defaults


def schema_keys(schema: dict, prefix: str = "") -> dict[str, dict]:
    """Every key the schema describes, dotted ('train.lr'), with its subschema."""
    keys = {}
    for name, sub in schema.get("properties", {}).items():
        keys[prefix + name] = sub
        keys.update(schema_keys(sub, f"{prefix}{name}."))
    return keys


def stated_keys(config: dict, prefix: str = "") -> set[str]:
    keys = set()
    for name, value in config.items():
        keys.add(prefix + name)
        if isinstance(value, dict):
            keys |= stated_keys(value, f"{prefix}{name}.")
    return keys


def test_defaults_live_in_one_place_the_default_study():
    """The Snakefile loads config/config.yaml under every study, so a schema
    default could only ever disagree with it: the schema has none, the default
    study states every key, and the schema requires every key (so a key
    dropped from config.yaml is named when the workflow starts), except a
    task's options, whose defaults are its config dataclass's (which
    config/config.yaml repeats: tests/tasks/test_contract.py keeps them equal)."""
    keys = schema_keys(SCHEMA)
    with_default = [key for key, sub in keys.items() if "default" in sub]
    assert not with_default, (
        f"config/config.yaml holds the defaults, not the schema: {with_default}")
    listed = set(DEFAULT_STUDY["tasks"])  # a task config/config.yaml does not list is optional
    assert stated_keys(DEFAULT_STUDY) == {
        key for key in keys if not (key.startswith("tasks.") and key.split(".")[1] not in listed)}
    for key, sub in [("", SCHEMA), *keys.items()]:
        if "properties" in sub and not key.startswith("tasks"):
            assert sorted(sub.get("required", [])) == sorted(sub["properties"]), key or "top"
    assert not any("required" in sub for key, sub in keys.items() if key.startswith("tasks"))
    jsonschema.Draft202012Validator(SCHEMA).validate(DEFAULT_STUDY)


def test_the_schema_documents_every_key():
    undocumented = [key for key, sub in schema_keys(SCHEMA).items()
                    if not sub.get("description", "").strip()]
    assert not undocumented


def test_the_run_dataclasses_default_to_the_default_study():
    """TrainConfig and TrainerConfig (used when a spec omits a key) hold the
    default study's values: config/config.yaml stays the one source."""
    import dataclasses

    from scalestudy.study.specs import TrainConfig, TrainerConfig, hardware

    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    # budget, forks and branch_of are a budgeted run's own (study.specs.budget_fields).
    per_run = {"budget", "forks", "branch_of"}
    assert {k: v for k, v in dataclasses.asdict(TrainConfig()).items()
            if k not in per_run} == config["train"]
    trainer = dataclasses.asdict(TrainerConfig())
    # threads: 0 means torch's default outside a workflow, which pins 1 per job.
    # loggers: the jobs' trackers, not part of a spec (specs.hardware).
    assert {**trainer, "threads": config["trainer"]["threads"]} == hardware(config)
