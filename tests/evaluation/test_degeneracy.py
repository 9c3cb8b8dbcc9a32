"""Degenerate tasks are found by running their references on the CPU; the check's own repairs (adversarial
inputs, redrawn state) are credited, and a task whose check a lazy kernel still passes is degenerate, kept out
of training and reported with its reason."""
import json

import pytest

from pipeline.evaluation.checks import reference_torch
from pipeline.evaluation.checks.degeneracy import degeneracy
from pipeline.tasks.degenerate import load_registry, split_degenerate, unchecked
from pipeline.tasks.sources import KERNELBENCH_TOLERANCE
from pipeline.tasks.validation import task_from_dict

HEAD = "import torch\nimport torch.nn as nn\n\n"
INPUTS = "\n\ndef get_inputs():\n    return [torch.randn(8, 256)]\n\ndef get_init_inputs():\n    return []\n"


def _task(forward: str, init: str = "", task_id: str = "t/probe", inputs: str = INPUTS, tolerance=None):
    source = (HEAD + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              + (f"        {init}\n" if init else "") + f"    def forward(self, x):\n        return {forward}\n"
              + inputs)
    return task_from_dict({"id": task_id, "kind": "torch2cuda", "family": "probe", "reference": source,
                           "configs": [{"name": "a"}, {"name": "b"}],
                           "tolerance": tolerance.model_dump() if tolerance else {"rtol": 1e-4, "atol": 1e-4}})


@pytest.fixture(autouse=True)
def _cpu(monkeypatch):
    monkeypatch.setattr(reference_torch, "DEVICE", "cpu")


def test_an_honest_task_is_ok():
    d = degeneracy(_task("torch.softmax(x, dim=1)"))
    assert d.verdict == "ok", d


def test_an_output_of_zeros_is_degenerate():
    d = degeneracy(_task("torch.clamp(x, min=-1, max=1) * 0.0"))
    assert d.verdict == "degenerate"
    assert any("zero" in p for p in d.under_check) and "every check configuration: writing zeros passes the check" in d.under_check
    assert d.reason


def test_an_output_insensitive_to_its_input_is_degenerate():
    d = degeneracy(_task("torch.relu(-torch.abs(x)) + 1.0"))  # ones whatever x holds
    assert d.verdict == "degenerate"
    assert any("insensitive to input 0" in p for p in d.under_check) and any("constant" in p for p in d.under_check)


def test_an_identity_at_the_task_s_sizes_is_degenerate_and_rounding_noise_too():
    assert degeneracy(_task("torch.clamp(x, min=-100.0, max=100.0)")).verdict == "degenerate"  # returns x
    scaled = _task("x.sum(dim=1, keepdim=True) * 1e-30")  # tiny but computed: the check is relative
    assert degeneracy(scaled).verdict == "ok"
    underflow = _task("torch.prod(x, dim=1)", tolerance=KERNELBENCH_TOLERANCE)  # 256 factors of randn: ~1e-42
    d = degeneracy(underflow)
    assert d.verdict == "degenerate" and "every check configuration: writing zeros passes the check" in d.under_check
    timed = underflow.model_copy(update={"configs": underflow.configs + [
        underflow.configs[0].model_copy(update={"name": "timing", "time": True})]})
    d = degeneracy(timed)  # the timed rounds' draw is adversarial: the product still underflows there
    assert "timing configuration timing: writing zeros passes the check" in d.under_check, d


def test_a_batchnorm_at_its_defaults_is_repaired_by_the_redrawn_state():
    bn = _task("self.bn(x)", "self.bn = nn.BatchNorm1d(256)")
    d = degeneracy(bn)
    assert d.verdict == "repaired", d
    assert any("'input0' passes the check" in p for p in d.task_draw)  # running stats 0 and 1: the input passes
    assert d.under_check == []


def test_a_kept_constant_is_a_repair_the_task_can_refuse():
    bn = _task("self.bn(x)", "self.bn = nn.BatchNorm1d(256)")
    fixed = bn.model_copy(update={"fixed_state": ["bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"]})
    assert degeneracy(fixed).verdict == "degenerate"


def test_the_registry_keeps_degenerate_tasks_out_and_forgets_a_changed_task(tmp_path):
    bad, good = _task("x * 0.0", task_id="t/bad"), _task("torch.tanh(x)", task_id="t/good")
    path = tmp_path / "degeneracy.json"
    path.write_text(json.dumps({"tasks": {
        "t/bad": {"hash": bad.content_hash(), "verdict": "degenerate", "reason": "writing zeros passes the check"},
        "t/good": {"hash": good.content_hash(), "verdict": "ok", "reason": ""}}}))
    load_registry.cache_clear()
    keep, dropped = split_degenerate([bad, good], str(path))
    assert [t.id for t in keep] == ["t/good"] and dropped == [("t/bad", "writing zeros passes the check")]
    changed = bad.model_copy(update={"reference": bad.reference.replace("0.0", "2.0")})
    assert split_degenerate([changed], str(path))[0] == [changed]  # checked as it was, not as it is


def test_the_shipped_registry_flags_none_of_the_built_in_tasks():
    from pipeline.tasks import load_tasks
    load_registry.cache_clear()
    keep, dropped = split_degenerate(load_tasks("builtin"))
    assert dropped == [] and len(keep) == 24
    assert unchecked(keep) == []  # every built-in task is vouched for: training on them is never refused


