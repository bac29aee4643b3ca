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
straight paddles of `dash` pixels with one empty pixel between two paddles,
turning by at most 45 degrees between paddles (at random, with probability
`curvature`); the next paddle starts one step along each of the two paddles'
directions, so a contour reads alike from both ends, and a contour never
comes near itself. Contours are drawn at intensity 160, markers as 3x3 blocks
at 255.

As in Linsley et al. and LRA, every image has two target contours and
`distractors` more, all of the same length, in both classes; a positive image
marks both ends of one target, a negative one end of each. And as Linsley et
al.'s two targets grow from seeds a few paddles apart, the second target has
an end near a marker (CLEARANCE + 3 to 3 * (dash + 1) pixels away, Chebyshev):
in a positive it starts near m1, in a negative it runs from m2 to near m1.

Negatives are matched to positives in pairs, so the markers' places give the
label away in neither class: each negative puts its markers m1, m2 where a
positive's are, up to one of the 8 symmetries of the square (so the markers'
distance in any metric and their distances to the border have one
distribution in both classes, one multiset in a generated set of even size),
and its contour from m1 leaves m1 along that positive's first paddle. The
contour from m2 is a walk that backs up (depth first) until it ends near m1.

Contours keep CLEARANCE (two) empty pixels from one another, and from the
markers a target's ends may carry; the two markers are more than CLEARANCE
apart. That keep-out is all the label needs: it is exactly "the markers'
pixels are linked through lit pixels at most CLEARANCE apart" (the tests
check that with connected components, independently of the generator).
Contours may touch the border; markers need one pixel. Half of each split is
positive. Simplified: no anti-aliasing, no paddle-level jitter, 8 directions,
and the distractors are as long as the targets (Linsley et al. add shorter
ones and single paddles). The defaults make contours about 0.7 of the side
long (8 paddles, 23 pixels, at 32x32; 24 paddles, 95 pixels, at 128x128).
tests/tasks/test_pathfinder.py bounds the one-threshold accuracy of the
markers' distance, the lit pixels and the lit pixels near the markers.
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
DEAD_ENDS = 8  # a walk backs up from at most DEAD_ENDS * contour_length dead ends
PAD = 8  # blocked pixels around the image in a walk's grid (more than dash + 1)
UP, DOWN = bytes(range(1, 256)) + b"\0", b"\xff" + bytes(range(255))  # +1, -1 on bytes
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
    contour_length: int = option(8, """generate; paddles per contour (8: a 23-pixel contour, about
        0.7 of the side of 32x32, so that the task stays long-range)""", minimum=1)
    dash: int = option(2, "generate; pixels per paddle (paddles are one pixel apart)", minimum=1)
    distractors: int = option(2, """generate; contours besides the two targets that carry the
        markers, as long as them""", minimum=0)
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
    contour_length: int = option(24, """generate; paddles per contour (24: a 95-pixel contour,
        about 0.7 of the side of 128x128)""", minimum=1)
    dash: int = option(3, "generate; pixels per paddle (paddles are one pixel apart)", minimum=1)
    distractors: int = option(6, """generate; contours besides the two targets that carry the
        markers, as long as them""", minimum=0)


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


def _block(blocked: np.ndarray, pixels, reach: int = CLEARANCE) -> None:
    """Mark every pixel within `reach` of `pixels`: no other contour may use it."""
    for y, x in pixels:
        blocked[max(0, y - reach): y + reach + 1, max(0, x - reach): x + reach + 1] = True


def _add(blocked: np.ndarray, pixels, target: bool) -> None:
    """Keep other contours CLEARANCE from a contour's `pixels` and, for a target
    contour (one that may carry markers), from its markers (CLEARANCE + 1 from
    its ends)."""
    _block(blocked, pixels)
    if target:
        _block(blocked, (pixels[0], pixels[-1]), CLEARANCE + 1)


def _room(blocked: np.ndarray, y: int, x: int) -> bool:
    """Is there room for a marker (a 3x3 block) at (y, x)?"""
    size = len(blocked)
    return 1 <= y < size - 1 and 1 <= x < size - 1 and not blocked[y - 1: y + 2, x - 1: x + 2].any()


def _marker_room(blocked: np.ndarray) -> np.ndarray:
    """The mask of the pixels where a marker fits clear of `blocked`."""
    n, room = len(blocked), np.zeros_like(blocked)
    room[1:-1, 1:-1] = ~np.any([blocked[dy: dy + n - 2, dx: dx + n - 2]
                                for dy in range(3) for dx in range(3)], axis=0)
    return room


def _ring(size: int, point, lo: int, hi: int) -> np.ndarray:
    """The mask of the pixels lo to hi (Chebyshev) from `point`."""
    y, x = np.ogrid[:size, :size]
    far = np.maximum(abs(y - point[0]), abs(x - point[1]))
    return (far >= lo) & (far <= hi)


