"""The fused round check against `comparison.compare`: the same verdicts, reasons and largest error (1e-12 relative)
on random, NaN, Inf, integer, huge and tiny outputs, partial writes and decoys; one readback per round."""
from __future__ import annotations

import math

import pytest
import torch

from pipeline.evaluation.checks import fused_check
from pipeline.evaluation.checks.fused_check import RoundCheck, compare_plain as compare, reference_stats
from pipeline.evaluation.checks.comparison import rounding_floor
from pipeline.core.records import Tolerance


def cases():
    g = torch.Generator().manual_seed(7)
    r = torch.randn(1000, generator=g)
    yield "exact", r.clone(), r
    yield "close", r + 1e-7 * torch.randn(1000, generator=g), r
    yield "one off", torch.where(torch.arange(1000) == 417, r + 1.0, r), r
    yield "scaled", r * 1.01, r
    nan_out = r.clone()
    nan_out[3] = float("nan")
    yield "nan in output", nan_out, r
    inf_out = r.clone()
    inf_out[5] = float("inf")
    yield "inf in output", inf_out, r
    ref_inf = r.clone()
    ref_inf[[2, 9]] = torch.tensor([float("inf"), float("nan")])
    yield "reference inf and nan matched", ref_inf.clone(), ref_inf
    unmatched = ref_inf.clone()
    unmatched[2] = float("-inf")
    yield "reference inf unmatched", unmatched, ref_inf
    half = r.clone()
    half[500:] = float("nan")  # a partial write: the rest still poisoned
    yield "partial write", half, r
    yield "huge", r * 1e30, r * 1e30 * (1 + 1e-7)
    yield "tiny", r * 1e-30 + 1e-37, r * 1e-30
    yield "tiny zeros", torch.zeros(1000), r * 1e-6  # within the absolute allowance, off by the whole norm
    yield "all zero reference", torch.zeros(1000) + 1e-9, torch.zeros(1000)
    yield "empty", torch.zeros(0), torch.zeros(0)
    yield "shape", torch.zeros(10), torch.zeros(11)
    ints = torch.randint(0, 50, (300,), generator=g)
    yield "integers equal", ints.clone(), ints
    other = ints.clone()
    other[[1, 7]] += 1
    yield "integers differ", other, ints
    yield "float64", r.double() + 1e-9, r.double()
    yield "matrix", (r + 3e-4).reshape(20, 50), r.reshape(20, 50)


TOLERANCES = [Tolerance(rtol=1e-4, atol=1e-4), Tolerance(rtol=1e-3, atol=1e-3, rel_l2=1e-3),
              Tolerance(rtol=0.0, atol=0.0), Tolerance(rtol=1e-2, atol=0.0, atol_abs=1e-5, rel_l2=1e-2)]


@pytest.mark.integration
@pytest.mark.parametrize("native", [True, False], ids=["c-pass", "torch-pass"])
@pytest.mark.parametrize("chunk", [1 << 25, 64])
@pytest.mark.parametrize("tol", TOLERANCES, ids=lambda t: f"{t.rtol}-{t.atol}-{t.atol_abs}-{t.rel_l2}")
def test_the_same_verdicts_as_compare(tol, chunk, native, monkeypatch):
    """Both passes on the CPU: fused_check.c (float32 tensors; the criterion per element the GPU kernels run,
    fused_check.h) and torch's (every other dtype, and where no C compiler is found)."""
    monkeypatch.setattr(fused_check, "COMPARE_CHUNK", chunk)  # chunked: the first chunk holding the worst error
    inputs = [torch.randn(300, generator=torch.Generator().manual_seed(3))]
    floor = fused_check.ROUNDING_FLOOR * float(inputs[0].double().pow(2).mean().sqrt()) if tol.rel_l2 > 0 else 0.0
    check = RoundCheck(tol, native_cpu=native)
    check.floor_of(inputs)
    all_cases = list(cases())
    for name, out, ref in all_cases:
        check.output(name, out, ref)
    check.read()
    assert check.floor == pytest.approx(floor, rel=1e-15) if floor else True
    big = torch.randn(200_000, generator=torch.Generator().manual_seed(5))
    far = big.clone()
    far[[10, 150_000]] += torch.tensor([5.0, 5.0])  # a tie for the worst error: the first index is named
    all_cases += [("large", big * (1 + 1e-6), big), ("tie", far, big)]
    for name, out, ref in all_cases[-2:]:
        check.output(name, out, ref)
    check.read()
    for name, out, ref in all_cases:
        want = compare(out, ref, tol, floor)
        got = check.verdict(name)
        assert got[0] == want[0] and got[2] == want[2], (name, got, want)
        assert got[1] == want[1] or math.isclose(got[1], want[1], rel_tol=1e-12), (name, got[1], want[1])


def test_reference_statistics_are_made_once_and_reused():
    r = torch.randn(500)
    stats = reference_stats(r)
    check = RoundCheck(Tolerance(rtol=1e-4, atol=1e-4, rel_l2=1e-3))
    check.output("a", r * 1.00001, r, stats)
    check.output("b", torch.zeros(500), r, stats)
    check.read()
    assert check.verdict("a")[0] and not check.verdict("b")[0]


