"""The PyTorch reference of a torch2cuda (KernelBench-format) task: its group, run here in the trusted process.

In: a torch2cuda Task (its module: Model, get_inputs, get_init_inputs), a seed for the check sets and one for
the module's constant state, both secret from the candidates.
Out: a `GroupData` (group_data.py) with the buffer layout the reference's outputs take, each configuration's
call specs per candidate format, and the makers the check sets and timed rounds draw from: `ConfigData.fresh`
(inputs on DEVICE from get_inputs(), or their adversarial, mild or wide twin), `run_reference` (float32, TF32
off), its float64 twin (the anchors) and, on request, its torch.compile'd build.
"""
from __future__ import annotations

import numpy as np

from pipeline.evaluation import light_abi
from pipeline.evaluation.checks.comparison import compare
from pipeline.evaluation.checks.fidelity import (adversarial_like, anchor_allowance, as_float64, float64_twin,
                                                 redraw_constant_state, run_measuring_sums, wide_like, WIDE_MARGIN)
from pipeline.evaluation.checks.group_data import Buffer, ConfigData, GroupData, torch_dtype, work_of
from pipeline.evaluation.checks.numerics import set_full_float32
from pipeline.core.records import Task, Tolerance
from pipeline.tasks import config_params

TORCH_DTYPES = {"torch.float32": "float32", "torch.float64": "float64", "torch.float16": "float16",
                "torch.int32": "int32", "torch.int64": "int64", "torch.uint8": "uint8", "torch.bool": "bool",
                "torch.int8": "int8", "torch.int16": "int16", "torch.bfloat16": "bfloat16"}


def load_reference_module(task: Task, params: dict) -> dict:
    """Execute the (trusted) reference module with the config's globals set."""
    namespace: dict = {"__name__": f"reference_{task.id.replace('/', '_')}"}
    exec(compile(task.reference, task.source_path or "reference.py", "exec"), namespace)
    namespace.update({k: v for k, v in params.items() if k in namespace})
    return namespace


DEVICE = "cuda"  # where the trusted side's torch2cuda data live (tests of the layout run it on "cpu")
KEEP_SETS_BYTES = 2 << 30  # torch2cuda check sets kept for the group's life up to this size; larger ones are
# made again from their seeds whenever they are needed, one at a time (ConfigData.check_set)


