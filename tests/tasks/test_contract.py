"""The LRA tasks behind one data contract: every release format read back from
a tiny byte-exact file, the offline stand-ins, the manifest, and bad data."""

import hashlib
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from scalestudy import tasks
from scalestudy.options import defaults
from scalestudy.study.config import load_study
from scalestudy.tasks import contract, image, pathfinder, retrieval, text

from tests.support import ROOT


def decode(row) -> bytes:
    """Byte/pixel token ids back to bytes, padding dropped."""
    return bytes(int(i) - contract.N_SPECIAL for i in row if int(i) != contract.PAD_ID)


def test_every_task_defaults_to_an_offline_source():
    assert {"listops", "text", "retrieval", "image", "pathfinder", "pathx"} <= set(tasks.TASKS)
    for entry in tasks.TASKS.values():
        assert entry.config().source in entry.module.SOURCES
        assert entry.config().source != "lra"  # the default needs no download
        assert hasattr(entry.module, "release_source") and hasattr(entry.module, "build")


def test_the_default_study_states_only_task_options_it_chooses_otherwise():
    """A task's options are declared once, in its config dataclass: what
    config/config.yaml states under tasks (if anything) differs from the
    declared default."""
    stated = yaml.safe_load((ROOT / "config/config.yaml").read_text())["tasks"]
    assert set(stated) <= set(tasks.TASKS)
    for task, options in stated.items():
        declared = defaults(tasks.TASKS[task].config)
        assert set(options) <= set(declared), task
        for key, value in options.items():
            assert value != declared[key], f"tasks.{task}.{key} states its declared default"
    # and every task's options reach the default study, at their defaults or as stated
    default = load_study()
    for task, entry in tasks.TASKS.items():
        assert default["tasks"][task] == {**defaults(entry.config), **stated.get(task, {})}


# --------------------------------------------------------------------------- Retrieval (AAN)


AAN_ROWS = {
    "train": "1\taan/1\taan/2\tDeep parsing.\tParsing, deeply.\n"
             "0\taan/3\taan/4\tA study of tags.\tUnrelated words here\n"
             "1.0\taan/5\taan/6\tcaf\u00e9 text\tsecond \"quoted\" text\n",
    "val": "0\taan/7\taan/8\tone\ttwo\n",
    "test": "1\taan/9\taan/10\tthree\tfour\n0\taan/11\taan/12\tfive\tsix\n",
}


def write_aan(lra_dir: Path) -> None:
    lra_dir.mkdir(parents=True, exist_ok=True)
    for split, rows in AAN_ROWS.items():
        (lra_dir / retrieval.FILES[split]).write_bytes(rows.encode())


def test_retrieval_reads_the_aan_pair_files(tmp_path):
    write_aan(tmp_path / "aan")
    cfg = {"source": "lra", "lra_dir": str(tmp_path / "aan"), "seq_len": 12}
    manifest = tasks.prepare("retrieval", cfg, tmp_path / "out")
    assert manifest["pair"] and manifest["standin"] is None and manifest["n_classes"] == 2
    assert manifest["splits"]["train"] == {"n": 3, "label_counts": {"0": 1, "1": 2}}
    assert manifest["splits"]["test"]["label_counts"] == {"0": 1, "1": 1}
    data = tasks.load("retrieval", cfg, tmp_path / "out")
    first, second, labels = data.splits["train"]
    assert labels.tolist() == [1, 0, 1]
    assert decode(first[0]) == b"Deep parsing" and decode(second[0]) == b"Parsing, dee"  # cut
    assert decode(first[2]) == "caf\u00e9 text".encode()  # UTF-8 bytes
    assert decode(second[2]) == b'second "quot'


def test_retrieval_names_the_malformed_row(tmp_path):
    write_aan(tmp_path)
    (tmp_path / retrieval.FILES["val"]).write_text("0\taan/7\taan/8\tone\n")
    with pytest.raises(ValueError, match=r"new_aan_pairs.eval.tsv:1: expected 5 tab-separated"):
        tasks.prepare("retrieval", {"source": "lra", "lra_dir": str(tmp_path)}, tmp_path / "o")
    (tmp_path / retrieval.FILES["val"]).write_text("0\tx\ty\ta\tb\n2\tx\ty\ta\tb\n")
    with pytest.raises(ValueError, match=r"new_aan_pairs.eval.tsv:2: label '2' is not 0 or 1"):
        tasks.prepare("retrieval", {"source": "lra", "lra_dir": str(tmp_path)}, tmp_path / "o")
    assert not (tmp_path / "o").exists()


