"""The checks after a timed batch in one pass, read back with one synchronisation per round.

    stats = reference_stats(expected_tensor)            # once per expected output (the reference side)
    check = RoundCheck(tol, floor)
    check.output(key, out, ref, stats); check.unchanged(key, buf, staged); check.poisoned(key, buf, byte)
    check.read()                                        # the one host synchronisation
    check.verdict(key) -> (ok, worst, reason)           # outputs: exactly `comparison.compare`'s verdict
    check.holds(key) -> bool                            # inputs unchanged, decoys as staged

The criterion is `comparison.compare`'s, term for term: NaN and Inf semantics, the elementwise allowance
rtol*|ref| + atol*rms(ref) + atol_abs, rel_l2 above the rounding floor, exact integers. What changes is
where the work happens: the reference's statistics (its largest finite magnitude, finite count and sum of
squares) are made once per expected tensor instead of once per check, and every statistic of a check
stays on the device, in float64, until one readback of all the checks of the round. `compare` reads the
output and the reference three times and synchronises about eleven times per output; here the
candidate's pass reads each once, and the host waits once per round (twice where a check fails: the
values at the worst element are read for the message).

Float32 tensors go through a compiled pass (`NativePass`): fused_check.cu's kernels on the GPU (`CudaPass`),
fused_check.c's loops on the CPU (`CpuPass`), both built from fused_check.h, the criterion per element written
once; each tensor is read once and no float64 temporary is made. Other dtypes, strided views and hosts without a
compiler take torch's operators, in chunks of COMPARE_CHUNK elements so float64 temporaries stay small.
"""
from __future__ import annotations

import math
from functools import lru_cache

COMPARE_CHUNK = 1 << 25  # elements per step of the torch pass: its float64 temporaries stay near 1 GiB
ROUNDING_FLOOR = 4 * 2.0 ** -23  # float32 rounding of values of the inputs' size (comparison.rounding_floor)

# columns of an output check's row, all float64: counts are exact below 2**53
BAD, NAN, UNLIKE, DIFF_SQ, WORST, WORST_AT, OUTSIDE, SCALE, FINITE_N, SQ, N = range(11)
WIDTH = 11


def reference_stats(ref):
    """[scale, finite count, sum of (ref/scale)**2] of an expected output, on its device (no synchronisation):
    `compare`'s reference-side sums, made once however often the reference is checked against."""
    import torch

    r = ref.reshape(-1)
    n = r.numel()
    zero = torch.zeros((), dtype=torch.float64, device=r.device)
    scale, finite_n, sq = zero.clone(), zero.clone(), zero.clone()
    for a in range(0, n, COMPARE_CHUNK):
        r64 = r[a:a + COMPARE_CHUNK].double()
        finite = torch.isfinite(r64)
        finite_n = finite_n + finite.sum()
        scale = torch.maximum(scale, torch.where(finite, r64.abs(), 0.0).max())
    safe = torch.where(scale > 0, scale, 1.0)
    for a in range(0, n, COMPARE_CHUNK):
        r64 = r[a:a + COMPARE_CHUNK].double()
        sq = sq + ((torch.where(torch.isfinite(r64), r64, 0.0) / safe) ** 2).sum()
    return torch.stack([scale, finite_n, sq])


THREADS = 256  # fused_check.cu's block size
MAX_BLOCKS = 1024


def native_source(name: str) -> str:
    """fused_check.cu or fused_check.c with fused_check.h (the criterion per element, shared) spliced in."""
    from pathlib import Path
    here = Path(__file__).parent
    return (here / name).read_text().replace('#include "fused_check.h"', (here / "fused_check.h").read_text())


