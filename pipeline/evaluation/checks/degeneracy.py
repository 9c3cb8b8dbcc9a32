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

Properties, per check configuration and output, on both check sets together (and on every timing
configuration under the task's own draw against the tolerance alone, which is what the timed rounds check,
when it fits `max_bytes`: a kernel could switch to zeros on that draw alone):
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
MAX_PARAMS = 8  # parameters redrawn one at a time for `insensitive` (the first ones of the state)


@dataclass
class Degeneracy:
    task: str
    verdict: str  # ok | repaired | degenerate | unchecked
    task_draw: list[str] = field(default_factory=list)  # properties on the task's own draw
    under_check: list[str] = field(default_factory=list)  # properties left under the evaluator's check
    reason: str = ""  # one line for reports

    def to_dict(self) -> dict:
        return asdict(self)


def degeneracy(task: Task, seed: int = 1, max_bytes: int = MAX_BYTES) -> Degeneracy:
    """The task's degeneracy (module docstring), never raising for a task's own failure."""
    try:
        if task.kind == "torch2cuda":
            fitted, changed = fit_sizes(task, lambda t: not _too_big(t, max_bytes))
            if fitted is None:
                return Degeneracy(task.id, "unchecked", reason=_too_big(task, max_bytes))
            task = fitted
            note = (f"checked with {', '.join(f'{k} = {v}' for k, v in changed.items())}, the other sizes as the "
                    f"task has them" if changed else "")
            plain = _torch_properties(task, seed, fidelity=False)
            checked = _torch_properties(task, seed, fidelity=True) if plain else []  # the check only adds to it
        else:
            plain = _c_properties(task, seed, fidelity=False)
            checked = _c_properties(task, seed, fidelity=True) if plain else []
    except Exception as e:  # noqa: BLE001 - the task's reference failed here: report it, never stop a sweep
        return Degeneracy(task.id, "unchecked", reason=f"the reference failed on the CPU: {type(e).__name__}: "
                                                       f"{str(e)[:200]}")
    verdict = "degenerate" if checked else "repaired" if plain else "ok"
    reason = {"ok": "", "repaired": f"on its own draw: {'; '.join(plain[:3])}; none under the check",
              "degenerate": "; ".join(checked[:3])}[verdict]
    return Degeneracy(task.id, verdict, plain, checked, reason + (f" ({note})" if task.kind == "torch2cuda" and note
                                                                  else ""))


BATCH_NAMES = ("batch_size", "batch", "B", "N")  # module globals that count independent samples


def runs_on_meta(task: Task) -> bool:
    """Whether the task's reference builds and runs on torch's meta device at its first configuration's sizes
    (a size changed alone can disagree with a shape the module derived from it when it was loaded)."""
    import torch
    from pipeline.evaluation.checks.reference import load_reference_module
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
    from pipeline.evaluation.checks.reference import load_reference_module
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


def _too_big(task: Task, max_bytes: int) -> str:
    """Why the task's check configurations cannot run on this CPU ("" when they can)."""
    from pipeline.evaluation.checks.reference import config_bytes
    checked = {c.name for c in task.configs if c.check}
    big = [s.name for s in config_bytes(task) if s.name in checked and s.inputs + s.outputs + s.params > max_bytes]
    return (f"configurations {', '.join(big)} hold more than {max_bytes >> 20} MiB: too large for the CPU check"
            if big else "")


def _torch_properties(task: Task, seed: int, fidelity: bool) -> list[str]:
    """Properties of a torch2cuda task's check (fidelity) or own draw (not), on the CPU."""
    import torch
    from pipeline.evaluation.checks import reference as R
    device, R.DEVICE = R.DEVICE, "cpu"
    try:
        return _torch_properties_cpu(task, seed, fidelity, R, torch)
    finally:
        R.DEVICE = device


