"""LRA Pathfinder and Path-X (Tay et al. 2021, after Linsley et al. 2018): are
the two marked end points of an image joined by a dashed contour? Pixels as a
sequence (id = intensity + 3), 2 classes; Pathfinder at 32x32 (1,024 tokens),
Path-X at 128x128 (16,384 tokens).

`source: lra` reads the release's `<lra_dir>/<difficulty>/metadata/*.npy`
(text files despite the name: one example per line, space-separated; field 0
is the image's subdirectory, field 1 its file name, field 3 the label) and the
PNG images they name. The metadata files are read in numeric order of their
names and the examples split 80/10/10 in that order, as LRA's split of the
same files. `difficulty` is curv_baseline, curv_contour_length_9 or
curv_contour_length_14 (the hardest, LRA's default).

`source: generate` is the offline stand-in, not LRA: our own generator in the
spirit of Linsley et al.'s, on the pixel grid. A contour is `contour_length`
straight paddles of `dash` pixels, one pixel apart, turning by at most 45
degrees between paddles (at random, with probability `curvature`). Every image
has two contours of that length and `distractors` more; a positive image marks
both ends of one contour, a negative image one end of each of the two, so
both classes draw the same number and lengths of contours and two markers
(3x3 blocks of intensity 255; contours are drawn at 160). Contours keep a
clearance of two empty pixels from one another and from the image border's
outermost row, and a paddle's gap is one pixel, so the label is exactly "the
markers' pixels are linked through on-pixels at most 2 apart" (the test checks
that with connected components, independently of the generator). Half of each
split is positive. Simplified: no anti-aliasing, no paddle-level jitter, and
distractors are as long as the contours (Linsley et al. use shorter ones).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..options import option
from .contract import BYTE_VOCAB, PIXELS, SPLITS, Split, byte_ids, make_split

SOURCES = ("generate", "lra")
DIFFICULTIES = ("curv_baseline", "curv_contour_length_9", "curv_contour_length_14")
N_CLASSES = 2
VOCAB_SIZE = BYTE_VOCAB
VOCAB_NAME = PIXELS
CONTOUR, MARKER = 160, 255
CLEARANCE = 2  # empty pixels between two contours (so a distance <= 2 link never crosses)
DIRECTIONS = ((0, 1), (1, 1), (1, 0), (1, -1), (0, -1), (-1, -1), (-1, 0), (-1, 1))
SPLIT_FRACTIONS = (0.8, 0.1, 0.1)
LRA_DIR_DOC = """the release's pathfinder32/ (pathfinder) or pathfinder128/ (pathx) directory;
    used when source is lra"""
IMAGE_SIZE_DOC = """side of the image in pixels (tokens = side^2): LRA's Pathfinder 32, Path-X
    128; the release's images must have it"""


@dataclass(frozen=True)
class PathfinderConfig:
    """LRA Pathfinder (pathx: Path-X): are the two marked end points joined by a
    dashed contour? Images of the release (source lra) or of our generator
    (source generate), as pixel tokens."""

    source: str = option("generate", """generate: the offline stand-in, our generator; lra: the
        release's metadata/*.npy and PNGs under lra_dir/difficulty (split 80/10/10)""",
                         enum=SOURCES)
    lra_dir: str = option("data/lra_release/pathfinder32", LRA_DIR_DOC)
    difficulty: str = option("curv_contour_length_14", """lra; the release's difficulty
        directory (14 is the hardest)""", enum=DIFFICULTIES)
    image_size: int = option(32, IMAGE_SIZE_DOC, minimum=8)
    contour_length: int = option(6, "generate; paddles per contour", minimum=1)
    dash: int = option(2, "generate; pixels per paddle (paddles are one pixel apart)", minimum=1)
    distractors: int = option(2, "generate; contours besides the two that carry the markers",
                              minimum=0)
    curvature: float = option(0.5, """generate; probability of a 45-degree turn between two
        paddles""", minimum=0, maximum=1)
    n_train: int = option(2000, "stand-in; training examples (at most)", minimum=1)
    n_val: int = option(200, "stand-in; validation examples (at most)", minimum=1)
    n_test: int = option(200, "stand-in; test examples (at most)", minimum=1)
    seed: int = option(0, "seed of the stand-in's data (not of the training runs)", minimum=0)

    def __post_init__(self) -> None:
        if self.difficulty not in DIFFICULTIES:
            raise ValueError(f"difficulty: got {self.difficulty!r}, accepted values: "
                             f"{', '.join(DIFFICULTIES)}")

    @property
    def seq_len(self) -> int:
        return self.image_size ** 2


