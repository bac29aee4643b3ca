import os
import sys

import pytest

# No torch import here: the torch-free tests (tests/analysis, tests/workflow) are
# collected and run by an install without it (test_layout.py checks).


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """One torch thread per test wherever a test module loaded torch: the tests build
    tiny models, where one thread is as fast as two and does not fight a busy
    machine's other processes for its cores."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """The prepared data of the tiny ListOps task (cells.TASK), once per module."""
    from scalestudy import tasks

    from tests.support.cells import TASK

    path = tmp_path_factory.mktemp("data") / "listops"
    tasks.prepare("listops", TASK, path)
    return path


@pytest.fixture(autouse=True)
def plugins_environment():
    """A test that loads a plugin names it in $SCALESTUDY_PLUGINS for the
    processes it starts (scalestudy.plugins); the next test starts without it."""
    from scalestudy.plugins import ENV

    before = os.environ.get(ENV)
    yield
    if before is None:
        os.environ.pop(ENV, None)
    else:
        os.environ[ENV] = before
