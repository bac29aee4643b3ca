"""LRA Image (Tay et al. 2021): CIFAR-10 (Krizhevsky 2009) as a sequence of
1,024 grayscale pixel intensities, 10 classes.

`source: lra` reads the standard python batches of cifar-10-python.tar.gz in
`lra_dir/cifar-10-batches-py/` (`data_batch_1..5`, `test_batch`: pickled dicts
with `data` uint8 [N, 3072], channel-major R, G, B planes of 32x32, and
`labels`), converts them to grayscale as LRA does
(`tf.image.rgb_to_grayscale`: 0.2989 R + 0.5870 G + 0.1140 B, rounded),
flattens row-major to 1,024 tokens (id = intensity + 3) and, as LRA, keeps the
last 10% of the training batches for validation. The batches are unpickled
with a restricted unpickler that builds only numpy arrays, lists and strings,
so no code in a file runs.

`source: digits` is the offline stand-in, not LRA: scikit-learn's bundled
handwritten digits (UCI optdigits test set, Alpaydin & Kaynak 1998: 1,797
grayscale 8x8 images, 10 classes), which install with scikit-learn and need no
download. Their 17 gray levels (0-16) are scaled to 0-255 and each image is
enlarged by pixel repetition to `image_size` (a multiple of 8; 32 gives LRA's
1,024 tokens); the images, permuted with `seed`, are split 80/10/10, or with a
larger test split (`test_fraction`, taken from the training images: validation
stays 10%) where a study needs a tighter accuracy than 179 images give.
"""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..options import UNLESS_DEFAULT, option, source_defaults
from .contract import BYTE_VOCAB, PIXELS, Split, byte_ids, make_split

SOURCES = ("digits", "lra")
BATCH_DIR = "cifar-10-batches-py"
TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_BATCH = "test_batch"
GRAY = (0.2989, 0.5870, 0.1140)
CIFAR_SIZE = 32
N_CLASSES = 10
VOCAB_SIZE = BYTE_VOCAB
VOCAB_NAME = PIXELS


@dataclass(frozen=True)
class ImageConfig:
    """LRA Image: CIFAR-10 as 1,024 grayscale pixel tokens (source lra), or the
    stand-in (source digits) of scikit-learn's bundled 8x8 handwritten digits."""

    source: str = option("digits", """digits: scikit-learn's handwritten digits, installed with
        it (no download), split 80/10/10; lra: CIFAR-10's python batches in
        lra_dir/cifar-10-batches-py/ (validation = last 10% of train)""", enum=SOURCES)
    lra_dir: str = option("data/lra_release/cifar10", """directory holding cifar-10-batches-py/
        (unpacked cifar-10-python.tar.gz); used when source is lra""")
    image_size: int | None = option(None, """side of the image in pixels (tokens = side^2);
        digits: a multiple of 8 (enlarged by pixel repetition); lra: 32""",
        by_source={"digits": 8, "lra": CIFAR_SIZE}, minimum=8)
    seed: int = option(0, "digits; seed of the 80/10/10 split", minimum=0)
    test_fraction: float = option(0.1, """digits; the share of the images held out for
        test (validation stays 10%, training gets the rest): 0.1 is 179 test images, a
        binomial standard error near 0.02-0.03; 0.25 is 449""",
        in_spec=UNLESS_DEFAULT, minimum=0.05, maximum=0.5)

    def __post_init__(self) -> None:
        source_defaults(self)
        if self.source == "lra" and self.image_size != CIFAR_SIZE:
            raise ValueError(f"tasks.image.image_size: got {self.image_size}; CIFAR-10 "
                             f"(source: lra) is {CIFAR_SIZE}")
        if self.source == "lra" and self.test_fraction != 0.1:
            raise ValueError(f"tasks.image.test_fraction: got {self.test_fraction}; CIFAR-10 "
                             "(source: lra) has its own test batch, so it applies to digits only")
        if self.source != "lra" and (self.image_size < 8 or self.image_size % 8):
            raise ValueError(f"tasks.image.image_size: got {self.image_size}, the digits are "
                             "enlarged by whole pixels: a multiple of 8")

    @property
    def seq_len(self) -> int:
        return self.image_size ** 2


def release_files(cfg: ImageConfig) -> list[str]:
    return [f"{BATCH_DIR}/{name}" for name in (*TRAIN_BATCHES, TEST_BATCH)]