@dataclass(frozen=True)
class PathXConfig(PathfinderConfig):
    """Path-X: Pathfinder at 128x128, with longer contours."""

    lra_dir: str = option("data/lra_release/pathfinder128", LRA_DIR_DOC)
    image_size: int = option(128, IMAGE_SIZE_DOC, minimum=8)
    contour_length: int = option(16, "generate; paddles per contour", minimum=1)
    dash: int = option(3, "generate; pixels per paddle (paddles are one pixel apart)", minimum=1)
    distractors: int = option(6, "generate; contours besides the two that carry the markers",
                              minimum=0)


def release_files(cfg: PathfinderConfig) -> list[str]:
    return [f"{cfg.difficulty}/metadata"]


def release_source(cfg: PathfinderConfig) -> tuple[str | None, str]:
    return None, f"the contents of its pathfinder{cfg.image_size}/ directory"


def standin(cfg: PathfinderConfig) -> str | None:
    if cfg.source == "lra":
        return None
    return (f"stand-in for LRA {'Path-X' if isinstance(cfg, PathXConfig) else 'Pathfinder'}: "
            f"our generator, {cfg.image_size}x{cfg.image_size}, {cfg.contour_length} paddles, "
            f"{cfg.distractors} distractors")


def n_classes(cfg: PathfinderConfig) -> int:
    return N_CLASSES


# --- the generator ------------------------------------------------------------------------


class NoRoom(Exception):
    """The contours did not fit; the image is drawn again."""


def _free(blocked: np.ndarray, y: int, x: int) -> bool:
    size = blocked.shape[0]
    return 1 <= y < size - 1 and 1 <= x < size - 1 and not blocked[y, x]


def _paddle(blocked: np.ndarray, y: int, x: int, d: int, dash: int):
    """The pixels of a paddle of `dash` pixels from (y, x) along d, or None
    where one is not free."""
    dy, dx = DIRECTIONS[d]
    pixels = [(y + k * dy, x + k * dx) for k in range(dash)]
    return pixels if all(_free(blocked, py, px) for py, px in pixels) else None


def _walk(rng: random.Random, cfg: PathfinderConfig,
          blocked: np.ndarray) -> list[tuple[int, int]] | None:
    """One random contour's pixels, or None where it cannot go on. A paddle
    that would leave the free area tries the other allowed turns first."""
    size = cfg.image_size
    y, x = rng.randrange(1, size - 1), rng.randrange(1, size - 1)
    d = rng.randrange(8)
    pixels = _paddle(blocked, y, x, d, cfg.dash)
    if pixels is None:
        return None
    for _ in range(cfg.contour_length - 1):
        turn = rng.choice((-1, 1)) if rng.random() < cfg.curvature else 0
        for new in (d + turn, d, d - turn) if turn else (d, d + 1, d - 1):
            new %= 8
            (ly, lx), (sy, sx) = pixels[-1], DIRECTIONS[new]
            paddle = _paddle(blocked, ly + 2 * sy, lx + 2 * sx, new, cfg.dash)  # over the gap
            if paddle is not None:
                break
        else:
            return None
        pixels += paddle
        d = new
    return pixels


def _contour(rng: random.Random, cfg: PathfinderConfig, blocked: np.ndarray,
             tries: int = 50) -> list[tuple[int, int]]:
    """The pixels of one contour clear of `blocked`, end points first and last,
    with room for a marker at each end and the two ends' markers apart."""
    for _ in range(tries):
        pixels = _walk(rng, cfg, blocked)
        if pixels is None:
            continue
        (y0, x0), (y1, x1) = ends = pixels[0], pixels[-1]
        room = not any(blocked[y - 1: y + 2, x - 1: x + 2].any() for y, x in ends)
        if room and max(abs(y0 - y1), abs(x0 - x1)) > 3:
            return pixels
    raise NoRoom


def _block(blocked: np.ndarray, pixels) -> None:
    """Mark every pixel within CLEARANCE + 1 of `pixels` (and its markers' room)."""
    reach = CLEARANCE + 1
    for y, x in pixels:
        blocked[max(0, y - reach): y + reach + 1, max(0, x - reach): x + reach + 1] = True