# --------------------------------------------------------------------------- Text (IMDb)


def write_imdb(lra_dir: Path, n_train: int = 10) -> dict[str, list[bytes]]:
    reviews = {}
    for split, n in (("train", n_train), ("test", 3)):
        for label in ("pos", "neg"):
            folder = lra_dir / "aclImdb" / split / label
            folder.mkdir(parents=True)
            for i in range(n):
                review = f"{label} review {i} of {split}<br /><br />fin".encode()
                (folder / f"{i}_{7 if label == 'pos' else 2}.txt").write_bytes(review)
                reviews.setdefault(split, []).append(review)
    return reviews


def test_text_reads_the_aclimdb_layout(tmp_path):
    reviews = write_imdb(tmp_path / "imdb")
    cfg = {"source": "lra", "lra_dir": str(tmp_path / "imdb"), "seq_len": 4000}
    manifest = tasks.prepare("text", cfg, tmp_path / "out")
    assert {s: m["n"] for s, m in manifest["splits"].items()} == {"train": 18, "val": 2,
                                                                  "test": 6}
    assert manifest["splits"]["test"]["label_counts"] == {"0": 3, "1": 3}
    assert manifest["n_classes"] == 2 and manifest["vocab_size"] == 259
    assert manifest["vocab"] == "bytes"
    data = tasks.load("text", cfg, tmp_path / "out")
    seen = []
    for split in ("train", "val"):
        tokens, labels = data.splits[split]
        for row, label in zip(tokens, labels.tolist(), strict=True):
            review = decode(row)
            assert review.startswith(b"pos" if label else b"neg")
            seen.append(review)
    assert sorted(seen) == sorted(reviews["train"])  # every review once, train or val
    tokens, labels = data.splits["test"]
    assert labels.tolist() == [0, 0, 0, 1, 1, 1]  # neg, then pos, in path order
    assert decode(tokens[0]) == b"neg review 0 of test<br /><br />fin"


def test_text_missing_folder_is_named(tmp_path):
    write_imdb(tmp_path)
    for path in (tmp_path / "aclImdb/test/pos").iterdir():
        path.unlink()
    with pytest.raises(FileNotFoundError, match=r"no review files \(\*.txt\) in .*test/pos"):
        tasks.prepare("text", {"source": "lra", "lra_dir": str(tmp_path)}, tmp_path / "o")


# --------------------------------------------------------------------------- Image (CIFAR-10)


def write_cifar(lra_dir: Path) -> dict[str, tuple[np.ndarray, list[int]]]:
    folder = lra_dir / image.BATCH_DIR
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    batches = {}
    for k, name in enumerate([*image.TRAIN_BATCHES, image.TEST_BATCH]):
        data = rng.integers(0, 256, size=(2, 3072), dtype=np.uint8)
        labels = [(2 * k) % 10, (2 * k + 1) % 10]
        batch = {b"batch_label": name.encode(), b"labels": labels, b"data": data,
                 b"filenames": [b"a.png", b"b.png"]}
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))
        batches[name] = data, labels
    return batches


