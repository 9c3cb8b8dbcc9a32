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
        --out benchmarks/results/mutation.json

Tasks run in worker processes (one per core), each with a time limit; a task whose reference fails or runs out
of time is listed with the reason, never silently dropped.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import signal
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
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
}
CHANGE_REL = 1e-9  # a mutant whose float64 output is within this fraction of the reference's norm changes nothing


# --- mutants of a torch2cuda reference --------------------------------------------------------------------------
def _mask_last(x, keep):
    """x with the elements of its last dimension where keep(index, size) is False set to zero."""
    import torch
    if not x.is_floating_point() or x.dim() == 0:
        return x
    n = x.shape[-1]
    m = torch.tensor([bool(keep(i, n)) for i in range(n)], device=x.device)
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
                    kept = sum(bool(keep(i, n)) for i in range(n))
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


def torch_mutants(cd, args: list) -> dict:
    """name -> (float32 outputs, float64 outputs) of every mutant of configuration `cd` on `args`; None where an
    operator does not apply (no floating parameter, a dtype the CPU lacks)."""
    import copy
    import torch
    from pipeline.evaluation.fidelity import as_float64
    model, twin = cd.module, cd.module64
    ref32 = _run(model, args)
    ref64 = _run(twin, as_float64(args)) if twin is not None else [r.double() for r in ref32]
    out = {}
    for name, f in _input_mutants().items():
        m = f(list(args))
        if name == "tf32_inputs":  # tensor-core inputs: the parameters rounded too, the sums in float32
            mm = copy.deepcopy(model)
            with torch.no_grad():
                for p in mm.state_dict(keep_vars=True).values():
                    if p.dtype == torch.float32:
                        p.data.copy_((p.data.view(torch.int32) & ~0x1FFF).view(torch.float32))
            o = _run(mm, m)
            out[name] = (o, [x.double() for x in o])
            continue
        out[name] = (_run(model, m), _run(twin, as_float64(m)) if twin is not None else None)
    for name, dt in (("bfloat16", torch.bfloat16), ("float16", torch.float16)):
        try:
            o = [x.float() if x.is_floating_point() else x for x in _run(copy.deepcopy(model).to(dt), args, dt)]
            out[name] = (o, [x.double() for x in o])
        except (RuntimeError, TypeError, NotImplementedError):
            out[name] = None
    out["zeros"] = ([torch.zeros_like(r) for r in ref32], [torch.zeros_like(r) for r in ref64])
    out["constant_mean"] = ([torch.full_like(r, float(r.double().mean())) if r.is_floating_point() else r
                             for r in ref32], None)
    out["constant_mean"] = (out["constant_mean"][0], [x.double() for x in out["constant_mean"][0]])
    inp = next((a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None)
    if inp is not None and inp.numel() == ref32[0].numel() and ref32[0].is_floating_point():
        o = [inp.reshape(ref32[0].shape).to(ref32[0].dtype)] + ref32[1:]
        out["return_input"] = (o, [x.double() for x in o])
    else:
        out["return_input"] = None
    shifted = []
    for r in ref32:
        r = r.clone()
        if r.numel() > 1:
            flat = r.view(-1)
            flat[-1] = flat[-2]
        shifted.append(r)
    out["shift_output_at_boundary"] = (shifted, [x.double() for x in shifted])
    floating = [n for n, p in model.state_dict().items() if p.is_floating_point() and p.numel()]
    for name, value in (("param_ones", 1.0), ("param_zeros", 0.0)):
        if not floating:
            out[name] = None
            continue
        variants = []
        for pname in floating[:3]:  # one mutant per parameter, the first three
            mm, mt = copy.deepcopy(model), copy.deepcopy(twin) if twin is not None else None
            with torch.no_grad():
                mm.state_dict(keep_vars=True)[pname].data.fill_(value)
                if mt is not None:
                    mt.state_dict(keep_vars=True)[pname].data.fill_(value)
            o = _run(mm, args)
            variants.append((o, _run(mt, as_float64(args)) if mt is not None else [x.double() for x in o]))
        out[name] = variants
    return out, ref64


def honest_variants(cd, args: list) -> dict:
    """name -> float32 outputs of honest computations: the float64 result rounded, the reference on one thread."""
    import torch
    from pipeline.evaluation.fidelity import as_float64
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
    from pipeline.evaluation.fidelity import norm_error
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
    from pipeline.evaluation import reference as R
    from pipeline.evaluation.reference import build_torch2cuda, check_outputs
    R.DEVICE = "cpu"
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


# --- sizes on the CPU ---------------------------------------------------------------------------------------------
def fit_on_cpu(task, max_bytes: int):
    """The task with its timing configurations left out and, where a check configuration's data exceed `max_bytes`,
    its module's integer sizes halved until they fit (recorded in the result as 'scaled')."""
    from pipeline.evaluation.reference import config_bytes, load_reference_module
    from pipeline.tasks import config_params
    checks = [c for c in task.configs if c.check and not c.time]
    task = task.model_copy(update={"configs": checks})
    scaled = {}
    for _ in range(24):
        sizes = config_bytes(task)
        if all(s.inputs + s.outputs + s.params <= max_bytes for s in sizes):
            return task, scaled
        ns = load_reference_module(task, config_params(task, task.configs[0]))
        ints = {k: v for k, v in ns.items() if not k.startswith("_") and type(v) is int and v > 16}
        if not ints:
            break
        name = max(ints, key=ints.get)
        scaled[name] = ints[name] // 2
        task = task.model_copy(update={"configs": [c.model_copy(update={"params": {**c.params, **scaled}})
                                                   for c in task.configs]})
    return None, scaled


def one_task(item: tuple) -> dict:
    """A worker: the campaign of one task, within `limit_s` (signal.alarm)."""
    import torch
    torch.set_num_threads(1)
    task_json, seed, limit_s, max_bytes = item
    from pipeline.records import Task
    task = Task.model_validate_json(task_json)
    t0 = time.perf_counter()

    def over(*_):
        raise TimeoutError(f"over {limit_s} s")
    signal.signal(signal.SIGALRM, over)
    signal.alarm(limit_s)
    try:
        fitted, scaled = fit_on_cpu(task, max_bytes)
        if fitted is None:
            return {"task": task.id, "skipped": f"too large for the CPU even with sizes halved ({scaled})"}
        result = campaign_torch(fitted, seed)
        result.update(task=task.id, kind=task.kind, scaled=scaled, seconds=round(time.perf_counter() - t0, 1))
        return result
    except Exception as e:  # noqa: BLE001 - a task that fails is reported with its reason, the campaign goes on
        return {"task": task.id, "skipped": f"{type(e).__name__}: {str(e)[:200]}"}
    finally:
        signal.alarm(0)


def summarise(results: list[dict]) -> dict:
    """Per operator class and task group: result-changing mutants, detected before and after, and rates."""
    table: dict = defaultdict(lambda: {"changing": 0, "before": 0, "after": 0})
    honest = defaultdict(lambda: [0, 0])
    for r in results:
        if "skipped" in r:
            continue
        group = r["task"].split("/")[0] + ("/" + r["task"].split("/")[1] if r["task"].startswith("kernelbench") else "")
        for op, row in r["mutants"].items():
            if not row["changing"]:
                continue
            cls = CLASSES[op.split("#")[0]]
            for key in ((cls, group), (cls, "all"), ("all", group), ("all", "all")):
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
    return {"rows": rows, "honest": {k: {"tasks": v[0], "rejected": v[1]} for k, v in honest.items()}}


def load_campaign_tasks(args) -> list:
    from pipeline.tasks import load_tasks
    from pipeline.tasks.sources import load_kernelbench
    tasks = []
    if args.builtin:
        tasks += [t for t in load_tasks("builtin") if t.kind == "torch2cuda"]
    if args.kernelbench:
        tasks += load_kernelbench(args.kernelbench, [int(x) for x in args.levels.split(",")])
    if args.only:
        tasks = [t for t in tasks if any(s in t.id for s in args.only.split(","))]
    return tasks[:args.limit] if args.limit else tasks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--builtin", action="store_true", help="the built-in torch2cuda tasks")
    ap.add_argument("--kernelbench", default="", help="a KernelBench checkout (its levels' problems)")
    ap.add_argument("--levels", default="1,2,3")
    ap.add_argument("--only", default="", help="comma-separated substrings of task ids to keep")
    ap.add_argument("--limit", type=int, default=0, help="at most this many tasks (0: all)")
    ap.add_argument("--seed", type=int, default=20261205)
    ap.add_argument("--task-limit-s", type=int, default=240)
    ap.add_argument("--max-bytes", type=int, default=64 << 20, help="a check configuration's data on the CPU")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", default="benchmarks/results/mutation.json")
    args = ap.parse_args()
    tasks = load_campaign_tasks(args)
    t0 = time.perf_counter()
    items = [(t.model_dump_json(), args.seed, args.task_limit_s, args.max_bytes) for t in tasks]
    results = []
    with ProcessPoolExecutor(args.workers) as pool:
        for k, r in enumerate(pool.map(one_task, items)):
            results.append(r)
            note = r.get("skipped") or f"{sum(v['changing'] for v in r['mutants'].values())} changing mutants"
            print(f"[{k + 1}/{len(items)}] {r['task']}: {note}", flush=True)
    report = {"summary": summarise(results), "tasks": results, "command": " ".join(sys.argv),
              "machine": platform.node(), "cpus": os.cpu_count(), "wall_s": round(time.perf_counter() - t0, 1),
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(f"{'class':<22}{'tasks':<22}{'changing':>9}{'before':>9}{'after':>9}")
    for row in report["summary"]["rows"]:
        print(f"{row['class']:<22}{row['tasks']:<22}{row['changing']:>9}{row['before_rate']:>9.3f}{row['after_rate']:>9.3f}")
    print("honest variants rejected:", report["summary"]["honest"])
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
