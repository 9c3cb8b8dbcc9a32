"""What makes "correct" mean the work was done: adversarial check inputs, redrawn parameters, a float64 anchor.

In: tensors of a check set (inputs drawn from the task's own distribution), a reference module, outputs.
Out: an adversarial twin of a check set, a module whose default-valued state is redrawn, and the
float64 check `anchored` that bounds a candidate's error by what honest float32 arithmetic produces.
Touches nothing outside the tensors and modules it is given (torch on any device, CPU in tests).

Why each part (`docs/fidelity.md` has the measurements):
- A kernel that reads every second element and rescales, or truncates a loop, stays within a flat
  tolerance when the inputs are alike (uniform draws: every element is a fair sample of the rest).
  `adversarial_like` draws inputs where every element matters: heavy tails, scales that differ by
  row, column and batch (blocks for 1-D), a non-zero mean and an overall size of its own, a few large
  values in cancelling pairs at secret positions, and larger values at the first and last element of
  every row (an off-by-one bound). It stays inside the domain the task's own draw shows (non-negative,
  strictly positive, within [0, 1]) and keeps its exact zeros (a triangle, a mask) and symmetry;
  integer tensors (indices) and discrete floats (masks, labels) are left as drawn. A reference that is not finite on such a draw makes the caller fall back.
- Parameters left at torch's defaults (ones, zeros) let a kernel drop a multiply by a weight of ones
  or an added zero bias. `redraw_constant_state` replaces every constant floating tensor of a
  module's state by a secret draw around its value (positive stays positive), except names the task
  lists as fixed.
- A flat relative tolerance (KernelBench's 1 % of the norm) admits skipped work. `anchored` measures
  the candidate against the reference computed in float64 on the same inputs, and allows
  ANCHOR_FACTOR times the float32 reference's own error against it, plus the roundings of a serial float32
  sum as long as the longest sum the reference computes (`run_measuring_sums` watches its ATen operations;
  `anchor_allowance`): what an honest float32 kernel, in any order of its sums, gets. Skipped work on the
  adversarial set is off by far more than that.
"""
from __future__ import annotations

import copy
import math

import numpy as np

ANCHOR_FACTOR = 16.0  # honest float32 kernels sum in other orders than the reference (trees, serial loops, atomics)
ANCHOR_ULPS = 8.0  # ... and round the output itself: this many float32 epsilons of the output's norm always pass
EPS32 = 2.0 ** -23
DISCRETE_VALUES = 16  # a float tensor with at most this many distinct values is a mask or labels: left as drawn
SPIKE_SCALE = 32.0  # large values at secret positions, this many times the draw's rms
EDGE_SCALE = 4.0  # the first and last element of every row, this many times the rms
MAX_SPIKE_PAIRS = 16
MAX_PERIOD = 16  # a uniform(lo, hi) input's adversarial draw adds a pattern of a secret period in [2, MAX_PERIOD]
PERIODIC_WEIGHT = (0.3, 0.6)  # ... with this share of the draw's spread
TIE_JITTER = 1e-3  # ... and a jitter of this share: tanh saturates for heavy-tailed z, and values that round to one
# float32 would tie for a maximum (an argmax, a column's maximum made constant)
SUB_RANGE = 0.25  # a uniform(lo, hi) input's adversarial draw stays within [lo + a*w, hi - b*w], a and b secret in
# [0, SUB_RANGE), w = hi - lo


def domain_of(x) -> tuple[float, float, bool]:
    """(low, high, strict) of the values a float tensor's draw shows: low 0 when none is negative, high 1 when
    it also stays within [0, 1]; -inf/inf otherwise; strict when the low bound is never reached (a log's input)."""
    lo, hi = float(x.min()), float(x.max())
    low = 0.0 if lo >= 0 else -math.inf
    high = 1.0 if lo >= 0 and hi <= 1 else math.inf
    return low, high, lo > 0


def is_discrete(x) -> bool:
    """A float tensor drawn from few values (masks, one-hot targets, labels stored as floats)."""
    import torch
    flat = x.reshape(-1)
    sample = flat if flat.numel() <= 1 << 16 else flat[torch.randint(flat.numel(), (1 << 16,), device=flat.device)]
    return int(torch.unique(sample).numel()) <= DISCRETE_VALUES