class NativePass:
    """The round check's pass over float32 tensors as compiled code (fused_check.h's criterion per element): the
    reference read once for its statistics, then the output and the reference read once together, every statistic
    accumulated in float64. Called through ctypes; returns rows of float64 partials that torch reduces where the
    tensors are, so nothing waits. `CudaPass` runs the kernels of fused_check.cu on torch's current stream;
    `CpuPass` runs fused_check.c's loops; each says how it is built (`_build(compiler)`) and where its tensors live
    (`device_type`). `load` returns None where the pass cannot be built or loaded; the torch pass then does the same
    work."""
    device_type = ""

    def __init__(self, library: str):
        import ctypes
        lib = ctypes.CDLL(library)
        p, ll, i, d = ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int, ctypes.c_double
        self.ref_fn, self.out_fn, self.differ_fn = lib.cudaperf_ref_stats, lib.cudaperf_output_stats, lib.cudaperf_differ
        self.ref_fn.argtypes, self.ref_fn.restype = [p, ll, p, i, p], i
        self.out_fn.argtypes, self.out_fn.restype = [p, p, ll, p, d, d, d, p, i, p], i
        self.differ_fn.argtypes, self.differ_fn.restype = [p, p, ll, p, i, p], i
        self._lib = lib

    @classmethod
    def load(cls, compiler) -> "NativePass | None":
        """The pass built by `compiler` (cached) and loaded, or None where it cannot be."""
        try:
            built = cls._build(compiler)
            return cls(built.artifact) if built.ok else None
        except OSError:
            return None

    def fits(self, *tensors) -> bool:
        """All `tensors` float32, contiguous, of one size above zero, on this pass's device."""
        import torch
        n = tensors[0].numel()
        return n > 0 and all(t.device.type == self.device_type and t.dtype == torch.float32 and t.is_contiguous()
                             and t.numel() == n for t in tensors)

    def _blocks(self, n: int) -> int:
        return 1

    def _stream(self) -> int:
        return 0

    def _call(self, fn, what: str, *args) -> None:
        code = fn(*args)
        if code:
            raise RuntimeError(f"the fused check's {what} failed to launch (CUDA error {code})")

    def _ref_rows(self, ref):
        import torch
        n, blocks = ref.numel(), self._blocks(ref.numel())
        part = torch.empty((blocks, 3), dtype=torch.float64, device=ref.device)
        self._call(self.ref_fn, "reference pass", ref.data_ptr(), n, part.data_ptr(), blocks, self._stream())
        return part

    def reference_stats(self, ref):
        """[scale, finite count, sum of (ref/scale)**2], as `reference_stats` makes them."""
        import torch
        part = self._ref_rows(ref)
        scale, finite_n = part[:, 0].max(), part[:, 1].sum()
        sq = torch.where(scale > 0, part[:, 2].sum() / torch.where(scale > 0, scale, 1.0) ** 2, 0.0)
        return torch.stack([scale, finite_n, sq])

    def sum_sq(self, x):
        """The sum of x**2 over the finite elements of x (the rounding floor's sum)."""
        return self._ref_rows(x)[:, 2].sum()

    def differ(self, a, b):
        """The count of elements of `a` unlike those of `b` (a NaN never equals itself, as torch.equal says)."""
        import torch
        n, blocks = a.numel(), self._blocks(a.numel())
        part = torch.empty((blocks,), dtype=torch.float64, device=a.device)
        self._call(self.differ_fn, "comparison pass", a.data_ptr(), b.data_ptr(), n, part.data_ptr(), blocks,
                   self._stream())
        return part.sum()

    def output_row(self, out, ref, stats, tol):
        import torch
        n, blocks = ref.numel(), self._blocks(ref.numel())
        part = torch.empty((blocks, 7), dtype=torch.float64, device=ref.device)
        stats = stats.contiguous()
        self._call(self.out_fn, "output pass", out.data_ptr(), ref.data_ptr(), n, stats.data_ptr(), float(tol.rtol),
                   float(tol.atol), float(tol.atol_abs), part.data_ptr(), blocks, self._stream())
        scale = stats[0]
        safe = torch.where(scale > 0, scale, 1.0)
        worst = part[:, 4].max()
        worst_at = torch.where(part[:, 4] == worst, part[:, 5], float("inf")).min()
        return torch.stack([part[:, 0].sum(), part[:, 1].sum(), part[:, 2].sum(), part[:, 3].sum() / safe ** 2, worst,
                            worst_at, part[:, 6].sum(), scale, stats[1], stats[2], torch.zeros_like(scale) + n])


