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


def test_a_larger_test_split_comes_from_the_training_images():
    default = image.build(image.ImageConfig())
    wider = image.build(image.ImageConfig(test_fraction=0.25))
    assert [len(default[s].labels) for s in ("train", "val", "test")] == [1439, 179, 179]
    assert [len(wider[s].labels) for s in ("train", "val", "test")] == [1169, 179, 449]
    # The same permutation: the default's test images stay in test, and the
    # training images are the first of the default's.
    assert (wider["test"].tokens[-179:] == default["test"].tokens).all()
    assert (wider["train"].tokens == default["train"].tokens[:1169]).all()


def test_a_test_fraction_is_refused_outside_its_range_and_for_cifar():
    import copy

    from scalestudy import tasks
    from scalestudy.study import ConfigError, validate

    from tests.support.studies import DECLARED_STUDY

    with pytest.raises(ValueError, match=r"tasks.image.test_fraction: got 0.25; .* digits only"):
        tasks.task_config("image", {"source": "lra", "image_size": 32, "test_fraction": 0.25})
    config = copy.deepcopy(DECLARED_STUDY)
    config["tasks"]["image"] = {"test_fraction": 0.9}
    with pytest.raises(ConfigError, match=r"^tasks\.image\.test_fraction: 0.9"):
        validate(config)


def test_the_default_test_fraction_leaves_a_spec_as_it_was():
    from scalestudy.study import specs

    from tests.support.studies import DECLARED_STUDY, typed

    grid = {**DECLARED_STUDY["grid"], "tasks": ["image"]}
    config = typed({**DECLARED_STUDY, "grid": grid, "tasks": {"image": {"image_size": 16}}})
    assert "test_fraction" not in specs.task_section(config, "image")
    wider = typed({**DECLARED_STUDY, "grid": grid,
                   "tasks": {"image": {"image_size": 16, "test_fraction": 0.25}}})
    assert specs.task_section(wider, "image")["test_fraction"] == 0.25


def test_data_prepared_before_test_fraction_existed_still_loads(tmp_path):
    import json

    from scalestudy import tasks

    tasks.prepare("image", {}, tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    del manifest["config"]["test_fraction"]
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert len(tasks.load("image", {}, tmp_path).splits["test"][0]) == 179
    with pytest.raises(ValueError, match="prepare it again"):
        tasks.load("image", {"test_fraction": 0.25}, tmp_path)