def test_image_reads_the_cifar_python_batches_in_lra_grayscale(tmp_path):
    batches = write_cifar(tmp_path / "cifar")
    first = batches["data_batch_1"][0]
    first[0, [0, 1024, 2048]] = (255, 0, 0)  # pixel 0: pure red
    first[0, [1, 1025, 2049]] = (10, 20, 30)
    (tmp_path / "cifar" / image.BATCH_DIR / "data_batch_1").write_bytes(pickle.dumps(
        {b"labels": batches["data_batch_1"][1], b"data": first}, protocol=2))
    cfg = {"source": "lra", "lra_dir": str(tmp_path / "cifar"), "image_size": 32}
    manifest = tasks.prepare("image", cfg, tmp_path / "out")
    assert {s: m["n"] for s, m in manifest["splits"].items()} == {"train": 9, "val": 1,
                                                                  "test": 2}
    assert manifest["seq_len"] == 1024 and manifest["n_classes"] == 10
    assert manifest["vocab"] == "pixels"  # an upstream byte table never transfers to it
    data = tasks.load("image", cfg, tmp_path / "out")
    tokens, labels = data.splits["train"]
    assert labels.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8]
    assert data.splits["val"][1].tolist() == [9]  # the last 10% of train
    assert data.splits["test"][1].tolist() == [0, 1]
    # 0.2989 * 255 = 76.2; 0.2989*10 + 0.587*20 + 0.114*30 = 18.15
    assert int(tokens[0, 0]) - 3 == 76 and int(tokens[0, 1]) - 3 == 18
    r, g, b = batches["test_batch"][0][1].reshape(3, 1024).astype(float)
    expected = np.floor(0.2989 * r + 0.5870 * g + 0.1140 * b + 0.5)
    assert (data.splits["test"][0][1].numpy().astype(int) - 3 == expected).all()


def test_image_refuses_a_pickle_that_would_run_code_and_a_bad_batch(tmp_path):
    write_cifar(tmp_path)
    folder = tmp_path / image.BATCH_DIR

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    (folder / "data_batch_3").write_bytes(pickle.dumps({b"data": Evil()}, protocol=2))
    with pytest.raises(ValueError, match=r"data_batch_3: not a CIFAR-10 python batch: "
                                         r"refusing to load .*print"):
        tasks.prepare("image", {"source": "lra", "lra_dir": str(tmp_path), "image_size": 32},
                      tmp_path / "o")
    (folder / "data_batch_3").write_bytes(pickle.dumps(
        {b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}, protocol=2))
    with pytest.raises(ValueError, match=r"data_batch_3: data must be uint8 \[N, 3072\]"):
        tasks.prepare("image", {"source": "lra", "lra_dir": str(tmp_path), "image_size": 32},
                      tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_image_standin_is_scikit_learns_digits():
    cfg = image.ImageConfig(image_size=16)
    splits = image.build(cfg)
    assert [len(splits[s].labels) for s in ("train", "val", "test")] == [1439, 179, 179]
    assert splits["train"].tokens.shape == (1439, 256)
    pixels = splits["train"].tokens.astype(int) - 3
    assert pixels.min() == 0 and pixels.max() == 255
    first = pixels[0].reshape(16, 16)
    assert (first[::2, ::2] == first[1::2, 1::2]).all()  # enlarged by pixel repetition
    assert sorted(set(splits["test"].labels.tolist())) == list(range(10))


# --------------------------------------------------------------------------- Pathfinder


def write_pathfinder(lra_dir: Path, size: int, n_files: int = 3, per_file: int = 4):
    """metadata/0.npy, 1.npy, ... (text files) naming PNGs under imgs/<k>/."""
    root = lra_dir / "curv_contour_length_14"
    (root / "metadata").mkdir(parents=True)
    expected = []  # (pixels, label), in the order LRA reads them
    for k in range(n_files):
        (root / f"imgs/{k}").mkdir(parents=True)
        lines = []
        for i in range(per_file):
            pixels = np.full((size, size), 10 * k + i, dtype=np.uint8)
            pixels[0, 0] = 255
            Image.fromarray(pixels, mode="L").save(root / f"imgs/{k}/sample_{i}.png")
            label = (k + i) % 2
            lines.append(f"imgs/{k} sample_{i}.png {i} {label} 14 1.5 2\n")
            expected.append((pixels, label))
        (root / f"metadata/{k}.npy").write_text("".join(lines))
    return expected


@pytest.mark.parametrize("task, size", [("pathfinder", 32), ("pathx", 128)])
def test_pathfinder_reads_the_release_metadata_and_pngs(tmp_path, task, size):
    expected = write_pathfinder(tmp_path / "pf", size, n_files=11, per_file=1)
    cfg = {"source": "lra", "lra_dir": str(tmp_path / "pf"), "image_size": size}
    manifest = tasks.prepare(task, cfg, tmp_path / "out")
    assert {s: m["n"] for s, m in manifest["splits"].items()} == {"train": 8, "val": 1,
                                                                  "test": 2}
    assert manifest["seq_len"] == size * size and manifest["mask_ratio"] == 0.5
    data = tasks.load(task, cfg, tmp_path / "out")
    # metadata files in numeric order: 0, 1, 2, ..., 10 (not 0, 1, 10, 2)
    rows = [row for split in ("train", "val", "test") for row in data.splits[split][0]]
    labels = [y for split in ("train", "val", "test") for y in data.splits[split][1].tolist()]
    assert labels == [label for _, label in expected]
    for row, (pixels, _) in zip(rows, expected, strict=True):
        assert decode(row.numpy()) == pixels.tobytes()


def test_pathfinder_names_the_bad_line_and_image(tmp_path):
    write_pathfinder(tmp_path, 32)
    meta = tmp_path / "curv_contour_length_14/metadata/1.npy"
    lines = meta.read_text().splitlines()
    cfg = {"source": "lra", "lra_dir": str(tmp_path)}
    meta.write_text("\n".join([lines[0], "imgs/1 sample_1.png 1"]) + "\n")
    with pytest.raises(ValueError, match=r"metadata/1.npy:2: expected"):
        tasks.prepare("pathfinder", cfg, tmp_path / "o")
    meta.write_text("\n".join([lines[0], "imgs/1 missing.png 1 0"]) + "\n")
    with pytest.raises(FileNotFoundError, match=r"metadata/1.npy:2: image .*missing.png"):
        tasks.prepare("pathfinder", cfg, tmp_path / "o")
    (tmp_path / "curv_contour_length_14/imgs/1/sample_1.png").write_bytes(b"not a png")
    meta.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"metadata/1.npy:2: .*sample_1.png is not a readable"):
        tasks.prepare("pathfinder", cfg, tmp_path / "o")
    with pytest.raises(ValueError, match=r"is 32x32, expected 128x128"):
        tasks.prepare("pathx", cfg, tmp_path / "o")
    assert not (tmp_path / "o").exists()


