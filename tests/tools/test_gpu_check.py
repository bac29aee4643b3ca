"""The GPU check's own helpers, on a CPU: the nominal peak of a device name,
the PYTHONPATH its subprocesses get, and how a step's syncs are counted.
Its sections' CPU form is tests/training/test_gpu_path.py's."""

import importlib.util
import os
import sys
import warnings

import pytest

from tests.support import ROOT


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "tools/gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules["gpu_check"]


# torch.cuda.get_device_name() of real parts, and their dense bf16 peaks.
DEVICES = {
    "NVIDIA L4": 121e12,
    "NVIDIA L40": 181e12,
    "NVIDIA L40S": 362e12,
    "NVIDIA H100 80GB HBM3": 989e12,
    "NVIDIA H100 PCIe": 756e12,
    "NVIDIA H100 NVL": 835e12,
    "NVIDIA H200": 989e12,
    "NVIDIA H200 NVL": 835e12,
    "NVIDIA GH200 480GB": 989e12,
    "NVIDIA A100-SXM4-80GB": 312e12,
    "NVIDIA A100-PCIE-40GB": 312e12,
    "NVIDIA A100 80GB PCIe": 312e12,
    "NVIDIA A10": 125e12,
    "NVIDIA A10G": None,  # not in the table: no MFU against a guess
    "Tesla V100-SXM2-16GB": None,  # no bf16 tensor cores
}


@pytest.mark.parametrize("name", DEVICES)
def test_the_nominal_peak_of_each_device_name_is_its_own(gpu_check, name):
    assert gpu_check.nominal_peak(name) == DEVICES[name]


def test_subprocesses_get_src_first_and_keep_the_environments_pythonpath(gpu_check):
    src = str(ROOT / "src")
    assert gpu_check.src_first({"PYTHONPATH": f"/opt/site{os.pathsep}/opt/more"})[
        "PYTHONPATH"] == os.pathsep.join([src, "/opt/site", "/opt/more"])
    assert gpu_check.src_first({})["PYTHONPATH"] == src
    assert gpu_check.src_first({"PYTHONPATH": ""})["PYTHONPATH"] == src


def synchronising_step():
    """Three syncs from two lines (as torch's sync debug mode warns: the same
    text each time) and a warning that is no sync."""
    for _ in range(2):
        warnings.warn("called a synchronizing CUDA operation", UserWarning, stacklevel=1)
    warnings.warn("called a synchronizing CUDA operation", UserWarning, stacklevel=1)
    warnings.warn("something else", UserWarning, stacklevel=1)
    return "result"


def test_every_sync_of_a_step_is_counted_with_where_it_came_from(gpu_check):
    ctx = gpu_check.Context("cpu", tiny=True, work=ROOT)
    for _ in range(2):  # the second step's warnings are counted too (no "once" filter)
        sources, result = gpu_check.step_syncs(ctx, synchronising_step)
        assert result == "result"
        assert len(sources) == 3
        lines = sorted({int(place.rsplit(":", 1)[1]) for place in sources})
        here = "tests/tools/test_gpu_check.py"
        assert [place.rsplit(":", 1)[0] for place in sources] == [here] * 3
        assert len(lines) == 2 and sources.count(f"{here}:{lines[0]}") == 2
