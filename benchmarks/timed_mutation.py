"""Timed-only mutants: each operator of the mutation campaign applied only on timed calls, judged through timed
rounds simulated on the CPU with the evaluator's own round code.

A timing configuration (its sizes shrunk until its data fit the CPU's budget) is played as `timed_rounds._rounds`
plays it: a warm-up round of one call, then `ROUNDS` rounds of `N_CALLS` calls, each round's slots and its decoy
placed by `timed_rounds.round_slots`, every slot's inputs drawn by `ConfigData.timed_inputs`, the expected outputs
the float32 reference's on the same inputs (c2cuda: the C reference, standing in for the naive CUDA baseline), one
secret call per round held to the float64 anchor (`timed_rounds.round_anchors`; c2cuda: the C reference run in
float64, the same computation as the naive baseline built in float64), and the verdict `timed_rounds.check_round`'s
Stop. The candidate is played by writing each called slot's outputs: the reference's, or a mutant's where the
mutant's key says the call is one it cheats on:

    at_size        every call at the timing configuration's size
    after_3_calls  honest on the first 3 calls at this configuration (the warm-up's included), mutated after
    after_8_calls  honest on the first 8, mutated after
    off_slot_0     honest on slot 0 (the checked set's buffers), mutated on the other slots
    in_batch       mutated on every call of a batch after its first (calls that follow another within a short gap)

plus two constants written on every timed call (class `timed_constant`): the mean of the reference's output on the
task's own draw at the timed size, and that output itself (what a kernel that returns a value learnt at this size
writes: a max of many uniform draws is about the draw's upper end).

Each configuration is judged twice: "before" (version 17's timed rounds: the task's own draw, the tolerance alone,
no anchor) and "after" (this version's: `timed_draw`, the anchor). A check configuration never sees a timed-only
mutant (it differs only on timed calls), so only the rounds can catch it.
"""
from __future__ import annotations

import random
from collections import defaultdict

ROUNDS = 3  # timed rounds after the warm-up (the evaluator's timing_rounds default)
N_CALLS = 3  # calls per timed round (the evaluator sizes batches by time; 3 make every key below bite)
KEYS = ("at_size", "after_3_calls", "after_8_calls", "off_slot_0", "in_batch")
CONSTANTS = ("constant_mean_own_draw", "own_draw_output")


def cheats(key: str, call: int, slot: int, place: int) -> bool:
    """Whether a mutant keyed `key` cheats on a call: `call` counts the configuration's calls from 1 (the warm-up's
    is 1), `slot` is the slot's address (0: the checked set's buffers), `place` its place in its batch."""
    if key == "at_size":
        return True
    if key == "after_3_calls":
        return call > 3
    if key == "after_8_calls":
        return call > 8
    if key == "off_slot_0":
        return slot != 0
    if key == "in_batch":
        return place > 0
    raise ValueError(f"unknown key {key!r}")


class _Driver:
    """`timed_rounds.stage`'s driver on CPU tensors: a memset by pointer."""

    def __init__(self, group):
        self.views = {b.ptr: b.view for b in group.buffers if b.view is not None}

    def memset_async(self, ptr, byte, nbytes, stream=0):
        import torch
        self.views[ptr].reshape(-1).view(torch.uint8).fill_(byte)


def give_views(group, cd) -> None:
    """CPU tensors for the buffers of the configuration's slots (the device buffers of the evaluator)."""
    import torch

    from pipeline.evaluation.checks.group_data import torch_dtype
    for k, slot in enumerate(cd.slots):
        for b in slot:
            buf = group.buffers[b]
            buf.view = torch.empty(buf.shape, dtype=torch_dtype(buf.dtype))
            buf.ptr = b + 1


def secret_anchors(cd, fresh: list[dict], expected: list[dict]) -> dict:
    """The round's anchored calls and their float64 anchors, as `_rounds` picks them (`eval.timing_anchored_calls`
    of the default config, in secret)."""
    from pipeline.core.config import EvalSection
    from pipeline.evaluation.timing import timed_rounds as TR
    return TR.round_anchors(cd, fresh, expected, TR.anchored_calls(len(fresh), EvalSection().timing_anchored_calls))