def build_torch2cuda(task: Task, seed: int, init_seed: int, compiled: bool = False,
                     keep_sets_bytes: int = KEEP_SETS_BYTES, fidelity: bool = True) -> GroupData:
    """The group of a torch2cuda task. The reference runs once per configuration to learn the output
    layout; the two check sets of each configuration (inputs from the task's get_inputs() under a
    secret seed, made on the device, and the reference's outputs) are made on demand by
    `ConfigData.check_set`, and kept only while the whole group's sets stay under `keep_sets_bytes`.
    With `compiled`, each configuration's reference is also built under torch.compile (None where it
    does not build). The module's constant state (weights of ones, biases of zeros) is redrawn from the
    secret `init_seed` (fidelity.redraw_constant_state), check set 1 is adversarial, and a float64 twin of the
    module gives every check set's float64 anchor (ConfigData.anchor_set); `fidelity=False` leaves all three out
    (version 13's check, which the mutation campaign measures against)."""
    import torch
    set_full_float32(torch)
    buffers: list[Buffer] = []
    configs: list[ConfigData] = []
    calls_of, compiled_of = [], []
    for ci, cfg in enumerate(task.configs):
        params = config_params(task, cfg)
        ns = load_reference_module(task, params)
        init_inputs = list(ns["get_init_inputs"]())
        torch.manual_seed(init_seed)
        model = ns["Model"](*init_inputs).to(DEVICE).eval()
        if fidelity:
            redraw_constant_state(model, torch.Generator().manual_seed(init_seed), tuple(task.fixed_state))
        twin = float64_twin(model) if fidelity else None
        state = [(name, p.detach().contiguous()) for name, p in model.state_dict().items()]
        seeds = [seed * 1000 + ci * 10 + si for si in range(3)]
        torch.manual_seed(seeds[0])
        with torch.device(DEVICE):
            raw = list(ns["get_inputs"]())
        args = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in raw]
        with torch.no_grad():
            out, summed = run_measuring_sums(model, *args) if fidelity else (model(*args), 0)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        in_specs, idx = [], []
        for k, x in enumerate(raw):
            if isinstance(x, torch.Tensor):
                buffers.append(Buffer(f"{cfg.name}.input{k}", TORCH_DTYPES[str(x.dtype)], tuple(x.shape), "in"))
                idx.append(len(buffers) - 1)
                in_specs.append({"buf": len(buffers) - 1})
            else:
                in_specs.append({"value": x})
        n_inputs = len(idx)
        param_idx = []
        for name, p in state:
            buffers.append(Buffer(f"{cfg.name}.{name}", TORCH_DTYPES[str(p.dtype)], tuple(p.shape), "param"))
            param_idx.append(len(buffers) - 1)
        out_idx = []
        for k, o in enumerate(outs):
            buffers.append(Buffer(f"{cfg.name}.output{k}", TORCH_DTYPES[str(o.dtype)], tuple(o.shape), "out"))
            out_idx.append(len(buffers) - 1)
        idx += param_idx + out_idx
        del raw, out, outs
        comp = _compiled_module(model, args) if compiled else None
        del args
        flops, nbytes = work_of(task, params)
        if not (flops or nbytes):  # no work model (KernelBench problems): the floor is moving inputs and outputs once
            nbytes = float(sum(buffers[b].nbytes for b in idx if buffers[b].role in ("in", "out")))
        calls = {"kernelbench": {
            "inputs": [dict(s, **_meta(buffers[s["buf"]])) if "buf" in s else s for s in in_specs],
            "params": [dict(name=n, buf=b, **_meta(buffers[b])) for (n, _), b in zip(state, param_idx)],
            "outputs": [dict(buf=b, **_meta(buffers[b])) for b in out_idx],
            "init_inputs": init_inputs, "init_seed": init_seed}}
        if all("buf" in s for s in in_specs):
            tensors = [s["buf"] for s in in_specs] + param_idx
            calls["light"] = {"inputs": tensors, "outputs": out_idx,
                              "sizes": light_abi.pack_sizes([buffers[b].shape for b in tensors + out_idx])}
        cd = ConfigData(cfg.name, cfg.check, cfg.time, params, idx, [], [], calls, flops, nbytes)
        cd.fresh, cd.run_reference = _torch_fresh(ns, model, in_specs, n_inputs, [p for _, p in state])
        if twin is not None:
            cd.run_reference64 = _torch_fresh(None, twin, in_specs, n_inputs, [], float64=True)[1]
        cd.seeds, cd.n_inputs, cd.param_values = seeds, n_inputs, dict(zip(param_idx, (p for _, p in state)))
        cd.adversarial, cd.module, cd.module64, cd.summed = fidelity, model, twin, summed
        if comp is not None:
            cd.run_compiled = _torch_fresh(None, comp, cd.calls["kernelbench"]["inputs"], 0, [])[1]
        cd.anchor_works = twin is not None and twin_runs(cd, seeds[0], [buffers[b] for b in out_idx])
        if cfg.check and cd.anchor_works:
            cd.wide = stable_on_wide(cd, task.tolerance, seeds[2] ^ 0x1D3)
        if cfg.time and fidelity:
            found = cd.finite_draw(seeds[0] ^ 0x71ED)
            cd.timed_draw = found[2] if found else "task"
            del found
            cd.timed_anchor = twin_anchor(cd) if cd.anchor_works else None
            cd.timed_anchor_note = "" if cd.anchor_works else "the float64 twin of the reference module does not run"
        configs.append(cd)
        calls_of.append((cd.fresh, cd.run_reference, seeds[0]))
        compiled_of.append(comp)
    set_bytes = sum(2 * buffers[b].nbytes for cd in configs for b in cd.buffers if buffers[b].role != "param")
    for cd in configs:
        cd.keep_sets = set_bytes <= keep_sets_bytes
    if DEVICE == "cuda":
        torch.cuda.empty_cache()  # the layout runs' memory goes back before the buffers are allocated
    return GroupData(task, buffers, configs, reference_label="PyTorch eager",
                     reference_calls=[_reference_call(*c) for c in calls_of],
                     compiled_calls=compiled_of if compiled else [])


def stable_on_wide(cd: ConfigData, tol: Tolerance, seed: int) -> bool:
    """Whether the reference is stable on the wide draw (fidelity.wide_like): its float32 outputs finite and within
    a WIDE_MARGIN-th of the task's tolerance of its float64 twin's (room for honest kernels that round otherwise).
    Then the task asks for stability over that range (a softmax, a log-sum-exp), and a kernel that loses it (an
    exponential without its max shift) must fail."""
    import torch
    margin = tol.model_copy(update={k: getattr(tol, k) / WIDE_MARGIN for k in ("rtol", "atol", "atol_abs", "rel_l2")})
    try:
        fresh = cd.fresh(seed, "wide")
        outs = cd.run_reference(cd.reference_copy(fresh))
        outs64 = cd.run_reference64(cd.reference_copy(fresh))
    except Exception:  # noqa: BLE001 - the reference refuses such values: no wide set
        return False
    for o, o64 in zip(outs, outs64):
        if not o.is_floating_point() or o.numel() != o64.numel():
            return False
        if not bool(torch.isfinite(o).all()) or not bool(torch.isfinite(o64).all()):
            return False
        if not compare(o.reshape(-1), o64.reshape(-1).to(o.dtype), margin)[0]:
            return False
    return True