class CudaPass(NativePass):
    """The pass as CUDA kernels (fused_check.cu), built once per evaluator by the project's compiler (cached)."""
    device_type = "cuda"

    @classmethod
    def _build(cls, compiler):
        return compiler.compile_cuda(native_source("fused_check.cu"))

    def _blocks(self, n: int) -> int:
        return max(1, min(MAX_BLOCKS, (n + THREADS - 1) // THREADS))

    def _stream(self) -> int:
        import torch
        return torch.cuda.current_stream().cuda_stream


class CpuPass(NativePass):
    """The pass as C loops (fused_check.c), built once per process with the host C compiler (cached): the CPU
    tests run the criterion the GPU pass runs, and a round on CPU tensors reads each tensor once."""
    device_type = "cpu"

    @classmethod
    def _build(cls, compiler):
        return compiler.compile_c_reference(native_source("fused_check.c"), "-O2")


@lru_cache(maxsize=1)
def cpu_pass() -> "CpuPass | None":
    """This process's CpuPass (None where no C compiler can build it: the torch pass then runs)."""
    from pipeline.core.config import CompileSection
    from pipeline.evaluation.build.compile import Compiler
    try:
        return CpuPass.load(Compiler(CompileSection()))
    except Exception:  # noqa: BLE001 - no compiler, no cache directory, no sandbox: the torch pass is as exact
        return None


class RoundCheck:
    """Every check of one round (outputs, unchanged inputs, decoys as staged), queued on the device and read
    back with one synchronisation (`read`). Float32 tensors go through a compiled pass: `cuda` (a CudaPass) on the
    GPU, this process's CpuPass on the CPU (unless `native_cpu` is off); each output and its reference read once."""

    def __init__(self, tol, floor: float = 0.0, cuda: "CudaPass | None" = None, native_cpu: bool = True):
        self.tol, self.floor, self.cuda, self.native_cpu = tol, floor, cuda, native_cpu
        self._rows, self._keys, self._kinds, self._tensors = [], [], [], {}
        self._values = None

    # --- queueing (no synchronisation) ------------------------------------------------------------------------
    def output(self, key, out, ref, stats=None) -> None:
        """Queue `out` against `ref` (same shape; `stats` from reference_stats, made here when None)."""
        import torch

        self._tensors[key] = (out, ref)
        if tuple(out.shape) != tuple(ref.shape):
            self._queue(key, "shape", torch.zeros(WIDTH, dtype=torch.float64, device=ref.device))
            return
        o, r = out.reshape(-1), ref.reshape(-1)
        n = r.numel()
        zero = torch.zeros((), dtype=torch.float64, device=r.device)
        tol = self.tol
        if not ref.is_floating_point() and tol.rtol == 0 and tol.atol == 0 and tol.atol_abs == 0:
            diff = zero.clone()
            for a in range(0, n, COMPARE_CHUNK):
                diff = diff + (o[a:a + COMPARE_CHUNK] != r[a:a + COMPARE_CHUNK]).sum()
            row = torch.zeros(WIDTH, dtype=torch.float64, device=r.device)
            row[OUTSIDE], row[N] = diff, n
            self._queue(key, "exact", row)
            return
        native = self._native(out, ref)
        if native is not None:
            stats = native.reference_stats(r) if stats is None else stats
            self._queue(key, "float", native.output_row(o, r, stats, tol))
            return
        stats = reference_stats(ref) if stats is None else stats
        scale, finite_n, sq = stats[0], stats[1], stats[2]
        safe = torch.where(scale > 0, scale, 1.0)
        rms = torch.where(finite_n > 0, scale * torch.sqrt(sq / torch.where(finite_n > 0, finite_n, 1.0)), 0.0)
        bad, nan, unlike, diff_sq, outside = zero.clone(), zero.clone(), zero.clone(), zero.clone(), zero.clone()
        worst, worst_at = zero.clone(), zero.clone()
        for a in range(0, n, COMPARE_CHUNK):
            o64, r64 = o[a:a + COMPARE_CHUNK].double(), r[a:a + COMPARE_CHUNK].double()
            finite = torch.isfinite(r64)
            o_nan = torch.isnan(o64)
            bad = bad + (~torch.isfinite(o64) & finite).sum()
            nan = nan + (o_nan & finite).sum()
            unlike = unlike + (~finite & ~((o64 == r64) | (o_nan & torch.isnan(r64)))).sum()
            diff = o64 - r64
            diff_sq = diff_sq + ((torch.where(finite, diff, 0.0) / safe) ** 2).sum()
            err = diff.abs() / (tol.rtol * r64.abs() + tol.atol * rms + tol.atol_abs + 1e-300)
            err = torch.where(finite, err, 0.0)
            m = err.max()
            outside = outside + (err > 1).sum()
            take = m > worst  # the first chunk that holds the largest error, as `compare` keeps it
            worst_at = torch.where(take, a + err.argmax().double(), worst_at)
            worst = torch.where(take, m, worst)
        row = torch.stack([bad, nan, unlike, diff_sq, worst, worst_at, outside, scale, finite_n, sq, zero + n])
        self._queue(key, "float", row)

    def _native(self, *tensors) -> "NativePass | None":
        """The compiled pass for `tensors` where one fits them (float32, contiguous, one size), else None."""
        if self.cuda is not None and self.cuda.fits(*tensors):
            return self.cuda
        if self.native_cpu and tensors[0].device.type == "cpu":
            cpu = cpu_pass()
            if cpu is not None and cpu.fits(*tensors):
                return cpu
        return None

    def floor_of(self, inputs) -> None:
        """Queue the sums of `comparison.rounding_floor` over `inputs` (the floor is known after `read`)."""
        import torch

        if self.tol.rel_l2 <= 0:
            return
        for i, x in enumerate(inputs):
            if x.is_floating_point() and x.numel():
                flat = x.reshape(-1)
                native = self._native(flat)
                if native is not None:
                    sq = native.sum_sq(flat)
                else:
                    sq = torch.zeros((), dtype=torch.float64, device=flat.device)
                    for a in range(0, flat.numel(), COMPARE_CHUNK):
                        sq = sq + flat[a:a + COMPARE_CHUNK].double().pow(2).nan_to_num(0.0, 0.0, 0.0).sum()
                row = torch.zeros(WIDTH, dtype=torch.float64, device=flat.device)
                row[SQ], row[N] = sq, flat.numel()
                self._queue(("floor", i), "floor", row)

    def unchanged(self, key, buf, staged) -> None:
        """Queue: `buf` still equals `staged` (torch.equal's meaning: a NaN never equals itself)."""
        import torch
        row = torch.zeros(WIDTH, dtype=torch.float64, device=buf.device)
        a, b = buf.reshape(-1), staged.reshape(-1)
        native = self._native(a, b) if a.numel() == b.numel() else None
        row[OUTSIDE] = native.differ(a, b) if native is not None else (a != b).sum()
        self._queue(key, "same", row)

    def poisoned(self, key, buf, byte: int) -> None:
        """Queue: every byte of `buf` still `byte` (a decoy's output, never called for)."""
        import torch
        row = torch.zeros(WIDTH, dtype=torch.float64, device=buf.device)
        row[OUTSIDE] = (buf.reshape(-1).view(torch.uint8) != byte).sum()
        self._queue(key, "same", row)

    def _queue(self, key, kind: str, row) -> None:
        self._keys.append(key)
        self._kinds.append(kind)
        self._rows.append(row)

    # --- the one readback ------------------------------------------------------------------------------------
    def read(self) -> None:
        import torch
        if self._rows:
            table = torch.stack([r.to(self._rows[0].device) for r in self._rows]).to("cpu", copy=True)  # the one wait
            self._values = {k: (kind, table[i].tolist()) for i, (k, kind) in enumerate(zip(self._keys, self._kinds))}
        else:
            self._values = {}
        largest = max((math.sqrt(v[SQ] / v[N]) for kind, v in self._values.values() if kind == "floor"), default=0.0)
        if largest:
            self.floor = ROUNDING_FLOOR * largest

    def holds(self, key) -> bool:
        return self._values[key][1][OUTSIDE] == 0

    def verdict(self, key) -> tuple[bool, float, str]:
        """(passed, max normalised error, reason), as `comparison.compare` gives them for this output."""
        kind, v = self._values[key]
        out, ref = self._tensors[key]
        if kind == "shape":
            return False, float("inf"), f"shape {tuple(out.shape)} != expected {tuple(ref.shape)}"
        n = int(v[N])
        if kind == "exact":
            diff = int(v[OUTSIDE])
            return diff == 0, float(diff > 0), f"{diff} of {n} elements differ" if diff else ""
        bad, nan, unlike = int(v[BAD]), int(v[NAN]), int(v[UNLIKE])
        if bad:
            return False, float("inf"), _nonfinite(nan, bad, n)
        if unlike:
            return False, float("inf"), _unlike(unlike, n)
        if n == 0:
            return True, 0.0, ""
        worst, worst_at, outside = v[WORST], int(v[WORST_AT]), int(v[OUTSIDE])
        scale, finite_n, sq, diff_sq = v[SCALE], v[FINITE_N], v[SQ], v[DIFF_SQ]
        if worst > 1.0:  # the failure's message reads the two values at the worst element (a second wait)
            return False, worst, _outside(outside, n, worst_at, out.reshape(-1), ref.reshape(-1))
        rms = scale * math.sqrt(sq / finite_n) if finite_n else 0.0
        tol = self.tol
        if tol.rel_l2 > 0 and sq > 0 and rms > self.floor and math.sqrt(diff_sq) > tol.rel_l2 * math.sqrt(sq):
            off = math.sqrt(diff_sq / sq)
            return False, max(worst, off / tol.rel_l2), _rel_l2(off, tol)
        return True, worst, ""


# the reasons a failed check gives, worded once for RoundCheck and compare_plain
def _nonfinite(nan: int, bad: int, n: int) -> str:
    return f"{nan} of {n} output elements are NaN (never written or invalid)" if nan else \
        f"{bad} output elements are infinite"


def _unlike(unlike: int, n: int) -> str:
    return (f"{unlike} of {n} elements where the reference is Inf or NaN differ from it (they must be the same Inf "
            f"or NaN)")


def _outside(outside: int, n: int, worst_at: int, o, r) -> str:
    return (f"{outside} of {n} elements outside tolerance; worst at flat index {worst_at}: got "
            f"{float(o[worst_at]):.6g}, expected {float(r[worst_at]):.6g}")


def _rel_l2(off: float, tol) -> str:
    return (f"every element is within the absolute allowance, but the output as a whole is off by {off:.3g} of the "
            f"reference's norm (at most {tol.rel_l2:g}): values this small are not computed")


def compare_plain(out, ref, tol, floor: float = 0.0) -> tuple[bool, float, str]:
    """The criterion written plainly, a pass over the tensors per statistic and a host wait per sum (as
    comparison.compare was up to evaluator version 15): the oracle the tests hold RoundCheck to, and the 'before'
    of benchmarks/check_cost.py. The evaluator judges with RoundCheck (comparison.compare)."""
    import torch

    if tuple(out.shape) != tuple(ref.shape):
        return False, float("inf"), f"shape {tuple(out.shape)} != expected {tuple(ref.shape)}"
    o, r = out.reshape(-1), ref.reshape(-1)
    n = r.numel()
    chunks = [(k, min(k + COMPARE_CHUNK, n)) for k in range(0, n, COMPARE_CHUNK)]
    rtol, atol, atol_abs = tol.rtol, tol.atol, tol.atol_abs
    if not ref.is_floating_point() and rtol == 0 and atol == 0 and atol_abs == 0:
        diff = sum(int((o[a:b] != r[a:b]).sum()) for a, b in chunks)
        return diff == 0, float(diff > 0), f"{diff} of {n} elements differ" if diff else ""
    nan = bad = unlike = 0
    scale = 0.0  # the largest finite |ref|: the rms is taken relative to it, so huge values cannot overflow it
    for a, b in chunks:
        o64, r64 = o[a:b].double(), r[a:b].double()
        finite = torch.isfinite(r64)
        wrong = ~torch.isfinite(o64) & finite
        bad += int(wrong.sum())
        nan += int((torch.isnan(o64) & finite).sum())
        unlike += int((~finite & ~((o64 == r64) | (torch.isnan(o64) & torch.isnan(r64)))).sum())
        if bool(finite.any()):
            scale = max(scale, float(r64[finite].abs().max()))
    if bad:
        return False, float("inf"), _nonfinite(nan, bad, n)
    if unlike:
        return False, float("inf"), _unlike(unlike, n)
    if n == 0:
        return True, 0.0, ""
    finite_n = sq = diff_sq = 0.0
    for a, b in chunks:
        o64, r64 = o[a:b].double(), r[a:b].double()
        finite = torch.isfinite(r64)
        finite_n += int(finite.sum())
        if scale > 0:
            sq += float(((torch.where(finite, r64, 0.0) / scale) ** 2).sum())
            diff_sq += float(((torch.where(finite, o64 - r64, 0.0) / scale) ** 2).sum())
    rms = scale * math.sqrt(sq / finite_n) if finite_n else 0.0
    worst, worst_at, outside = 0.0, 0, 0
    for a, b in chunks:
        o64, r64 = o[a:b].double(), r[a:b].double()
        err = (o64 - r64).abs() / (rtol * r64.abs() + atol * rms + atol_abs + 1e-300)
        err = torch.where(torch.isfinite(r64), err, 0.0)  # non-finite reference elements matched above
        m = float(err.max())
        outside += int((err > 1).sum())
        if m > worst:
            worst, worst_at = m, a + int(err.argmax())
    if worst > 1.0:
        return False, worst, _outside(outside, n, worst_at, o, r)
    if tol.rel_l2 > 0 and sq > 0 and rms > floor and math.sqrt(diff_sq) > tol.rel_l2 * math.sqrt(sq):
        off = math.sqrt(diff_sq / sq)
        return False, max(worst, off / tol.rel_l2), _rel_l2(off, tol)
    return True, worst, ""
