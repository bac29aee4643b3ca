"""Every analysis command a user points at their own data, fed generated bad
tables and caches (Hypothesis): it either refuses with one line and its
documented exit status (errors.py: 2 bad input, 3 nothing to fit), writing
nothing, or writes a valid output; it never changes an input, never leaves
half an output or a staged directory, never ends in a traceback.

Each input is a valid base (a small ladder, a small cache of run records)
with up to three mutations drawn from what users' files really hold: empty
or non-numeric cells, booleans, infinities, non-positive numbers, a
dropped or renamed column, duplicated rows, too few rows, a constant
column, failed or diverged runs, accuracies outside [0, 1], a truncated or
empty file, bytes that are no table. The fast suite draws a few hundred
cases (`FAST`, derandomized, so CI sees the same ones), `-m slow` ten times
as many at random (docs/analysis.md, "What the analysis refuses", says how
many ran).
"""

from __future__ import annotations

import contextlib
import copy
import io
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from scalestudy import errors
from scalestudy.cli.parser import run_command
from scalestudy.records import SCHEMA, read_records
from scalestudy.study.config import StudyConfig

from tests.support import ROOT
from tests.support.studies import DECLARED_STUDY

CACHE = ROOT / "data" / "cache" / "deep_fixup.parquet"  # 9 runs: an analysis in ~1 s

# Examples per property: the fast suite's, and (-m slow) ten times as many.
RUNS = [pytest.param(60, True, id="fast"),
        pytest.param(600, False, id="slow", marks=pytest.mark.slow)]


