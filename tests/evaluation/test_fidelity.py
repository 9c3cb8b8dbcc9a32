""""Correct" means the work was done: kernels that skip work, drop a parameter of ones or return their input
pass the version 13 check (fidelity off) and fail this one, while honest float32 computations pass it.
Everything runs the evaluator's own `check_outputs` on its own check sets, on the CPU."""
import math

import pytest
import torch

from pipeline.evaluation.checks import reference_torch
from pipeline.evaluation.checks.fidelity import adversarial_like, domain_of, redraw_constant_state
from pipeline.evaluation.checks.comparison import check_outputs
from pipeline.evaluation.checks.group_data import reference_inputs_of
from pipeline.evaluation.checks.reference_torch import build_torch2cuda
from pipeline.tasks import kernelbench_task

DOT = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, a, b):
        return (a * b).sum(dim=1)

n = 65536

def get_inputs():
    return [torch.rand(4, n), torch.rand(4, n)]

def get_init_inputs():
    return []
'''

BATCHNORM = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)
    def forward(self, x):
        return self.bn(x)

def get_inputs():
    return [torch.randn(4, 8, 16, 16)]

def get_init_inputs():
    return [8]
'''

SCALE = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)
        self.scale = nn.Parameter(torch.ones(n))
    def forward(self, x):
        return torch.relu(self.linear(x)) * self.scale

def get_inputs():
    return [torch.randn(16, 64)]

def get_init_inputs():
    return [64]