class Rounds:
    """One configuration's simulated rounds: the slots and decoys of each (secret, `round_slots`), every call's
    inputs (`timed_inputs`), expected outputs (`expect(fresh set) -> {position: tensor}`) and, per round, the
    anchor of its secret call (`round_anchors`). Mutants are judged on the same rounds, so they differ only in
    what they write."""

    def __init__(self, group, cd, expect, seed: int, anchored: bool):
        from pipeline.evaluation.timing.timed_rounds import DECOY_SLOTS, round_slots
        self.group, self.cd = group, cd
        rng = random.Random(seed)
        decoys = DECOY_SLOTS if len(cd.slots) > DECOY_SLOTS else 0
        self.rounds, call = [], 0
        for r in range(1 + ROUNDS):
            n = 1 if r == 0 else min(N_CALLS, len(cd.slots) - decoys)
            slots, decoy = round_slots(n, decoys)
            s = rng.getrandbits(31)
            fresh = [cd.timed_inputs(s * 64 + k) for k in slots]
            decoy_sets = [cd.timed_inputs(s * 64 + k) for k in decoy]
            expected = [expect(f) for f in fresh]
            anchors = secret_anchors(cd, fresh, expected) if anchored else {}
            calls = list(range(call + 1, call + 1 + n))
            call += n
            self.rounds.append(dict(slots=slots, decoy=decoy, fresh=fresh, decoy_sets=decoy_sets,
                                    expected=expected, anchors=anchors, calls=calls))
        self.driver = _Driver(group)

    def calls(self):
        """(round index, place in the batch, call number, slot, fresh set) of every call."""
        for r, rd in enumerate(self.rounds):
            for place, (call, slot, fresh) in enumerate(zip(rd["calls"], rd["slots"], rd["fresh"])):
                yield r, place, call, slot, fresh

    def judge(self, written) -> str:
        """'' when every round passes, else the first Stop's reason. `written(round, place, call, slot)` gives a
        call's outputs ({position: tensor}) or None for the reference's (an honest call)."""
        from pipeline.evaluation.child.outcome import Stop
        from pipeline.evaluation.timing.timed_rounds import check_round, stage
        group, cd = self.group, self.cd
        for r, rd in enumerate(self.rounds):
            stage(self.driver, group, [cd.slots[k] for k in rd["slots"] + rd["decoy"]], rd["fresh"] + rd["decoy_sets"])
            for place, (call, slot, want) in enumerate(zip(rd["calls"], rd["slots"], rd["expected"])):
                outs = written(r, place, call, slot) or want
                for j, o in outs.items():
                    view = group.buffers[cd.slots[slot][j]].view
                    if o is None or o.numel() != view.numel():
                        return f"call {call}: an output of another size"
                    view.copy_(o.reshape(view.shape).to(view.dtype))
            try:
                check_round(group, cd, rd["slots"], rd["fresh"], rd["expected"], rd["decoy"], rd["decoy_sets"],
                            "timed batch" if r else "warm-up batch", None, rd["anchors"])
            except Stop as e:
                return e.reason if hasattr(e, "reason") else str(e)
        return ""


def judge_mutant(rounds: Rounds, outputs_of) -> dict:
    """{key: detected} of one mutant over the rounds. `outputs_of(call) -> {position: tensor}` is the mutant's
    output on a call's inputs (made on first use). A round's verdict is per call, so a mutant no round catches
    where it cheats on every call (at_size) escapes under every key: the others are judged only when it does not."""
    cache = {}

    def written_by(key):
        def written(r, place, call, slot):
            if not cheats(key, call, slot, place):
                return None
            if call not in cache:
                cache[call] = outputs_of(call)
            return cache[call]
        return written
    out = {"at_size": bool(rounds.judge(written_by("at_size")))}
    for key in KEYS[1:]:
        out[key] = out["at_size"] and bool(rounds.judge(written_by(key)))
    return out