def markers_joined(img: np.ndarray) -> bool:
    """Independently of the generator: are the two markers (blocks of 255)
    linked through lit pixels at most 2 apart (Chebyshev)?"""
    from scipy import ndimage
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree

    markers, n_markers = ndimage.label(img == pathfinder.MARKER, structure=np.ones((3, 3)))
    assert n_markers == 2
    points = np.argwhere(img > 0)
    pairs = cKDTree(points).query_pairs(r=2, p=np.inf, output_type="ndarray")
    graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])),
                       shape=(len(points),) * 2)
    _, component = connected_components(graph, directed=False)
    marker_of = markers[points[:, 0], points[:, 1]]
    return component[marker_of == 1][0] == component[marker_of == 2][0]


@pytest.mark.parametrize("config", [pathfinder.PathfinderConfig(),
                                    pathfinder.PathfinderConfig(image_size=16, contour_length=3,
                                                                distractors=1),
                                    pathfinder.PathXConfig()],
                         ids=["pathfinder", "smoke", "pathx"])
def test_pathfinder_generator_labels_are_what_the_image_shows(config):
    n = 40 if config.image_size == 128 else 200
    images, labels = pathfinder.generate(config, n, "check")
    assert images.shape == (n, config.image_size, config.image_size)
    assert labels.sum() == n // 2  # balanced
    for img, label in zip(images, labels, strict=True):
        assert markers_joined(img) == bool(label)
        # Both classes draw the same ink: as many contours, two markers.
        assert set(np.unique(img)) == {0, pathfinder.CONTOUR, pathfinder.MARKER}
    lit = (images > 0).reshape(n, -1).sum(1)
    assert abs(lit[labels == 1].mean() - lit[labels == 0].mean()) < 0.1 * lit.mean()


def test_pathfinder_generator_is_deterministic_and_says_when_it_cannot_fit():
    cfg = pathfinder.PathfinderConfig(image_size=16, contour_length=3, distractors=1)
    a, b = pathfinder.generate(cfg, 6, "s"), pathfinder.generate(cfg, 6, "s")
    assert (a[0] == b[0]).all() and (a[1] == b[1]).all()
    crowded = pathfinder.PathfinderConfig(image_size=12, contour_length=8, distractors=4)
    with pytest.raises(ValueError, match="do not fit in 12x12; lower contour_length"):
        pathfinder.generate(crowded, 1, "s")