def _torch_properties_cpu(task: Task, seed: int, fidelity: bool, R, torch) -> list[str]:
    found: list[str] = []
    sizes = {s.name: s for s in R.config_bytes(task)}
    checks, timed, seen = [], [], set()
    for c in task.configs:
        key = tuple(sorted(c.params.items()))
        if c.check and key not in seen:  # configurations of the same sizes (KernelBench's seed0, seed1) once
            seen.add(key)
            checks.append(c)
        s = sizes[c.name]
        if c.time and s.inputs + s.outputs + s.params <= MAX_BYTES:
            timed.append(c.model_copy(update={"name": f"{c.name} (timed)", "check": False}))
    group = R.build_torch2cuda(task.model_copy(update={"configs": checks + timed}), seed, init_seed=seed + 7,
                               fidelity=fidelity)
    lazy: dict[str, list[str]] = {}  # what a lazy kernel gets past -> the check configurations it passes
    checked = 0
    for cd in group.configs:
        if not cd.check:  # as the timed rounds check it: the task's own draw against the tolerance alone
            inputs, expected = cd.check_set(0)
            for b, out in expected.items():
                found += [f"{cd.name}/{group.buffers[b].name.split('.', 1)[1]}: {p}"
                          for p in _output_properties(out, inputs, task)]
            cd.drop_sets()
            continue
        sets = [cd.check_set(si) for si in range(2)]
        per_set = [{f"{cd.name}/{group.buffers[b].name.split('.', 1)[1]}: {p}"
                    for b, out in expected.items() for p in _output_properties(out, inputs, task)}
                   for inputs, expected in sets]
        # the check's sets are judged together: an output that is zero on the task's draw but informative on the
        # adversarial one fails a kernel writing zeros (rounding-noise figures differ by set: named by the first)
        found += sorted(per_set[0] | per_set[1]) if not fidelity else sorted(
            p for p in per_set[0] if p.split(" (")[0] in {q.split(" (")[0] for q in per_set[1]})
        checked += 1
        for label, outs_of in _trivial_outputs(group, cd, sets).items():
            if fidelity and "affine" in label:  # an affine map that holds on the adversarial set too is the task
                continue  # itself (a scalar multiplication), not a shortcut; on the task's draw it is one (a norm)
            if all(R.check_outputs(group, cd, si, {**sets[si][0], **outs_of(si)})[0] for si in range(2)):
                lazy.setdefault(f"{label} passes the check", []).append(cd.name)
        for label, outs_of in _ignoring(cd, sets, seed).items():
            if all(R.check_outputs(group, cd, si, {**sets[si][0], **outs_of(si)})[0] for si in range(2)):
                lazy.setdefault(f"insensitive to {label} (a kernel ignoring it passes)", []).append(cd.name)
        cd.drop_sets()
        torch.manual_seed(0)
    # a lazy kernel must pass every check configuration (a copy is a right permute where one axis has size 1)
    found += [f"every check configuration: {label}" for label, names in lazy.items() if len(names) == checked]
    return sorted(set(found))


def _output_properties(out, inputs: dict, task: Task) -> list[str]:
    import torch
    from pipeline.evaluation.checks.reference import rounding_floor
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


def _trivial_outputs(group, cd, sets) -> dict:
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
    if any(sets[0][1][b].numel() > 1 for b in outs):  # a scalar's mean is the answer itself
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


def _ignoring(cd, sets, seed: int) -> dict:
    """label -> function(set index) -> the reference's outputs with one input (or parameter) redrawn."""
    import torch
    from pipeline.evaluation.checks.reference import reference_inputs_of
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
            if not x.is_floating_point():
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


def _c_properties(task: Task, seed: int, fidelity: bool) -> list[str]:
    """Properties of a c2cuda task's check configurations that are not timed (the C reference runs on them)."""
    import torch
    from pipeline.core.config import CompileSection
    from pipeline.evaluation.build.compile import Compiler
    from pipeline.evaluation.checks.fidelity import C_FLOAT64_PRELUDE
    from pipeline.evaluation.checks import reference as R
    small = task.model_copy(update={"configs": [c for c in task.configs if c.check and not c.time]})
    comp = Compiler(CompileSection())
    lib = comp.compile_c_reference(small.reference)
    if not lib.ok:
        raise RuntimeError(f"the C reference does not compile: {lib.log[:200]}")
    group = R.build_c2cuda(small, seed, fidelity=fidelity)
    R.run_c_reference(group, lib.artifact)
    if fidelity and R.can_anchor_c(small):
        lib64 = comp.compile_c_reference(C_FLOAT64_PRELUDE + small.reference)
        if lib64.ok:
            R.run_c_reference64(group, lib64.artifact)
    found, lazy = [], {}
    for cd in group.configs:
        cd.input_sets = [{b: torch.from_numpy(v) for b, v in s.items()} for s in cd.input_sets]
        cd.expected = [{b: torch.from_numpy(v) for b, v in s.items()} for s in cd.expected]
        cd.anchors = [{b: (torch.from_numpy(v), a) for b, (v, a) in s.items()} for s in cd.anchors]
        sets = [cd.check_set(si) for si in range(2)]
        for inputs, expected in sets:
            for b, out in expected.items():
                if group.buffers[b].role == "out":
                    name = f"{cd.name}/{group.buffers[b].name.split('.', 1)[1]}"
                    found += [f"{name}: {p}" for p in _output_properties(out, inputs, task)]
        full = [{b: sets[si][0].get(b, torch.zeros(1)) for b in cd.buffers} for si in range(2)]
        for label, outs_of in _trivial_outputs(group, cd, sets).items():
            if "affine" in label or "copying" in label:
                continue  # C outputs beside inputs of the same size are common (saxpy's y): judged by redraws
            if all(R.check_outputs(group, cd, si, {**full[si], **outs_of(si)})[0] for si in range(2)):
                lazy.setdefault(f"{label} passes the check", []).append(cd.name)
    found += [f"every check configuration: {label}" for label, names in lazy.items() if len(names) == len(group.configs)]
    return sorted(set(found))