def record(rows: dict, name: str, phase: str, changing: bool, detected: dict, keys=KEYS) -> None:
    """Rows `timed:<operator>@<key>`: result-changing (after), detected before, detected after. `changing` is
    judged on the first call's inputs; a mutant a round caught changed the result on some call, and counts too."""
    for key in keys:
        row = rows[f"timed:{name}@{key}"]
        row["applies"] = True
        if phase == "after" and (changing or detected["at_size"]):
            row["changing"] = True
        row[phase] = row[phase] or detected[key]


def new_rows() -> dict:
    return defaultdict(lambda: {"changing": False, "before": False, "after": False, "applies": False})


# --- sizes on the CPU ---------------------------------------------------------------------------------------------
def fit_timed_torch(task, cfg, max_bytes: int):
    """(the task with only timing configuration `cfg`, its sizes halved as the check configurations' are
    (mutation.fit_on_cpu: batch first) until its data fit `max_bytes`; the sizes changed), or (None, ...)."""
    from pipeline.evaluation.checks.degeneracy import fit_sizes
    from pipeline.evaluation.checks.footprint import config_bytes

    def fits(t) -> bool:
        return all(s.inputs + s.outputs <= max_bytes and s.params <= max(8 * max_bytes, 600 << 20)
                   for s in config_bytes(t))
    return fit_sizes(task.model_copy(update={"configs": [cfg]}), fits)


def c_bytes(task, params: dict) -> int:
    import numpy as np

    from pipeline.tasks import arg_dtype, eval_expr, is_pointer
    return sum(int(eval_expr(a.size, params)) * np.dtype(arg_dtype(a)).itemsize for a in task.args if is_pointer(a))


