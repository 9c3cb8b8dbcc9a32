"""Mutation campaign: how much skipped, truncated or lowered work the evaluator's check catches, on the CPU.

Each task's reference is run as a mutant (work dropped, loops truncated, precision lowered, a constant or an
input returned, a parameter left out, an index shifted by one), and the mutant's float32 outputs are checked by
the evaluator's own `check_outputs` on the evaluator's own check sets and tolerances, exactly as a candidate's
outputs would be. A mutant counts as result-changing when its float64 output differs from the reference's by
more than float64 noise; it is detected when any check set of any check configuration fails it. Each task is
checked twice in one run: "before" (version 13's check: the task's own draws, state as initialised, no
float64 anchor) and "after" (this version's). Honest variants (the reference computed in float64 and rounded,
the reference on one thread) must pass "after".

    .venv/bin/python benchmarks/mutation.py --builtin --kernelbench ../shared/kernelbench --levels 1,2,3 \\
        --out benchmarks/results/v14/mutation.json

With `--timed also` (or `only`) every timing configuration is also played through simulated timed rounds with
timed-only mutants (benchmarks/timed_mutation.py).

Tasks run in worker processes (one per core), each with a time limit; a task whose reference fails or runs out
of time is listed with the reason, never silently dropped.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CLASSES = {  # operator -> class (the operator classes)
    "skip_every_2nd_rescaled": "drop_work", "skip_every_8th_rescaled": "drop_work", "skip_tail_rescaled": "drop_work",
    "skip_one_row": "drop_work", "skip_one_term": "drop_work",
    "truncate_tail": "truncate_loop", "truncate_last": "truncate_loop",
    "bfloat16": "precision", "float16": "precision", "tf32_inputs": "precision",
    "zeros": "constant_or_input", "constant_mean": "constant_or_input", "return_input": "constant_or_input",
    "param_ones": "leave_out_parameter", "param_zeros": "leave_out_parameter",
    "shift_input_by_one": "index_shift", "shift_output_at_boundary": "index_shift",
    "bf16_inputs": "precision", "half_compute": "precision",
}
CHANGE_REL = 1e-9  # a mutant whose float64 output is within this fraction of the reference's norm changes nothing


# --- mutants of a torch2cuda reference --------------------------------------------------------------------------
def _kept(keep, n: int):
    """keep(index, n) over indices 0..n-1 as a numpy bool array (keep is elementwise arithmetic on the index)."""
    import numpy as np
    return np.broadcast_to(np.asarray(keep(np.arange(n), n), dtype=bool), (n,)).copy()


def _mask_last(x, keep):
    """x with the elements of its last dimension where keep(index, size) is False set to zero."""
    import torch
    if not x.is_floating_point() or x.dim() == 0:
        return x
    n = x.shape[-1]
    m = torch.from_numpy(_kept(keep, n)).to(x.device)
    return torch.where(m, x, torch.zeros((), dtype=x.dtype))


def _input_mutants():
    """name -> function(list of input tensors) -> mutated list (the first floating input carries any rescale)."""
    import torch

    def drop(keep, rescale):
        def f(xs):
            out, first = [], True
            for x in xs:
                if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dim() > 0:
                    n = x.shape[-1]
                    kept = int(_kept(keep, n).sum())
                    y = _mask_last(x, keep)
                    if rescale and first and kept:
                        y = y * (n / kept)
                    first = False
                    out.append(y)
                else:
                    out.append(x)
            return out
        return f

    def one_row(xs):
        out = []
        for x in xs:
            if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dim() > 1:
                x = x.clone()
                x[x.shape[0] // 2] = 0
            out.append(x)
        return out

    def one_term(xs):
        out = []
        for x in xs:
            if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 1:
                x = x.clone()
                x.view(-1)[x.numel() // 2] = 0
            out.append(x)
        return out

    def shift(xs):
        out = []
        for x in xs:
            if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dim() > 0 and x.shape[-1] > 1:
                x = torch.cat([x[..., 1:], torch.zeros_like(x[..., :1])], dim=-1)
            out.append(x)
        return out

    def tf32(xs):
        return [(x.view(torch.int32) & ~0x1FFF).view(torch.float32)
                if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x for x in xs]
    return {
        "skip_every_2nd_rescaled": drop(lambda i, n: i % 2 == 0, True),
        "skip_every_8th_rescaled": drop(lambda i, n: i % 8 != 7, True),
        "skip_tail_rescaled": drop(lambda i, n: i < n - max(1, n // 16), True),
        "skip_one_row": one_row,
        "skip_one_term": one_term,
        "truncate_tail": drop(lambda i, n: i < n - max(1, n // 16), False),
        "truncate_last": drop(lambda i, n: i < n - 1, False),
        "shift_input_by_one": shift,
        "tf32_inputs": tf32,
    }


def _run(module, args, dtype=None):
    import torch
    if dtype is not None:
        args = [a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    with torch.no_grad():
        out = module(*args)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [o.detach() for o in outs]


def _args_of(cd, fresh_pos: dict) -> list:
    """The reference call's arguments (tensors from a check set by position, plain values as the task gives)."""
    args, j = [], 0
    for spec in cd.calls["kernelbench"]["inputs"]:
        if "buf" in spec:
            args.append(fresh_pos[j])
            j += 1
        else:
            args.append(spec["value"])
    return args


