"""Degenerate tasks: outputs a kernel can match without doing the work, found by running the reference on the CPU.

In: a Task whose reference runs on this CPU (PyTorch references; C references through gcc). Out: a
`Degeneracy` record: the properties found on the task's own draw, those left under the evaluator's check
(check set 1 adversarial, constant module state redrawn, the float64 anchor: `fidelity.py`), and a verdict:
- `ok`: nothing found;
- `repaired`: found on the task's own draw, gone under the evaluator's check (the repair is in how the task
  is checked; the task's code is unchanged);
- `degenerate`: still there under the evaluator's check: kept out of training and benchmark aggregates;
- `unchecked`: the reference could not run here (too large for the CPU, or it failed), with the reason.
Touches nothing but the CPU (torch on "cpu", gcc through the Compiler's cache).

Properties, per check configuration and output, on both check sets together; and per timing configuration,
on the draw the timed rounds use (torch2cuda: `adversarial_like`, milder or the task's own where the reference
is not finite on it; c2cuda: `adversarial_uniform` for float inputs declared uniform, the rest as the task
draws them) under the same check (`check_outputs`: tolerance and float64 anchor). A timing configuration too
large for the CPU is checked with its sizes shrunk (`shrink`, said in the record's `sizes`), and what a lazy
kernel gets past there counts alone (a kernel can switch to a constant at the timed size and nowhere else),
once it holds on CONFIRM_DRAWS further timed draws too (the timed rounds draw every call afresh).
- `non-finite`: the reference itself is Inf or NaN somewhere;
- `constant` / `zero`: every element equal;
- `rounding-noise`: the output's rms under the float32 rounding of its inputs (`rounding_floor`);
- `trivial`: a kernel writing zeros, a constant, an input, or a fixed affine function of one input
  (a * x + b, fitted on the first check set and kept for the second) passes the check (`check_outputs`, as a
  candidate would be checked);
- `insensitive`: with one input or parameter (the first MAX_PARAMS floating ones) redrawn, the reference's
  outputs still pass the check: a kernel ignoring it would be called correct.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from pipeline.core.records import Task

MAX_BYTES = 64 << 20  # a configuration's data (inputs, outputs, parameters) the CPU check takes on
MAX_FLOPS = 5e7  # a timing configuration's work (its work model) the CPU check takes on; larger ones are shrunk
MAX_PARAMS = 8  # parameters redrawn one at a time for `insensitive` (the first ones of the state)


@dataclass
class Degeneracy:
    task: str
    verdict: str  # ok | repaired | degenerate | unchecked
    task_draw: list[str] = field(default_factory=list)  # properties on the task's own draw
    under_check: list[str] = field(default_factory=list)  # properties left under the evaluator's check
    reason: str = ""  # one line for reports
    sizes: str = ""  # the sizes checked where they are not the task's own (timing configurations shrunk to fit)

    def to_dict(self) -> dict:
        return asdict(self)


def degeneracy(task: Task, seed: int = 1, max_bytes: int = MAX_BYTES, max_flops: float = MAX_FLOPS) -> Degeneracy:
    """The task's degeneracy (module docstring), never raising for a task's own failure."""
    try:
        notes = []
        if task.kind == "torch2cuda":
            fitted, changed = fit_sizes(task, lambda t: not _too_big(t, max_bytes))
            if fitted is None:
                return Degeneracy(task.id, "unchecked", reason=_too_big(task, max_bytes))
            if changed:
                notes.append(f"check configurations at {_sizes(changed)}")
            task = fitted
        timed, unfit = timed_configs(task, max_bytes, max_flops)
        if unfit:
            return Degeneracy(task.id, "unchecked", reason=f"timing configuration {', '.join(unfit)} cannot be shrunk "
                              f"to {max_bytes >> 20} MiB and {max_flops:.0e} flops for the CPU check")
        notes += [f"timing configuration {c.name.removesuffix(TIMED)} at {_sizes(changed)}" for c, changed in timed
                  if changed]
        timed = [c for c, _ in timed]
        if task.kind == "torch2cuda":
            def properties(s: int, fidelity: bool, checks: bool = True) -> list[str]:
                return _torch_properties(task, timed, s, fidelity, checks)
        else:
            libs = _c_libraries(task)

            def properties(s: int, fidelity: bool, checks: bool = True) -> list[str]:
                return _c_properties(task, timed, s, fidelity, libs, checks)
        plain = _confirmed(properties(seed, False), lambda s: properties(s, False, checks=False), seed)
        # the check only takes away from what the task's own draw shows, except at timing configurations, which
        # the timed rounds judge on a draw of their own: those are always judged under the check
        checked = _confirmed(properties(seed, True, checks=bool(plain)), lambda s: properties(s, True, checks=False),
                             seed)
    except Exception as e:  # noqa: BLE001 - the task's reference failed here: report it, never stop a sweep
        return Degeneracy(task.id, "unchecked", reason=f"the reference failed on the CPU: {type(e).__name__}: "
                                                       f"{str(e)[:200]}")
    sizes = "; ".join(notes)
    verdict = "degenerate" if checked else "repaired" if plain else "ok"
    reason = {"ok": "", "repaired": f"on its own draw: {'; '.join(plain[:3])}; none under the check",
              "degenerate": "; ".join(checked[:3])}[verdict]
    if reason and sizes:
        reason += f" (checked with {sizes}, the other sizes as the task has them)"
    return Degeneracy(task.id, verdict, plain, checked, reason, sizes)


CONFIRM_DRAWS = 7  # further timed draws (other seeds) a finding at a timing configuration must hold on


def _at_timed(p: str) -> bool:
    return p.startswith("timing configuration ") or f"{TIMED}/" in p


def _label(p: str) -> str:
    return p.split(" (rms ")[0]  # a rounding-noise figure differs by draw


def _confirmed(found: list[str], timed_only, seed: int) -> list[str]:
    """`found` less what it says of timing configurations that does not hold on CONFIRM_DRAWS further draws
    (`timed_only(seed)`: the properties of the timing configurations alone under another seed). The timed rounds
    draw every call afresh: an output that is all zeros on one adversarial draw in two (a relu of a sum whose
    sign the draw's secret centre decides) fails a kernel writing zeros within a round."""
    keep = {_label(p) for p in found if _at_timed(p)}
    for k in range(1, CONFIRM_DRAWS + 1):
        if not keep:
            break
        keep &= {_label(p) for p in timed_only(seed + k)}
    return [p for p in found if not _at_timed(p) or _label(p) in keep]


def _sizes(params: dict) -> str:
    return ", ".join(f"{k} = {v}" for k, v in params.items())


BATCH_NAMES = ("batch_size", "batch", "B", "N")  # module globals that count independent samples


def runs_on_meta(task: Task) -> bool:
    """Whether the task's reference builds and runs on torch's meta device at its first configuration's sizes
    (a size changed alone can disagree with a shape the module derived from it when it was loaded)."""
    import torch
    from pipeline.evaluation.checks.reference_torch import load_reference_module
    from pipeline.tasks import config_params
    try:
        ns = load_reference_module(task, config_params(task, task.configs[0]))
        with torch.device("meta"), torch.no_grad():
            ns["Model"](*list(ns["get_init_inputs"]()))(*list(ns["get_inputs"]()))
        return True
    except Exception:  # noqa: BLE001 - any failure means this size cannot be changed alone
        return False


def fit_sizes(task: Task, fits) -> tuple[Task | None, dict]:
    """The task with its module's integer sizes halved until `fits(task)`: batch sizes (BATCH_NAMES) first,
    since samples are independent and what makes an output degenerate (a reduction's length, the values a
    clamp leaves) stays; then the largest size, each only where the reference still runs. Returns the task
    (None when nothing makes it fit) and the sizes changed."""
    from pipeline.evaluation.checks.reference_torch import load_reference_module
    from pipeline.tasks import config_params
    changed, frozen = {}, set()
    for _ in range(40):
        if fits(task):
            return task, changed
        ns = load_reference_module(task, config_params(task, task.configs[0]))
        ints = {k: v for k, v in ns.items() if not k.startswith("_") and type(v) is int and v > 1 and k not in frozen}
        if not ints:
            break
        name = next((n for n in BATCH_NAMES if n in ints), None) or max(ints, key=ints.get)
        trial = task.model_copy(update={"configs": [c.model_copy(update={"params": {**c.params, name: ints[name] // 2}})
                                                    for c in task.configs]})
        if runs_on_meta(trial):
            task, changed[name] = trial, ints[name] // 2
        else:
            frozen.add(name)
    return None, changed


TIMED = " (timed)"  # the name of a timing configuration judged as the timed rounds judge it


def timed_configs(task: Task, max_bytes: int = MAX_BYTES, max_flops: float = MAX_FLOPS) -> tuple[list, list[str]]:
    """([(configuration, sizes changed)], names that cannot fit): every timing configuration as a check-only one
    named '<name> (timed)', its sizes shrunk (`shrink`) until its data fit `max_bytes` and its work model's flops
    `max_flops` (torch2cuda problems without a work model: the bytes alone)."""
    out, unfit = [], []
    for c in task.configs:
        if not c.time:
            continue
        params, changed = shrink(task, c, max_bytes, max_flops)
        if params is None:
            unfit.append(c.name)
            continue
        new = {**c.params, **changed} if task.kind == "torch2cuda" else params
        out.append((c.model_copy(update={"name": c.name + TIMED, "params": new, "check": True, "time": False}),
                    changed))
    return out, unfit


def shrink(task: Task, cfg, max_bytes: int, max_flops: float) -> tuple[dict | None, dict]:
    """(params that fit, the ones changed), or (None, ...) where none do. A size is halved at a time: batch sizes
    (BATCH_NAMES) first, then sizes the output grows with while the work behind each output element stays (independent
    rows, columns, samples), largest first, and only then the others (a reduction's length, which decides whether
    its output is near constant: a max of many uniform draws; the bins a scatter sums into). No size goes below its smallest value at a check configuration of the task (sizes the
    reference is known to take), or 1 where every configuration has the same one."""
    from pipeline.tasks import config_params
    params = dict(config_params(task, cfg))
    measure = _torch_measure if task.kind == "torch2cuda" else _c_measure
    first = measure(task, params)
    if first is None:
        return None, {}
    names = [k for k, v in params.items() if type(v) is int and v > 1
             and (task.kind == "c2cuda" or k in _module_ints(task))]
    others = [config_params(task, c) for c in task.configs if not c.time]
    floors = {}
    for k in names:
        seen = [o[k] for o in others if type(o.get(k)) is int]
        same = all(type(config_params(task, c).get(k)) is int and config_params(task, c)[k] == params[k]
                   for c in task.configs)
        floors[k] = 1 if same and task.kind == "torch2cuda" else max(1, min(seen, default=1))
    def per_output(m) -> float:  # the work (or the bytes read) behind one output element
        return (m[1] or m[0]) / max(m[2], 1)
    grows = {k for k in names if (m := measure(task, {**params, k: params[k] // 2})) is not None and m[2] < first[2]
             and per_output(m) <= 1.5 * per_output(first)}  # rows, samples: not the bins a scatter sums into
    changed, frozen, now = {}, set(), first
    for _ in range(120):
        if now[0] <= max_bytes and now[1] <= max_flops:
            return params, changed
        usable = [k for k in names if k not in frozen and params[k] // 2 >= floors[k]]
        if not usable:
            return None, changed
        k = min(usable, key=lambda n: (n not in BATCH_NAMES, n not in grows, -params[n]))
        trial = {**params, k: params[k] // 2}
        m = measure(task, trial)
        if m is None:
            frozen.add(k)
            continue
        params, now, changed[k] = trial, m, trial[k]
    return None, changed


def _module_ints(task: Task) -> set[str]:
    from pipeline.tasks import module_names
    return {k for k, v in module_names(task.reference).literals.items() if type(v) is int}


def _flops(task: Task, params: dict) -> float:
    from pipeline.tasks import eval_expr
    try:
        return float(eval_expr(task.work.flops, params))
    except Exception:  # noqa: BLE001 - a work model over names this configuration lacks: bytes alone decide
        return 0.0


def _c_measure(task: Task, params: dict) -> tuple[int, float, int] | None:
    """(bytes of the arguments, flops, output elements) of a c2cuda task at `params`; None where a size is not
    positive."""
    from pipeline.tasks import arg_dtype, eval_expr, is_pointer
    import numpy as np
    total = outs = 0
    try:
        for a in task.args:
            if is_pointer(a):
                n = int(eval_expr(a.size, params))
                if n < 1:
                    return None
                total += n * np.dtype(arg_dtype(a)).itemsize
                outs += n if a.role in ("out", "inout") else 0
    except Exception:  # noqa: BLE001 - sizes that do not evaluate at these params
        return None
    return total, _flops(task, params), outs


def _torch_measure(task: Task, params: dict) -> tuple[int, float, int] | None:
    """(bytes of inputs, outputs and state, flops, output elements) of a torch2cuda task at `params`, from its
    reference run on torch's meta device; None where it does not build or run there."""
    import torch
    from pipeline.evaluation.checks.reference_torch import load_reference_module
    try:
        ns = load_reference_module(task, params)
        with torch.device("meta"), torch.no_grad():
            model = ns["Model"](*list(ns["get_init_inputs"]()))
            inputs = [x for x in ns["get_inputs"]() if isinstance(x, torch.Tensor)]
            out = model(*inputs)
    except Exception:  # noqa: BLE001 - these sizes do not make a problem the reference takes
        return None
    outs = [o for o in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(o, torch.Tensor)]
    nbytes = sum(t.numel() * t.element_size() for t in inputs + outs + list(model.state_dict().values()))
    return nbytes, _flops(task, params), sum(o.numel() for o in outs)


def _too_big(task: Task, max_bytes: int) -> str:
    """Why the task's check configurations cannot run on this CPU ("" when they can)."""
    from pipeline.evaluation.checks.footprint import config_bytes
    checked = {c.name for c in task.configs if c.check and not c.time}  # timing ones: `timed_configs`
    big = [s.name for s in config_bytes(task) if s.name in checked and s.inputs + s.outputs + s.params > max_bytes]
    return (f"configurations {', '.join(big)} hold more than {max_bytes >> 20} MiB: too large for the CPU check"
            if big else "")


def _torch_properties(task: Task, timed: list, seed: int, fidelity: bool, checks: bool = True) -> list[str]:
    """Properties of a torch2cuda task's check (fidelity) or own draw (not), on the CPU: at its check
    configurations (`checks`) and at the timing configurations `timed` (timed_configs)."""
    import torch
    from pipeline.evaluation.checks import reference_torch
    device, reference_torch.DEVICE = reference_torch.DEVICE, "cpu"
    try:
        return _torch_properties_cpu(task, timed, seed, fidelity, checks, torch)
    finally:
        reference_torch.DEVICE = device


def _judged_sets(cd) -> tuple[int, ...]:
    """The check sets a configuration is judged on: both at a check configuration; at a timing one the second
    alone, which is drawn as the timed rounds draw (adversarial under the check; the first set, the task's own
    draw, is where a lazy kernel's constants are fitted)."""
    return (1,) if cd.name.endswith(TIMED) else (0, 1)


def _torch_properties_cpu(task: Task, timed: list, seed: int, fidelity: bool, checks: bool, torch) -> list[str]:
    from pipeline.evaluation.checks.comparison import check_outputs
    from pipeline.evaluation.checks.reference_torch import build_torch2cuda
    found: list[str] = []
    configs, seen = [], set()
    for c in task.configs if checks else []:
        key = tuple(sorted(c.params.items()))
        if c.check and not c.time and key not in seen:  # the same sizes (KernelBench's seed0, seed1) once
            seen.add(key)
            configs.append(c)
    n_checks = len(configs)
    group = build_torch2cuda(task.model_copy(update={"configs": configs + timed}), seed, init_seed=seed + 7,
                             fidelity=fidelity)
    lazy: dict[str, list[str]] = {}  # what a lazy kernel gets past -> the check configurations it passes
    for cd in group.configs:
        judged = _judged_sets(cd)
        sets = [cd.check_set(si) for si in range(2)]
        per_set = [{f"{cd.name}/{group.buffers[b].name.split('.', 1)[1]}: {p}"
                    for b, out in expected.items() for p in _output_properties(out, inputs, task)}
                   for inputs, expected in sets]
        if len(judged) == 1:
            found += sorted(per_set[1])
        else:
            # the check's sets are judged together: an output that is zero on the task's draw but informative on
            # the adversarial one fails a kernel writing zeros (rounding-noise figures differ by set: named by the
            # first)
            found += sorted(per_set[0] | per_set[1]) if not fidelity else sorted(
                p for p in per_set[0] if p.split(" (")[0] in {q.split(" (")[0] for q in per_set[1]})
        passes = []
        for label, outs_of in _trivial_outputs(group, cd, sets, timed=len(judged) == 1).items():
            if fidelity and "affine" in label:  # an affine map that holds on the adversarial set too is the task
                continue  # itself (a scalar multiplication), not a shortcut; on the task's draw it is one (a norm)
            if all(check_outputs(group, cd, si, {**sets[si][0], **outs_of(si)})[0] for si in judged):
                passes.append(f"{label} passes the check")
        for label, outs_of in _ignoring(cd, sets, seed, independent=len(judged) == 1).items():
            if all(check_outputs(group, cd, si, {**sets[si][0], **outs_of(si)})[0] for si in judged):
                passes.append(f"insensitive to {label} (a kernel ignoring it passes)")
        _record_lazy(cd.name, passes, lazy, found)
        cd.drop_sets()
        torch.manual_seed(0)
    # a lazy kernel must pass every check configuration (a copy is a right permute where one axis has size 1)
    found += [f"every check configuration: {label}" for label, names in lazy.items() if len(names) == n_checks]
    return sorted(set(found))


def _record_lazy(name: str, passes: list[str], lazy: dict, found: list[str]) -> None:
    """What a lazy kernel gets past at configuration `name`: at a timing configuration it counts alone (a kernel
    can switch to it at the timed size and be timed doing nothing); at a check one it is gathered into `lazy`."""
    if name.endswith(TIMED):
        found += [f"timing configuration {name.removesuffix(TIMED)}: {label}" for label in passes]
    else:
        for label in passes:
            lazy.setdefault(label, []).append(name)


def _output_properties(out, inputs: dict, task: Task) -> list[str]:
    import torch
    from pipeline.evaluation.checks.comparison import rounding_floor
    if not out.is_floating_point():
        flat = out.reshape(-1)
        return ["constant"] if flat.numel() > 1 and bool((flat == flat[0]).all()) else []
    props = []
    if not bool(torch.isfinite(out).all()):
        props.append("non-finite")
    flat = out.reshape(-1)
    if flat.numel() > 1 and bool((flat == flat[0]).all()):
        props.append("zero" if float(flat[0]) == 0 else "constant")
    elif flat.numel() == 1 and float(flat[0]) == 0:
        props.append("zero")
    floor = rounding_floor(task.tolerance, inputs.values())
    rms = float(out.double().pow(2).mean().sqrt()) if out.numel() else 0.0
    if floor > 0 and rms <= floor and "zero" not in props:
        props.append(f"rounding-noise (rms {rms:.3g} <= {floor:.3g})")
    return props


def _trivial_outputs(group, cd, sets, timed: bool = False) -> dict:
    """label -> function(set index) -> {output buffer: tensor} of outputs a lazy kernel could write: zeros, a
    constant, an input, or a fixed affine function a * x + b of one input. The constant and (a, b) are fitted on
    set 0 and used unchanged on set 1, as a kernel would hard-code them (sqrt(N) for a norm of a fixed draw)."""
    import torch
    outs = [b for b in cd.buffers if group.buffers[b].role == "out"]
    inputs = [b for b in cd.buffers if group.buffers[b].role in ("in", "param")]

    def zeros(si):
        return {b: torch.zeros_like(sets[si][1][b]) for b in outs}

    def mean(si):
        return {b: torch.full_like(sets[si][1][b], float(sets[0][1][b].double().mean()))
                if sets[si][1][b].is_floating_point() else torch.zeros_like(sets[si][1][b]) for b in outs}
    table = {"writing zeros": zeros}
    if timed or any(sets[0][1][b].numel() > 1 for b in outs):  # a scalar's mean is set 0's answer itself (a timing
        # configuration is judged on set 1 alone: there a constant fitted on set 0 is a lazy kernel's guess)
        table["writing a constant"] = mean

    def fit(k: int, b: int) -> tuple[float, float]:
        x, y = sets[0][0][k].reshape(-1).double(), sets[0][1][b].reshape(-1).double()
        xm, ym = float(x.mean()), float(y.mean())
        var = float(((x - xm) ** 2).sum())
        a = float(((x - xm) * (y - ym)).sum()) / var if var > 0 else 0.0
        return a, ym - a * xm

    for k in inputs:
        usable = all(sets[0][0][k].numel() == sets[0][1][b].numel() and sets[0][0][k].is_floating_point()
                     and sets[0][1][b].is_floating_point() for b in outs)
        if not usable:
            continue
        coefficients = {b: fit(k, b) for b in outs}

        def copy(si, k=k, affine=False):
            got = {}
            for b in outs:
                x = sets[si][0][k].reshape(sets[si][1][b].shape).double()
                if affine:
                    a, c = coefficients[b]
                    x = a * x + c
                got[b] = x.to(sets[si][1][b].dtype)
            return got
        name = group.buffers[k].name.split(".", 1)[1]
        table[f"copying '{name}'"] = copy
        table[f"a fixed affine function of '{name}'"] = lambda si, k=k, c=copy: c(si, k, True)
    return table


def _ignoring(cd, sets, seed: int, independent: bool = False) -> dict:
    """label -> function(set index) -> the reference's outputs with one input (or parameter) redrawn: around its
    values, or drawn afresh as the set was drawn where that is the honest test: integer inputs (indices: flipped,
    a bag of them sums to the same), and every input at a timing configuration (`independent`: on an adversarial
    draw a few large values decide an argmax, and a redraw around them keeps them)."""
    import torch
    from pipeline.evaluation.checks.group_data import reference_inputs_of
    table = {}
    positions = list(range(len(cd.buffers)))
    state = list(cd.module.state_dict().values())
    floating = [j for j in positions[cd.n_inputs:cd.n_inputs + len(cd.param_values)]
                if state[j - cd.n_inputs].is_floating_point()][:MAX_PARAMS]  # counters are no input
    for j in positions[:cd.n_inputs] + floating:
        def redrawn(si, j=j):
            inputs = sets[si][0]
            fresh = reference_inputs_of(cd, inputs)
            x = fresh[j]
            if (independent or not x.is_floating_point()) and j < cd.n_inputs:
                draw = cd.draws[si] if si < len(cd.draws) and cd.draws[si] in ("adversarial", "mild") else "task"
                fresh[j] = cd.fresh(seed * 7919 + 17 * j + si, draw)[j] if draw != "task" else \
                    cd.fresh(seed * 7919 + 17 * j + si)[j]
            elif not x.is_floating_point():
                if x.dtype == torch.bool:
                    fresh[j] = ~x
                else:
                    fresh[j] = x.flip(-1) if x.dim() else x
            else:
                g = torch.Generator().manual_seed(seed * 31 + j + 1000 * si)
                fresh[j] = x * torch.empty(x.shape, dtype=torch.float64).uniform_(0.5, 1.5, generator=g).to(x.dtype) \
                    + 0.25 * float(x.double().pow(2).mean().sqrt()) * torch.randn(x.shape, generator=g).to(x.dtype)
            outs = cd.run_reference(cd.reference_copy(fresh)) if j < cd.n_inputs else _with_param(cd, j, fresh[j], fresh)
            out_bufs = [b for b in cd.buffers if b in sets[si][1]]
            return {b: o.detach().reshape(sets[si][1][b].shape) for b, o in zip(out_bufs, outs)}
        name = f"input {j}" if j < cd.n_inputs else f"parameter '{list(cd.module.state_dict())[j - cd.n_inputs]}'"
        table[name] = redrawn
    return table


def _with_param(cd, j: int, value, fresh: dict) -> list:
    """The reference's outputs with state entry j - n_inputs set to `value` (then put back)."""
    import torch
    name = list(cd.module.state_dict())[j - cd.n_inputs]
    t = cd.module.state_dict(keep_vars=True)[name]
    before = t.detach().clone()
    with torch.no_grad():
        t.data.copy_(value)
    try:
        return cd.run_reference(cd.reference_copy(fresh))
    finally:
        with torch.no_grad():
            t.data.copy_(before)


def _c_libraries(task: Task) -> tuple[str, str]:
    """(the C reference's shared library, its float64 build or "" where it has none), built once per task."""
    from pipeline.core.config import CompileSection
    from pipeline.evaluation.build.compile import Compiler
    from pipeline.evaluation.checks.fidelity import C_FLOAT64_PRELUDE
    from pipeline.evaluation.checks.reference_c import can_anchor_c
    comp = Compiler(CompileSection())
    lib = comp.compile_c_reference(task.reference)
    if not lib.ok:
        raise RuntimeError(f"the C reference does not compile: {lib.log[:200]}")
    lib64 = comp.compile_c_reference(C_FLOAT64_PRELUDE + task.reference) if can_anchor_c(task) else None
    return lib.artifact, lib64.artifact if lib64 is not None and lib64.ok else ""


def _c_properties(task: Task, timed: list, seed: int, fidelity: bool, libs: tuple[str, str],
                  checks: bool = True) -> list[str]:
    """Properties of a c2cuda task's check configurations that are not timed (`checks`) and of its timing
    configurations `timed` (timed_configs), where the C reference runs on them."""
    import torch
    from pipeline.evaluation.checks.comparison import check_outputs
    from pipeline.evaluation.checks.reference_c import build_c2cuda, run_c_reference, run_c_reference64
    own = [c for c in task.configs if c.check and not c.time] if checks else []
    small = task.model_copy(update={"configs": own + timed})
    group = build_c2cuda(small, seed, fidelity=fidelity)
    run_c_reference(group, libs[0])
    if fidelity and libs[1]:
        run_c_reference64(group, libs[1])
    found, lazy = [], {}
    for cd in group.configs:
        judged = _judged_sets(cd)
        cd.input_sets = [{b: torch.from_numpy(v) for b, v in s.items()} for s in cd.input_sets]
        cd.expected = [{b: torch.from_numpy(v) for b, v in s.items()} for s in cd.expected]
        cd.anchors = [{b: (torch.from_numpy(v), a) for b, (v, a) in s.items()} for s in cd.anchors]
        sets = [cd.check_set(si) for si in range(2)]
        for si in judged:
            inputs, expected = sets[si]
            for b, out in expected.items():
                if group.buffers[b].role == "out":
                    name = f"{cd.name}/{group.buffers[b].name.split('.', 1)[1]}"
                    found += [f"{name}: {p}" for p in _output_properties(out, inputs, task)]
        full = [{b: sets[si][0].get(b, torch.zeros(1)) for b in cd.buffers} for si in range(2)]
        passes = []
        for label, outs_of in _trivial_outputs(group, cd, sets, timed=len(judged) == 1).items():
            if "affine" in label or "copying" in label:
                continue  # C outputs beside inputs of the same size are common (saxpy's y): judged by redraws
            if all(check_outputs(group, cd, si, {**full[si], **outs_of(si)})[0] for si in judged):
                passes.append(f"{label} passes the check")
        _record_lazy(cd.name, passes, lazy, found)
    found += [f"every check configuration: {label}" for label, names in lazy.items() if len(names) == len(own)]
    return sorted(set(found))