def draw(rng: random.Random, cfg: PathfinderConfig, connected: bool) -> np.ndarray:
    """One [size, size] uint8 image whose markers are joined iff `connected`."""
    for _ in range(200):
        blocked = np.zeros((cfg.image_size,) * 2, dtype=bool)
        image = np.zeros_like(blocked, dtype=np.uint8)
        try:
            contours = []
            for _ in range(2 + cfg.distractors):
                pixels = _contour(rng, cfg, blocked)
                _block(blocked, pixels)
                contours.append(pixels)
        except NoRoom:
            continue
        for pixels in contours:
            for y, x in pixels:
                image[y, x] = CONTOUR
        first, second = contours[0], contours[1]
        ends = ((first[0], first[-1]) if connected
                else (rng.choice((first[0], first[-1])), rng.choice((second[0], second[-1]))))
        for y, x in ends:
            image[y - 1: y + 2, x - 1: x + 2] = MARKER
        return image
    raise ValueError(f"pathfinder: {2 + cfg.distractors} contours of {cfg.contour_length} "
                     f"paddles do not fit in {cfg.image_size}x{cfg.image_size}; lower "
                     "contour_length, dash or distractors")


def generate(cfg: PathfinderConfig, n: int, seed: str) -> tuple[np.ndarray, np.ndarray]:
    """n images [n, size, size] and labels, half positive, in random order."""
    rng = random.Random(seed)
    labels = [i % 2 for i in range(n)]
    rng.shuffle(labels)
    images = np.stack([draw(rng, cfg, bool(label)) for label in labels]) if n else \
        np.zeros((0, cfg.image_size, cfg.image_size), dtype=np.uint8)
    return images, np.asarray(labels, dtype=np.int64)


def image_split(images: np.ndarray, labels) -> Split:
    flat = images.reshape(len(images), -1)
    return make_split([byte_ids(image.tobytes()) for image in flat], labels, flat.shape[1])


# --- the release --------------------------------------------------------------------------


def read_png(path: Path, size: int, where: str) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    if not path.is_file():
        raise FileNotFoundError(f"{where}: image {path} not found")
    try:
        with Image.open(path) as img:
            pixels = np.asarray(img.convert("L"))
    except (UnidentifiedImageError, OSError) as err:
        raise ValueError(f"{where}: {path} is not a readable image: {err}") from None
    if pixels.shape != (size, size):
        raise ValueError(f"{where}: {path} is {pixels.shape[1]}x{pixels.shape[0]}, "
                         f"expected {size}x{size}")
    return pixels


def read_release(cfg: PathfinderConfig) -> dict[str, Split]:
    root = Path(cfg.lra_dir) / cfg.difficulty
    metadata = root / "metadata"
    if not metadata.is_dir():
        raise FileNotFoundError(f"Pathfinder release: expected the directory metadata/ in "
                                f"{root}")
    files = sorted(metadata.glob("*.npy"), key=lambda p: (not p.stem.isdigit(),
                                                          int(p.stem) if p.stem.isdigit() else 0,
                                                          p.name))
    if not files:
        raise FileNotFoundError(f"Pathfinder release: no metadata files (*.npy) in {metadata}")
    images, labels = [], []
    for meta in files:
        for line, text in enumerate(meta.read_text().splitlines(), start=1):
            fields = text.split()
            if not fields:
                continue
            where = f"{meta}:{line}"
            if len(fields) < 4 or fields[3] not in ("0", "1"):
                raise ValueError(f"{where}: expected 'subdirectory file_name _ label(0|1) ...', "
                                 f"got {text!r}")
            images.append(read_png(root / fields[0] / fields[1], cfg.image_size, where))
            labels.append(int(fields[3]))
    n = len(images)
    cut1, cut2 = int(n * SPLIT_FRACTIONS[0]), int(n * (SPLIT_FRACTIONS[0] + SPLIT_FRACTIONS[1]))
    stacked = np.stack(images)
    bounds = {"train": (0, cut1), "val": (cut1, cut2), "test": (cut2, n)}
    return {split: image_split(stacked[a:b], labels[a:b]) for split, (a, b) in bounds.items()}


def build(cfg: PathfinderConfig) -> dict[str, Split]:
    if cfg.source == "lra":
        return read_release(cfg)
    sizes = {"train": cfg.n_train, "val": cfg.n_val, "test": cfg.n_test}
    return {split: image_split(*generate(cfg, sizes[split], f"{cfg.seed}:{split}"))
            for split in SPLITS}