def twin_runs(cd: ConfigData, seed: int, outputs: list[Buffer]) -> bool:
    """Whether the float64 twin runs on the configuration's own draw and gives a float64 output of the size of each
    floating output of the reference (`outputs`, the buffers its layout run made; a module that makes float32
    tensors of its own in forward does not)."""
    import torch
    try:
        outs64 = cd.run_reference64(cd.reference_copy(cd.fresh(seed)))
    except Exception:  # noqa: BLE001 - no anchor: the task's tolerance alone judges this configuration
        return False
    floating = [(b, o64) for b, o64 in zip(outputs, outs64) if torch_dtype(b.dtype).is_floating_point]
    return len(outs64) == len(outputs) and all(o64.dtype == torch.float64 and o64.numel() == int(np.prod(b.shape))
                                               for b, o64 in floating)


def twin_anchor(cd: ConfigData):
    """`ConfigData.timed_anchor` from the float64 twin: (fresh set, {position: expected output}) -> {position:
    (float64 output, allowance)}, empty where the twin fails or gives other shapes or types."""
    def anchor(fresh_set: dict, expected: dict) -> dict:
        import torch
        try:
            outs64, summed = run_measuring_sums(cd.run_reference64, cd.reference_copy(fresh_set))
        except Exception as e:  # noqa: BLE001 - the twin cannot run on these inputs: the task's tolerance alone
            cd.anchor_works = False  # judges from here on, unwidened
            cd.timed_anchor_note = f"the float64 twin failed on a timed call ({type(e).__name__})"
            return {}
        anchors = {}
        for j, o64 in zip(sorted(expected), outs64):
            want = expected[j]
            if o64.dtype == torch.float64 and want.is_floating_point() and o64.numel() == want.numel():
                anchors[j] = (o64.detach(), anchor_allowance(want.reshape(o64.shape), o64, summed=summed))
        return anchors
    return anchor


def _reference_call(fresh, run, seed: int):
    """A call of the reference on one fixed input set, made on its first call (dataset measurement)."""
    held: list = []

    def call():
        if not held:
            held.append(fresh(seed))
        run(held[0])
    return call


def _torch_fresh(ns: dict | None, model, in_specs: list[dict], n_inputs: int, params: list, float64: bool = False):
    """(fresh, run): `fresh(seed, draw="task")` runs the task's get_inputs() on the device under that seed and
    returns {position: tensor} for the input buffers (positions 0..n_inputs-1) and the parameters (after them);
    with draw "adversarial" or "mild", each input is replaced by its adversarial twin (fidelity.adversarial_like,
    seeded from `seed`). `run(fresh_set)` calls the reference on such a set and returns its outputs (`float64`:
    the float64 twin's, on the inputs cast to float64)."""
    import torch

    def fresh(seed: int, draw: str = "task") -> dict:
        torch.manual_seed(seed)
        with torch.device(DEVICE):
            raw = list(ns["get_inputs"]())
        tensors = [x.contiguous().to(DEVICE) for x in raw if isinstance(x, torch.Tensor)]
        if draw != "task":
            gen = torch.Generator(device=DEVICE)
            gen.manual_seed(seed ^ 0x5AD5EED)
            tensors = [wide_like(x, gen) if draw == "wide" else adversarial_like(x, gen, mild=draw == "mild")
                       for x in tensors]
        out = dict(enumerate(tensors))
        out.update({n_inputs + k: p for k, p in enumerate(params)})
        return out

    def run(fresh_set: dict) -> list:
        args, j = [], 0
        for spec in in_specs:
            if "buf" in spec:
                args.append(fresh_set[j])
                j += 1
            else:
                args.append(spec["value"])
        if float64:
            args = as_float64(args)
        with torch.no_grad():
            out = model(*args)
        return list(out) if isinstance(out, (tuple, list)) else [out]
    return fresh, run


def _compiled_module(model, args):
    """`model` under torch.compile, built by one run on `args`; None where it does not build."""
    import torch
    try:
        compiled = torch.compile(model)
        with torch.no_grad():
            compiled(*args)
        if DEVICE == "cuda":
            torch.cuda.synchronize()
    except Exception:  # any failure of torch.compile on this reference: it then has no compiled baseline
        return None
    return compiled


def _meta(buf: Buffer) -> dict:
    return {"shape": list(buf.shape), "dtype": buf.dtype}