def adversarial_like(x, gen, mild: bool = False):
    """A draw of x's shape, dtype and domain (see `domain_of`) where every element matters; `gen` a torch
    Generator on x's device holding the secret seed. `mild`: scales and mean only (no tails, no spikes), for
    references that are not finite on the full draw. Integer, boolean, tiny or discrete tensors come back as
    drawn (their values carry meaning: indices, masks)."""
    import torch
    if not x.is_floating_point() or x.numel() < 4 or is_discrete(x):
        return x.clone()
    dev, shape, n = x.device, tuple(x.shape), x.numel()
    work = torch.float64 if n <= 1 << 24 else torch.float32  # large inputs: float32 temporaries (memory)
    z = torch.randn(shape, generator=gen, device=dev, dtype=work)
    if not mild:  # heavy tails: a normal scaled by a log-normal
        z.mul_(torch.randn(shape, generator=gen, device=dev, dtype=work).mul_(0.75).exp_())
    dims = [d for d, s in enumerate(shape) if s > 1]
    for d in dims:  # scales that differ along every dimension: rows, columns, batches
        f = torch.exp(torch.empty(shape[d], device=dev, dtype=work).uniform_(-1.4, 1.4, generator=gen))
        z.mul_(f.reshape([shape[d] if k == d else 1 for k in range(len(shape))]))
    if len(dims) == 1:  # a vector: blocks of a secret length with scales of their own
        size = shape[dims[0]]
        block = int(torch.randint(2, max(3, size // 4 + 1), (1,), generator=gen, device=dev))
        f = torch.exp(torch.empty(-(-size // block), device=dev, dtype=work).uniform_(-1.4, 1.4, generator=gen))
        z.mul_(f.repeat_interleave(block)[:size].reshape(z.shape))
    u = torch.rand(2, generator=gen, device=dev, dtype=torch.float64)
    mean = (0.5 + float(u[0])) * (1.0 if float(u[1]) < 0.5 else -1.0)  # a non-zero mean of a secret sign
    v = z.add_(mean)
    flat = v.reshape(-1)
    if not mild:  # a few large values in cancelling pairs (+s, -s) at secret positions
        pairs = min(MAX_SPIKE_PAIRS, max(1, n // 2048), n // 2)
        at = torch.randint(n, (2 * pairs,), generator=gen, device=dev)
        rms = float(flat.double().pow(2).mean().sqrt())
        jitter = 1 + 0.25 * torch.rand(2 * pairs, generator=gen, device=dev, dtype=work)  # no ties (an argmax)
        flat[at[:pairs]] = SPIKE_SCALE * rms * jitter[:pairs]
        flat[at[pairs:]] = -SPIKE_SCALE * rms * jitter[pairs:]
        if shape and shape[-1] >= 3:  # the first and last element of every row: where an off-by-one loop bound
            for edge in (0, shape[-1] - 1):  # or a dropped tail leaves a term out
                block = v[..., edge]
                signs = torch.where(torch.rand(block.shape, generator=gen, device=dev) < 0.5, -1.0, 1.0).to(work)
                v[..., edge] = signs * (EDGE_SCALE * rms) * (1 + 0.25 * torch.rand(block.shape, generator=gen,
                                                                                   device=dev, dtype=work))
    low, high, strict = domain_of(x)
    g = torch.rand(2, generator=gen, device=dev, dtype=torch.float64)  # a secret overall scale, never near 1: a
    size = math.exp((0.2 + float(g[0])) * (1.0 if float(g[1]) < 0.5 else -1.0))  # norm taken as a constant fails
    rms_x = size * (float(x.double().pow(2).mean().sqrt()) or 1.0)
    if high == 1.0:  # within [0, 1]: squash to (0, 1), the spikes land near the ends
        v = torch.sigmoid(v)
    elif low == 0.0:  # non-negative: magnitudes at the draw's own size
        v = v.abs() * rms_x / max(float(v.abs().pow(2).mean().sqrt()), 1e-300)
    else:
        v = v * rms_x / max(float(v.pow(2).mean().sqrt()), 1e-300)
    out = v.to(x.dtype)
    zeros = x == 0
    if float(zeros.float().mean()) > 0.05:  # a structure of exact zeros (a triangle, a mask, padding): kept
        out = torch.where(zeros, torch.zeros((), dtype=x.dtype, device=dev), out)
    if x.dim() >= 2 and x.shape[-1] == x.shape[-2] and torch.equal(x, x.transpose(-1, -2)):  # symmetric: kept
        out = torch.triu(out) + torch.triu(out, 1).transpose(-1, -2)
    if strict or high == 1.0:  # keep away from the bounds the draw never reached (a log, a division)
        tiny = float(x.min()) if strict else 0.0
        out = out.clamp(min=max(tiny, torch.finfo(x.dtype).tiny))
        if high == 1.0:
            out = out.clamp(max=float(x.max()))
    return out.contiguous()


WIDE_SCALE = (16.0, 64.0)  # the wide draw's secret scale: logits of hundreds to thousands, where exp overflows float32
WIDE_MARGIN = 4.0  # the reference must agree with its float64 twin within the tolerance over this, to keep the set


def wide_like(x, gen):
    """An adversarial draw (`adversarial_like`) scaled by a secret factor in WIDE_SCALE: logits in the hundreds to
    thousands, where a softmax, log-softmax, log-sum-exp or cross-entropy without its max shift overflows float32
    and a stable reference does not. Draws within [0, 1] and discrete ones come back as the adversarial draw. (A
    common offset would also find a one-pass variance, but an honest two-pass one that sums serially in float32
    drifts by n roundoffs of the offset, which fails first.)"""
    import torch
    v = adversarial_like(x, gen)
    if not v.is_floating_point() or v.numel() < 4 or is_discrete(x):
        return v
    if domain_of(x)[1] == 1.0:
        return v
    u = float(torch.rand(1, generator=gen, device=v.device, dtype=torch.float64))
    return (v * (WIDE_SCALE[0] + (WIDE_SCALE[1] - WIDE_SCALE[0]) * u)).contiguous()


def redraw_constant_state(model, gen, fixed: tuple[str, ...] = ()) -> list[str]:
    """Replace, in place, every constant floating tensor of `model`'s state (parameters and buffers left at a
    default: a weight of ones, a bias of zeros, a running variance of ones) by a secret draw around its value:
    c * U(0.5, 1.5) for c != 0 (the sign kept: a variance stays positive), U(-0.5, 0.5) for 0. Names in `fixed`
    (a task's constant buffers that rightly hold their value) keep it. Returns the names redrawn."""
    import torch
    changed = []
    with torch.no_grad():
        for name, t in model.state_dict(keep_vars=True).items():
            if name in fixed or not t.is_floating_point() or t.numel() < 1:
                continue
            flat = t.reshape(-1)
            c = float(flat[0])
            if not bool((flat == flat[0]).all()) or not math.isfinite(c):
                continue
            u = torch.empty(t.shape, dtype=torch.float64).uniform_(0.0, 1.0, generator=gen).to(t.device)
            t.data.copy_((c * (0.5 + u) if c != 0 else u - 0.5).to(t.dtype))
            changed.append(name)
    return changed


def float64_twin(model):
    """A copy of a reference module computing in float64 (its floating state cast), or None where it cannot."""
    import torch
    try:
        twin = copy.deepcopy(model)
        return twin.to(torch.float64)
    except Exception:  # noqa: BLE001 - a module that cannot be copied or cast has no float64 anchor
        return None


def as_float64(args: list):
    """Arguments for a float64 twin: floating tensors cast (exactly) to float64, the rest as they are."""
    import torch
    return [a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]


def norm_error(a, b) -> float:
    """||a - b||_2 in float64 over the finite elements of b, chunked so temporaries stay small."""
    import torch
    x, y = a.reshape(-1), b.reshape(-1)
    total, step = 0.0, 1 << 24
    for k in range(0, y.numel(), step):
        d = x[k:k + step].double() - y[k:k + step].double()
        total += float(torch.where(torch.isfinite(y[k:k + step]), d, 0.0).pow(2).sum())
    return math.sqrt(total)


def longest_axis(inputs) -> int:
    """The longest dimension of any floating input (or parameter): how long a sum over it can be, for references
    whose operations cannot be seen (C)."""
    return max((max(t.shape) for t in inputs if t.is_floating_point() and t.dim()), default=1)


SUMMING = ("sum", "mean", "nansum", "prod", "norm", "linalg_vector_norm", "var", "std", "logsumexp", "avg_pool",
           "adaptive_avg_pool", "_adaptive_avg_pool", "mse_loss", "l1_loss", "huber_loss", "smooth_l1_loss",
           "binary_cross_entropy", "kl_div", "nll_loss", "soft_margin_loss", "multilabel_margin_loss", "dist",
           "cdist", "_cdist_forward", "_euclidean_dist", "trace", "embedding_bag")  # ATen names that sum terms


def _reduced_length(func, args, kwargs, out) -> int:
    """How many terms one output element of an ATen operation sums (1 for elementwise operations)."""
    name = func.__name__.split(".")[0] if hasattr(func, "__name__") else str(func)
    import torch
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if not tensors:
        return 1
    x = tensors[0]
    if name in ("mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "dot", "mv", "addmv"):
        a = tensors[1] if name.startswith("add") or name.startswith("badd") else tensors[0]
        return int(a.shape[-1]) if a.dim() else 1
    if name in ("convolution", "_convolution", "cudnn_convolution", "mkldnn_convolution", "conv2d", "conv3d",
                "conv1d", "_slow_conv2d_forward", "slow_conv3d_forward", "slow_conv_transpose2d",
                "slow_conv_transpose3d"):
        w = tensors[1] if len(tensors) > 1 else x
        if not w.dim() or not w.shape[0]:
            return 1
        transposed = len(args) > 6 and args[6] is True
        groups = args[8] if len(args) > 8 and isinstance(args[8], int) else 1
        # in_channels / groups x kernel; a transposed weight is (in, out / groups, k...): in / groups x kernel
        return int(w.shape[0] // max(1, groups) * math.prod(w.shape[2:])) if transposed else int(w[0].numel())
    outs = out if isinstance(out, (tuple, list)) else [out]
    outs = [o for o in outs if isinstance(o, torch.Tensor)]
    if outs and name.startswith(SUMMING) and x.numel() > max(o.numel() for o in outs):  # sums of many terms
        return max(1, x.numel() // max(1, max(o.numel() for o in outs)))
    if name in ("_softmax", "_log_softmax", "cumsum", "cumprod", "logcumsumexp", "_cummax_helper", "_cummin_helper",
                "native_layer_norm", "native_group_norm", "native_batch_norm", "_native_batch_norm_legit_no_training"):
        dim = next((a for a in args[1:] if isinstance(a, int)), -1)
        if name.startswith("native_layer_norm"):
            shape = args[1] if len(args) > 1 else [x.shape[-1]]
            return max(1, int(math.prod(shape)))
        if name.startswith("native_group_norm") or name.startswith("native_batch_norm") or "batch_norm" in name:
            return max(1, x.numel() // max(1, int(x.shape[1]) if x.dim() > 1 else 1))
        return int(x.shape[dim]) if x.dim() else 1
    return 1


def run_measuring_sums(run, *args) -> tuple[object, int]:
    """(run(*args), the longest sum any of its ATen operations computes for one output element): the reduction
    length that bounds how far an honest serial float32 order may drift (anchor_allowance)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    longest = [1]

    class Sums(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            try:
                longest[0] = max(longest[0], _reduced_length(func, args, kwargs or {}, out))
            except Exception:  # noqa: BLE001 - an operation whose shape cannot be read counts as elementwise
                pass
            return out
    with Sums():
        result = run(*args)
    return result, longest[0]


def anchor_allowance(ref32, ref64, inputs=(), summed: int | None = None) -> float:
    """The norm of error an honest float32 computation of this output may have against the float64 value:
    ANCHOR_FACTOR times the float32 reference's own, plus ANCHOR_ULPS * sqrt(n) float32 epsilons of the output's
    norm, n the longest sum of the computation (`summed`, from run_measuring_sums; else the longest axis of
    `inputs`): a serial float32 sum of n terms, the order of a naive kernel's loop, drifts by about sqrt(n / 3)
    roundings where the reference's tree or cascade sums drift by a few."""
    import torch
    zero = torch.zeros((), dtype=torch.float64, device=ref64.device)
    n = summed if summed is not None else longest_axis(inputs)
    serial = ANCHOR_ULPS * EPS32 * math.sqrt(max(1, n))
    return ANCHOR_FACTOR * norm_error(ref32, ref64) + serial * norm_error(zero.expand(ref64.shape), ref64)


SERIAL_CAP = 8.0  # the serial-sum rule applies only where it asks for at most this many times the task's rtol


def serial_tolerance(tol, summed: int):
    """`tol` with its rtol raised to (summed - 1) float32 unit roundoffs where that is at most SERIAL_CAP times the
    task's: the worst-case relative error of a serial float32 sum of `summed` terms of one sign (Higham's bound for
    recursive summation), reached where every term is small beside the partial sum (a row led by one large value,
    as the adversarial draw places them): a softmax row of 8,191 (bound 4.9e-4) drifted by 2.4e-4 on an H100
    against an rtol of 1e-4. Longer sums keep the task's rtol: a serial float32 sum of millions of terms drifts by
    percents and is no honest answer at that tolerance, and widening there would pass a kernel that reads every
    other term and doubles the sum."""
    serial = (max(1, summed) - 1) * EPS32 / 2
    return tol if serial <= tol.rtol or serial > SERIAL_CAP * tol.rtol else tol.model_copy(update={"rtol": serial})


def anchored(out, ref64, allowance: float, floor: float = 0.0) -> tuple[bool, str]:
    """(passed, reason): the output as a whole within `allowance` (anchor_allowance) of the float64 reference;
    not where the reference's rms is at most `floor` (comparison.rounding_floor): rounding noise of the inputs'
    size, judged by the task's elementwise allowance alone (as `compare` does)."""
    if floor > 0 and ref64.numel() and float(ref64.double().pow(2).mean().sqrt()) <= floor:
        return True, ""
    err = norm_error(out, ref64)
    if err <= allowance or not ref64.is_floating_point():
        return True, ""
    return False, (f"off the float64 reference by {err:.3g} in norm, {err / max(allowance, 1e-300):.3g} times what "
                   f"honest float32 arithmetic gets ({allowance:.3g}): work left out or done in lower precision")


def adversarial_uniform(rng, n: int, lo: float, hi: float):
    """numpy float64 values in [lo, hi) drawn so that every element matters (c2cuda inputs declared
    uniform(lo, hi)): a secret centre, heavy tails, blocks of a secret length with scales of their own, and a few
    values near both ends at secret positions, none equal to another (no ties for an argmax), a pattern of a secret
    period added to every element (`MAX_PERIOD`: a kernel that reads every k-th element and rescales sees a
    biased share of it wherever k and the period share a factor, as it would not on bounded values alone), all
    within a secret sub-range (`SUB_RANGE`): the largest and smallest values move from draw to draw, so a maximum, a minimum or a
    range over many uniform draws is no constant (with ends fixed at lo and hi, the maximum of millions of draws is
    hi whatever the data)."""
    import numpy as np
    width = hi - lo
    z = rng.standard_normal(n) * np.exp(0.75 * rng.standard_normal(n))
    block = int(rng.integers(2, max(3, n // 4 + 1)))
    z *= np.repeat(np.exp(rng.uniform(-1.4, 1.4, -(-n // block))), block)[:n]
    centre = rng.uniform(0.2, 0.8)
    period, weight = int(rng.integers(2, MAX_PERIOD + 1)), rng.uniform(*PERIODIC_WEIGHT)
    pattern = rng.uniform(-1, 1, period)[(np.arange(n) + int(rng.integers(period))) % period]
    t = (1 - weight) * np.tanh(0.5 * z) + weight * pattern
    u = centre + (0.5 - abs(centre - 0.5)) * ((1 - TIE_JITTER) * t + TIE_JITTER * rng.uniform(-1, 1, n))
    spikes = min(2 * MAX_SPIKE_PAIRS, max(2, n // 1024), n)
    at = rng.permutation(n)[:spikes]
    u[at[: spikes // 2]] = 1 - 0.01 * rng.random(spikes // 2)
    u[at[spikes // 2:]] = 0.01 * rng.random(spikes - spikes // 2)
    a, b = SUB_RANGE * rng.random(2)
    return np.clip(lo + width * (a + (1 - a - b) * u), lo, np.nextafter(hi, lo))



def adversarial_uniform_torch(gen, n: int, lo: float, hi: float, dtype, device, host=None):
    """`adversarial_uniform`'s draw made by torch on `device` with the Generator `gen` (the timed rounds' inputs,
    made on the GPU every round): the same secret centre, heavy tails, blocks of a secret length with scales of
    their own, a pattern of a secret period, and values near both ends at secret positions, within a secret
    sub-range of [lo, hi). Its few secret scalars come from `host` (a numpy Generator; by default one seeded from
    `gen`'s seed), so the draw queues its work on the device without waiting for it."""
    import torch
    width = hi - lo
    work = torch.float32  # every round's inputs: float32 temporaries (time and memory)
    z = torch.randn(n, generator=gen, device=device, dtype=work)
    z.mul_(torch.randn(n, generator=gen, device=device, dtype=work).mul_(0.75).exp_())
    host = host if host is not None else np.random.default_rng(gen.initial_seed())
    r = host.random(7).tolist()
    block = 2 + int(r[0] * (max(3, n // 4 + 1) - 2))
    scales = torch.empty(-(-n // block), device=device, dtype=work).uniform_(-1.4, 1.4, generator=gen).exp_()
    z.mul_(scales.repeat_interleave(block)[:n])
    centre = 0.2 + 0.6 * r[1]
    period = 2 + int(r[4] * (MAX_PERIOD - 1))
    weight = PERIODIC_WEIGHT[0] + (PERIODIC_WEIGHT[1] - PERIODIC_WEIGHT[0]) * r[5]
    pattern = torch.empty(period, device=device, dtype=work).uniform_(-1, 1, generator=gen)
    phase = int(r[6] * period)
    index = torch.arange(n, device=device).add_(phase).remainder_(period)
    u = z.mul_(0.5).tanh_().mul_(1 - weight).add_(pattern[index], alpha=weight).mul_(1 - TIE_JITTER)
    u.add_(torch.empty(n, device=device, dtype=work).uniform_(-TIE_JITTER, TIE_JITTER, generator=gen))
    u.mul_(0.5 - abs(centre - 0.5)).add_(centre)
    spikes = min(2 * MAX_SPIKE_PAIRS, max(2, n // 1024), n)
    at = torch.randperm(n, generator=gen, device=device)[:spikes] if n <= 1 << 16 else \
        torch.randint(n, (spikes,), generator=gen, device=device)
    near = 0.01 * torch.rand(spikes, generator=gen, device=device, dtype=work)
    u[at[: spikes // 2]] = 1 - near[: spikes // 2]
    u[at[spikes // 2:]] = near[spikes // 2:]
    a, b = SUB_RANGE * r[2], SUB_RANGE * r[3]
    top = float(np.nextafter(np.float32(hi), np.float32(lo))) if dtype == torch.float32 else float(np.nextafter(hi, lo))
    return u.mul_(width * (1 - a - b)).add_(lo + width * a).clamp_(lo, top).to(dtype)

C_FLOAT64_PRELUDE = """#include <math.h>
#define float double
#define expf exp
#define logf log
#define log2f log2
#define exp2f exp2
#define sqrtf sqrt
#define fabsf fabs
#define sinf sin
#define cosf cos
#define tanf tan
#define tanhf tanh
#define powf(a, b) pow((double)(a), (double)(b))
#define fmaxf(a, b) fmax((double)(a), (double)(b))
#define fminf(a, b) fmin((double)(a), (double)(b))
#define floorf floor
#define ceilf ceil
#define erff erf
#define atan2f(a, b) atan2((double)(a), (double)(b))
#define atanf atan
#define hypotf(a, b) hypot((double)(a), (double)(b))
#define roundf round
#define fmodf(a, b) fmod((double)(a), (double)(b))
#define cbrtf cbrt
#define log1pf log1p
#define expm1f expm1
#define log10f log10
#define fmaf(a, b, c) fma((double)(a), (double)(b), (double)(c))
#define truncf trunc
#define copysignf(a, b) copysign((double)(a), (double)(b))
#define sinhf sinh
#define coshf cosh
#define asinf asin
#define acosf acos
#define rintf rint
#define nearbyintf nearbyint
#define lroundf lround
#define fdimf(a, b) fdim((double)(a), (double)(b))
#define erfcf erfc
"""
"""Put before a C reference (or a CUDA baseline), it computes in float64: its float buffers and scalars become
double (the harness passes float64 copies), the float maths functions their double forms; those of two or three
arguments cast them, so a float literal beside a double picks the double function (in CUDA, C++'s mixed-type
templates are host-only)."""
