"""The C reference of a c2cuda task: its group's inputs, its outputs and float64 anchors, its serial time.

In: a c2cuda Task, a seed the candidates cannot know, the C reference built as a shared library (its float64
build for the anchors: fidelity.C_FLOAT64_PRELUDE).
Out: a `GroupData` (group_data.py) whose check configurations hold two input sets each (`build_c2cuda`), the C
reference's outputs on them (`run_c_reference`) and their float64 anchors (`run_c_reference64`); timing
configurations get a maker of fresh inputs on the GPU instead, being too large for the C reference. The task's
naive CUDA implementation, run in a child like any candidate (by the evaluator, which also times it), is first
verified against the C reference and gives the expected outputs at timing sizes (`adopt_baseline_outputs`).
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np

from pipeline.evaluation.checks.comparison import compare
from pipeline.evaluation.checks.fidelity import adversarial_uniform, adversarial_uniform_torch, anchor_allowance
from pipeline.evaluation.checks.group_data import Buffer, ConfigData, GroupData, TaskBroken, torch_dtype, work_of
from pipeline.evaluation.checks.input_draws import draw_on_device, draw_on_host
from pipeline.core.records import Task
from pipeline.tasks import arg_dtype, config_params, eval_expr, is_pointer, parse_init


def build_c2cuda(task: Task, seed: int, fidelity: bool = True) -> GroupData:
    """Buffers and inputs for a c2cuda task; outputs of check configs from the C reference are
    filled by `run_c_reference`, those of timing configs by the baseline (see evaluator). With `fidelity`,
    the second input set of every check configuration is adversarial where an input is declared uniform(lo, hi)
    (fidelity.adversarial_uniform; other draws, indices and records, stay the task's own), and timing
    configurations draw their timed calls the same way (`timed_draw`)."""
    rng = np.random.default_rng(seed)
    buffers: list[Buffer] = []
    configs: list[ConfigData] = []
    for cfg in task.configs:
        params = config_params(task, cfg)
        idx, sets, call_args = [], [{}, {}], []
        adversarial = fidelity and cfg.check
        for arg in task.args:
            if not is_pointer(arg):
                _, value = parse_init(arg.init, params)
                call_args.append(["scalar", _scalar_ctype(arg.ctype), value])
                continue
            n = int(eval_expr(arg.size, params))
            buffers.append(Buffer(f"{cfg.name}.{arg.name}", arg_dtype(arg), (n,), arg.role))
            b = len(buffers) - 1
            idx.append(b)
            call_args.append(["ptr", b])
            if arg.role in ("in", "inout"):
                init = parse_init(arg.init, params)
                for s in sets:
                    s[b] = draw_on_host(rng, arg_dtype(arg), n, init)
                if adversarial and init[0] == "uniform" and np.dtype(arg_dtype(arg)).kind == "f":
                    sets[1][b] = adversarial_uniform(rng, n, init[1], init[2]).astype(arg_dtype(arg))
        flops, nbytes = work_of(task, params)
        cd = ConfigData(cfg.name, cfg.check, cfg.time, params, idx, sets,
                        calls={"c2cuda": {"args": call_args}}, flops=flops, min_bytes=nbytes, adversarial=adversarial)
        if cfg.time:
            cd.fresh = _c2cuda_fresh(task, params, [buffers[b] for b in idx])
            cd.timed_draw = "adversarial" if fidelity and _has_uniform_float(task, params) else "task"
        configs.append(cd)
    return GroupData(task, buffers, configs, reference_label="naive CUDA baseline")


def _has_uniform_float(task: Task, params: dict) -> bool:
    """Whether an input of the task is a float buffer declared uniform(lo, hi): what the adversarial draw changes."""
    return any(is_pointer(a) and a.role in ("in", "inout") and np.dtype(arg_dtype(a)).kind == "f"
               and parse_init(a.init, params)[0] == "uniform" for a in task.args)


def _c2cuda_fresh(task: Task, params: dict, bufs: list[Buffer], device: str = "cuda"):
    """fresh(seed, draw="task"): inputs made on `device` from the task's own initialisers (uniform, randint,
    records), seeded; with draw "adversarial", float inputs declared uniform(lo, hi) get the adversarial draw
    within [lo, hi) (fidelity.adversarial_uniform_torch), as check set 1 does; the other inputs stay as drawn."""
    inits = {}
    pointer_args = [a for a in task.args if is_pointer(a)]
    for j, (arg, buf) in enumerate(zip(pointer_args, bufs)):
        if arg.role in ("in", "inout"):
            inits[j] = (buf, parse_init(arg.init, params))

    def fresh(seed: int, draw: str = "task") -> dict:
        import torch
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
        host = np.random.default_rng([seed, 0xADE])  # the adversarial draw's secret scalars, with no device sync
        out = {}
        for j, (buf, init) in inits.items():
            n = int(np.prod(buf.shape))
            if draw != "task" and init[0] == "uniform" and np.dtype(buf.dtype).kind == "f":
                out[j] = adversarial_uniform_torch(gen, n, float(init[1]), float(init[2]), torch_dtype(buf.dtype),
                                                   device, host).reshape(buf.shape)
            else:
                out[j] = draw_on_device(gen, buf.dtype, n, init, device).reshape(buf.shape)
        return out
    return fresh


def adopt_baseline_outputs(group: GroupData, stage_inputs: Callable,
                           call: Callable[[int, ConfigData], None]) -> None:
    """c2cuda: run the naive CUDA baseline on every configuration, twice with the two input sets
    (`stage_inputs(group, cd, set_index)` writes them, `call(ci, cd)` runs the baseline and raises
    TaskBroken when it fails). On timing configurations, too large for the C reference, its outputs
    become the expected outputs; elsewhere they must match the C reference's, or the task is broken."""
    task = group.task
    for ci, cd in enumerate(group.configs):
        got = []
        for si in range(2):
            stage_inputs(group, cd, si)
            call(ci, cd)
            got.append({b: group.buffers[b].view.clone() for b in cd.buffers
                        if group.buffers[b].role in ("out", "inout")})
        if cd.time:
            cd.expected = got
            continue
        for si in range(2):
            for b, ref_out in cd.expected[si].items():
                ok, _, why = compare(got[si][b], ref_out, task.tolerance)
                if not ok:
                    raise TaskBroken(f"task {task.id}: the naive baseline disagrees with the C reference "
                                     f"on {cd.name}: {why}")