def release_source(cfg: ImageConfig) -> tuple[str | None, str]:
    # LRA reads CIFAR-10 from TensorFlow Datasets, which downloads the same images.
    return ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
            f"its {BATCH_DIR}/ directory")


def standin(cfg: ImageConfig) -> str | None:
    if cfg.source == "lra":
        return None
    return (f"stand-in for LRA Image: scikit-learn's handwritten digits, grayscale, "
            f"{cfg.image_size}x{cfg.image_size}")


def n_classes(cfg: ImageConfig) -> int:
    return N_CLASSES


class _ArraysOnly(pickle.Unpickler):
    """Unpickles numpy arrays and plain containers; refuses any other global."""

    ALLOWED = {("multiarray", "_reconstruct"), ("numeric", "_frombuffer"),
               ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")}

    def find_class(self, module: str, name: str):
        # numpy 1 pickles name numpy.core.*, numpy 2 numpy._core.*
        short = module.rpartition(".")[2] if module.startswith("numpy.") else module
        if (short, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}")
        if module.startswith("numpy.core."):
            module = "numpy._core." + short
        return super().find_class(module, name)


def read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One python batch -> (uint8 [N, 3072], int64 [N] labels), validated."""
    if not path.is_file():
        raise FileNotFoundError(f"CIFAR-10 release file not found: expected {path.name} in "
                                f"{path.parent}")
    try:
        batch = _ArraysOnly(io.BytesIO(path.read_bytes()), encoding="bytes").load()
    except Exception as err:
        raise ValueError(f"{path}: not a CIFAR-10 python batch: {err}") from None
    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        raise ValueError(f"{path}: not a CIFAR-10 python batch (a dict with data and labels)")
    data, labels = np.asarray(batch[b"data"]), np.asarray(batch[b"labels"], dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * CIFAR_SIZE ** 2:
        raise ValueError(f"{path}: data must be uint8 [N, 3072], got {data.dtype} "
                         f"{list(data.shape)}")
    if labels.shape != (len(data),):
        raise ValueError(f"{path}: {len(labels)} labels for {len(data)} images")
    bad = np.flatnonzero((labels < 0) | (labels >= N_CLASSES))
    if len(bad):
        raise ValueError(f"{path}: image {bad[0]} has label {labels[bad[0]]}, outside 0-9")
    return data, labels


def grayscale(data: np.ndarray) -> np.ndarray:
    """[N, 3072] channel-major RGB -> [N, 1024] uint8 gray, as LRA."""
    rgb = data.reshape(len(data), 3, CIFAR_SIZE ** 2).astype(np.float64)
    gray = np.tensordot(np.asarray(GRAY), rgb, axes=([0], [1]))
    return np.floor(gray + 0.5).clip(0, 255).astype(np.uint8)


def pixel_split(images: np.ndarray, labels: np.ndarray) -> Split:
    return make_split([byte_ids(image.tobytes()) for image in images], labels,
                      images.shape[1])


def read_release(cfg: ImageConfig) -> dict[str, Split]:
    root = Path(cfg.lra_dir) / BATCH_DIR
    parts = [read_batch(root / name) for name in TRAIN_BATCHES]
    images = grayscale(np.concatenate([p[0] for p in parts]))
    labels = np.concatenate([p[1] for p in parts])
    cut = len(images) - len(images) // 10
    test_images, test_labels = read_batch(root / TEST_BATCH)
    return {"train": pixel_split(images[:cut], labels[:cut]),
            "val": pixel_split(images[cut:], labels[cut:]),
            "test": pixel_split(grayscale(test_images), test_labels)}


def digits_standin(cfg: ImageConfig) -> dict[str, Split]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    levels = np.floor(digits.images * 255 / 16 + 0.5).astype(np.uint8)  # 0-16 -> 0-255
    scale = cfg.image_size // 8
    images = levels.repeat(scale, axis=1).repeat(scale, axis=2).reshape(len(levels), -1)
    order = np.random.default_rng(cfg.seed).permutation(len(images))
    n_val, n_test = len(order) // 10, int(len(order) * cfg.test_fraction)
    cuts = {"train": order[: len(order) - n_val - n_test],
            "val": order[len(order) - n_val - n_test: len(order) - n_test],
            "test": order[len(order) - n_test:]}
    return {split: pixel_split(images[index], digits.target[index])
            for split, index in cuts.items()}


def build(cfg: ImageConfig) -> dict[str, Split]:
    return read_release(cfg) if cfg.source == "lra" else digits_standin(cfg)