def test_a_norm_taken_as_a_constant_passes_the_task_s_draw_only():
    d = degeneracy(_task("x / torch.norm(x, p='fro')", inputs=INPUTS.replace("randn(8, 256)", "randn(64, 4096)"),
                         tolerance=KERNELBENCH_TOLERANCE))
    assert d.verdict == "repaired", d  # sqrt(N) for the norm passes on randn alone, not on the adversarial set
    assert any("a fixed affine function of 'input0'" in p for p in d.task_draw)


def test_a_lazy_kernel_must_pass_every_check_configuration():
    inputs = "\n\nrows = 1\n\ndef get_inputs():\n    return [torch.randn(4, rows, 300)]\n\ndef get_init_inputs():\n    return []\n"
    task = _task("x.transpose(1, 2).contiguous()", inputs=inputs)
    thin_only = task.model_copy(update={"configs": [c.model_copy(update={"params": {"rows": 1}})
                                                    for c in task.configs]})
    assert degeneracy(thin_only).verdict == "degenerate"  # a copy is the answer at every size it is checked at
    mixed = task.model_copy(update={"configs": [task.configs[0].model_copy(update={"params": {"rows": 1}}),
                                                task.configs[1].model_copy(update={"params": {"rows": 7}})]})
    assert degeneracy(mixed).verdict == "ok"


CAPPED_SUM = """void capped_sum(int n, const float* x, float* s) {
    double acc = 0.0;
    for (int i = 0; i < n; ++i) acc += x[i];
    s[0] = (float)(acc < 1000.0 ? acc : 1000.0);
}
"""


def _capped_task(timed_n: int):
    return task_from_dict({
        "id": "c2cuda/capped_probe", "kind": "c2cuda", "family": "probe", "function": "capped_sum",
        "reference": CAPPED_SUM,
        "args": [{"name": "n", "ctype": "int", "role": "scalar", "init": "n"},
                 {"name": "x", "ctype": "const float*", "role": "in", "size": "n", "init": "uniform(0, 1)"},
                 {"name": "s", "ctype": "float*", "role": "out", "size": "1"}],
        "configs": [{"name": "small", "params": {"n": 16}}, {"name": "odd", "params": {"n": 37}},
                    {"name": "big", "params": {"n": timed_n}, "time": True}],
        "work": {"flops": "n", "bytes": "4*n"}, "tolerance": {"rtol": 1e-3, "atol": 0.0},
        "implementations": [{"name": "naive", "strategy": "naive", "format": "c2cuda",
                             "code": 'extern "C" void capped_sum(int n, const float* x, float* s) {}\n'}]})


def test_a_task_degenerate_at_its_timing_configuration_alone_is_degenerate():
    # a sum capped at 1000 is informative over 16 or 37 draws of uniform(0, 1); over millions it is the cap, on
    # the timed rounds' adversarial draw as on the task's own: a kernel writing 1000 there is timed doing nothing
    d = degeneracy(_capped_task(1 << 24), max_bytes=1 << 20)  # shrunk to fit 1 MiB, still long enough
    assert d.verdict == "degenerate", d
    assert "timing configuration big: writing a constant passes the check" in d.under_check, d
    assert not any(p.startswith("every check configuration") for p in d.under_check), d
    assert "timing configuration big" in d.reason and d.sizes == "timing configuration big at n = 131072", d
    assert degeneracy(_capped_task(64), max_bytes=1 << 20).verdict == "ok"  # the same task timed on 64 draws


def test_eval_s_verdict_line_says_when_a_task_is_degenerate_or_unchecked(tmp_path):
    from pipeline.commands.eval_command import task_note, verdict_line
    from pipeline.core.records import EvalResult
    bad, new = _task("x * 0.0", task_id="t/bad"), _task("torch.tanh(x)", task_id="t/new")
    path = tmp_path / "degeneracy.json"
    path.write_text(json.dumps({"tasks": {"t/bad": {"hash": bad.content_hash(), "verdict": "degenerate",
                                                    "reason": "writing zeros passes the check"}}}))
    load_registry.cache_clear()
    result = EvalResult(task_id="t/bad", candidate_hash="0", format="kernelbench", verdict="correct", speedup=20.0)
    assert verdict_line(result, task_note(bad, str(path))) == (
        "verdict   correct, 20x (task degenerate: writing zeros passes the check; not counted in training or "
        "benchmarks)")
    assert "not in the registry" in task_note(new, str(path))


def test_the_registry_report_counts_per_source_and_family_and_lists_flagged_tasks():
    from pipeline.commands.data_command import registry_report
    text = registry_report({"c2cuda/dot": {"verdict": "ok"}, "c2cuda/gemm/a": {"verdict": "ok"},
                            "c2cuda/gemm/b": {"verdict": "degenerate", "reason": "timing configuration large: zero"},
                            "kernelbench/level2/9_X": {"verdict": "unchecked", "reason": "too large"}})
    assert "| builtin c2cuda | 1 | 0 | 0 | 0 |" in text and "| generated c2cuda | 1 | 0 | 1 | 0 |" in text
    assert "| gemm | 1 | 0 | 1 | 0 |" in text and "| kernelbench/level2 | 0 | 0 | 0 | 1 |" in text
    assert "- `c2cuda/gemm/b` **degenerate**: timing configuration large: zero" in text
