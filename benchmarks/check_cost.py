"""Device traffic and host waits of the checks after a timed batch, before (one `compare` per output, torch.equal
per input and decoy buffer, as evaluator version 15 did) and after (fused_check.RoundCheck), counted by op on CPU
tensors in one run.

    python benchmarks/check_cost.py [--slots 8] [--elements 1048576] [--out benchmarks/results/v16/check_cost.json]

"after" is the evaluator's path for float32 tensors: fused_check's compiled pass (fused_check.c here, whose
criterion per element and traffic are those of fused_check.cu's kernels on a GPU); "after_torch_pass" is the same
checks through torch's operators, the path of other dtypes and strided views.

A round here is `--slots` called slots of one float32 input and one float32 output each, and one decoy slot,
as a timing configuration of an elementwise task stages them. Traffic is the bytes every operator reads
and writes (views and metadata are free), per byte of checked output; host waits are the operators that
make the host wait for the device (.item(), float(), bool(), torch.equal, copies to the host). On a GPU
these operators run the same way; `benchmarks/gpu_checks.sh throughput` times them there.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FREE = {"view", "_unsafe_view", "reshape", "as_strided", "alias", "slice", "select", "detach", "t", "expand",
        "unsqueeze", "squeeze", "_reshape_alias", "lift_fresh", "empty", "empty_like", "empty_strided"}
WAITS = {"_local_scalar_dense", "equal", "is_nonzero", "allclose"}


def counter():
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.bytes, self.waits, self.ops = 0, 0, 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            name = func.overloadpacket.__name__
            if name in WAITS or (name == "_to_copy" and kwargs.get("device") is not None):
                self.waits += 1
            if name not in FREE:
                self.ops += 1
                flat = [a for a in list(args) + list(kwargs.values()) + (list(out) if isinstance(out, (tuple, list))
                                                                          else [out])]
                self.bytes += sum(t.numel() * t.element_size() for t in flat if isinstance(t, torch.Tensor))
            return out
    return Count()


class native_counted:
    """Counts fused_check's compiled passes (ctypes calls the dispatch mode cannot see): each call reads its
    tensors once, and is one operator; the rows it writes are counted when torch reduces them."""

    def __init__(self, count):
        self.count, self.saved = count, {}

    def __enter__(self):
        from pipeline.evaluation.checks.fused_check import NativePass
        for name in ("_ref_rows", "output_row", "differ"):
            method = self.saved[name] = getattr(NativePass, name)

            def wrapped(this, *args, _method=method, **kwargs):
                import torch
                self.count.ops += 1
                self.count.bytes += sum(a.numel() * a.element_size() for a in args[:2] if isinstance(a, torch.Tensor))
                return _method(this, *args, **kwargs)
            setattr(NativePass, name, wrapped)
        return self

    def __exit__(self, *exc):
        from pipeline.evaluation.checks.fused_check import NativePass
        for name, method in self.saved.items():
            setattr(NativePass, name, method)


def round_buffers(slots: int, n: int):
    import torch
    g = torch.Generator().manual_seed(0)
    ins = [torch.randn(n, generator=g) for _ in range(slots + 1)]
    staged = [x.clone() for x in ins]
    outs = [torch.relu(x) for x in ins[:slots]]
    expected = [o.clone() for o in outs]
    decoy_out = torch.empty(n)
    decoy_out.view(torch.uint8).fill_(0xFF)
    return ins, staged, outs, expected, decoy_out


def before(tol, ins, staged, outs, expected, decoy_out) -> None:
    """The checks as evaluator version 15 ran them: per slot torch.equal and `compare`, then the decoys."""
    import torch

    from pipeline.evaluation.checks.fused_check import compare_plain as compare
    from pipeline.evaluation.checks.comparison import rounding_floor
    floor = rounding_floor(tol, [staged[0]])
    for x, s, o, e in zip(ins, staged, outs, expected):
        assert torch.equal(x, s)
        assert compare(o, e, tol, floor)[0]
    assert torch.equal(ins[-1], staged[-1])
    assert bool((decoy_out.view(torch.uint8) == 0xFF).all())


def after(tol, ins, staged, outs, expected, decoy_out, native: bool = True) -> None:
    """The checks as the evaluator runs them now (fused_check.RoundCheck): with `native`, through the compiled
    pass (fused_check.c here, the same criterion and traffic as fused_check.cu's kernels on a GPU); without, through
    torch's operators (tensors a compiled pass does not take: other dtypes, strided views)."""
    from pipeline.evaluation.checks.fused_check import RoundCheck
    check = RoundCheck(tol, native_cpu=native)
    check.floor_of([staged[0]])
    for k, (x, s, o, e) in enumerate(zip(ins, staged, outs, expected)):
        check.unchanged(("in", k), x, s)
        check.output(("out", k), o, e)
    check.unchanged("decoy in", ins[-1], staged[-1])
    check.poisoned("decoy out", decoy_out, 0xFF)
    check.read()
    assert all(check.verdict(("out", k))[0] for k in range(len(outs))) and check.holds("decoy out")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--elements", type=int, default=1 << 20)
    ap.add_argument("--out", default=None, help="JSON file to write (default: a new file under benchmarks/results/v<evaluator version>/)")
    args = ap.parse_args()
    from pipeline.core.records import Tolerance
    tol = Tolerance(rtol=1e-4, atol=1e-4, rel_l2=1e-3)
    bufs = round_buffers(args.slots, args.elements)
    out_bytes = args.slots * args.elements * 4
    result = {"command": " ".join(["python", "benchmarks/check_cost.py", *sys.argv[1:]]), "slots": args.slots,
              "elements": args.elements, "machine": "CPU tensors, counted by op"}
    from pipeline.evaluation.checks.fused_check import cpu_pass
    if cpu_pass() is None:
        sys.exit("error: fused_check.c did not build; install a C compiler (gcc) and run this again")
    runs = (("before", before), ("after", after), ("after_torch_pass", lambda *a: after(*a, native=False)))
    for name, fn in runs:
        with counter() as c, native_counted(c):
            fn(tol, *bufs)
        result[name] = {"bytes_per_output_byte": c.bytes / out_bytes, "waits_per_round": c.waits,
                        "waits_per_slot": c.waits / args.slots, "operators": c.ops}
    if args.out is None:
        from benchmarks.results_path import fresh_result_path
        args.out = str(fresh_result_path("check_cost.json"))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"{'':16} {'bytes/output byte':>18} {'waits/round':>12} {'waits/slot':>11} {'operators':>10}")
    for name, _ in runs:
        r = result[name]
        print(f"{name:16} {r['bytes_per_output_byte']:18.1f} {r['waits_per_round']:12d} {r['waits_per_slot']:11.2f} "
              f"{r['operators']:10d}")


if __name__ == "__main__":
    main()
