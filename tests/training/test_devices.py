"""A workstation's GPUs, one set per job (training/devices.py): every accelerator
that may train on a GPU claims its own, `auto` (the default) included."""

import pytest

from scalestudy.study import resources
from scalestudy.study.config import TrainerConfig
from scalestudy.training import devices


@pytest.mark.parametrize("accelerator", ["auto", "gpu", "cuda"])
def test_every_accelerator_that_may_use_a_gpu_claims_one_no_other_job_holds(tmp_path,
                                                                           accelerator):
    """Three local jobs of a study on two GPUs: the first two each take a GPU of
    their own (else Lightning puts both on cuda:0), the third finds none free."""
    slots = str(resources.write_slots(tmp_path / "gpus", 2))
    trainer = TrainerConfig(accelerator=accelerator, devices=1)
    jobs = [{resources.SLOTS_ENV: slots, "CUDA_VISIBLE_DEVICES": "3,5"} for _ in range(3)]
    assert devices.claim(trainer, jobs[0]) == ["3"]
    assert devices.claim(trainer, jobs[1]) == ["5"]
    assert [job["CUDA_VISIBLE_DEVICES"] for job in jobs[:2]] == ["3", "5"]
    assert all(resources.SLOTS_ENV not in job for job in jobs[:2])
    with pytest.raises(devices.NoFreeGPU):
        devices.claim(trainer, jobs[2])


@pytest.mark.parametrize("accelerator", ["cpu", "mps"])
def test_a_run_that_trains_on_no_gpu_claims_none(tmp_path, accelerator):
    slots = str(resources.write_slots(tmp_path / "gpus", 1))
    job = {resources.SLOTS_ENV: slots}
    assert devices.claim(TrainerConfig(accelerator=accelerator), job) is None
    assert job == {resources.SLOTS_ENV: slots}