def _near(cfg: PathfinderConfig, point) -> tuple:
    """Where the other target contour has an end near a marker: CLEARANCE + 3
    (room for a marker) to three paddles' steps (Chebyshev) from `point`."""
    return point, CLEARANCE + 3, 3 * (cfg.dash + 1)


def _walk(rng: random.Random, cfg: PathfinderConfig, blocked: np.ndarray, grid: list,
          start: tuple[int, int], target: bool, ends: tuple | None,
          heading: int | None = None) -> list | None:
    """A random contour of contour_length paddles from `start`, or None where
    none fits. Each paddle turns by at most 45 degrees from the one before,
    one empty pixel after it (the next paddle starts one step along each of
    the two directions, so a contour reads alike from both ends). A paddle
    that does not fit tries the other turns, and a dead end backs up (depth
    first, at most DEAD_ENDS per paddle). The contour keeps CLEARANCE from
    itself too (from all but the paddle before). A target contour has room
    for a marker at both ends, the two markers more than CLEARANCE apart, and
    ends lo to hi (Chebyshev) from point where `ends` = (point, lo, hi) is
    given (a walk that can no longer get there backs up). `grid`: `blocked`
    as rows of bytes (> 0: taken), PAD blocked pixels around the image."""
    length, dash, budget = cfg.contour_length, cfg.dash, DEAD_ENDS * cfg.contour_length
    (ey, ex), lo, hi = ends or ((0, 0), 0, 2 * cfg.image_size)  # default: anywhere

    def paddle(y, x, d):
        dy, dx = DIRECTIONS[d]
        pixels = [(y + k * dy, x + k * dx) for k in range(dash)]
        return None if any(grid[py + PAD][px + PAD] for py, px in pixels) else (d, pixels)

    def own(pixels, step):  # (un)block the box around one of the contour's own paddles
        (ay, ax), (by, bx) = pixels[0], pixels[-1]
        x0, x1 = min(ax, bx) - CLEARANCE + PAD, max(ax, bx) + CLEARANCE + PAD + 1
        for row in grid[min(ay, by) - CLEARANCE + PAD: max(ay, by) + CLEARANCE + PAD + 1]:
            row[x0:x1] = row[x0:x1].translate(step)

    def grow(paddles):
        nonlocal budget
        (y0, x0), (y1, x1) = paddles[0][1][0], paddles[-1][1][-1]
        far = max(abs(y1 - ey), abs(x1 - ex))
        if far - hi > (length - len(paddles)) * (dash + 1):
            return None  # the end is out of reach
        if len(paddles) == length:
            apart = max(abs(y0 - y1), abs(x0 - x1)) > CLEARANCE + 2
            ok = not target or (apart and _room(blocked, y1, x1))
            return paddles if ok and lo <= far else None
        turn = rng.choice((-1, 1))
        turns = (turn, 0, -turn) if rng.random() < cfg.curvature else (0, turn, -turn)
        if len(paddles) > 1:  # the paddle before the last joins the contour's own keep-out
            own(paddles[-2][1], UP)
        (d, last), found = paddles[-1], None
        for new in ((d + t) % 8 for t in turns):
            (ay, ax), (by, bx) = DIRECTIONS[d], DIRECTIONS[new]
            next_paddle = paddle(last[-1][0] + ay + by, last[-1][1] + ax + bx, new)
            if next_paddle is not None and budget > 0:
                found = grow(paddles + [next_paddle])
                if found:
                    break
                budget -= 1
        if len(paddles) > 1:
            own(paddles[-2][1], DOWN)
        return found

    if target and not _room(blocked, *start):
        return None
    for d in rng.sample(range(8), 8) if heading is None else [heading]:
        first = paddle(*start, d)
        found = first and grow([first])
        if found:
            return [p for _, pixels in found for p in pixels]
    return None


def _contour(rng: random.Random, cfg: PathfinderConfig, blocked: np.ndarray, target: bool,
             starts: np.ndarray | None = None, ends: tuple | None = None,
             heading: int | None = None, tries: int = 20) -> list[tuple[int, int]]:
    """One contour's pixels clear of `blocked`, from a random point of `starts`
    (a mask; default: where a marker fits for a target contour, else any free
    pixel), its first paddle along `heading` where given."""
    if starts is None:
        starts = _marker_room(blocked) if target else ~blocked
    where = np.flatnonzero(starts)
    grid = [bytearray(row) for row in np.pad(blocked, PAD, constant_values=True).astype(np.uint8)]
    for _ in range(tries if len(where) else 0):
        start = divmod(int(where[rng.randrange(len(where))]), len(blocked))
        pixels = _walk(rng, cfg, blocked, grid, start, target, ends, heading)
        if pixels is not None:
            return pixels
    raise NoRoom


