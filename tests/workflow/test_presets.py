"""Every study preset validates and builds its DAG (snakemake dry run in a
fresh directory, so results already on disk do not hide the grid); each
option's default is declared once; a study on the LRA release
stops, naming what to download, when the release is missing."""

from pathlib import Path

import jsonschema
import pytest
import yaml

from scalestudy.options import defaults
from scalestudy.study.schema import load_schema
from scalestudy.tasks import LRA_ARCHIVE, TASKS, MissingRelease, check_releases, task_config
from scalestudy.tasks.listops import split_files

from tests.support import ROOT
from tests.support.studies import (
    DECLARED_STUDY,
    OVERLAYS,
    dry_run,
    expected_jobs,
    job_counts,
    typed,
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
        cfg = {**DECLARED_STUDY["tasks"][task], **preset.get("tasks", {}).get(task, {})}
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
    """The task configs of a study's grid (what check_releases reads)."""
    stated = {"listops": {"source": source, "lra_dir": str(lra_dir)}}
    return {task: task_config(task, stated.get(task, {})) for task in tasks}


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
    check_releases(typed(DECLARED_STUDY).tasks)  # the default study generates its data


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


def test_defaults_live_in_one_place_the_option_declarations():
    """Each option of a declared section (study/config.py) and of a task
    (tasks/<task>.py) is declared once: the schema holds no default, its
    section is made from the dataclass (a key for each study option, none
    for a run's own fields), config/config.yaml states of a declared section
    only the options the default study chooses otherwise, and the grid's every
    key is required of the default study."""
    import dataclasses

    from scalestudy.study.config import SECTIONS

    keys = schema_keys(SCHEMA)
    with_default = [key for key, sub in keys.items() if "default" in sub]
    assert not with_default, f"the option declarations hold the defaults: {with_default}"
    stated = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    assert set(stated) <= {"study", "grid", "tasks", *SECTIONS}
    for name in set(stated) & set(SECTIONS):
        declared = defaults(SECTIONS[name])
        for key, value in stated[name].items():
            assert value != declared[key], f"{name}.{key} states its declared default"
    for name, kind in SECTIONS.items():
        options = [f.name for f in dataclasses.fields(kind) if not f.metadata.get("per_run")]
        assert list(SCHEMA["properties"][name]["properties"]) == options, name
    assert sorted(SCHEMA["properties"]["grid"]["required"]) == sorted(
        SCHEMA["properties"]["grid"]["properties"])
    assert not any("required" in sub for key, sub in keys.items() if key.startswith("tasks"))
    jsonschema.Draft202012Validator(SCHEMA).validate(DECLARED_STUDY)


def test_the_schema_documents_every_key():
    undocumented = [key for key, sub in schema_keys(SCHEMA).items()
                    if not sub.get("description", "").strip()]
    assert not undocumented


def test_the_completed_default_study_is_the_declared_defaults():
    """What validation fills in is the declarations' defaults, and a spec's
    train and trainer sections parse to the same dataclasses' values."""
    import dataclasses

    from scalestudy.study.config import SECTIONS, TrainConfig, TrainerConfig

    for name, kind in SECTIONS.items():
        assert DECLARED_STUDY[name] == defaults(kind), name
    per_run = {"budget", "forks", "branch_of"}  # a budgeted run's own (specs.budget_fields)
    assert {k: v for k, v in dataclasses.asdict(TrainConfig()).items()
            if k not in per_run} == DECLARED_STUDY["train"]
    assert {**dataclasses.asdict(TrainerConfig()), "loggers": ["csv"]} == DECLARED_STUDY["trainer"]


def test_a_dry_run_prints_each_planned_claim_below_half_power(tmp_path):
    """snakemake -n of the planned preset (tay_scale_worse) with two seeds instead
    of its four: one line naming its claim's planned power below 0.5, and the DAG
    all the same (not an error); at its own four seeds, no such line."""
    import shutil

    workdir = workflow_copy(tmp_path)
    (workdir / "data/cache").mkdir(parents=True)
    shutil.copy(ROOT / "data/cache/workstation.parquet", workdir / "data/cache")
    preset = yaml.safe_load((ROOT / "config/studies/tay_scale_worse.yaml").read_text())
    preset["grid"]["seeds"] = [0, 1]
    (workdir / "config/studies/two_seeds.yaml").write_text(yaml.safe_dump(preset))
    done = dry_run(workdir, "two_seeds.yaml")
    assert done.returncode == 0, done.stderr[-2000:]
    planned = [line for line in done.stdout.splitlines() if line.startswith("plan: ")]
    assert len(planned) == 1 and "performer_albert_scale_poorly: planned power" in planned[0]
    assert "Job stats:" in done.stdout
    own = dry_run(workdir, "tay_scale_worse.yaml")
    assert own.returncode == 0 and "plan: " not in own.stdout
