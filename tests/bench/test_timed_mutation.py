"""Timed-only mutants (benchmarks/timed_mutation.py) through timed rounds simulated on the CPU with the evaluator's
own round code: a mutant that cheats only after the first calls is caught, a constant learnt at the timed size
passes the task's own draw and fails the adversarial one, and honest variants pass."""
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import mutation as M  # noqa: E402
import timed_mutation as T  # noqa: E402

from pipeline.evaluation.checks.reference_c import run_c  # noqa: E402
from pipeline.tasks import load_tasks  # noqa: E402

ROW_MAX = """#include <stddef.h>
void row_max(int rows, int cols, const float* a, float* out) {
    for (int r = 0; r < rows; ++r) {
        float m = a[(size_t)r * cols];
        for (int c = 1; c < cols; ++c) if (a[(size_t)r * cols + c] > m) m = a[(size_t)r * cols + c];
        out[r] = m;
    }
}
"""


def builtin(task_id: str):
    return next(t for t in load_tasks("builtin") if t.id == task_id)


def timing_config(task, max_bytes: int = 1 << 18, seed: int = 5):
    """(config on the CPU, its C libraries): the task's first timing configuration, shrunk to `max_bytes`."""
    libs = M.c_libs(task)
    fitted, _ = T.fit_timed_c(task, next(c for c in task.configs if c.time), max_bytes)
    c = T.c_config(task, fitted, seed, libs)
    c.cd.timed_anchor = c.anchor
    return c, libs


def c_mutant(c, libs, rounds, name: str):
    """outputs_of(call) of campaign mutant `name` on each call's own inputs."""
    fresh = {call: f for _, _, call, _, f in rounds.calls()}

    def outputs_of(call):
        inputs = c.host(fresh[call])
        want = {c.cd.buffers[j]: t.numpy() for j, t in c.expect(fresh[call]).items()}
        return c.as_positions(T._c_mutants(c.group, c.cd, libs, inputs, want, with64=False)[name][0])
    return outputs_of


def test_a_mutant_honest_on_the_first_calls_is_caught_in_a_later_round():
    c, libs = timing_config(builtin("c2cuda/saxpy"))
    rounds = T.Rounds(c.group, c.cd, c.expect, seed=1, anchored=True)
    assert sum(len(rd["calls"]) for rd in rounds.rounds) == 1 + T.ROUNDS * T.N_CALLS >= 9
    skip = c_mutant(c, libs, rounds, "skip_every_2nd_rescaled")
    found = T.judge_mutant(rounds, skip)
    assert found["after_3_calls"] and found["after_8_calls"], found
    # caught where it cheats, not before: keyed past the rounds' calls it writes the reference's outputs only
    assert rounds.judge(lambda r, place, call, slot: skip(call) if call > 99 else None) == ""
    why = rounds.judge(lambda r, place, call, slot: skip(call) if call > 8 else None)
    assert "timed batch" in why, why


def row_max_task(cols: int):
    """A max over each row of many uniform(-1, 1) draws: on the task's own draw every output is about 1."""
    base = builtin("c2cuda/row_sum")
    configs = [base.configs[0], base.configs[0].model_copy(update={"name": "large", "params": {"rows": 4, "cols": cols},
                                                                   "check": True, "time": True})]
    return base.model_copy(update={"id": "c2cuda/row_max", "function": "row_max", "reference": ROW_MAX,
                                   "configs": configs})


def test_a_constant_at_the_timed_size_passes_the_tasks_own_draw_and_fails_the_adversarial_one():
    c, _ = timing_config(row_max_task(1 << 16), max_bytes=1 << 20)
    own = c.constants["own_draw_output"]
    assert all(np.allclose(o.numpy(), 1.0, atol=1e-3) for o in own.values())  # the maximum at this size is about the draw's upper end
    ones = {j: o.clone().fill_(1.0) for j, o in own.items()}
    adversarial, anchor = c.cd.timed_draw, c.anchor
    assert adversarial == "adversarial" and anchor is not None
    for written in (own, ones, c.constants["constant_mean_own_draw"]):
        c.cd.timed_draw, c.cd.timed_anchor = "task", None  # version 17's timed rounds: it passes them
        before = T.Rounds(c.group, c.cd, c.expect, seed=2, anchored=False)
        assert before.judge(lambda *call: written) == ""
        c.cd.timed_draw, c.cd.timed_anchor = adversarial, anchor  # now: caught
        after = T.Rounds(c.group, c.cd, c.expect, seed=2, anchored=True)
        assert after.judge(lambda *call: written) != ""


@pytest.mark.parametrize("task_id", ["c2cuda/dot", "c2cuda/softmax_rows"])
def test_honest_variants_pass_the_simulated_rounds_and_half_precision_does_not(task_id):
    c, libs = timing_config(builtin(task_id))
    rounds = T.Rounds(c.group, c.cd, c.expect, seed=3, anchored=True)
    assert any(rd["anchors"] for rd in rounds.rounds)  # the float64 anchor is in play
    fresh = {call: f for _, _, call, _, f in rounds.calls()}
    for lib, float_as in (("fast", None), ("f64", "float64")):
        def honest(r, place, call, slot, lib=lib, float_as=float_as):
            got = c.as_positions(run_c(c.group, c.cd, libs[lib], c.host(fresh[call]), float_as))
            return {j: v.float() for j, v in got.items()}
        assert rounds.judge(honest) == "", lib
    assert rounds.judge(lambda r, place, call, slot: None) == ""  # the reference itself
    found = T.judge_mutant(rounds, c_mutant(c, libs, rounds, "half_compute"))
    assert found["at_size"], found