def _distractors(rng: random.Random, cfg: PathfinderConfig, blocked: np.ndarray,
                 tries: int = 5) -> list:
    """The distractor contours around the targets in `blocked` (all drawn
    again where one does not fit)."""
    for _ in range(tries):
        contours, taken = [], blocked.copy()
        try:
            for _ in range(cfg.distractors):
                contours.append(_contour(rng, cfg, taken, target=False))
                _add(taken, contours[-1], target=False)
        except NoRoom:
            continue
        return contours
    raise NoRoom


def _positive(rng: random.Random, cfg: PathfinderConfig) -> list:
    """A positive image's contours: the target joining its markers m1 and m2
    (its ends), a second target from near m1, then the distractors."""
    blocked = np.zeros((cfg.image_size,) * 2, dtype=bool)
    joined = _contour(rng, cfg, blocked, target=True)
    _add(blocked, joined, target=True)
    beside = _contour(rng, cfg, blocked, target=True,
                      starts=_ring(cfg.image_size, *_near(cfg, joined[0])))
    _add(blocked, beside, target=True)
    return [joined, beside] + _distractors(rng, cfg, blocked)


def _negative(rng: random.Random, cfg: PathfinderConfig, m1, m2, heading: int) -> list:
    """A negative image's contours for markers at m1 and m2: a target from m1
    (its first paddle along `heading`), a second one from m2 that ends near
    m1, then the distractors."""
    blocked = np.zeros((cfg.image_size,) * 2, dtype=bool)
    keep_m2 = blocked.copy()
    _block(keep_m2, [m2], CLEARANCE + 1)  # room for m2's marker
    from_m1 = _contour(rng, cfg, keep_m2, target=True, starts=_ring(cfg.image_size, m1, 0, 0),
                       heading=heading)
    _add(blocked, from_m1, target=True)
    to_m1 = _contour(rng, cfg, blocked, target=True, starts=_ring(cfg.image_size, m2, 0, 0),
                     ends=_near(cfg, m1), tries=10)
    _add(blocked, to_m1, target=True)
    return [from_m1, to_m1] + _distractors(rng, cfg, blocked)


def _heading(a, b) -> int:
    """The direction from pixel a towards pixel b."""
    return DIRECTIONS.index(tuple(int(np.sign(q - p)) for p, q in zip(a, b, strict=True)))


def _symmetry(rng: random.Random, size: int):
    """A random symmetry of the square image (one of 8), on (y, x)."""
    transpose, flip_y, flip_x = (rng.random() < 0.5 for _ in range(3))

    def move(point):
        y, x = point[::-1] if transpose else point
        return (size - 1 - y if flip_y else y), (size - 1 - x if flip_x else x)
    return move


def _image(cfg: PathfinderConfig, contours, markers) -> np.ndarray:
    image = np.zeros((cfg.image_size,) * 2, dtype=np.uint8)
    for pixels in contours:
        image[tuple(np.transpose(pixels))] = CONTOUR
    for y, x in markers:
        image[y - 1: y + 2, x - 1: x + 2] = MARKER
    return image


def draw_pair(rng: random.Random, cfg: PathfinderConfig,
              tries: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """A positive [size, size] uint8 image and its negative: the negative's
    markers lie where the positive's do, up to a symmetry of the square, and
    its contour from m1 leaves it along the positive's first paddle."""
    for _ in range(tries):
        try:
            positive = _positive(rng, cfg)
            joined, move = positive[0], _symmetry(rng, cfg.image_size)
            m1, m2 = move(joined[0]), move(joined[-1])
            negative = _negative(rng, cfg, m1, m2, _heading(m1, move(joined[1])))
        except NoRoom:
            continue
        return _image(cfg, positive, (joined[0], joined[-1])), _image(cfg, negative, (m1, m2))
    raise _no_fit(cfg)


def _no_fit(cfg: PathfinderConfig) -> ValueError:
    return ValueError(f"pathfinder: {2 + cfg.distractors} contours of {cfg.contour_length} "
                      f"paddles do not fit in {cfg.image_size}x{cfg.image_size}; lower "
                      "contour_length, dash or distractors")


def generate(cfg: PathfinderConfig, n: int, seed: str) -> tuple[np.ndarray, np.ndarray]:
    """n images [n, size, size] and labels, half positive, in random order."""
    rng = random.Random(seed)
    labels = [i % 2 for i in range(n)]
    rng.shuffle(labels)
    try:  # fail fast where not even one contour fits
        _contour(rng, cfg, np.zeros((cfg.image_size,) * 2, dtype=bool), target=True, tries=200)
    except NoRoom:
        raise _no_fit(cfg) from None
    pairs = [draw_pair(rng, cfg) for _ in range((n + 1) // 2)]
    positives, negatives = iter([p for p, _ in pairs]), iter([q for _, q in pairs])
    images = [next(positives) if label else next(negatives) for label in labels]
    return (np.stack(images) if n else np.zeros((0,) + (cfg.image_size,) * 2, np.uint8),
            np.asarray(labels, dtype=np.int64))


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
