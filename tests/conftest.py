import sys
from pathlib import Path

import pytest
import torch

# model_checks.py lives beside the tests.
sys.path.insert(0, str(Path(__file__).parent))

# The tests build tiny models: one thread is as fast as two and does not fight
# a busy machine's other processes for its cores.
torch.set_num_threads(1)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """The prepared data of the tiny ListOps task (cells.TASK), once per module."""
    from cells import TASK

    from scalestudy import tasks

    path = tmp_path_factory.mktemp("data") / "listops"
    tasks.prepare("listops", TASK, path)
    return path
