"""The Image stand-in's digits carry their own labels: every
example's pixels, read back to scikit-learn's 0-16 levels, are an image of
`load_digits` whose target is the example's label, and the three splits together
hold each (image, label) of the data set exactly once."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from sklearn.datasets import load_digits

from scalestudy.tasks import image


@pytest.mark.parametrize("size", [8, 16])
def test_each_digit_image_has_its_label(size):
    splits = image.build(image.ImageConfig(image_size=size))
    digits = load_digits()
    expected = Counter((img.astype(np.uint8).tobytes(), int(label))
                       for img, label in zip(digits.images, digits.target, strict=True))
    got = Counter()
    scale = size // 8
    for split in splits.values():
        pixels = split.tokens.astype(int) - 3  # byte ids: pixel + 3
        assert pixels.shape[1] == size * size and pixels.min() >= 0 and pixels.max() <= 255
        for row, label in zip(pixels, split.labels, strict=True):
            grid = row.reshape(size, size)
            # Enlarged by repetition: every scale x scale block is one pixel.
            small = grid[::scale, ::scale]
            assert (np.kron(small, np.ones((scale, scale), dtype=int)) == grid).all()
            # 0-255 back to the data set's 0-16 levels (steps of 255/16, far apart).
            levels = np.rint(small * 16 / 255).astype(np.uint8)
            got[(levels.tobytes(), int(label))] += 1
    assert got == expected
