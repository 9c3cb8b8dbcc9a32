"""Where a group's buffers lie: the slots of timing configurations and their places in the device arenas.

In: a `GroupData` whose configurations list their buffers (group_data.py), the bytes a configuration's slots
may take and how many a batch wants.
Out: the group changed in place: each timing configuration's `slots` (and, for c2cuda, the baseline's own
`baseline_slots` and the float64 baseline's `anchor_slot` with its call under group_data.ANCHOR_CALLS), new
`Buffer`s appended for them; `arena_layout` sets every buffer's arena and offset and returns the arenas' sizes.
Nothing is allocated here.
"""
from __future__ import annotations

from pipeline.evaluation.checks.group_data import ANCHOR_CALLS, Buffer, ConfigData, GroupData


def add_timing_slots(group: GroupData, memory_bytes: int, max_slots: int) -> None:
    """Give every timing configuration up to `max_slots` sets of its buffers (slot 0 is the checked set).
    Each timed call of a batch gets a slot of its own, so the trusted side can check every one of them.
    A slot costs about twice its bytes (the slot and the trusted copy of its inputs and expected outputs),
    so `memory_bytes` bounds the slots of one configuration; there is always at least one. c2cuda
    baselines run in a child of their own: they get slots of their own (slot 1.. of the baseline's
    list), never mapped into a candidate's process, so no candidate can read the expected outputs."""
    for cd in group.configs:
        if not cd.time or cd.slots:
            continue
        own = group.task.kind == "c2cuda"
        set_bytes = sum(group.buffers[b].nbytes for b in cd.buffers) * (2 if own else 1)
        n = max(1, min(max_slots, memory_bytes // max(2 * set_bytes, 1)))
        cd.slots = [list(cd.buffers)] + [_new_slot(group, cd, f"#{k}", False) for k in range(1, n)]
        if own:
            cd.baseline_slots = [_new_slot(group, cd, f"#b{k}", True) for k in range(n)]


def add_anchor_slot(group: GroupData) -> None:
    """c2cuda: give every timing configuration a set of buffers of its own for the naive baseline built in float64
    (fidelity.C_FLOAT64_PRELUDE): float32 buffers become float64 ones, never mapped into a candidate's process, and
    the call passes float scalars as double. One call on it, on a timed call's inputs cast to float64, gives that
    call's float64 anchor (the evaluator's `timed_anchor`)."""
    for cd in group.configs:
        if not cd.time or cd.anchor_slot:
            continue
        for b in cd.buffers:
            src = group.buffers[b]
            dtype = "float64" if src.dtype == "float32" else src.dtype
            group.buffers.append(Buffer(f"{src.name}#f64", dtype, src.shape, src.role, baseline_only=True))
            cd.anchor_slot.append(len(group.buffers) - 1)
        mapping = dict(zip(cd.buffers, cd.anchor_slot))
        cd.calls[ANCHOR_CALLS] = {"args": [["ptr", mapping[a[1]]] if a[0] == "ptr" else
                                           ["scalar", "double" if a[1] == "float" else a[1], a[2]]
                                           for a in cd.calls["c2cuda"]["args"]]}


def _new_slot(group: GroupData, cd: ConfigData, tag: str, baseline_only: bool) -> list[int]:
    slot = []
    for b in cd.buffers:
        src = group.buffers[b]
        group.buffers.append(Buffer(f"{src.name}{tag}", src.dtype, src.shape, src.role, baseline_only))
        slot.append(len(group.buffers) - 1)
    return slot


ARENA_ALIGN = 512  # bytes: every buffer starts at a multiple (vector loads of any width stay aligned)


def arena_layout(group: GroupData) -> list[int]:
    """Place every buffer in one of two device allocations and return their sizes: arena 0, which the
    candidate's process maps, and arena 1, the c2cuda baseline's own slots, which it never maps.
    Parameters come first and keep their place for the group's life; the buffers of each configuration
    (its slots included) start at the same offset after them, because configurations are worked through
    one at a time (stage, call, check; then the next), so a group needs the device memory of its
    largest configuration, not of all of them."""
    owner = {}
    for ci, cd in enumerate(group.configs):
        for b in list(cd.buffers) + [b for s in cd.slots + cd.baseline_slots + [cd.anchor_slot] for b in s]:
            owner.setdefault(b, ci)

    def aligned(n: int) -> int:
        return -(-n // ARENA_ALIGN) * ARENA_ALIGN
    persistent = {b for cd in group.configs for b in cd.buffers if group.buffers[b].role == "param"}
    sizes = [0, 0]
    for b in sorted(persistent):  # the persistent region: parameters of the checked set of each configuration
        buf = group.buffers[b]
        buf.arena, buf.offset = 0, sizes[0]
        sizes[0] += aligned(buf.nbytes)
    start, ends = list(sizes), list(sizes)
    for ci in range(len(group.configs)):
        at = list(start)
        for b, buf in enumerate(group.buffers):
            if b in persistent or owner.get(b, 0) != ci:
                continue
            buf.arena = 1 if buf.baseline_only else 0
            buf.offset = at[buf.arena]
            at[buf.arena] += aligned(buf.nbytes)
        ends = [max(e, a) for e, a in zip(ends, at)]
    return ends