def test_inputs_unchanged_and_decoys_mean_what_torch_equal_means():
    x = torch.randn(100)
    check = RoundCheck(Tolerance())
    check.unchanged("same", x, x.clone())
    changed = x.clone()
    changed[10] += 1e-6
    check.unchanged("changed", changed, x)
    with_nan = x.clone()
    with_nan[0] = float("nan")
    check.unchanged("nan", with_nan, with_nan.clone())  # NaN never equals itself, as torch.equal says
    poisoned = torch.full((50,), float("nan"))
    poisoned.view(torch.uint8).fill_(0xFF)
    check.poisoned("decoy kept", poisoned, 0xFF)
    written = poisoned.clone()
    written[7] = 0.0
    check.poisoned("decoy written", written, 0xFF)
    check.read()
    assert [check.holds(k) for k in ("same", "changed", "nan", "decoy kept", "decoy written")] == \
        [torch.equal(x, x.clone()), False, torch.equal(with_nan, with_nan.clone()), True, False]


def test_one_readback_per_round():
    """Every check of a round queued without a host wait; `read` is the one device-to-host transfer."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Syncs(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = func.overloadpacket.__name__
            if name in ("_local_scalar_dense", "equal", "is_nonzero") or (name == "_to_copy" and "device" in kwargs):
                self.n += 1
            return func(*args, **kwargs)
    tol = Tolerance(rtol=1e-4, atol=1e-4, rel_l2=1e-3)
    outs = [torch.randn(1000) for _ in range(8)]
    with Syncs() as syncs:
        check = RoundCheck(tol)
        check.floor_of([torch.randn(1000)])
        for i, o in enumerate(outs):
            check.output(i, o + 1e-7, o)
            check.unchanged(("in", i), o, o.clone())
        queued = syncs.n
        check.read()
    assert queued == 0 and syncs.n == 1
    assert all(check.verdict(i)[0] and check.holds(("in", i)) for i in range(8))


@pytest.mark.gpu
@pytest.mark.parametrize("tol", TOLERANCES, ids=lambda t: f"{t.rtol}-{t.atol}-{t.atol_abs}-{t.rel_l2}")
def test_the_cuda_pass_gives_compares_verdicts(tol, compile_cfg):
    """The kernels (fused_check.cu) on the GPU against `compare` on the same tensors: same verdicts and reasons,
    the largest error within 1e-12 relative (their sums run in another order)."""
    from pipeline.evaluation.build.compile import Compiler
    from pipeline.evaluation.checks.fused_check import CudaPass
    cuda = CudaPass.load(Compiler(compile_cfg))
    assert cuda is not None
    inputs = [torch.randn(300, generator=torch.Generator().manual_seed(3)).cuda()]
    floor = rounding_floor(tol, inputs)
    check = RoundCheck(tol, cuda=cuda)
    check.floor_of(inputs)
    big = torch.randn(3_000_000, device="cuda")
    all_cases = [(n, o.cuda(), r.cuda()) for n, o, r in cases()] + [("large", big * (1 + 1e-6), big)]
    for name, out, ref in all_cases:
        check.output(name, out, ref)
    check.read()
    for name, out, ref in all_cases:
        want, got = compare(out, ref, tol, floor), check.verdict(name)
        assert got[0] == want[0] and got[2] == want[2], (name, got, want)
        assert got[1] == want[1] or math.isclose(got[1], want[1], rel_tol=1e-12), (name, got[1], want[1])


def test_the_c_pass_reads_each_float32_tensor_once():
    """On CPU float32 tensors the round's checks run fused_check.c: no float64 temporaries, no elementwise torch
    operators over the tensors (only the few rows of partial sums), and the same answers as the torch pass."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from pipeline.evaluation.checks.fused_check import cpu_pass
    assert cpu_pass() is not None, "the host C compiler builds fused_check.c"

    class Big(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if any(isinstance(a, torch.Tensor) and a.numel() >= 1000 for a in args):
                self.ops.append(func.overloadpacket.__name__)
            return out
    tol = Tolerance(rtol=1e-4, atol=1e-4, rel_l2=1e-3)
    x, out = torch.randn(4096), torch.randn(4096)
    near, far, staged, moved = out + 1e-6, out + 1.0, x.clone(), x.clone()
    moved[17] = 3.0
    answers = []
    for native in (True, False):
        with Big() as big:
            check = RoundCheck(tol, native_cpu=native)
            check.floor_of([x])
            check.output("o", near, out)
            check.output("far", far, out)
            check.unchanged("x", x, staged)
            check.unchanged("moved", moved, x)
            check.read()
        big.ops = [op for op in big.ops if op not in ("view", "reshape", "_unsafe_view", "alias", "slice")]
        answers.append((check.floor, check.verdict("o"), check.verdict("far")[:2], check.holds("x"),
                        check.holds("moved")))
        if native:
            assert big.ops == [], big.ops  # every check ran in C
        else:
            assert "_to_copy" in big.ops and "ne" in big.ops
    (f1, o1, far1, *h1), (f2, o2, far2, *h2) = answers
    assert f1 == pytest.approx(f2, rel=1e-12) and o1[0] and o2[0] and h1 == h2 == [True, False]
    assert math.isclose(o1[1], o2[1], rel_tol=1e-12) and math.isclose(far1[1], far2[1], rel_tol=1e-12)