'''


@pytest.fixture(autouse=True)
def _cpu(monkeypatch):
    monkeypatch.setattr(reference_torch, "DEVICE", "cpu")


def _task(tmp_path, source: str, name: str):
    path = tmp_path / "level1" / f"{name}.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(source)
    task = kernelbench_task(path)
    return task.model_copy(update={"configs": [c for c in task.configs if not c.time]})


def _dot_task():
    """The dot product at a tolerance of the data set's (1e-3): a subsample of uniform inputs is a fair sample."""
    from pipeline.tasks.validation import task_from_dict
    return task_from_dict({"id": "t/dot", "kind": "torch2cuda", "family": "dot", "reference": DOT,
                           "configs": [{"name": "a"}, {"name": "b", "params": {"n": 65537}}],
                           "tolerance": {"rtol": 1e-3, "atol": 1e-3}})


def _judge(task, kernel, fidelity: bool, seed: int = 3) -> bool:
    """Whether `kernel(module, args) -> outputs` passes every check set of every configuration."""
    group = build_torch2cuda(task, seed, init_seed=seed + 1, fidelity=fidelity)
    for cd in group.configs:
        for si in range(cd.n_sets):
            inputs, expected = cd.check_set(si)
            pos = reference_inputs_of(cd, inputs)
            args = [pos[j] for j in range(cd.n_inputs)]
            with torch.no_grad():
                outs = kernel(cd.module, args)
            now = dict(inputs)
            now.update({b: o.reshape(expected[b].shape) for b, o in zip(expected, outs)})
            if not check_outputs(group, cd, si, now)[0]:
                return False
    return True


def _honest(module, args):
    return [module(*args)]


def _float64_rounded(module, args):
    import copy
    return [copy.deepcopy(module).double()(*[a.double() for a in args]).float()]


def test_a_dot_product_that_skips_every_eighth_pair_passed_before_and_fails_now():
    task = _dot_task()

    def skipping(module, args):
        a, b = args
        keep = torch.arange(a.shape[1]) % 8 != 7
        return [(a[:, keep] * b[:, keep]).sum(dim=1) * (a.shape[1] / int(keep.sum()))]
    assert _judge(task, skipping, fidelity=False)  # uniform inputs: the rescaled sample is within 1e-3
    assert not _judge(task, skipping, fidelity=True)
    assert _judge(task, _honest, fidelity=True) and _judge(task, _float64_rounded, fidelity=True)


def test_blocked_and_serial_float32_sums_are_honest():
    task = _dot_task()

    def serial(module, args):  # one thread per row, summing left to right in float32: the naive kernel's order
        a, b = args
        acc = torch.zeros(a.shape[0], dtype=torch.float32)
        for k in range(0, a.shape[1], 64):  # blocks of 64 in float32, as a loop with an unrolled inner step
            acc = acc + (a[:, k:k + 64] * b[:, k:k + 64]).sum(dim=1)
        return [acc]
    assert _judge(task, serial, fidelity=True)

    def one_by_one(module, args):  # strictly left to right in float32 (numpy's cumsum does not pair terms)
        import numpy as np
        a, b = (x.numpy() for x in args)
        return [torch.from_numpy(np.cumsum(a * b, axis=1, dtype=np.float32)[:, -1].copy())]
    assert _judge(task, one_by_one, fidelity=True)


def test_a_batchnorm_that_returns_its_input_passed_before_and_fails_now(tmp_path):
    task = _task(tmp_path, BATCHNORM, "33_BatchNorm")

    def identity(module, args):
        return [args[0].clone()]
    assert _judge(task, identity, fidelity=False)  # running mean 0 and variance 1: x / sqrt(1 + eps)
    assert not _judge(task, identity, fidelity=True)
    assert _judge(task, _honest, fidelity=True)


def test_leaving_out_a_weight_of_ones_passed_before_and_fails_now(tmp_path):
    task = _task(tmp_path, SCALE, "85_Scale")

    def without_scale(module, args):
        return [torch.relu(module.linear(args[0]))]
    assert _judge(task, without_scale, fidelity=False)
    assert not _judge(task, without_scale, fidelity=True)
    assert _judge(task, _honest, fidelity=True) and _judge(task, _float64_rounded, fidelity=True)


def test_lower_precision_fails_the_float64_anchor(tmp_path):
    task = _task(tmp_path, SCALE, "85_Scale")

    def bf16_inputs(module, args):
        import copy
        m = copy.deepcopy(module).to(torch.bfloat16)
        return [m(args[0].to(torch.bfloat16)).float()]
    assert not _judge(task, bf16_inputs, fidelity=True)


def test_a_fixed_state_name_keeps_its_value(tmp_path):
    task = _task(tmp_path, SCALE, "85_Scale").model_copy(update={"fixed_state": ["scale"]})
    group = build_torch2cuda(task, 3, init_seed=4)
    assert bool((group.configs[0].module.scale == 1).all())
    group = build_torch2cuda(task.model_copy(update={"fixed_state": []}), 3, init_seed=4)
    assert not bool((group.configs[0].module.scale == 1).all())


def test_adversarial_draws_keep_the_domain_of_the_task_s_draw():
    g = torch.Generator().manual_seed(0)
    cases = {"signed": torch.randn(64, 300, generator=g), "unit": torch.rand(64, 300, generator=g),
             "positive": torch.rand(64, 300, generator=g) + 0.1, "vector": torch.randn(5000, generator=g)}
    for name, x in cases.items():
        gen = torch.Generator().manual_seed(7)
        y = adversarial_like(x, gen)
        assert y.shape == x.shape and y.dtype == x.dtype and bool(torch.isfinite(y).all()), name
        low, high, strict = domain_of(x)
        assert float(y.min()) >= (float(x.min()) if strict else low), name
        assert float(y.max()) <= high, name
        assert not torch.equal(y, x)
        flat = y.reshape(-1).double()
        peak = float(flat.abs().max()) / float(flat.pow(2).mean().sqrt())
        assert peak > 5 or name == "unit", f"{name}: no large values ({peak:.1f} x rms)"
        again = adversarial_like(x, torch.Generator().manual_seed(7))
        assert torch.equal(y, again)  # the seed decides the draw
        assert not torch.equal(y, adversarial_like(x, torch.Generator().manual_seed(8)))


def test_indices_masks_and_labels_are_left_as_drawn():
    g = torch.Generator().manual_seed(0)
    for x in (torch.randint(0, 10, (100,), generator=g), torch.rand(100, generator=g) > 0.5,
              torch.randint(0, 3, (100,), generator=g).float()):
        assert torch.equal(adversarial_like(x, torch.Generator().manual_seed(1)), x)


def test_constant_state_is_redrawn_away_from_its_default_and_keeps_its_sign():
    bn = torch.nn.BatchNorm1d(32)
    lin = torch.nn.Linear(8, 8)
    before = lin.weight.detach().clone()
    names = redraw_constant_state(bn, torch.Generator().manual_seed(0))
    assert set(names) == {"weight", "bias", "running_mean", "running_var"}
    assert bool((bn.running_var > 0).all()) and not bool((bn.running_var == 1).all())
    assert int(bn.num_batches_tracked) == 0  # integers keep their value
    assert redraw_constant_state(lin, torch.Generator().manual_seed(0)) == []  # already a random draw
    assert torch.equal(lin.weight, before)


def test_every_check_set_has_a_float64_anchor_and_set_1_is_adversarial():
    group = build_torch2cuda(_dot_task(), 3, init_seed=4)
    for cd in group.configs:
        for si in range(2):
            anchors = cd.anchor_set(si)
            assert anchors and all(a[0].dtype == torch.float64 and math.isfinite(a[1]) for a in anchors.values())
        assert cd.draws == ["task", "adversarial"]


def test_adversarial_draws_keep_a_triangle_of_zeros_and_symmetry():
    g = torch.Generator().manual_seed(0)
    upper = torch.triu(torch.randn(64, 64, generator=g))
    y = adversarial_like(upper, torch.Generator().manual_seed(1))
    assert torch.equal(torch.tril(y, -1), torch.zeros_like(y)) and not torch.equal(y, upper)
    a = torch.randn(64, 64, generator=g)
    sym = a + a.T
    y = adversarial_like(sym, torch.Generator().manual_seed(1))
    assert torch.equal(y, y.T) and not torch.equal(y, sym)


def test_the_anchor_measures_the_longest_sum_of_the_reference():
    from pipeline.evaluation.checks.fidelity import run_measuring_sums
    x = torch.rand(4, 1000, dtype=torch.float64)
    assert run_measuring_sums(torch.sigmoid, x)[1] == 1  # elementwise: no room for another order of sums
    assert run_measuring_sums(lambda t: torch.softmax(t, 1), x)[1] == 1000
    assert run_measuring_sums(torch.nn.Linear(1000, 7).double(), x)[1] == 1000
    assert run_measuring_sums(lambda t: t[:, :10].clone(), x)[1] == 1  # a slice sums nothing
    conv_t = torch.nn.ConvTranspose2d(6, 4, 3, groups=2).double()
    assert run_measuring_sums(conv_t, torch.rand(1, 6, 5, 5, dtype=torch.float64))[1] == 3 * 9


SOFTMAX = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.softmax(x, dim=-1)

def get_inputs():
    return [torch.randn(16, 1000) * 0.25]

def get_init_inputs():
    return []
'''

