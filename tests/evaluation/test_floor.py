"""The roofline floor: the task's own precision sets the compute peak, and a task without a work model
(KernelBench problems) still gets a floor from moving its inputs and outputs once."""
import pytest

from pipeline.core.config import EvalSection
from pipeline.evaluation.checks.group_data import Buffer, ConfigData, GroupData
from pipeline.evaluation.runner import config_floor_ms
from pipeline.tasks import load_tasks


def _group(dtype: str, flops: float, nbytes: float):
    task = next(t for t in load_tasks("builtin") if t.id == "c2cuda/saxpy")
    bufs = [Buffer("c.x", dtype, (10,), "in"), Buffer("c.i", "int32", (10,), "in")]
    cd = ConfigData("c", False, True, {}, [0, 1], [], flops=flops, min_bytes=nbytes)
    return GroupData(task, bufs, [cd]), cd


def test_fp32_work_uses_the_fp32_rate_not_the_tensor_core_rate():
    cfg = EvalSection(result_cache_dir="")
    group, cd = _group("float32", flops=67e9, nbytes=0)
    assert config_floor_ms(cfg, group, cd) == pytest.approx(1.0)  # 67 GFLOP at 67 TFLOP/s
    group, cd = _group("bfloat16", flops=989e9, nbytes=0)
    assert config_floor_ms(cfg, group, cd) == pytest.approx(1.0)


def test_bytes_bound_floor():
    cfg = EvalSection(result_cache_dir="")
    group, cd = _group("float32", flops=0, nbytes=4.8e9)
    assert config_floor_ms(cfg, group, cd) == pytest.approx(1.0)


def test_a_task_without_work_model_gets_its_inputs_and_outputs_as_floor(tmp_path, monkeypatch):
    from pipeline.evaluation.checks import reference_torch
    from pipeline.evaluation.checks.reference_torch import build_torch2cuda
    from pipeline.tasks import kernelbench_task
    monkeypatch.setattr(reference_torch, "DEVICE", "cpu")  # the layout and sizes need no GPU
    src = tmp_path / "1_Relu.py"
    src.write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
                   "        return torch.relu(x)\n\nN = 4096\n\ndef get_inputs():\n    return [torch.randn(16, N)]\n\n"
                   "def get_init_inputs():\n    return []\n")
    group = build_torch2cuda(kernelbench_task(src), seed=1, init_seed=2)
    assert all(cd.min_bytes == 2 * 4 * 16 * 4096 for cd in group.configs if cd.time)