# --------------------------------------------------------------------------- text stand-ins


@pytest.fixture
def fake_stdlib(tmp_path) -> Path:
    """A tiny standard library: two packages and a module."""
    root = tmp_path / "lib"
    for package, n_files in (("asyncio", 30), ("email", 30), ("json", 4)):
        (root / package).mkdir(parents=True)
        for i in range(n_files):
            tag = hashlib.sha256(f"{package}/{i}".encode()).hexdigest()[:16]
            body = "".join(f"{tag} {j:02d}\n" for j in range(12))  # no window in two files
            (root / package / f"m{i}.py").write_text(body)
    (root / "top.py").write_text("x = 1\n" * 40)
    return root


def test_text_standin_classifies_windows_by_package(fake_stdlib):
    cfg = text.TextConfig(seq_len=24, stdlib_dir=str(fake_stdlib), n_train=1000, n_val=1000,
                          n_test=1000)
    splits = text.build(cfg)
    sources = {p: [f.read_bytes() for f in (fake_stdlib / p).glob("*.py")]
               for p in cfg.packages}
    for split in splits.values():
        counts = np.bincount(split.labels, minlength=2)
        assert counts[0] == counts[1] > 0  # balanced
        for row, label in zip(split.tokens, split.labels, strict=True):
            window = decode(row)
            assert any(window in f for f in sources[cfg.packages[label]])
    assert text.standin(cfg).startswith("stand-in for LRA Text")


def test_retrieval_standin_pairs_windows_of_one_file_or_two(fake_stdlib):
    cfg = retrieval.RetrievalConfig(seq_len=24, stdlib_dir=str(fake_stdlib), n_train=40,
                                    n_val=10, n_test=10)
    splits = retrieval.build(cfg)
    files = [f.read_bytes() for f in fake_stdlib.rglob("*.py")]
    for split in splits.values():
        assert split.labels.sum() == len(split.labels) // 2
        for a, b, label in zip(split.tokens, split.tokens2, split.labels, strict=True):
            same = [f for f in files if decode(a) in f and decode(b) in f]
            assert bool(same) == bool(label)


# --------------------------------------------------------------------------- the contract


def test_manifest_checksum_and_atomic_replacement(tmp_path):
    cfg = {"seq_len": 16, "n_train": 20, "n_val": 4, "n_test": 4}
    out = tmp_path / "retrieval"
    manifest = tasks.prepare("retrieval", cfg, out)
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk == manifest
    assert {"task", "source", "standin", "n_classes", "seq_len", "vocab_size", "mask_ratio",
            "checksum", "splits", "pair", "config"} <= set(manifest)
    assert manifest["mask_ratio"] == 0.15 and manifest["source"] == "stdlib"
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "test.npz", "train.npz",
                                                     "val.npz"]
    # A failed prepare leaves the old cache whole and no temporary directory.
    with pytest.raises(FileNotFoundError):
        tasks.prepare("retrieval", {"source": "lra", "lra_dir": str(tmp_path / "no")}, out)
    assert json.loads((out / "manifest.json").read_text()) == manifest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["retrieval"]
    # Another config replaces it whole; loading with the old config is refused.
    tasks.prepare("retrieval", {**cfg, "seed": 1}, out)
    with pytest.raises(ValueError, match="prepare it again"):
        tasks.load("retrieval", cfg, out)
    # Arrays that do not match the manifest's checksum are refused.
    arrays = dict(np.load(out / "val.npz"))
    arrays["labels"] = 1 - arrays["labels"]
    np.savez(out / "val.npz", **arrays)
    with pytest.raises(ValueError, match="checksum"):
        tasks.load("retrieval", {**cfg, "seed": 1}, out)