def torch_mutants(cd, args: list, with64: bool = True, models: dict | None = None) -> dict:
    """name -> (float32 outputs, float64 outputs) of every mutant of configuration `cd` on `args`; None where an
    operator does not apply (no floating parameter, a dtype the CPU lacks). Without `with64` the float64 twin
    does not run (the float64 outputs are the float32 ones widened): a timed call needs only what it writes.
    `models`: a dict that keeps the mutated modules between calls on the same configuration (made on first use)."""
    import copy
    import torch
    from pipeline.evaluation.checks.fidelity import as_float64
    model, twin = cd.module, cd.module64 if with64 else None
    models = {} if models is None else models

    def kept(key, make):
        if key not in models:
            models[key] = make()
        return models[key]
    ref32 = _run(model, args)
    ref64 = _run(twin, as_float64(args)) if twin is not None else [r.double() for r in ref32]
    out = {}
    for name, f in _input_mutants().items():
        m = f(list(args))
        if name == "tf32_inputs":  # tensor-core inputs: the parameters rounded too, the sums in float32
            def tf32_model():
                mm = copy.deepcopy(model)
                with torch.no_grad():
                    for p in mm.state_dict(keep_vars=True).values():
                        if p.dtype == torch.float32:
                            p.data.copy_((p.data.view(torch.int32) & ~0x1FFF).view(torch.float32))
                return mm
            o = _run(kept("tf32", tf32_model), m)
            out[name] = (o, [x.double() for x in o])
            continue
        out[name] = (_run(model, m), _run(twin, as_float64(m)) if twin is not None else None)
    for name, dt in (("bfloat16", torch.bfloat16), ("float16", torch.float16)):
        try:
            o = [x.float() if x.is_floating_point() else x for x in _run(kept(name, lambda dt=dt: copy.deepcopy(model).to(dt)), args, dt)]
            out[name] = (o, [x.double() for x in o])
        except (RuntimeError, TypeError, NotImplementedError):  # an operator with no kernel of that dtype on
            out[name] = None  # the CPU: the mutant does not apply (recorded as such, never as detected)
    # output mutants: the same change made to the float32 and to the float64 reference outputs
    def on_outputs(change):
        return [change(r) for r in ref32], [change(r) for r in ref64]
    out["zeros"] = on_outputs(torch.zeros_like)
    out["constant_mean"] = on_outputs(lambda r: torch.full_like(r, float(r.double().mean())) if r.is_floating_point() else r)
    inp = next((a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None)
    if inp is not None and inp.numel() == ref32[0].numel() and ref32[0].is_floating_point():
        out["return_input"] = ([inp.reshape(ref32[0].shape)] + ref32[1:], [inp.reshape(ref64[0].shape).double()] + ref64[1:])
    else:
        out["return_input"] = None

    def shift(r):
        r = r.contiguous().clone()
        if r.numel() > 1:
            flat = r.view(-1)
            flat[-1] = flat[-2]
        return r
    out["shift_output_at_boundary"] = on_outputs(shift)
    floating = [n for n, p in model.state_dict().items() if p.is_floating_point() and p.numel()]
    for name, value in (("param_ones", 1.0), ("param_zeros", 0.0)):
        if not floating:
            out[name] = None
            continue
        variants = []
        for pname in floating[:3]:  # one mutant per parameter, the first three
            def filled(m, pname=pname, value=value):
                m = copy.deepcopy(m)
                with torch.no_grad():
                    m.state_dict(keep_vars=True)[pname].data.fill_(value)
                return m
            mm = kept((name, pname), lambda: filled(model))
            mt = kept((name, pname, "f64"), lambda: filled(twin)) if twin is not None else None
            o = _run(mm, args)
            variants.append((o, _run(mt, as_float64(args)) if mt is not None else [x.double() for x in o]))
        out[name] = variants
    return out, ref64


def honest_variants(cd, args: list) -> dict:
    """name -> float32 outputs of honest computations: the float64 result rounded, the reference on one thread."""
    import torch
    from pipeline.evaluation.checks.fidelity import as_float64
    out = {}
    if cd.module64 is not None:
        out["float64_rounded"] = [o.to(torch.float32) if o.is_floating_point() else o
                                  for o in _run(cd.module64, as_float64(args))]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out["one_thread"] = _run(cd.module, args)
    finally:
        torch.set_num_threads(threads)
    return out


def _changed(m64: list, r64: list) -> bool:
    from pipeline.evaluation.checks.fidelity import norm_error
    import torch
    for a, b in zip(m64, r64):
        if tuple(a.shape) != tuple(b.shape):
            return True
        if not a.is_floating_point():
            if not torch.equal(a.to(b.dtype), b):
                return True
            continue
        if not bool(torch.isfinite(a).all()) and bool(torch.isfinite(b).all()):
            return True
        zero = torch.zeros_like(b)
        if norm_error(a, b) > CHANGE_REL * max(norm_error(zero, b), 1e-300):
            return True
    return False


def campaign_torch(task, seed: int) -> dict:
    """Per operator (and variant): result-changing?, detected before?, detected after?; honest variants' fate."""
    import torch
    from pipeline.evaluation.checks import reference_torch
    from pipeline.evaluation.checks.comparison import check_outputs
    from pipeline.evaluation.checks.reference_torch import build_torch2cuda
    reference_torch.DEVICE = "cpu"
    rows: dict = defaultdict(lambda: {"changing": False, "before": False, "after": False, "applies": False})
    honest: dict = defaultdict(lambda: True)
    for phase, fid in (("before", False), ("after", True)):
        group = build_torch2cuda(task, seed, init_seed=seed + 1, fidelity=fid)
        for cd in group.configs:
            if not cd.check:
                continue
            for si in range(2):
                inputs, expected = cd.check_set(si)
                fresh_pos = {j: inputs[b] for j, b in enumerate(cd.buffers) if b in inputs}
                args = _args_of(cd, fresh_pos)
                outs = [b for b in cd.buffers if b in expected]
                mutants, ref64 = torch_mutants(cd, args)

                def detected(o32: list) -> bool:
                    now = dict(inputs)
                    for b, o in zip(outs, o32):
                        now[b] = o.reshape(expected[b].shape).to(expected[b].dtype)
                    return not check_outputs(group, cd, si, now)[0]
                for name, value in mutants.items():
                    if value is None:
                        continue
                    variants = value if isinstance(value, list) else [value]
                    for k, (o32, o64) in enumerate(variants):
                        key = name if len(variants) == 1 else f"{name}#{k}"
                        row = rows[key]
                        row["applies"] = True
                        if phase == "after" and o64 is not None and _changed(o64, ref64):
                            row["changing"] = True
                        row[phase] = row[phase] or detected(o32)
                if fid:
                    for name, o32 in honest_variants(cd, args).items():
                        honest[name] = honest[name] and not detected(o32)
                    honest["reference"] = honest["reference"] and not detected([expected[b] for b in outs])
        torch.manual_seed(0)
    return {"mutants": {k: dict(v) for k, v in rows.items()}, "honest_passed": dict(honest),
            "draws": {cd.name: cd.draws for cd in group.configs if cd.check}}


# --- mutants of a c2cuda reference (gcc) -------------------------------------------------------------------------
C_HALF_PRELUDE = """#include <math.h>
#define float _Float16
"""


def _c_input_mutants() -> dict:
    """name -> function(n, dict of 1-D numpy inputs, first floating key) -> mutated dict."""
    import numpy as np

    def drop(keep, rescale):
        def f(xs, first):
            out = {}
            for b, x in xs.items():
                n = x.size
                m = _kept(keep, n)
                y = np.where(m, x, 0).astype(x.dtype)
                if rescale and b == first and m.sum():
                    y = (y * (n / m.sum())).astype(x.dtype)
                out[b] = y
            return out
        return f

    def segment(xs, first):  # one row: a run of sqrt(n) elements in the middle
        out = {}
        for b, x in xs.items():
            y = x.copy()
            w = max(1, int(x.size ** 0.5))
            y[x.size // 2: x.size // 2 + w] = 0
            out[b] = y
        return out

    def one(xs, first):
        out = {}
        for b, x in xs.items():
            y = x.copy()
            y[x.size // 2] = 0
            out[b] = y
        return out

    def shift(xs, first):
        return {b: np.concatenate([x[1:], np.zeros(1, x.dtype)]) for b, x in xs.items()}

    def bf16(xs, first):
        return {b: (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32) if x.dtype == np.float32 else x
                for b, x in xs.items()}
    return {"skip_every_2nd_rescaled": drop(lambda i, n: i % 2 == 0, True),
            "skip_every_8th_rescaled": drop(lambda i, n: i % 8 != 7, True),
            "skip_tail_rescaled": drop(lambda i, n: i < n - max(1, n // 16), True),
            "skip_one_row": segment, "skip_one_term": one,
            "truncate_tail": drop(lambda i, n: i < n - max(1, n // 16), False),
            "truncate_last": drop(lambda i, n: i < n - 1, False),
            "shift_input_by_one": shift, "bf16_inputs": bf16}


def half_callable(task) -> bool:
    """Whether the `_Float16` build can be called through ctypes: not with a float scalar argument (a `_Float16`
    travels in a vector register, where ctypes cannot put one, and every later argument lands one register off)."""
    return not any(a.role == "scalar" and a.ctype.strip() == "float" for a in task.args)


def c_libs(task) -> dict:
    """The C reference built four ways: float32 (`f32`), float64 (`f64`), `_Float16` (`f16`) and O3 fast-math
    (`fast`: reassociated, vectorised sums, another honest order); None where one does not build."""
    from pipeline.core.config import CompileSection
    from pipeline.evaluation.build.compile import Compiler
    from pipeline.evaluation.checks.fidelity import C_FLOAT64_PRELUDE
    from pipeline.evaluation.checks.reference_c import _c_function
    comp = Compiler(CompileSection())
    libs = {}
    fast = '#pragma GCC optimize ("O3,fast-math")\n'
    for key, prefix in (("f32", ""), ("f64", C_FLOAT64_PRELUDE), ("f16", C_HALF_PRELUDE), ("fast", fast)):
        r = comp.compile_c_reference(prefix + task.reference)
        libs[key] = _c_function(task, r.artifact) if r.ok else None
    if libs["f32"] is None:
        raise RuntimeError("the C reference does not compile")
    return libs


def campaign_c(task, seed: int) -> dict:
    """As campaign_torch, for a c2cuda task's C reference at its check sizes."""
    import numpy as np
    import torch
    from pipeline.core.config import CompileSection
    from pipeline.evaluation.build.compile import Compiler
    from pipeline.evaluation.checks.fidelity import C_FLOAT64_PRELUDE
    from pipeline.evaluation.checks.comparison import check_outputs
    from pipeline.evaluation.checks.reference_c import (build_c2cuda, can_anchor_c, run_c, run_c_reference,
                                                        run_c_reference64)
    comp = Compiler(CompileSection())
    libs = c_libs(task)
    rows: dict = defaultdict(lambda: {"changing": False, "before": False, "after": False, "applies": False})
    honest: dict = defaultdict(lambda: True)
    notes = []
    for phase, fid in (("before", False), ("after", True)):
        group = build_c2cuda(task, seed, fidelity=fid)
        r = comp.compile_c_reference(task.reference)
        run_c_reference(group, r.artifact)
        if fid and can_anchor_c(task) and libs["f64"] is not None:
            r64 = comp.compile_c_reference(C_FLOAT64_PRELUDE + task.reference)
            note = run_c_reference64(group, r64.artifact)
            if note:
                notes.append(note)
        for cd in group.configs:
            if not cd.check or cd.time:
                continue
            for si in range(len(cd.input_sets)):
                inputs, expected = cd.input_sets[si], cd.expected[si]
                t_in = {b: torch.from_numpy(v) for b, v in inputs.items()}
                t_exp = {b: torch.from_numpy(v) for b, v in expected.items()}
                cd.input_sets[si], cd.expected[si] = t_in, t_exp
                if si < len(cd.anchors):
                    cd.anchors[si] = {b: (torch.from_numpy(v), a) for b, (v, a) in cd.anchors[si].items()}
                ref64 = run_c(group, cd, libs["f64"], inputs, "float64") if libs["f64"] is not None else None

                def detected(outs: dict) -> bool:
                    now = {b: torch.from_numpy(np.ascontiguousarray(v)) for b, v in inputs.items()}
                    now.update({b: torch.from_numpy(np.ascontiguousarray(outs[b]).astype(expected[b].dtype))
                                for b in expected})
                    for b in cd.buffers:
                        now.setdefault(b, torch.zeros(1))
                    return not check_outputs(group, cd, si, now)[0]

                def changed(m64: dict) -> bool:
                    return ref64 is not None and _changed([torch.from_numpy(m64[b].astype(np.float64)) for b in expected],
                                                          [torch.from_numpy(ref64[b].astype(np.float64)) for b in expected])
                floats = [b for b, v in inputs.items() if v.dtype.kind == "f"]
                # data, not indices: integer inputs (offsets, indices, counts) are left as they are
                mut_in = {b: v for b, v in inputs.items() if group.buffers[b].role == "in" and v.dtype.kind == "f"}
                for name, f in _c_input_mutants().items():
                    m = dict(inputs)
                    m.update(f(mut_in, floats[0] if floats else None))
                    o32 = run_c(group, cd, libs["f32"], m)
                    o64 = o32 if name == "bf16_inputs" else (run_c(group, cd, libs["f64"], m, "float64")
                                                              if libs["f64"] is not None else None)
                    _record(rows[name], phase, o64 is not None and changed(o64), detected(o32))
                if libs["f16"] is not None and floats and half_callable(group.task):
                    o16 = run_c(group, cd, libs["f16"], inputs, "float16")
                    _record(rows["half_compute"], phase, changed(o16), detected({b: v.astype(np.float32) if v.dtype == np.float16 else v for b, v in o16.items()}))
                if ref64 is not None:
                    src = next(iter(mut_in.values()), None)
                    for name, change in (("zeros", np.zeros_like),
                                         ("constant_mean", lambda v: np.full_like(v, v.astype(np.float64).mean())),
                                         ("shift_output_at_boundary", _shift_np),
                                         ("return_input", lambda v: src[:v.size].astype(v.dtype) if src is not None
                                          and src.size == v.size else None)):
                        o32 = {b: change(v) for b, v in expected.items()}
                        if any(v is None for v in o32.values()):
                            continue
                        _record(rows[name], phase, changed({b: change(v) for b, v in ref64.items() if b in expected}),
                                detected(o32))
                if fid:
                    if libs["fast"] is not None:
                        honest["fast_math_O3"] = honest["fast_math_O3"] and not detected(run_c(group, cd, libs["fast"], inputs))
                    if ref64 is not None and all(expected[b].dtype == np.float32 for b in expected):
                        honest["float64_rounded"] = honest["float64_rounded"] and not detected(
                            {b: v.astype(np.float32) for b, v in ref64.items()})
                    honest["reference"] = honest["reference"] and not detected(expected)
    return {"mutants": {k: dict(v) for k, v in rows.items()}, "honest_passed": dict(honest), "notes": notes}


def _shift_np(v):
    v = v.copy()
    if v.size > 1:
        v.reshape(-1)[-1] = v.reshape(-1)[-2]
    return v


def _record(row: dict, phase: str, changing: bool, detected: bool) -> None:
    row["applies"] = True
    if phase == "after" and changing:
        row["changing"] = True
    row[phase] = row[phase] or detected


# --- sizes on the CPU ---------------------------------------------------------------------------------------------
def fit_on_cpu(task, max_bytes: int):
    """The task with its timing configurations left out and, where a check configuration's inputs and outputs
    exceed `max_bytes` (or its parameters 600 MB), its sizes halved as the degeneracy check does
    (degeneracy.fit_sizes: batch first); returns (task or None, the sizes changed)."""
    from pipeline.evaluation.checks.degeneracy import fit_sizes
    from pipeline.evaluation.checks.footprint import config_bytes
    checks = [c for c in task.configs if c.check and not c.time]

    def fits(t) -> bool:
        return all(s.inputs + s.outputs <= max_bytes and s.params <= max(8 * max_bytes, 600 << 20)
                   for s in config_bytes(t))
    return fit_sizes(task.model_copy(update={"configs": checks}), fits)


def one_task(item: tuple) -> dict:
    """A worker: the campaign of one task, within `limit_s` (signal.alarm)."""
    import torch
    torch.set_num_threads(1)
    task_json, seed, limit_s, max_bytes, *timed = item
    timed_mode, timed_max_bytes = (timed + ["", 1 << 20])[:2]  # "" (check configurations only), "also", "only"
    from pipeline.core.records import Task
    task = Task.model_validate_json(task_json)
    t0 = time.perf_counter()

    def over(*_):
        raise TimeoutError(f"over {limit_s} s")
    signal.signal(signal.SIGALRM, over)
    signal.alarm(limit_s)
    try:
        if timed_mode == "only":
            result = {"mutants": {}, "honest_passed": {}}
            scaled = {}
        elif task.kind == "c2cuda":
            scaled = {}
            result = campaign_c(task.model_copy(update={"configs": [c for c in task.configs if c.check and not c.time]}), seed)
        else:
            fitted, scaled = fit_on_cpu(task, max_bytes)
            if fitted is None:
                return {"task": task.id, "skipped": f"too large for the CPU even with sizes halved ({scaled})"}
            result = campaign_torch(fitted, seed)
        result.update(task=task.id, kind=task.kind, scaled=scaled, seconds=round(time.perf_counter() - t0, 1))
    except Exception as e:  # noqa: BLE001 - a task that fails is reported with its reason, the campaign goes on
        return {"task": task.id, "skipped": f"{type(e).__name__}: {str(e)[:200]}"}
    finally:
        signal.alarm(0)
    if timed_mode:  # the timed rounds, within a limit of their own: the check configurations' rows stay either way
        import timed_mutation
        t1 = time.perf_counter()
        signal.alarm(limit_s)
        try:
            run = timed_mutation.timed_c if task.kind == "c2cuda" else timed_mutation.timed_torch
            timed = run(task, seed, timed_max_bytes)
            result["mutants"].update(timed["mutants"])
            result["honest_passed"].update(timed["honest_passed"])
            result.update(timed_scaled=timed["scaled"], timed_notes=timed["notes"],
                          timed_seconds=round(time.perf_counter() - t1, 1))
        except Exception as e:  # noqa: BLE001 - reported with its reason, as a task that fails is
            result["timed_skipped"] = f"{type(e).__name__}: {str(e)[:200]}"
        finally:
            signal.alarm(0)
    return result


def worker(in_path: str, out_path: str) -> None:
    """`--worker IN OUT`: the campaign of every task in IN (one JSON item a line), one result a line in OUT, each
    preceded by a line naming the task it starts, so that a crash (a mutant that makes a C reference fault) is
    pinned on its task."""
    with open(out_path, "a") as out:
        for line in Path(in_path).read_text().splitlines():
            item = json.loads(line)
            out.write(json.dumps({"start": item[0]}) + "\n")
            out.flush()
            out.write(json.dumps(one_task((item[1], *item[2:]))) + "\n")
            out.flush()


def run_workers(task_jsons: list[str], args) -> list[dict]:
    """Every task through `args.workers` worker processes; a worker that dies takes only its current task with it
    (listed as skipped) and is started again on the rest of its share."""
    import subprocess
    import tempfile
    ids = [json.loads(t)["id"] for t in task_jsons]
    shares = [list(range(k, len(task_jsons), args.workers)) for k in range(args.workers)]
    results: dict[int, dict] = {}
    if not task_jsons:
        return []
    with tempfile.TemporaryDirectory(prefix="cudaperf-mutation-") as d:
        procs = {}

        def start(w: int, todo: list[int]) -> None:
            inp, out = Path(d, f"in{w}.jsonl"), Path(d, f"out{w}.jsonl")
            inp.write_text("".join(json.dumps([ids[i], task_jsons[i], args.seed, args.task_limit_s, args.max_bytes,
                                               args.timed, args.timed_max_bytes])
                                   + "\n" for i in todo))
            out.write_text("")
            procs[w] = (subprocess.Popen([sys.executable, __file__, "--worker", str(inp), str(out)]), todo, out)
        for w, share in enumerate(shares):
            if share:
                start(w, share)
        while procs:
            time.sleep(1)
            for w, (proc, todo, out) in list(procs.items()):
                if proc.poll() is None:
                    continue
                del procs[w]
                started, done = None, []
                for line in out.read_text().splitlines():
                    row = json.loads(line)
                    if "start" in row:
                        started = row["start"]
                    else:
                        done.append(row)
                        started = None
                for row in done:
                    i = ids.index(row["task"])
                    results[i] = row
                    print(f"[{len(results)}/{len(ids)}] {row['task']}: "
                          f"{row.get('skipped') or sum(v['changing'] for v in row['mutants'].values())}", flush=True)
                rest = [i for i in todo if i not in results]
                if started is not None and rest:
                    i = ids.index(started)
                    results[i] = {"task": started, "skipped": f"the worker died (exit {proc.returncode}) on it"}
                    rest = [j for j in rest if j != i]
                if rest:
                    start(w, rest)
    return [results[i] for i in sorted(results)]


def class_of(op: str) -> str:
    """The class of a mutant's row: CLASSES's; a timed-only one (`timed:<operator>@<key>`) `timed_<class>`, the
    constants at the timed size `timed_constant`."""
    from timed_mutation import CONSTANTS
    if not op.startswith("timed:"):
        return CLASSES[op.split("#")[0]]
    base = op[len("timed:"):].split("@")[0].split("#")[0]
    return "timed_constant" if base in CONSTANTS else "timed_" + CLASSES[base]


def groups_of(task_id: str, kind: str) -> list[str]:
    """The rows a task counts in: its kind (KernelBench: its level), and its source where it is ParEval or the
    generated families (ids of three parts)."""
    if task_id.startswith("kernelbench"):
        return ["/".join(task_id.split("/")[:2])]
    if task_id.startswith("pareval"):
        return [kind, "pareval"]
    return [kind, "generated"] if task_id.count("/") >= 2 else [kind]


def summarise(results: list[dict]) -> dict:
    """Per operator class and task group: result-changing mutants, detected before and after, and rates; the
    result-changing mutants missed after, by operator, with their tasks."""
    table: dict = defaultdict(lambda: {"changing": 0, "before": 0, "after": 0})
    honest = defaultdict(lambda: [0, 0])
    missed = defaultdict(list)
    for r in results:
        if "skipped" in r:
            continue
        groups = groups_of(r["task"], r["kind"])
        for op, row in r["mutants"].items():
            if not row["changing"]:
                continue
            cls = class_of(op)
            if not row["after"]:
                missed[op.split("#")[0]].append(r["task"])
            for key in [(c, g) for c in (cls, "all") for g in groups + ["all"]]:
                if key[0] == "all" and cls.startswith("timed_"):
                    key = ("all timed", key[1])
                t = table[key]
                t["changing"] += 1
                t["before"] += row["before"]
                t["after"] += row["after"]
        for name, ok in r["honest_passed"].items():
            honest[name][0] += 1
            honest[name][1] += not ok
    rows = []
    for (cls, group), t in sorted(table.items()):
        rows.append({"class": cls, "tasks": group, **t,
                     "before_rate": round(t["before"] / t["changing"], 4), "after_rate": round(t["after"] / t["changing"], 4)})
    return {"rows": rows, "honest": {k: {"tasks": v[0], "rejected": v[1]} for k, v in honest.items()},
            "missed_after": {k: sorted(set(v)) for k, v in sorted(missed.items())}}


def load_campaign_tasks(args) -> list:
    from pipeline.tasks import load_tasks
    from pipeline.tasks.sources import load_kernelbench
    tasks = []
    if args.builtin:
        tasks += load_tasks("builtin")
    if args.pareval:
        tasks += load_tasks("pareval")
    if args.generated_per_family:
        from pipeline.dataset.checks import sample_tasks
        tasks += sample_tasks(load_tasks("generated"), per_group=args.generated_per_family)
    if args.kernelbench:
        tasks += load_kernelbench(args.kernelbench, [int(x) for x in args.levels.split(",")])
    if args.only:
        tasks = [t for t in tasks if any(s in t.id for s in args.only.split(","))]
    return tasks[:args.limit] if args.limit else tasks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--builtin", action="store_true", help="the built-in tasks (c2cuda and torch2cuda)")
    ap.add_argument("--pareval", action="store_true", help="ParEval's problems as c2cuda tasks")
    ap.add_argument("--generated-per-family", type=int, default=0, help="this many generated tasks of each family")
    ap.add_argument("--kernelbench", default="", help="a KernelBench checkout (its levels' problems)")
    ap.add_argument("--levels", default="1,2,3")
    ap.add_argument("--only", default="", help="comma-separated substrings of task ids to keep")
    ap.add_argument("--limit", type=int, default=0, help="at most this many tasks (0: all)")
    ap.add_argument("--seed", type=int, default=20261205)
    ap.add_argument("--task-limit-s", type=int, default=240)
    ap.add_argument("--max-bytes", type=int, default=64 << 20, help="a check configuration's data on the CPU")
    ap.add_argument("--timed", choices=["", "also", "only"], default="",
                    help="timed-only mutants through simulated timed rounds (benchmarks/timed_mutation.py): "
                         "'also' beside the check configurations' campaign, 'only' instead of it")
    ap.add_argument("--timed-max-bytes", type=int, default=1 << 20,
                    help="a timing configuration's data on the CPU (its sizes halved until they fit)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", default="", help="the report (default: results_path's benchmarks/results/v<N>/mutation.json)")
    ap.add_argument("--resume", nargs="*", default=[], help="worker output files (JSON lines) of an earlier run")
    ap.add_argument("--no-run", action="store_true", help="only report the resumed rows")
    args = ap.parse_args()
    tasks = load_campaign_tasks(args)
    t0 = time.perf_counter()
    done = {}
    for path in args.resume:  # rows of an earlier run (a worker's output lines): their tasks are not run again
        for line in Path(path).read_text().splitlines():
            row = json.loads(line)
            if "task" in row and "start" not in row:
                done[row["task"]] = row
    todo = [t for t in tasks if t.id not in done]
    if args.no_run:  # a report of the resumed rows alone: the rest are listed as not run
        fresh = [{"task": t.id, "skipped": "not run (--no-run: the campaign was stopped before it)"} for t in todo]
    else:
        fresh = run_workers([t.model_dump_json() for t in todo], args)
    results = [done[t.id] for t in tasks if t.id in done] + fresh
    report = {"summary": summarise(results), "tasks": results, "command": " ".join(sys.argv),
              "machine": platform.node(), "cpus": os.cpu_count(), "wall_s": round(time.perf_counter() - t0, 1),
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if not args.out:
        from results_path import fresh_result_path
        args.out = str(fresh_result_path("mutation.json"))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    rows = ",\n".join("  " + json.dumps(r) for r in report.pop("tasks"))  # one line a task: a diff reads by task
    Path(args.out).write_text(json.dumps(report, indent=1)[:-2] + ',\n "tasks": [\n' + rows + "\n ]\n}\n")
    print(f"{'class':<22}{'tasks':<22}{'changing':>9}{'before':>9}{'after':>9}")
    for row in report["summary"]["rows"]:
        print(f"{row['class']:<22}{row['tasks']:<22}{row['changing']:>9}{row['before_rate']:>9.3f}{row['after_rate']:>9.3f}")
    print("honest variants rejected:", report["summary"]["honest"])
    print(f"written to {args.out}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], sys.argv[3])
    else:
        main()
