"""c2cuda: the naive baseline's outputs become the expected outputs at timing sizes, and must match
the C reference at checking sizes (adopt_baseline_outputs, shared by the evaluator and dataset
measurement). Run on CPU with torch tensors standing in for the device views."""
import numpy as np
import pytest
import torch

from pipeline.evaluation.build.compile import Compiler
from pipeline.evaluation.checks.group_data import TaskBroken
from pipeline.evaluation.checks.reference_c import adopt_baseline_outputs, build_c2cuda, run_c_reference


@pytest.fixture()
def saxpy_group(compile_cfg, builtin_tasks):
    task = builtin_tasks["c2cuda/saxpy"]
    group = build_c2cuda(task, seed=7)
    ref = Compiler(compile_cfg).compile_c_reference(task.reference)
    assert ref.ok, ref.log
    run_c_reference(group, ref.artifact)
    for cd in group.configs:  # what to_device does, on the CPU
        for table in cd.input_sets + cd.expected:
            for b, v in table.items():
                table[b] = torch.from_numpy(np.ascontiguousarray(v)).reshape(group.buffers[b].shape)
    for buf in group.buffers:
        buf.view = torch.zeros(buf.shape, dtype=getattr(torch, np.dtype(buf.dtype).name))
    return group


def stage(group, cd, si):
    for b, v in cd.input_sets[si].items():
        group.buffers[b].view.copy_(v)


def saxpy_baseline(group, scale_error=1.0):
    """A stand-in for the naive kernel: y = a*x + y over the staged buffers (times `scale_error`)."""
    def call(ci, cd):
        a = float(cd.calls["c2cuda"]["args"][1][2])
        x, y = (group.buffers[b].view for b in cd.buffers)
        y.copy_((a * x + y) * scale_error)
    return call


@pytest.mark.integration
def test_timing_configs_adopt_the_baseline_and_check_configs_match_the_reference(saxpy_group):
    group = saxpy_group
    timed = [cd for cd in group.configs if cd.time]
    assert timed and all(not cd.expected for cd in timed)
    adopt_baseline_outputs(group, stage, saxpy_baseline(group))
    for cd in timed:
        assert len(cd.expected) == 2
        x, y = cd.buffers
        a = float(cd.calls["c2cuda"]["args"][1][2])
        for si in range(2):
            want = a * cd.input_sets[si][x] + cd.input_sets[si][y]
            assert torch.allclose(cd.expected[si][y], want)
            assert not torch.equal(cd.expected[0][y], cd.expected[1][y])  # two input sets, two outputs


@pytest.mark.integration
def test_a_baseline_that_disagrees_with_the_c_reference_breaks_the_task(saxpy_group):
    with pytest.raises(TaskBroken, match="disagrees with the C reference"):
        adopt_baseline_outputs(saxpy_group, stage, saxpy_baseline(saxpy_group, scale_error=1.5))