@pytest.mark.parametrize("task", ["text", "retrieval", "image", "pathfinder", "pathx"])
def test_a_missing_release_names_the_file_and_where(tmp_path, task):
    cfg = {"source": "lra", "lra_dir": str(tmp_path / "lra")}
    if task == "image":
        cfg["image_size"] = 32
    with pytest.raises(FileNotFoundError, match=f"expected .* in {tmp_path / 'lra'}"):
        tasks.prepare(task, cfg, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(tasks.MissingRelease) as missing:
        tasks.check_releases({task: tasks.task_config(task, cfg)})
    message = str(missing.value)
    assert f"task {task} reads the LRA release" in message and "does not exist" in message
    config = tasks.task_config(task, cfg)
    assert all(name in message for name in tasks.TASKS[task].module.release_files(config))
    url, _ = tasks.TASKS[task].module.release_source(config)
    assert (url or tasks.LRA_ARCHIVE) in message


def test_bad_task_config_is_named():
    with pytest.raises(ValueError, match=r"tasks.image.source: got 'cifar', accepted values: "
                                         r"digits, lra"):
        tasks.task_config("image", {"source": "cifar"})
    with pytest.raises(ValueError, match="difficulty: got 'easy'"):
        tasks.task_config("pathfinder", {"difficulty": "easy"})
    with pytest.raises(ValueError, match="tasks.text: unknown keys"):
        tasks.task_config("text", {"length": 3})


# --------------------------------------------------------------------------- the pair model


def test_pair_head_classifies_u_v_product_and_difference():
    import torch

    from scalestudy.models import build_backbone
    from scalestudy.models.heads import ClassifierHead, pool
    from scalestudy.training.modules import Classifier

    torch.manual_seed(0)
    backbone = build_backbone("transformer", "xxs", 259, 16)
    head = ClassifierHead(backbone, 2, pair=True)
    model = Classifier(backbone, head, 2).eval()
    a, b = torch.randint(3, 259, (4, 16)), torch.randint(3, 259, (4, 16))
    a[:, 12:] = 0
    logits, _ = model(a, b)
    u = pool(backbone(a, a != 0).hidden, a != 0, "mean")
    v = pool(backbone(b, b != 0).hidden, b != 0, "mean")
    features = torch.cat([u, v, u * v, u - v], dim=-1)
    expected = head.out(torch.nn.functional.gelu(head.hidden(features)))
    assert logits.shape == (4, 2)
    assert torch.allclose(logits, expected, atol=1e-5)


def test_records_label_stand_ins_and_read_older_records(tmp_path):
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from scalestudy.records import read_records, task_label

    runs = pd.DataFrame({"task": ["text", "text", "image", "listops"],
                         "task_data": ["stand-in for LRA Text: x", "stand-in for LRA Text: x",
                                       "LRA release", None]})
    assert task_label(runs, "text") == "text (stand-in)"
    assert task_label(runs, "image") == "image" and task_label(runs, "listops") == "listops"
    cached = pq.read_table(ROOT / "data/cache/deep_fixup.parquet")
    older = tmp_path / "older.parquet"
    pq.write_table(cached.drop_columns(["task_data"]) if "task_data" in cached.column_names
                   else cached, older)
    frame = read_records(older)
    assert frame["task_data"].isna().all() and len(frame) == cached.num_rows
    assert pa.types.is_string(pq.read_schema(older).field("task").type)


def test_figures_title_a_stand_in_task_as_one(tmp_path, monkeypatch):
    import pandas as pd
    import pyarrow as pa

    from scalestudy.analysis.figures import accuracy_vs_size, output
    from scalestudy.records import SCHEMA

    rows = []
    for size in ("xxs", "xs"):
        row = {f.name: "" if pa.types.is_string(f.type) else 0 if pa.types.is_integer(f.type)
               else np.nan for f in SCHEMA}
        row.update(task="text", task_data="stand-in for LRA Text: x", arch="transformer",
                   size=size, prior="random", stage="scratch", status="ok", test_acc=0.6)
        rows.append(row)
    titles = []
    monkeypatch.setattr(accuracy_vs_size, "save", lambda fig, *a, **k: titles.append(
        fig._suptitle.get_text()) or output.Drawn())
    accuracy_vs_size.draw(pd.DataFrame(rows), None, tmp_path, "text")
    assert titles and titles[0].startswith("text (stand-in): test accuracy")