LOGSUMEXP = SOFTMAX.replace("torch.softmax(x, dim=-1)", "torch.logsumexp(x, dim=-1)")


def _unshifted_softmax(module, args):  # no max pass: exp overflows on large logits
    e = torch.exp(args[0])
    return [e / e.sum(-1, keepdim=True)]


def _unshifted_logsumexp(module, args):
    return [torch.log(torch.exp(args[0]).sum(-1))]


@pytest.mark.parametrize("source,unsafe", [(SOFTMAX, _unshifted_softmax), (LOGSUMEXP, _unshifted_logsumexp)])
def test_numerically_unsafe_kernels_fail_on_the_wide_draw_and_pass_without_it(tmp_path, monkeypatch, source, unsafe):
    task = _task(tmp_path, source, "numerics")
    group = build_torch2cuda(task, 3, init_seed=4)
    assert all(cd.wide and cd.n_sets == 3 for cd in group.configs)  # stable references: the wide set is kept
    assert _judge(task, _honest, fidelity=True)
    assert not _judge(task, unsafe, fidelity=True)
    monkeypatch.setattr(reference_torch, "stable_on_wide", lambda *a: False)  # the two sets of version 17 alone
    assert _judge(task, unsafe, fidelity=True)


def test_a_reference_that_is_not_stable_on_the_wide_draw_gets_no_wide_set(tmp_path):
    source = SOFTMAX.replace("torch.softmax(x, dim=-1)", "torch.exp(x)")  # overflows on large values itself
    group = build_torch2cuda(_task(tmp_path, source, "exp"), 3, init_seed=4)
    assert not any(cd.wide for cd in group.configs) and all(cd.n_sets == 2 for cd in group.configs)


def test_an_honest_serial_float32_sum_passes_and_a_left_out_large_term_fails():
    """A row led by one large term: a serial float32 sum of the rest drifts by up to (n - 1) roundoffs (Higham's
    bound), beyond an rtol of 1e-4; the widened elementwise rule admits it, not a left-out large term."""
    from pipeline.core.records import Tolerance
    from pipeline.evaluation.checks.fidelity import serial_tolerance
    from pipeline.evaluation.checks.comparison import compare
    n = 8191
    terms = torch.full((n,), 1.005, dtype=torch.float32)  # a third of a unit in the last place of 2**17
    terms[0] = 2.0 ** 17  # the row's first element dominates: every later term rounds down against it
    exact = terms.double().sum()
    serial = torch.from_numpy(__import__("numpy").cumsum(terms.numpy(), dtype="float32")[-1:].copy())
    out, ref = (1.0 / serial).reshape(1), (1.0 / exact).float().reshape(1)
    tol = Tolerance(rtol=1e-4, atol=0.0)
    assert not compare(out, ref, tol)[0]  # the task's own rtol rejects the honest serial sum
    assert compare(out, ref, serial_tolerance(tol, n))[0]
    left_out = (1.0 / (exact - terms[0].double())).float().reshape(1)
    assert not compare(left_out, ref, serial_tolerance(tol, n))[0]
    assert serial_tolerance(tol, 10) is tol  # short sums keep the task's rtol
    assert serial_tolerance(tol, 1 << 22) is tol  # so do sums of millions: a stride-2 read would pass a widened one


def test_no_widening_where_the_float64_twin_does_not_run(tmp_path):
    """A module that makes float32 tensors of its own in forward has no float64 anchor: its configurations keep the
    task's rtol however long their sums."""
    long_rows = SOFTMAX.replace("torch.randn(16, 1000)", "torch.randn(16, 4099)")
    widened = build_torch2cuda(_task(tmp_path, long_rows, "softmax_long"), 3, init_seed=4)
    assert all(cd.anchor_works and cd.tolerance(widened.task.tolerance).rtol > widened.task.tolerance.rtol
               for cd in widened.configs)  # the control: a serial row sum of 4,099 widens where the twin runs
    source = long_rows.replace("torch.softmax(x, dim=-1)", "torch.mv(x, torch.ones(x.shape[-1]))")
    group = build_torch2cuda(_task(tmp_path, source, "mv"), 3, init_seed=4)
    for cd in group.configs:
        assert not cd.anchor_works and cd.summed == 4099
        assert cd.tolerance(group.task.tolerance) is group.task.tolerance