def _scalar_ctype(ctype: str) -> str:
    return " ".join(w for w in ctype.split() if w != "const")


_NP_CTYPES = {"float32": ctypes.c_float, "float64": ctypes.c_double, "int32": ctypes.c_int32,
              "uint32": ctypes.c_uint32, "int64": ctypes.c_int64, "uint64": ctypes.c_uint64,
              "uint8": ctypes.c_uint8}


def _c_function(task: Task, library_path: str):
    fn = getattr(ctypes.CDLL(library_path), task.function)
    fn.restype = None
    return fn


def _c_call(group: GroupData, cd: ConfigData, inputs: dict, float_as: str | None = None) -> tuple[dict, list]:
    """Host copies of one input set (outputs zeroed) and the ctypes arguments of one C call on them; float32
    buffers and scalars passed as `float_as` ("float64" for the float64 anchor, "float16" for a mutant)."""
    host, args = {}, []
    for (kind, *rest), arg in zip(cd.calls["c2cuda"]["args"], group.task.args):
        dt = arg_dtype(arg)
        dt = float_as if float_as and dt == "float32" else dt
        if kind == "scalar":
            args.append(ctypes.c_uint16(np.float16(rest[1]).view(np.uint16)) if dt == "float16"
                        else _NP_CTYPES[dt](rest[1]))
            continue
        b = rest[0]
        host[b] = inputs[b].astype(dt) if b in inputs else np.zeros(group.buffers[b].shape, dt)
        args.append(ctypes.c_void_p(host[b].ctypes.data))
    return host, args


def run_c(group: GroupData, cd: ConfigData, fn, inputs: dict, float_as: str | None = None) -> dict:
    """{output buffer: numpy array} of one call of the C function `fn` on `inputs` (buffer -> numpy), as
    `_c_call` lays it out."""
    host, args = _c_call(group, cd, inputs, float_as)
    fn(*args)
    return {b: host[b] for b in cd.buffers if group.buffers[b].role in ("out", "inout")}


def run_c_reference(group: GroupData, library_path: str) -> None:
    """Outputs of every check configuration that is not a timing one, from the C reference."""
    fn = _c_function(group.task, library_path)
    for cd in group.configs:
        if cd.time:
            continue
        cd.expected = []
        for inputs in cd.input_sets:
            host, args = _c_call(group, cd, inputs)
            fn(*args)
            cd.expected.append({b: host[b] for b in cd.buffers if group.buffers[b].role in ("out", "inout")})


def can_anchor_c(task: Task) -> bool:
    """A C reference can run in float64 (fidelity.C_FLOAT64_PRELUDE) when its floating data are float32 buffers
    and scalars drawn or given as numbers (no records holding floats bit for bit)."""
    for arg in task.args:
        if arg_dtype(arg) == "float64" or (is_pointer(arg) and arg.init.strip().startswith(("records", "graph"))):
            return False
    return any(arg_dtype(a) == "float32" for a in task.args if is_pointer(a) and a.role in ("out", "inout"))


def run_c_reference64(group: GroupData, library_path: str) -> str:
    """Float64 anchors of every check configuration that is not a timing one (ConfigData.anchors), from the C
    reference built with fidelity.C_FLOAT64_PRELUDE; the float32 reference (`run_c_reference`) must have run.
    Returns why there is no anchor ("" when there is): a float64 result that disagrees with the float32 one
    beyond the task's tolerance means the reference relies on float32 itself (bit tricks), so it gets none."""
    fn = _c_function(group.task, library_path)
    for cd in group.configs:
        if cd.time:
            continue
        cd.anchors = []
        for si, inputs in enumerate(cd.input_sets):
            host = run_c(group, cd, fn, inputs, "float64")
            anchors = {}
            for b, r32 in cd.expected[si].items():
                if r32.dtype != np.float32:
                    continue
                import torch
                t32, t64 = torch.from_numpy(r32), torch.from_numpy(host[b])
                ok, _, why = compare(t32, t64, group.task.tolerance)
                if not ok:
                    for c in group.configs:
                        c.anchors = []
                    return f"the C reference in float64 disagrees with itself in float32 on {cd.name} ({why})"
                anchors[b] = (host[b], anchor_allowance(t32, t64, [torch.from_numpy(v) for v in inputs.values()]))
            cd.anchors.append(anchors)
    return ""


def time_c_reference(group: GroupData, library_path: str, config: str, trials: int = 5) -> float:
    """Seconds of one call of the C reference on configuration `config` (the mean of `trials`, each on a
    fresh copy of the first input set, as ParEval's driver times its serial baseline): the serial time
    ParEval's speedups are against."""
    import statistics
    import time
    fn = _c_function(group.task, library_path)
    cd = next(c for c in group.configs if c.name == config)
    times = []
    for _ in range(trials):
        _, args = _c_call(group, cd, cd.input_sets[0])
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.mean(times)