def fit_timed_c(task, cfg, max_bytes: int):
    """(the task with only timing configuration `cfg`, its largest size halved at a time, never below its smallest
    value at a check configuration, until its buffers fit `max_bytes`; the sizes changed), or (None, ...)."""
    params, changed = dict(cfg.params), {}
    floors = {k: min([c.params[k] for c in task.configs if not c.time and type(c.params.get(k)) is int] or [1])
              for k in params}
    while c_bytes(task, params) > max_bytes:
        usable = [k for k, v in params.items() if type(v) is int and v // 2 >= max(1, floors[k])]
        if not usable:
            return None, changed
        k = max(usable, key=params.get)
        params[k] //= 2
        changed[k] = params[k]
    return task.model_copy(update={"configs": [cfg.model_copy(update={"params": params})]}), changed


# --- torch2cuda ---------------------------------------------------------------------------------------------------
def _flat(mutants: dict) -> dict:
    """{operator or operator#variant: (float32 outputs, float64 outputs)} from mutation.torch_mutants' dict."""
    out = {}
    for name, value in mutants.items():
        if value is None:
            continue
        variants = value if isinstance(value, list) else [value]
        for k, v in enumerate(variants):
            out[name if len(variants) == 1 else f"{name}#{k}"] = v
    return out


def timed_torch(task, seed: int, max_bytes: int) -> dict:
    """Every timing configuration of a torch2cuda task through the simulated rounds, before and after."""
    import torch

    import mutation as M
    from pipeline.evaluation.checks import reference_torch
    from pipeline.evaluation.checks.buffer_layout import add_timing_slots
    reference_torch.DEVICE = "cpu"
    rows, honest, scaled, notes = new_rows(), defaultdict(lambda: True), {}, []
    for cfg in [c for c in task.configs if c.time]:
        fitted, changed = fit_timed_torch(task, cfg, max_bytes)
        if fitted is None:
            notes.append(f"{cfg.name}: too large for the CPU even with sizes halved ({changed})")
            continue
        scaled[cfg.name] = changed
        group = reference_torch.build_torch2cuda(fitted, seed, init_seed=seed + 1, fidelity=True)
        cd = group.configs[0]
        add_timing_slots(group, 1 << 40, N_CALLS + 1)
        give_views(group, cd)
        outs = [j for j, b in enumerate(cd.buffers) if group.buffers[b].role == "out"]

        def expect(fresh):
            return {j: o.detach().clone().contiguous() for j, o in zip(outs, cd.run_reference(cd.reference_copy(fresh)))}
        own = expect(cd.fresh(seed ^ 0xC0457))  # the output on the task's own draw, at the timed size
        constants = {"constant_mean_own_draw": {j: torch.full_like(o, float(o.double().mean())) if o.is_floating_point()
                                                else o for j, o in own.items()},
                     "own_draw_output": own}
        anchor, adversarial = cd.timed_anchor, cd.timed_draw
        models: dict = {}  # the mutated modules, made once per configuration
        for phase in ("before", "after"):
            cd.timed_draw = "task" if phase == "before" else adversarial
            cd.timed_anchor = anchor if phase == "after" else None
            rounds = Rounds(group, cd, expect, seed + (phase == "after"), anchored=phase == "after")
            fresh_of = {call: fresh for _, _, call, _, fresh in rounds.calls()}
            per_call: dict = {}

            def mutants_at(call: int) -> dict:
                if call not in per_call:
                    args = M._args_of(cd, cd.reference_copy(fresh_of[call]))
                    per_call[call] = _flat(M.torch_mutants(cd, args, with64=False, models=models)[0])
                return per_call[call]
            # result-changing: the float64 outputs on the first call's inputs, as the check configurations judge it
            args = M._args_of(cd, cd.reference_copy(fresh_of[1]))
            first, ref64 = M.torch_mutants(cd, args, models=models)
            first = _flat(first)
            for name, (o32, o64) in first.items():
                changing = o64 is not None and M._changed(o64, ref64)
                found = judge_mutant(rounds, lambda call, name=name: dict(zip(outs, mutants_at(call)[name][0])))
                record(rows, name, phase, changing, found)
            for name, value in constants.items():
                changing = M._changed([value[j].double() for j in outs], ref64)
                found = judge_mutant(rounds, lambda call, value=value: value)
                record(rows, name, phase, changing, found, keys=("at_size",))
            if phase == "after":
                for name in ("float64_rounded", "one_thread", "reference"):
                    def honest_at(call, name=name):
                        if name == "reference":
                            return None
                        args = M._args_of(cd, cd.reference_copy(fresh_of[call]))
                        got = M.honest_variants(cd, args).get(name)
                        return dict(zip(outs, got)) if got is not None else None
                    _judge_honest(rounds, honest_at, name, cfg.name, honest, notes)
            per_call.clear()
    return _finished(group, rows, honest, scaled, notes)


def _judge_honest(rounds, outputs_of, name: str, config: str, honest: dict, notes: list) -> None:
    """An honest variant (`outputs_of(call) -> {position: tensor}`, None for the reference's own) through the same
    rounds as the mutants: recorded in `honest` (a rejection is kept) and, when rejected, in `notes`."""
    why = rounds.judge(lambda r, place, call, slot: outputs_of(call))
    honest[f"timed:{name}"] = honest[f"timed:{name}"] and not why
    if why:
        notes.append(f"{config}: honest {name} rejected: {why[:200]}")


def _finished(group, rows: dict, honest: dict, scaled: dict, notes: list) -> dict:
    """A task's timed rows, with the group's CPU tensors let go."""
    for b in group.buffers:
        b.view = None
    return {"mutants": {k: dict(v) for k, v in rows.items()}, "honest_passed": dict(honest), "scaled": scaled,
            "notes": notes}


# --- c2cuda -------------------------------------------------------------------------------------------------------
def _c_mutants(group, cd, libs: dict, inputs: dict, expected: dict, with64: bool) -> dict:
    """{operator: ({buffer: float32 output}, {buffer: float64 output} or None)} of every C mutant on one call's
    inputs ({buffer: numpy}), as mutation.campaign_c makes them."""
    import numpy as np

    import mutation as M
    from pipeline.evaluation.checks.reference_c import run_c
    from mutation import half_callable
    out = {}
    floats = [b for b, v in inputs.items() if v.dtype.kind == "f"]
    mut_in = {b: v for b, v in inputs.items() if group.buffers[b].role == "in" and v.dtype.kind == "f"}
    for name, f in M._c_input_mutants().items():
        m = dict(inputs)
        m.update(f(mut_in, floats[0] if floats else None))
        o32 = run_c(group, cd, libs["f32"], m)
        o64 = None
        if with64:
            o64 = o32 if name == "bf16_inputs" else (run_c(group, cd, libs["f64"], m, "float64")
                                                      if libs["f64"] is not None else None)
        out[name] = (o32, o64)
    if libs["f16"] is not None and floats and half_callable(group.task):
        o16 = run_c(group, cd, libs["f16"], inputs, "float16")
        o16 = {b: v.astype(np.float32) if v.dtype == np.float16 else v for b, v in o16.items()}
        out["half_compute"] = (o16, o16)
    src = next(iter(mut_in.values()), None)
    for name, change in (("zeros", np.zeros_like),
                         ("constant_mean", lambda v: np.full_like(v, v.astype(np.float64).mean())),
                         ("shift_output_at_boundary", M._shift_np),
                         ("return_input", lambda v: src[:v.size].astype(v.dtype) if src is not None
                          and src.size == v.size else None)):
        o32 = {b: change(v) for b, v in expected.items()}
        if any(v is None for v in o32.values()):
            continue
        out[name] = (o32, None)  # float64: the same change of the float64 reference (made by the caller)
    return out


def c_config(task, fitted, seed: int, libs: dict):
    """One timing configuration of a c2cuda task (`fitted`: the task with it alone, shrunk) on the CPU: its group
    with CPU buffers for its slots, `host`/`as_positions` (a set by position <-> numpy by buffer), `expect` (the
    C reference in float32 on a call's inputs: the naive baseline's outputs), `anchor` (the C reference in
    float64: the float64 baseline's; None and `why` where there is none) and the constants at the timed size."""
    from types import SimpleNamespace

    import numpy as np
    import torch

    from pipeline.evaluation.checks.buffer_layout import add_timing_slots
    from pipeline.evaluation.checks.comparison import compare
    from pipeline.evaluation.checks.fidelity import anchor_allowance
    from pipeline.evaluation.checks.reference_c import _c2cuda_fresh, build_c2cuda, can_anchor_c, run_c
    group = build_c2cuda(fitted, seed, fidelity=True)
    cd = group.configs[0]
    add_timing_slots(group, 1 << 40, N_CALLS + 1)
    cd.fresh = _c2cuda_fresh(fitted, cd.params, [group.buffers[b] for b in cd.buffers], device="cpu")
    give_views(group, cd)

    def host(fresh):
        return {cd.buffers[j]: t.numpy() for j, t in fresh.items()}

    def as_positions(outs: dict) -> dict:
        return {j: torch.from_numpy(np.ascontiguousarray(outs[b])) for j, b in enumerate(cd.buffers) if b in outs}

    def expect(fresh):  # the naive baseline's outputs: the C reference in float32, the same computation
        return as_positions(run_c(group, cd, libs["f32"], host(fresh)))
    anchor, why = None, "the C reference does not run in float64 (records, float64 data or no float32 output)"
    if can_anchor_c(fitted) and libs["f64"] is not None:  # agreement on the first check set, as the evaluator asks
        r32 = run_c(group, cd, libs["f32"], cd.input_sets[0])
        r64 = run_c(group, cd, libs["f64"], cd.input_sets[0], "float64")
        bad = [compare(torch.from_numpy(r32[b]), torch.from_numpy(r64[b]), task.tolerance)[2]
               for b in r32 if r32[b].dtype == np.float32
               and not compare(torch.from_numpy(r32[b]), torch.from_numpy(r64[b]), task.tolerance)[0]]
        why = f"the C reference in float64 disagrees with itself in float32 ({bad[0]})" if bad else ""
        if not bad:
            def anchor(fresh_set: dict, expected: dict) -> dict:
                got = as_positions(run_c(group, cd, libs["f64"], host(fresh_set), "float64"))
                inputs = list(fresh_set.values())
                return {j: (o64, anchor_allowance(expected[j], o64, inputs)) for j, o64 in got.items()
                        if j in expected and expected[j].dtype == torch.float32}
    own = expect(cd.fresh(seed ^ 0xC0457))
    constants = {"constant_mean_own_draw": {j: torch.full_like(o, float(o.double().mean())) for j, o in own.items()},
                 "own_draw_output": own}
    return SimpleNamespace(group=group, cd=cd, host=host, as_positions=as_positions, expect=expect, anchor=anchor,
                           why=why, constants=constants)


def timed_c(task, seed: int, max_bytes: int) -> dict:
    """Every timing configuration of a c2cuda task through the simulated rounds, before and after."""
    import numpy as np
    import torch

    import mutation as M
    from pipeline.evaluation.checks.fidelity import anchor_allowance
    from pipeline.evaluation.checks.reference_c import run_c
    libs = M.c_libs(task)
    rows, honest, scaled, notes = new_rows(), defaultdict(lambda: True), {}, []
    for cfg in [c for c in task.configs if c.time]:
        fitted, changed = fit_timed_c(task, cfg, max_bytes)
        if fitted is None:
            notes.append(f"{cfg.name}: too large for the CPU even with sizes halved ({changed})")
            continue
        scaled[cfg.name] = changed
        c = c_config(task, fitted, seed, libs)
        group, cd, host, as_positions, expect, anchor = c.group, c.cd, c.host, c.as_positions, c.expect, c.anchor
        if c.why:
            notes.append(f"{cfg.name}: no float64 anchor of timed calls: {c.why}")
        constants = c.constants
        adversarial = cd.timed_draw
        for phase in ("before", "after"):
            cd.timed_draw = "task" if phase == "before" else adversarial
            cd.timed_anchor = anchor if phase == "after" else None
            rounds = Rounds(group, cd, expect, seed + (phase == "after"), anchored=phase == "after")
            fresh_of = {call: fresh for _, _, call, _, fresh in rounds.calls()}
            want_of = {call: rd["expected"][p] for rd in rounds.rounds for p, call in enumerate(rd["calls"])}
            per_call: dict = {}

            def mutants_at(call: int) -> dict:
                if call not in per_call:
                    want = {cd.buffers[j]: t.numpy() for j, t in want_of[call].items()}
                    per_call[call] = _c_mutants(group, cd, libs, host(fresh_of[call]), want, with64=False)
                return per_call[call]
            inputs1 = host(fresh_of[1])
            ref64 = run_c(group, cd, libs["f64"], inputs1, "float64") if libs["f64"] is not None else None
            want1 = {cd.buffers[j]: t.numpy() for j, t in want_of[1].items()}

            def changed(m64: dict | None) -> bool:
                return ref64 is not None and m64 is not None and M._changed(
                    [torch.from_numpy(np.asarray(m64[b], dtype=np.float64)) for b in want1],
                    [torch.from_numpy(ref64[b].astype(np.float64)) for b in want1])
            for name, (o32, o64) in _c_mutants(group, cd, libs, inputs1, want1, with64=True).items():
                if o64 is None and ref64 is not None and name in ("zeros", "constant_mean", "shift_output_at_boundary",
                                                                  "return_input"):
                    change = {"zeros": np.zeros_like, "shift_output_at_boundary": M._shift_np,
                              "constant_mean": lambda v: np.full_like(v, v.astype(np.float64).mean()),
                              "return_input": None}[name]
                    o64 = {b: change(ref64[b]) for b in want1} if change is not None else \
                        {b: o32[b].astype(np.float64) for b in want1}
                found = judge_mutant(rounds, lambda call, name=name: as_positions(mutants_at(call)[name][0]))
                record(rows, name, phase, changed(o64), found)
            for name, value in constants.items():
                found = judge_mutant(rounds, lambda call, value=value: value)
                record(rows, name, phase, changed({cd.buffers[j]: v.numpy() for j, v in value.items()}), found,
                       keys=("at_size",))
            if phase == "after":
                variants = {"reference": lambda call: None}
                if libs["fast"] is not None:
                    variants["fast_math_O3"] = lambda call: as_positions(
                        run_c(group, cd, libs["fast"], host(fresh_of[call])))
                if libs["f64"] is not None and all(t.dtype == torch.float32 for t in want_of[1].values()):
                    variants["float64_rounded"] = lambda call: {j: v.float() for j, v in as_positions(
                        run_c(group, cd, libs["f64"], host(fresh_of[call]), "float64")).items()}
                for name, f in variants.items():
                    _judge_honest(rounds, f, name, cfg.name, honest, notes)
            per_call.clear()
    return _finished(group, rows, honest, scaled, notes)