def examples(n: int, derandomize: bool):
    return settings(max_examples=n, deadline=None, derandomize=derandomize, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --------------------------------------------------------------------------- inputs

def base_ladder() -> pd.DataFrame:
    """A clean ladder: 4 sizes x 3 token counts x 2 seeds on a Chinchilla-like surface."""
    rng = np.random.default_rng(0)
    rows = [(n, m * n, s) for n in np.geomspace(2e7, 3e8, 4) for m in (5, 10, 20)
            for s in range(2)]
    table = pd.DataFrame(rows, columns=["params", "tokens", "seed"])
    law = 1.69 + 406.4 / table["params"] ** 0.34 + 410.7 / table["tokens"] ** 0.28
    table["loss"] = law * np.exp(rng.normal(0, 0.01, len(table)))
    table["acc"] = 1 / (1 + np.exp(4 * (table["loss"] - 3.0)))
    return table


BAD_VALUES = [np.nan, 0.0, -1.0, np.inf, -np.inf, 1e308, "abc", "", True, "1e9", None]


@st.composite
def mutated(draw, base: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """`base` with up to three mutations of `columns` (and of its rows)."""
    table = base.copy()
    for kind in draw(st.lists(st.sampled_from(
            ["cell", "bool", "text", "drop", "rename", "duplicate", "few", "constant"]),
            max_size=3)):
        column = draw(st.sampled_from([c for c in columns if c in table] or [None]))
        if column is None or table.empty:
            continue
        if kind == "cell":
            rows = draw(st.lists(st.integers(0, len(table) - 1), min_size=1, max_size=3))
            table[column] = table[column].astype(object)
            for row in rows:
                table.iloc[row, table.columns.get_loc(column)] = draw(
                    st.sampled_from(BAD_VALUES))
        elif kind == "bool":
            numbers = pd.to_numeric(table[column], errors="coerce")
            table[column] = numbers > numbers.median()
        elif kind == "text":
            table[column] = [f"v{i}" for i in range(len(table))]
        elif kind == "drop":
            table = table.drop(columns=[column])
        elif kind == "rename":
            table = table.rename(columns={column: column[:-1]})
        elif kind == "duplicate":
            k = draw(st.integers(1, len(table)))
            table = pd.concat([table, table.iloc[:k]], ignore_index=True)
        elif kind == "few":
            table = table.iloc[:draw(st.integers(0, 3))]
        elif kind == "constant":
            table[column] = table[column].iloc[0]
    return table


def write(table: pd.DataFrame, path: Path, form: str) -> Path:
    """`table` as `form`: csv, parquet (mixed columns as text), or a broken file."""
    if form == "csv":
        table.to_csv(path, index=False)
    elif form == "parquet":
        fixed = table.copy()
        for c in fixed.columns:
            if fixed[c].dtype == object:
                fixed[c] = fixed[c].map(lambda v: None if v is None else str(v))
        fixed.to_parquet(path)
    elif form == "empty":
        path.write_bytes(b"")
    elif form == "truncated":
        table.to_parquet(path)
        path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    else:
        path.write_bytes(bytes(range(256)) * 4)
    return path


# A new output path most often, so that most cases reach the command's own checks.
OUTS = ["fresh"] * 5 + ["input", "foreign", "file"]


def out_path(work: Path, kind: str, table_path: Path, directory: bool = True) -> Path:
    """Where a command is told to write: a new path, the input itself, a
    directory holding another file, or an existing file."""
    if kind == "input":
        return table_path
    out = work / ("out" if directory else "out.file")
    if kind == "foreign":
        out.mkdir()
        (out / "mine.txt").write_text("a user's file")
    elif kind == "file":
        out.write_text("a user's file")
    return out


# --------------------------------------------------------------------------- the check

def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def run(argv: list, work: Path, out: Path, outputs) -> int:
    """Run the command; refused: one line, status 2 or 3, nothing in `work`
    changed; else status 0, every input unchanged and `outputs(out)` holds."""
    before = snapshot(work)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = run_command([str(a) for a in argv])
    command = argv[0]
    text = err.getvalue()
    event(f"{command}: exit {code}")
    assert "Traceback" not in text, text
    after = snapshot(work)
    staged = [p.name for p in work.rglob(".*")]
    assert not staged, f"staged files left behind: {staged}"
    if code != errors.OK:
        assert code in (errors.BAD_INPUT, errors.NO_RESULT), (code, text)
        lines = [line for line in text.splitlines() if line.startswith(f"scalestudy {command}")]
        assert len(lines) == 1, text
        word = "error:" if code == errors.BAD_INPUT else "nothing to report:"
        assert lines[0].startswith(f"scalestudy {command}: {word}"), text
        assert after == before, "a refused command changed files"
        return code
    changed = {k for k in before if after.get(k) != before[k]}
    owned = str(out.relative_to(work))
    assert all(k == owned or k.startswith(owned + "/") for k in changed), changed
    outputs(out)
    return code


def prediction_written(out: Path) -> None:
    predictions = pd.read_csv(out / "predictions.csv")
    assert predictions["loss"].notna().any() and (predictions["loss"].dropna() > 0).all()
    assert (out / "excluded.csv").is_file() and (out / "predict.json").is_file()


def frontier_written(out: Path) -> None:
    fits = pd.read_csv(out / "frontier_fits.csv")
    assert fits["status"].eq("ok").any()


# --------------------------------------------------------------------------- ladders

LADDER_COLUMNS = ["params", "tokens", "loss", "acc", "seed"]


@pytest.mark.parametrize("n, derandomize", RUNS)
def test_predict_on_generated_ladders(n, derandomize):
    @given(st.data())
    @examples(n, derandomize)
    def check(data):
        table = data.draw(mutated(base_ladder(), LADDER_COLUMNS))
        form = data.draw(st.sampled_from(["csv", "parquet", "empty", "garbage"]))
        metric = data.draw(st.sampled_from([[], ["--metric", "acc"]]))
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            path = write(table, work / f"ladder.{'csv' if form == 'csv' else 'parquet'}", form)
            out = out_path(work, data.draw(st.sampled_from(OUTS)), path)
            run(["predict", path, "--at", "1e9:2e10", "--out-dir", out, "--n-boot", "0",
                 "--n-polish", "8", "--no-figures", *metric], work, out, prediction_written)

    check()


@pytest.mark.parametrize("n, derandomize", RUNS)
def test_frontier_on_generated_ladders(n, derandomize):
    @given(st.data())
    @examples(n, derandomize)
    def check(data):
        table = data.draw(mutated(base_ladder().drop(columns=["acc"]),
                                  ["params", "tokens", "loss"]))
        form = data.draw(st.sampled_from(["csv", "parquet", "empty", "garbage"]))
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            path = write(table, work / f"runs.{'csv' if form == 'csv' else 'parquet'}", form)
            out = out_path(work, data.draw(st.sampled_from(OUTS)), path)
            run(["frontier", path, "--out-dir", out, "--n-boot", "0", "--n-polish", "8",
                 "--no-figures", "--predict", "1e21"], work, out, frontier_written)

    check()


# --------------------------------------------------------------------------- run records

RECORD_COLUMNS = ["test_acc", "val_acc", "upstream_loss", "val_loss", "n_params", "status",
                  "train_flops", "seed", "stage"]


@st.composite
def caches(draw, base: pd.DataFrame) -> pd.DataFrame:
    """A cache of run records with up to three of the ways a cache goes wrong."""
    runs = base.copy()
    for kind in draw(st.lists(st.sampled_from(
            ["nan", "range", "failed", "all_failed", "duplicate", "drop", "empty", "type",
             "category", "version"]), max_size=3)):
        if runs.empty:
            break
        row = draw(st.integers(0, len(runs) - 1))
        if kind in ("nan", "range"):
            column = draw(st.sampled_from(["test_acc", "upstream_loss"] if kind == "nan"
                                          else ["test_acc", "val_acc", "val_loss"]))
            if column in runs:
                runs.loc[runs.index[row], column] = (
                    np.nan if kind == "nan" else draw(st.sampled_from([1.7, -0.1, np.inf])))
        elif kind == "failed" and "status" in runs:
            runs.loc[runs.index[row], "status"] = draw(st.sampled_from(["failed", "diverged"]))
        elif kind == "all_failed" and "status" in runs:
            runs["status"] = "failed"
        elif kind == "duplicate":
            runs = pd.concat([runs, runs.iloc[[row]]], ignore_index=True)
        elif kind == "drop":
            runs = runs.drop(columns=[draw(st.sampled_from(RECORD_COLUMNS))], errors="ignore")
        elif kind == "empty":
            runs = runs.iloc[:0]
        elif kind == "type" and "n_params" in runs:
            runs["n_params"] = runs["n_params"].astype(str) + "x"
        elif kind == "category" and "stage" in runs:
            runs.loc[runs.index[row], "stage"] = "pretraining"
        elif kind == "version":
            runs["schema_version"] = 2
    return runs


def small_cache() -> pd.DataFrame:
    return read_records(CACHE)


def write_cache(runs: pd.DataFrame, path: Path, form: str) -> Path:
    if form == "parquet":
        runs.to_parquet(path)
    elif form == "truncated":
        runs.to_parquet(path)
        path.write_bytes(path.read_bytes()[:300])
    elif form == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(b"PAR1" + bytes(range(200)))
    return path


FORMS = st.sampled_from(["parquet"] * 6 + ["truncated", "empty", "garbage"])


def fits_written(out: Path) -> None:
    fits = pd.read_parquet(out)
    assert len(fits) and "metric" in fits


def analysis_written(out: Path) -> None:
    assert {"fits.parquet", "figures", "tables", "claims.md"} <= {p.name for p in out.iterdir()}
    assert (out / "claims.md").read_text().startswith("# Claims checked")


@pytest.mark.parametrize("n, derandomize", RUNS)
def test_fit_and_analyse_on_generated_caches(n, derandomize):
    base = small_cache()

    @given(st.data())
    @examples(n, derandomize)
    def check(data):
        runs = data.draw(caches(base))
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            path = write_cache(runs, work / "cache.parquet", data.draw(FORMS))
            command = data.draw(st.sampled_from(["fit", "analyse"]))
            if command == "fit":
                out = out_path(work, data.draw(st.sampled_from(OUTS)), path, directory=False)
                run(["fit", path, "--out", out, "--n-boot", "10"], work, out, fits_written)
            else:
                out = out_path(work, data.draw(st.sampled_from(OUTS)), path)
                run(["analyse", path, "--out-dir", out, "--n-boot", "10", "--workers", "1"],
                    work, out, analysis_written)

    check()


@pytest.mark.parametrize("n, derandomize", RUNS)
def test_claims_tables_and_figures_on_generated_caches(n, derandomize):
    """claims, tables and one figure of a mutated cache with its base's fits (or
    a broken fits file)."""
    base = small_cache()

    @given(st.data())
    @examples(n, derandomize)
    def check(data):
        runs = data.draw(caches(base))
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            path = write_cache(runs, work / "cache.parquet", data.draw(FORMS))
            fits = work / "fits.parquet"
            assert run_command(["fit", str(CACHE), "--out", str(fits), "--n-boot", "10"]) == 0
            if data.draw(st.booleans()):
                write_cache(runs, fits, data.draw(st.sampled_from(["truncated", "garbage"])))
            command = data.draw(st.sampled_from(["claims", "tables", "figure"]))
            if command == "claims":
                out = out_path(work, data.draw(st.sampled_from(OUTS)), path, directory=False)
                run(["claims", path, fits, "--out", out, "--n-boot", "10"], work, out,
                    lambda o: o.read_text().startswith("# Claims checked"))
            elif command == "tables":
                out = out_path(work, data.draw(st.sampled_from(OUTS)), path)
                run(["tables", path, fits, "--out-dir", out], work, out,
                    lambda o: (o / "alpha.csv").is_file())
            else:
                out = out_path(work, data.draw(st.sampled_from(
                    ["fresh"] * 5 + ["input", "file"])), path)
                run(["figure", path, fits, "--name", "loss_vs_depth", "--out-dir", out,
                     "--entry", work / "entry.json", "--tasks", "listops"], work, out,
                    lambda o: True)

    check()


@pytest.mark.parametrize("n, derandomize", RUNS)
def test_the_notebook_opens_a_cache_or_refuses_it(n, derandomize):
    """open_study raises ValueError (bad input) or NoResult, never anything else."""
    from scalestudy import open_study

    base = small_cache()

    @given(st.data())
    @examples(n, derandomize)
    def check(data):
        runs = data.draw(caches(base))
        with tempfile.TemporaryDirectory() as tmp:
            path = write_cache(runs, Path(tmp) / "cache.parquet", data.draw(FORMS))
            try:
                study = open_study(path)
            except (ValueError, errors.NoResult):
                return
            assert len(study.runs) and study.runs["status"].eq("ok").any()

    check()


@pytest.mark.parametrize("n, derandomize", RUNS)
def test_status_names_every_corrupt_record_and_counts_the_rest(n, derandomize):
    from scalestudy.records import write_record
    from scalestudy.study.grid import cells
    from scalestudy.study.status import CONFIG, report, study_status

    config = copy.deepcopy(DECLARED_STUDY)
    config["study"] = "s"
    config["grid"].update(archs=["transformer"], sizes=["xxs", "xs"], priors=["random"],
                          seeds=[0, 1])
    grid_cells = cells(StudyConfig.from_dict(config).grid)
    row = dict.fromkeys(SCHEMA.names[1:])

    @given(st.data())
    @examples(n, derandomize)
    def check(data):
        broken = data.draw(st.lists(st.sampled_from(range(len(grid_cells))), unique=True))
        with tempfile.TemporaryDirectory() as tmp:
            study_dir = Path(tmp) / "results" / "s"
            study_dir.mkdir(parents=True)
            (study_dir / CONFIG).write_text(yaml.safe_dump(config))
            for i, cell in enumerate(grid_cells):
                path = study_dir / cell.directory / "record.parquet"
                write_record({**row, "study": "s", "task": cell.task, "arch": cell.arch,
                              "size": cell.size, "prior": cell.prior, "seed": cell.seed,
                              "stage": "scratch", "status": "ok", "wall_seconds": 1.0}, path)
                if i in broken:
                    cut = data.draw(st.sampled_from([0, 4, 200]))
                    path.write_bytes(path.read_bytes()[:cut])
            status = study_status(study_dir)
            counts = status.counts()["train scratch"]
            assert counts["corrupt"] == len(broken)
            assert counts["done"] == len(grid_cells) - len(broken)
            assert report(status).count("record.parquet: not a") == len(broken)

    check()
