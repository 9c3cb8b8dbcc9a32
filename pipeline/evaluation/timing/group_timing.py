"""What the candidates of one group share in their timing, on one evaluator (timed_rounds.py uses it).

eval.group_rounds: the inputs and expected outputs of a round whose baseline is not timed, made for the group's
first candidate and given to the next in their own secret order (`shared_round`, `keep_round`; kept in
`ConfigData.round_sets`). eval.timing_baseline "chained": the end bracket of the last candidate, the next one's
start (`ChainedBaseline`, in `ConfigData.chained_baseline`).
"""
from __future__ import annotations

from pipeline.evaluation.checks.group_data import ConfigData
from pipeline.evaluation.harness import EvaluatorParts


def shared_round(ev: EvaluatorParts, cd: ConfigData, round_index: int, n_calls: int, n_decoys: int):
    """(fresh sets, decoy sets, expected outputs) of round `round_index` as an earlier candidate of the group was
    given them (eval.group_rounds), or None. They go to this candidate's own slots in its own secret order
    (`round_slots`), so only the inputs repeat across the group's candidates, each in a process of its own;
    within one candidate every round still has inputs of its own."""
    if not ev.cfg.group_rounds:
        return None
    return cd.round_sets.get((round_index, n_calls, n_decoys))


def keep_round(ev: EvaluatorParts, cd: ConfigData, round_index: int, fresh_sets: list[dict], decoy_sets: list[dict],
               expected: list[dict]) -> None:
    """Keep a round's sets for the group's next candidates (eval.group_rounds), within eval.timing_memory_bytes per
    configuration: past it, the rounds beyond draw afresh for every candidate."""
    if not ev.cfg.group_rounds or (round_index, len(fresh_sets), len(decoy_sets)) in cd.round_sets:
        return
    nbytes = sum(t.numel() * t.element_size() for sets in (fresh_sets, decoy_sets, expected) for one in sets
                 for t in one.values() if hasattr(t, "numel"))
    if cd.round_sets_bytes + nbytes > ev.cfg.timing_memory_bytes:
        return
    cd.round_sets[(round_index, len(fresh_sets), len(decoy_sets))] = (fresh_sets, decoy_sets, expected)
    cd.round_sets_bytes += nbytes


class ChainedBaseline:
    """eval.timing_baseline "chained": the baseline's end bracket of a configuration's last timed candidate on this
    evaluator, the next one's start bracket: per-call ms, the batch's calls (the next batch is as long), and the
    torch.compile'd reference's per-call ms timed beside it (None where it has none). Kept only where that
    candidate's drift check passed and the GPU was idle before and after its end was timed; the next candidate's
    own end checks the drift from it again."""

    def __init__(self, ms: float, n_calls: int, compiled_ms: float | None):
        self.ms, self.n_calls, self.compiled_ms = ms, n_calls, compiled_ms
