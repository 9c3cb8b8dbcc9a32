"""The timed rounds without a GPU: CPU tensors stand in for device buffers, a fake driver for CUDA and
scripted children for the candidate, so every rule of timed_rounds.py is exercised on CPU: each timed
call is checked on fresh inputs, the trusted clock is the only clock, the fixed cost is subtracted."""
import math
import time

import numpy as np
import pytest
import torch

from pipeline.core.config import EvalSection
from pipeline.evaluation.child.outcome import Stop
from pipeline.evaluation.checks.buffer_layout import add_timing_slots
from pipeline.evaluation.checks.group_data import Buffer, ConfigData, GroupData
from pipeline.evaluation.timing.timed_rounds import TIMING_PARTS, time_config
from pipeline.evaluation.timing.statistics import TrustedClock
from pipeline.tasks import load_tasks

N = 1000


class VirtualTime:
    """A clock that moves only when something sleeps: the scripted children's and the fake driver's sleeps are the
    "kernels", so every time these tests compare is exact whatever else the host is doing. Stands in for the
    `time` module of the timing code and of this file."""

    def __init__(self):
        self.now, self.tick = 1000.0, 0.0  # tick: seconds each reading adds (for tests that count every part)

    def perf_counter(self):
        self.now += self.tick
        return self.now

    monotonic = perf_counter

    def sleep(self, seconds):
        self.now += max(float(seconds), 0.0)

    def __getattr__(self, name):  # time.time() and the rest: the real module
        return getattr(time, name)


@pytest.fixture(autouse=True)
def virtual_time(monkeypatch):
    import sys
    from pipeline.evaluation.timing import checksums, statistics, timed_rounds
    clock = VirtualTime()
    for module in (timed_rounds, statistics, checksums, sys.modules[__name__]):
        monkeypatch.setattr(module, "time", clock)
    return clock


class FakeDriver:
    """Memsets and syncs on CPU tensors registered by pointer; `busy_s` makes the probe slow."""

    def __init__(self):
        self.views, self.busy_s = {}, 0.0

    def alloc(self, nbytes):
        return 0

    def memset_async(self, ptr, byte, nbytes, stream=0):
        if ptr in self.views:
            self.views[ptr].view(-1).view(torch.uint8).fill_(byte)

    def synchronize(self):
        if self.busy_s:
            time.sleep(self.busy_s)


class ScriptedChild:
    """Plays a candidate (or the trusted baseline): `compute(call_index, x, y_in) -> y` or None to skip."""

    def __init__(self, group, cd, compute, sleep_per_call_s=0.0, baseline=False, claim_factor=1.0):
        self.group, self.cd, self.compute, self.calls = group, cd, compute, 0
        self.sleep, self.claim_factor = sleep_per_call_s, claim_factor
        self.slots = cd.slots[:1] + cd.baseline_slots if baseline else cd.slots

    def freeze(self):
        self.frozen = True

    def thaw(self):
        self.frozen = False

    def kill(self):
        self.killed = True

    def request(self, msg, timeout_s):
        assert not getattr(self, "frozen", False), "a request to a frozen child would hang"
        t0 = time.perf_counter()
        self._run(msg)
        return {"ok": True, "flags": [], "events_ms": 1e3 * (time.perf_counter() - t0) * self.claim_factor}

    def _run(self, msg):
        for k in msg["slots"]:
            self.calls += 1
            x, y = (self.group.buffers[b].view for b in self.slots[k])
            out = self.compute(self.calls, x, y.clone())
            if out is not None:
                y.copy_(out)
            time.sleep(self.sleep)


def saxpy(x, y):
    return 1.5 * x + y


def make(candidate, sleep=0.0, eval_updates=None, busy_s=0.0, claim_factor=1.0, baseline=None, fresh=None,
         tolerance=None):
    task = next(t for t in load_tasks("builtin") if t.id == "c2cuda/saxpy")
    if tolerance is not None:
        task = task.model_copy(update={"tolerance": tolerance})
    bufs = [Buffer("large.x", "float32", (N,), "in"), Buffer("large.y", "float32", (N,), "inout")]
    cd = ConfigData("large", False, True, {}, [0, 1], [])
    group = GroupData(task, bufs, [cd])
    add_timing_slots(group, memory_bytes=8 * 2 * 2 * (2 * 4 * N), max_slots=8)  # 8 + 8 slots of 2 float buffers
    driver = FakeDriver()
    for i, b in enumerate(group.buffers):
        b.ptr = 1000 + i
        b.view = torch.zeros(b.shape, dtype=torch.float32)
        driver.views[b.ptr] = b.view

    def saxpy_inputs(seed):
        g = torch.Generator().manual_seed(seed)
        return {0: torch.rand(N, generator=g) * 2 - 1, 1: torch.rand(N, generator=g)}
    cd.fresh = fresh or saxpy_inputs
    baseline = baseline or (lambda n, x, y: saxpy(x, y))
    group.baseline_child = ScriptedChild(group, cd, baseline, sleep, baseline=True)
    cfg = EvalSection(**{"result_cache_dir": "", "timing_rounds": 3, "timing_trials": 12, "timing_batch_s": 0.05,
                         "busy_probe_limit_s": 0.05, "timing_ci": 0.0, "timing_baseline": "every_round",
                         **(eval_updates or {})})

    class Ev:
        pass
    ev = Ev()
    ev.cfg, ev.driver = cfg, driver
    ev.clock = TrustedClock(driver)
    null = ScriptedChild(group, cd, lambda n, x, y: None)
    null.request = lambda msg, timeout_s: (time.sleep(0.0005), {"ok": True, "events_ms": 0.0})[1]
    ev.null_child = lambda fmt: null
    driver.busy_s = busy_s
    child = ScriptedChild(group, cd, candidate, sleep, claim_factor=claim_factor)
    return ev, group, cd, child


def test_slots_follow_the_memory_budget():
    _, group, cd, _ = make(lambda n, x, y: saxpy(x, y))
    assert len(cd.slots) == 8 and len(cd.baseline_slots) == 8
    assert len({b for s in cd.slots + cd.baseline_slots for b in s}) == 32
    assert all(group.buffers[s[1]].role == "inout" for s in cd.slots)
    assert not any(group.buffers[b].baseline_only for s in cd.slots for b in s)
    assert all(group.buffers[b].baseline_only for s in cd.baseline_slots for b in s)


def test_honest_candidate_gets_per_call_times_from_the_trusted_clock():
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), sleep=0.002)
    times = time_config(ev, group, 0, cd, child, "c2cuda")
    assert len(times.candidate) >= 3 and times.calls_per_batch == 7  # 50 ms aim / 2 ms per call, 8 slots less a decoy
    assert 0.0015 < np.median(times.candidate) / 1e3 < 0.004  # per call, overhead removed
    assert 0.8 < np.median(times.candidate) / np.median(times.baseline) < 1.25


def test_a_claimed_time_below_what_the_trusted_clock_allows_is_not_believed():
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), sleep=0.002, claim_factor=0.1)
    times = time_config(ev, group, 0, cd, child, "c2cuda")
    assert times.disagreements == len(times.candidate)  # every timed batch claimed too little
    assert 0.8 < np.median(times.candidate) / np.median(times.baseline) < 1.25  # its true time, not 10x


def test_a_claim_of_zero_on_short_batches_is_not_believed():
    # 1 ms per call, 7 calls: a batch far shorter than the 50 ms aim, yet long beside the null child's 0.5 ms
    # round trip, whose sleep may overshoot by a millisecond on a busy host and would otherwise eat the work
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), sleep=0.001, claim_factor=0.0)
    times = time_config(ev, group, 0, cd, child, "c2cuda")
    assert times.calls_per_batch * 1.0 < 1e3 * ev.cfg.timing_batch_s  # the batches are short of the aim
    assert min(times.candidate) > 0.3  # ms per call: about its 1 ms of work, not the 0 it claimed


def test_the_candidate_is_frozen_outside_its_own_batches():
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y))
    seen = []
    real_fresh = cd.fresh
    cd.fresh = lambda seed: (seen.append(child.frozen), real_fresh(seed))[1]
    time_config(ev, group, 0, cd, child, "c2cuda")
    assert seen and all(seen) and not child.frozen  # frozen while inputs are made, thawed at the end


def test_the_rounds_wall_time_is_broken_down_into_its_parts(virtual_time):
    virtual_time.tick = 1e-6  # every part takes some time
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), sleep=0.002)
    t0 = time.perf_counter()
    times = time_config(ev, group, 0, cd, child, "c2cuda")
    wall = time.perf_counter() - t0
    assert set(times.parts_s) == set(TIMING_PARTS)
    assert all(v > 0 for v in times.parts_s.values())
    assert 0.9 * wall < sum(times.parts_s.values()) <= wall  # every part counted once, little left out
    sleeping = len(times.candidate) * times.calls_per_batch * 0.002  # the timed rounds' calls sleep 2 ms each
    assert sleeping < times.parts_s["candidate"] < sleeping + 0.5 * wall


def test_a_settled_ratio_ends_the_rounds_early_only_when_asked():
    from pipeline.evaluation.timing.statistics import ratio_settled
    assert ratio_settled([2.0, 2.02, 1.98], [1.0, 1.0, 1.0], 0.05)  # +-1 %: settled at 5 %
    assert not ratio_settled([2.0, 2.02, 1.98], [1.0, 1.0, 1.0], 0.01)  # t(2) = 4.3 widens three rounds
    assert not ratio_settled([2.0, 3.0, 1.5], [1.0, 1.0, 1.0], 0.05)
    assert ratio_settled([2.0, 4.0], [1.0, 2.0], 0.001)  # a clock change hits both sides of a round alike
    assert not ratio_settled([2.0], [1.0], 0.5)  # one round tells nothing
    many = {"timing_trials": 160, "timing_budget_s": 30.0, "timing_ci": 0.0}
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), sleep=0.002)
    ev.cfg = ev.cfg.model_copy(update=many)
    full = time_config(ev, group, 0, cd, child, "c2cuda")
    # 160 calls in batches of the size the warm-up set (7 on an idle host; fewer where a loaded host's
    # 2 ms sleeps last longer)
    assert len(full.candidate) == math.ceil(160 / full.calls_per_batch) and full.stop == "trials"
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), sleep=0.002)
    ev.cfg = ev.cfg.model_copy(update={**many, "timing_ci": 0.5})
    early = time_config(ev, group, 0, cd, child, "c2cuda")
    assert 3 <= len(early.candidate) < math.ceil(160 / early.calls_per_batch)  # timing_rounds at least, then
    # once the ratio settled (3 on an idle host; a loaded one can need a round more, its sleeps being the "kernels")
    assert 0.8 < np.median(early.candidate) / np.median(early.baseline) < 1.25 and early.stop == "settled"
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), sleep=0.002)  # long calls: the budget ends the rounds
    ev.cfg = ev.cfg.model_copy(update={**many, "timing_budget_s": 0.0})
    short = time_config(ev, group, 0, cd, child, "c2cuda")
    assert len(short.candidate) == 3 and short.stop == "budget"  # timing_rounds, the interval not reached: said so


def test_the_adaptive_stop_judges_the_times_the_result_reports():
    """The adaptive stop's interval is of the times the result will report: the candidate's own per-call events
    where they are believed (steady here, while the host's wake-ups make every window's length jitter, in the
    calibration's as in the candidate's), so it stops at timing_rounds; a candidate whose claims are not believed
    is judged by the jittery trusted clock and keeps timing."""
    import random
    rng = random.Random(7)

    def jittery(child):
        request = child.request

        def run(msg, timeout_s):
            reply = request(msg, timeout_s)
            time.sleep(rng.uniform(0.0, 0.002))  # the host's wake-up after "done": in the window, not in the events
            return reply
        child.request = run
        return child
    many = {"timing_trials": 400, "timing_budget_s": 30.0, "timing_ci": 0.02}
    rounds = {}
    for name, factor in (("honest", 1.0), ("false claim", 0.3)):
        ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), sleep=0.002, claim_factor=factor,
                                    eval_updates=many)
        null = ev.null_child("c2cuda")
        plain = null.request
        null.request = lambda msg, timeout_s: (time.sleep(rng.uniform(0.0, 0.002)), plain(msg, timeout_s))[1]
        times = time_config(ev, group, 0, cd, jittery(child), "c2cuda")
        rounds[name] = (len(times.candidate), times.stop, times.claims_believed)
    assert rounds["honest"] == (3, "settled", True), rounds
    assert rounds["false claim"][0] > 6 and not rounds["false claim"][2], rounds


def test_the_t_quantile_past_the_table_is_students_not_the_normals():
    from pipeline.evaluation.timing.statistics import t_975
    exact = {2: 4.303, 10: 2.228, 11: 2.201, 15: 2.131, 20: 2.086, 30: 2.042, 60: 2.000, 120: 1.980}
    for df, t in exact.items():
        assert abs(t_975(df) - t) < 0.001, (df, t_975(df))


def test_every_timed_call_is_checked_so_skipping_later_calls_fails():
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y) if n <= 3 else None)
    with pytest.raises(Stop) as stop:
        time_config(ev, group, 0, cd, child, "c2cuda")
    assert stop.value.verdict == "incorrect"
    assert {"wrong-in-timed-call", "unfinished-at-done"} & set(stop.value.flags)


def test_drift_after_many_calls_fails():
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y) if n <= 10 else saxpy(x, y) + 1e-3)  # 12+ timed calls
    with pytest.raises(Stop) as stop:
        time_config(ev, group, 0, cd, child, "c2cuda")
    assert stop.value.verdict == "incorrect"


def test_memoised_results_fail_because_every_round_has_fresh_inputs():
    cache = {}

    def memo(n, x, y):
        key = x.data_ptr()
        cache.setdefault(key, saxpy(x, y))
        return cache[key]
    ev, group, cd, child = make(memo)
    with pytest.raises(Stop) as stop:
        time_config(ev, group, 0, cd, child, "c2cuda")
    assert stop.value.verdict == "incorrect"


def test_input_mutation_in_a_timed_call_is_rejected():
    def mutate(n, x, y):
        out = saxpy(x, y)
        x.zero_()
        return out
    ev, group, cd, child = make(mutate)
    with pytest.raises(Stop) as stop:
        time_config(ev, group, 0, cd, child, "c2cuda")
    assert stop.value.verdict == "rejected" and stop.value.flags == ["input-mutation"]


def test_a_gpu_that_stays_busy_gives_no_time_at_all(monkeypatch):
    from pipeline.evaluation.timing import timed_rounds
    from pipeline.evaluation.checks.group_data import TaskBroken
    monkeypatch.setattr(timed_rounds, "IDLE_WAIT_S", 0.5)
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), busy_s=0.06)
    with pytest.raises(TaskBroken, match="another job"):  # busy also with the candidate's process gone
        time_config(ev, group, 0, cd, child, "c2cuda")
    assert child.killed


def test_work_left_running_by_the_candidate_is_its_own_fault():
    """A candidate that leaves a kernel running after its calls return keeps the GPU busy; once its process is
    killed the GPU falls idle, so it is rejected, not let off as the evaluator's failure (a neutral reward)."""
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), busy_s=0.06)
    child.kill = lambda: setattr(ev.driver, "busy_s", 0.0)  # its kernels end with its process
    with pytest.raises(Stop) as stop:
        time_config(ev, group, 0, cd, child, "c2cuda")
    assert stop.value.verdict == "rejected" and stop.value.flags == ["work-left-running"]


def test_checksums_inside_the_window_pass_honest_outputs_and_fail_placeholders():
    from pipeline.evaluation.timing.checksums import Checksums, secret_signs
    _, group, cd, _ = make(lambda n, x, y: saxpy(x, y))
    fresh = [cd.fresh(k) for k in range(3)]
    expected = [{1: saxpy(f[0], f[1])} for f in fresh]
    signs = secret_signs(group, cd, [1])
    sums = Checksums(group, cd, [0, 1, 2], expected, signs)
    for k in range(3):
        group.buffers[cd.slots[k][1]].view.copy_(expected[k][1] * (1 + 5e-6))  # within rtol 1e-5
    assert sums.hold() and sums.cost_s() >= 0
    for k in range(3):  # same values, wrong places (each slot alone passes by chance with p < 1 %)
        group.buffers[cd.slots[k][1]].view.copy_(expected[k][1].flip(0))
    assert not sums.hold()
    group.buffers[cd.slots[2][1]].view.fill_(float("nan"))
    assert not sums.hold()


def test_claims_within_the_noise_are_the_times_and_a_false_claim_gains_at_most_the_noise():
    from pipeline.evaluation.timing.statistics import believed_times
    trusted = [1.00, 1.02, 0.98, 1.05, 1.01]
    honest = [0.97, 0.99, 0.96, 1.00, 0.98]
    times, believed = believed_times(honest, trusted, noise_ms=0.05)
    assert believed and times == honest  # precise events, within the noise of the trusted clock
    half_faked = [0.5, 0.99, 0.5, 1.00, 0.5]  # lies in most rounds
    times, believed = believed_times(half_faked, trusted, noise_ms=0.05)
    assert not believed and min(times) >= min(trusted) - 0.05 - 1e-9
    assert np.median(times) >= np.median(trusted) - 0.05 - 1e-9
    slight = [t - 0.04 for t in trusted]  # below the truth, but inside the noise: gains at most 0.05 ms
    times, believed = believed_times(slight, trusted, noise_ms=0.05)
    assert believed and np.median(trusted) - np.median(times) <= 0.05


def test_an_honest_candidates_times_are_its_own_events_once_the_trusted_clock_allows_them():
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), sleep=0.002)
    times = time_config(ev, group, 0, cd, child, "c2cuda")
    assert times.claims_believed and times.disagreements <= len(times.candidate) // 2
    assert all(c <= t * 1.5 for c, t in zip(times.candidate, times.trusted))


def test_the_expected_outputs_statistics_bound_the_exact_ones_and_count_inf_and_nan_exactly():
    """The checksums' targets: float32 norms raised past their rounding (never below the float64 sums, at most 2e-4
    above), the signed sum in float64; an output with an Inf or a NaN, squares past float32, or integers: exact."""
    from pipeline.evaluation.timing.checksums import expected_statistics, signed_sum
    g = torch.Generator().manual_seed(3)
    w = torch.randint(0, 2, (1 << 10,), generator=g).float() * 2 - 1
    plain = torch.randn(100_003, generator=g) * 1e3
    odd = plain.clone()
    odd[5], odd[7] = math.inf, math.nan
    huge = torch.full((10,), 1e30)
    ints = torch.randint(0, 100, (5000,), generator=g, dtype=torch.int32)
    for x in (plain, odd, huge, ints):
        part = x.double()
        finite = torch.isfinite(part)
        kept = torch.where(finite, part, 0.0)
        exact = ((~finite).sum().item(), kept.abs().sum().item(), (kept * kept).sum().item(),
                 signed_sum(x, w, torch.float64, True).item())
        got = expected_statistics([x], [w])[0]
        assert got[0] == exact[0] and got[3] == pytest.approx(exact[3], rel=1e-12, abs=1e-6)
        for a, b in zip(got[1:3], exact[1:3]):
            assert b <= a <= b * (1 + 2e-4)


def test_the_signed_sum_repeats_its_weights_and_equals_the_plain_sum():
    from pipeline.evaluation.timing import checksums
    g = torch.Generator().manual_seed(3)
    flat = torch.randn(10 * 7 + 3, generator=g, dtype=torch.float64)
    signs = (torch.randint(0, 2, (7,), generator=g) * 2 - 1).float()
    plain = float((flat * signs.double().repeat(11)[:flat.numel()]).sum())
    assert float(checksums.signed_sum(flat, signs, torch.float64)) == pytest.approx(plain, abs=1e-9)


def test_the_calibration_writes_the_outputs_bytes_and_its_own_gpu_time_is_not_overhead():
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), sleep=0.002)
    sent = []

    def calibration(msg, timeout_s):  # a trusted batch whose window is mostly its (claimed, trusted) GPU work
        sent.append(msg)
        time.sleep(0.004)
        return {"ok": True, "events_ms": 4.0 if msg["slots"] == [] and msg.get("fill_bytes") else 0.0}
    ev.null_child("c2cuda").request = calibration
    times = time_config(ev, group, 0, cd, child, "c2cuda")
    fills = [m["fill_bytes"] for m in sent if "fill_bytes" in m]
    assert fills and set(fills) == {4 * N}  # y, the one output (inout), of one call
    assert {m["launches"] for m in sent if "fill_bytes" in m} >= {1, times.calls_per_batch}
    assert times.overhead_ms < 3.0  # the 4 ms it spent on the GPU are not counted as overhead
    assert times.claims_believed and 0.8 < np.median(times.candidate) / np.median(times.baseline) < 1.25


def test_a_cold_first_calibration_does_not_widen_the_noise_for_a_false_claim():
    """A claim 20 % below its work is not made believable by one cold calibration sample. The work is host sleeps,
    whose jitter on a loaded 2-core machine can reach 20 % by itself now and then: of three independent runs, at
    most one may believe the claim (a cold sample that widened the noise would make all three believe it)."""
    believed = 0
    for _ in range(3):
        ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), sleep=0.002, claim_factor=0.8)
        seen = []

        def calibration(msg, timeout_s):  # the configuration's first calibration is slow, the rest are not
            if msg.get("fill_bytes"):
                seen.append(msg)
                time.sleep(0.05 if len(seen) == 1 else 0.0005)
            else:
                time.sleep(0.0005)
            return {"ok": True, "events_ms": 0.0}
        ev.null_child("c2cuda").request = calibration
        believed += bool(time_config(ev, group, 0, cd, child, "c2cuda").claims_believed)
    assert believed <= 1, f"{believed} of 3 runs believed a claim 20 % below its work"


def test_a_short_pytorch_baseline_runs_once_untimed_right_before_its_timed_batch():
    """A PyTorch reference launched from a host that idled through the round's other work ran slower per
    call than back to back; the warm batch runs the same calls first, and only the second batch is timed."""
    from types import SimpleNamespace

    from pipeline.evaluation.timing.timed_rounds import _baseline_batch
    calls, windows = [], []

    class Clock:
        def calls(self, each, flush_first=False):
            before = len(calls)
            results = [c() for c in each]
            windows.append((len(calls) - before, flush_first))
            return 1e-3 * len(windows), results

    cd = SimpleNamespace(run_reference=lambda f: calls.append(f["x"]) or [f["x"] * 2],
                         reference_copy=lambda f: dict(f))
    fresh = [{"x": torch.tensor([1.0])}, {"x": torch.tensor([2.0])}]
    seconds, expected = _baseline_batch(SimpleNamespace(clock=Clock()), None, 0, cd, [0, 1], fresh, [1])
    assert windows == [(2, True), (2, True)] and seconds == 2e-3  # the second window is the time
    assert [float(e[1]) for e in expected] == [2.0, 4.0]
    windows.clear()
    seconds, _ = _baseline_batch(SimpleNamespace(clock=Clock()), None, 0, cd, [0, 1], fresh, [1], warm=False)
    assert windows == [(2, True)] and seconds == 1e-3


def test_trusted_calls_are_timed_one_by_one_on_an_idle_device_as_kernelbench_times_a_trial():
    """TrustedClock.calls: per call a device-wide sync, an event, the call, an event; the time is the sum of the
    calls' own pairs (what runs between calls, and the wait for the device, is in none)."""
    log = []

    class Driver:
        now = 0.0

        def event(self):
            log.append("event")
            return len([x for x in log if x == "event"])

        def record(self, ev):
            log.append(("record", ev))
            self.stamps = getattr(self, "stamps", {})
            self.stamps[ev] = self.now

        def synchronize(self):
            log.append("sync")
            self.now += 10.0

        def elapsed_ms(self, a, b):
            return self.stamps[b] - self.stamps[a]

        def memset_async(self, *a):
            log.append("flush")

        def alloc(self, nbytes):
            return 0
    driver = Driver()
    clock = TrustedClock(driver, flush_ptr=1, flush_bytes=64)

    def call(ms):
        def run():
            log.append(("call", ms))
            driver.now += ms
            return ms
        return run
    seconds, results = clock.calls([call(2.0), call(3.0)], flush_first=True)
    assert results == [2.0, 3.0] and seconds == pytest.approx(5e-3)
    assert log[log.index("flush") + 1:] == ["sync", ("record", 1), ("call", 2.0), ("record", 2),
                                            "sync", ("record", 3), ("call", 3.0), ("record", 4), "sync"]
    log.clear()
    assert clock.calls([call(1.0)])[0] == pytest.approx(1e-3) and "event" not in log  # the pairs are made once


def test_only_short_baseline_batches_are_warmed():
    from pipeline.evaluation.timing.timed_rounds import BASELINE_WARM_S, warm_baseline
    assert warm_baseline(None)  # the first round: nothing known yet
    assert warm_baseline(0.002) and not warm_baseline(BASELINE_WARM_S) and not warm_baseline(1.5)


class ComputesAhead(ScriptedChild):
    """At the first call of each batch it computes every slot whose buffers it can reach (they sit at a
    stride it can work out); the later calls of the batch then have nothing left to do."""

    def _run(self, msg):
        for n, k in enumerate(msg["slots"]):
            self.calls += 1
            if n == 0:
                for bufs in self.cd.slots:
                    x, y = (self.group.buffers[b].view for b in bufs)
                    y.copy_(saxpy(x, y))
            time.sleep(self.sleep)


def test_computing_ahead_of_the_calls_is_caught_by_a_decoy_slot():
    from pipeline.evaluation.timing import timed_rounds
    ev, group, cd, _ = make(lambda n, x, y: saxpy(x, y))
    child = ComputesAhead(group, cd, None)
    with pytest.raises(Stop) as stop:
        time_config(ev, group, 0, cd, child, "c2cuda")
    assert stop.value.verdict == "rejected" and stop.value.flags == ["computed-ahead"]
    assert "never called for" in stop.value.reason
    ev, group, cd, _ = make(lambda n, x, y: saxpy(x, y))  # without a decoy the same batch passes every check
    child = ComputesAhead(group, cd, None)
    original = timed_rounds.DECOY_SLOTS
    try:
        timed_rounds.DECOY_SLOTS = 0
        assert len(time_config(ev, group, 0, cd, child, "c2cuda").candidate) >= 3
    finally:
        timed_rounds.DECOY_SLOTS = original


def test_the_called_slots_and_the_decoys_change_places_every_round():
    from pipeline.evaluation.timing.timed_rounds import round_slots
    seen_orders, decoy_places = set(), set()
    for _ in range(200):
        called, decoy = round_slots(7, 1)
        assert sorted(called + decoy) == list(range(8)) and len(decoy) == 1
        seen_orders.add(tuple(called))
        decoy_places.add(decoy[0])
    assert len(seen_orders) > 150 and decoy_places == set(range(8))
    assert round_slots(1, 0) == ([0], [])


def test_the_in_window_checksum_holds_outputs_whose_reference_has_an_inf():
    """An Inf or NaN in an expected output leaves that element out of the in-window sums, not the output:
    outputs still poisoned at "done" fail the window, the right ones (the Inf included) pass it."""
    from pipeline.evaluation.timing.checksums import Checksums, secret_signs
    from pipeline.evaluation.timing.timed_rounds import _out_positions
    ev, group, cd, child = make(lambda n, x, y: None)
    signs = secret_signs(group, cd, _out_positions(group, cd))
    slots, expected = [0, 1, 2], []
    for k in slots:
        y = torch.rand(group.buffers[cd.slots[k][1]].view.numel())
        y[123], y[7] = float("inf"), float("nan")
        expected.append({1: y})
    for k in slots:  # nothing written yet
        group.buffers[cd.slots[k][1]].view.fill_(float("nan"))
    sums = Checksums(group, cd, slots, expected, signs)
    assert len(sums.views) == 3 and not sums.hold()
    for k, want in zip(slots, expected):
        group.buffers[cd.slots[k][1]].view.copy_(want[1])
    assert sums.hold()


def test_kernelbench_copies_are_in_neither_sides_time_and_the_calibration_makes_them(monkeypatch):
    """A KernelBench-format harness copies each result into the output buffer after the call's end mark, as
    KernelBench's own harness never copies: the baseline's window holds no copy either. The trusted clock's
    window of the candidate's batch does hold the copies, so the calibration makes as many, of the same sizes,
    inside its own window, where they count as overhead (taken off), never as the calibration's GPU work."""
    from types import SimpleNamespace

    from pipeline.evaluation.timing import timed_rounds
    assert not hasattr(timed_rounds, "_output_copied")
    copies, windows = [], []
    original = torch.Tensor.copy_

    def counted(self, src, *a, **k):
        copies.append(tuple(src.shape))
        return original(self, src, *a, **k)
    monkeypatch.setattr(torch.Tensor, "copy_", counted)

    class Clock:
        def calls(self, each, flush_first=False):
            before = len(copies)
            results = [c() for c in each]
            windows.append(len(copies) - before)
            return 1e-3, results

        def batch(self, run):
            before = len(copies)
            run()
            windows.append(len(copies) - before)
            return SimpleNamespace(seconds=0.01, probe_before_s=0.0, probe_after_s=0.0)

        def flush_l2(self):
            pass

    out = SimpleNamespace(view=torch.zeros(3), role="out", nbytes=12)
    group = SimpleNamespace(buffers=[SimpleNamespace(view=torch.zeros(3), role="in"), out])
    cd = SimpleNamespace(run_reference=lambda f: [f[0] * 2], reference_copy=lambda f: dict(f), buffers=[0, 1])
    fresh = [{0: torch.ones(3)}, {0: torch.full((3,), 2.0)}]
    _, expected = timed_rounds._baseline_batch(SimpleNamespace(clock=Clock()), group, 0, cd, [0, 1], fresh, [1],
                                               warm=False)
    assert windows == [0] and copies == []  # the reference alone in its window, as KernelBench times it
    assert [e[1].tolist() for e in expected] == [[2.0] * 3, [4.0] * 3]

    dests = timed_rounds.output_copy_buffers(group, cd)
    pairs = timed_rounds._harness_copies(dests, expected, [1])
    assert [(d is dests[0], s is e[1]) for (d, s), e in zip(pairs, expected)] == [(True, True)] * 2
    assert timed_rounds._harness_copies(None, expected, [1]) == []  # c2cuda and light calls write the buffers

    sent = []
    null = SimpleNamespace(freeze=lambda: None, thaw=lambda: None,
                           request=lambda msg, t: (sent.append(msg), {"ok": True, "events_ms": 4.0})[1])
    ev = SimpleNamespace(cfg=SimpleNamespace(run_timeout_s=5.0, busy_probe_limit_s=0.05), clock=Clock(),
                         null_child=lambda fmt: null)
    windows.clear()
    overhead_s, busy = timed_rounds._calibration(ev, 0, "kernelbench", 2, 12, SimpleNamespace(hold=lambda: True),
                                                 pairs)
    assert windows == [2] and dests[0].tolist() == [4.0] * 3  # both copies inside the calibration's window
    assert sent[0]["harness"] == "kernelbench" and sent[0]["launches"] == 2 and sent[0]["fill_bytes"] == 12
    assert overhead_s == pytest.approx(0.006) and not busy  # the window less the batch's own 4 ms of GPU work
    timed_rounds._calibration(ev, 0, "c2cuda", 2, 12, SimpleNamespace(hold=lambda: True))
    assert "harness" not in sent[-1]


def test_a_bracketed_baseline_is_timed_at_the_start_and_the_end_only():
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), sleep=0.002,
                                eval_updates={"timing_baseline": "bracket", "timing_trials": 56})
    base = group.baseline_child
    batches = []
    real = base.request

    def steady(msg, timeout_s):  # the baseline's own (trusted) events: 2 ms a call, as a steady GPU gives
        batches.append(len(msg["slots"]))
        return dict(real(msg, timeout_s), events_ms=2.0 * len(msg["slots"]))
    base.request = steady
    times = time_config(ev, group, 0, cd, child, "c2cuda")
    assert len(times.candidate) == 8 and len(times.baseline) == 2  # the first timed round's and a closing batch
    assert times.baseline_drift is not None and times.baseline_drift <= 0.02
    assert len(batches) == 1 + 8 + 1  # warm-up, each round's expected outputs (untimed after the first), the end
    assert 0.8 < np.median(times.candidate) / np.median(times.baseline) < 1.25


def test_group_rounds_make_a_rounds_sets_once_for_the_group():
    """eval.group_rounds: the group's first candidate has every round's inputs drawn and the baseline run on them;
    the next candidate of the group gets the untimed rounds' sets again, in slots of its own secret order, with no
    draw and no baseline batch for them, and is judged on them as the first was (a wrong kernel still fails); the
    rounds that time the baseline (the warm-up, the first timed round, the closing bracket) draw afresh."""
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), sleep=0.002,
                                eval_updates={"timing_baseline": "bracket", "timing_trials": 56, "group_rounds": True})
    base = group.baseline_child
    batches, draws = [], []
    real_request, real_fresh = base.request, cd.fresh
    base.request = lambda msg, timeout_s: (batches.append(len(msg["slots"])),
                                           dict(real_request(msg, timeout_s), events_ms=2.0 * len(msg["slots"])))[1]
    cd.fresh = lambda seed, *draw: (draws.append(seed), real_fresh(seed, *draw))[1]
    first = time_config(ev, group, 0, cd, child, "c2cuda")
    first_batches, first_draws = len(batches), len(draws)
    assert len(first.candidate) == 8 and len(cd.round_sets) == 7  # rounds 2-8: untimed baseline, kept
    assert 0 < cd.round_sets_bytes <= ev.cfg.timing_memory_bytes
    batches.clear(), draws.clear()
    second_child = type(child)(group, cd, lambda n, x, y: saxpy(x, y), 0.002)
    second = time_config(ev, group, 0, cd, second_child, "c2cuda")
    assert len(second.candidate) == 8 and len(second.baseline) == 2
    assert len(batches) == 3 and first_batches == 10  # the warm-up, the first timed round, the end; 7 rounds fewer
    assert len(draws) < first_draws / 3  # only the rounds that time the baseline drew inputs
    assert 0.8 < np.median(second.candidate) / np.median(second.baseline) < 1.25
    wrong = type(child)(group, cd, lambda n, x, y: saxpy(x, y) if n <= 20 else saxpy(x, y) + 0.5, 0.002)
    with pytest.raises(Stop) as stop:  # wrong only on its later calls: those of the rounds the group shares
        time_config(ev, group, 0, cd, wrong, "c2cuda")
    assert stop.value.verdict == "incorrect"


def test_group_rounds_stay_within_the_timing_memory():
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), sleep=0.002,
                                eval_updates={"timing_baseline": "bracket", "timing_trials": 56, "group_rounds": True,
                                              "timing_memory_bytes": 3 * 8 * 2 * 4 * N})  # about three rounds' sets
    time_config(ev, group, 0, cd, child, "c2cuda")
    assert 1 <= len(cd.round_sets) < 7 and cd.round_sets_bytes <= ev.cfg.timing_memory_bytes
    ev2, group2, cd2, child2 = make(lambda n, x, y: saxpy(x, y), sleep=0.002,
                                    eval_updates={"timing_baseline": "bracket", "timing_trials": 56})
    time_config(ev2, group2, 0, cd2, child2, "c2cuda")
    assert cd2.round_sets == {}  # off by default


def test_a_chained_baseline_is_timed_once_per_candidate_and_still_bracketed():
    """eval.timing_baseline 'chained': the group's first candidate is bracketed as with 'bracket'; the next one's
    start bracket is the first one's end (the same per-call time, the same batch), so it times the baseline only at
    its own end, and with eval.group_rounds runs the baseline for nothing else; where the GPU drifted between, its
    own end is more than 2 % from that start and it falls back to alternation, and the chain is dropped."""
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), sleep=0.002,
                                eval_updates={"timing_baseline": "chained", "timing_trials": 56, "group_rounds": True})
    base = group.baseline_child
    batches, per_call_ms = [], [2.0]
    real_request = base.request
    base.request = lambda msg, timeout_s: (batches.append(len(msg["slots"])), dict(
        real_request(msg, timeout_s), events_ms=per_call_ms[0] * len(msg["slots"])))[1]
    first = time_config(ev, group, 0, cd, child, "c2cuda")
    assert len(first.baseline) == 2 and first.baseline_drift <= 0.02 and len(batches) == 10
    chain = cd.chained_baseline
    assert chain is not None and chain.ms == first.baseline[-1] and chain.n_calls == first.calls_per_batch
    batches.clear()
    second = time_config(ev, group, 0, cd, type(child)(group, cd, lambda n, x, y: saxpy(x, y), 0.002), "c2cuda")
    assert second.baseline[0] == first.baseline[-1] and len(second.baseline) == 2
    assert second.calls_per_batch == first.calls_per_batch and len(second.candidate) == 8
    assert len(batches) == 3  # the warm-up's and the first timed round's expected outputs (not kept), and its end
    assert 0.8 < np.median(second.candidate) / np.median(second.baseline) < 1.25
    per_call_ms[0] = 2.6  # the GPU's clock dropped since the chain's end was timed
    third = time_config(ev, group, 0, cd, type(child)(group, cd, lambda n, x, y: saxpy(x, y), 0.002), "c2cuda")
    assert third.baseline_drift > 0.02 and cd.chained_baseline is None
    assert len(third.candidate) == len(third.baseline) >= 3  # alternation, the chain's start left out
    assert all(b == pytest.approx(2.6) for b in third.baseline)


def test_a_chained_end_taken_on_a_busy_gpu_starts_no_chain(monkeypatch):
    from pipeline.evaluation.timing import timed_rounds
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), sleep=0.002,
                                eval_updates={"timing_baseline": "chained", "timing_trials": 21})
    real_batch = timed_rounds._baseline_batch

    def end_after_busy(*args, **kwargs):  # the end bracket's batch (new inputs, no expected outputs kept) follows
        return real_batch(*args, **kwargs)  # the probe that the clock says found the GPU busy
    probes = []
    real_probe = ev.clock.probe
    ev.clock.probe = lambda: (probes.append(1), 1.0 if end_bracket[0] else real_probe())[1]
    end_bracket = [False]
    real_to = timed_rounds.GpuTurns.to

    def to(self, mode, why=""):
        end_bracket[0] = why == "timing: the baseline's end bracket"
        return real_to(self, mode, why)
    monkeypatch.setattr(timed_rounds.GpuTurns, "to", to)
    monkeypatch.setattr(timed_rounds, "_baseline_batch", end_after_busy)
    times = time_config(ev, group, 0, cd, child, "c2cuda")
    assert times.baseline_drift <= 0.02 and len(times.baseline) == 2  # the candidate's own bracket stands
    assert cd.chained_baseline is None  # but the next one times its own start


def test_a_baseline_that_drifts_falls_back_to_timing_it_every_round():
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), sleep=0.002,
                                eval_updates={"timing_baseline": "bracket", "timing_trials": 21})
    base = group.baseline_child
    calls = []
    real = base.request

    def slower(msg, timeout_s):  # the GPU's clock drops after the first rounds: the baseline takes 30 % longer
        calls.append(1)
        return dict(real(msg, timeout_s), events_ms=(2.0 if len(calls) <= 4 else 2.6) * len(msg["slots"]))
    base.request = slower
    times = time_config(ev, group, 0, cd, child, "c2cuda")
    assert times.baseline_drift > 0.02
    assert len(times.candidate) == len(times.baseline) == 3  # timing_rounds of alternation, nothing before


def _lock_state(lock) -> str:
    """How another evaluator finds `lock` now: 'exclusive' (no shared hold possible), 'shared' (shared possible,
    exclusive not) or 'free'."""
    import fcntl
    with open(lock.main_path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(f, fcntl.LOCK_UN)
            return "free"
        except BlockingIOError:
            pass
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(f, fcntl.LOCK_UN)
            return "shared"
        except BlockingIOError:
            return "exclusive"


def test_the_gpu_is_taken_alone_only_for_what_is_timed(tmp_path, monkeypatch, virtual_time):
    """Windows (baseline, calibration, the candidate's batch) under the exclusive lock; the round's input draws
    and checks under the shared one, beside other evaluators' work; the lock free once the rounds end, and the
    evaluator's GPU work done each time a turn passes."""
    virtual_time.tick = 1e-6  # waiting for the lock takes some time
    from pipeline.evaluation.timing import timed_rounds
    from pipeline.evaluation.gpu.lock import GpuLock
    seen: dict[str, set] = {"window": set(), "inputs": set(), "check": set()}
    ev, group, cd, child = make(lambda n, x, y: (seen["window"].add(_lock_state(ev.gpu_lock)), saxpy(x, y))[1])
    idles = []
    ev.gpu_lock = GpuLock("7", str(tmp_path), idle=lambda: idles.append(1))
    from pipeline.evaluation.gpu.lock import CodeLock
    ev.candidate_code = CodeLock()  # no sibling loaded ahead runs its code from a window to its check
    real_fresh, real_check = cd.fresh, timed_rounds.check_round
    cd.fresh = lambda seed: (seen["inputs"].add((_lock_state(ev.gpu_lock), ev.candidate_code.locked())),
                             real_fresh(seed))[1]

    def check(*args, **kwargs):
        seen["check"].add((_lock_state(ev.gpu_lock), ev.candidate_code.locked()))
        return real_check(*args, **kwargs)
    monkeypatch.setattr(timed_rounds, "check_round", check)
    real_stage = timed_rounds.stage
    seen["stage"] = set()

    def stage(driver, g, slot_buffers, sets):  # the candidate's slots: only alone on the GPU, never while a turn
        if slot_buffers and slot_buffers[0] in cd.slots:  # passes (a sibling's load ahead runs its code then)
            seen["stage"].add((_lock_state(ev.gpu_lock), ev.candidate_code.locked()))
        return real_stage(driver, g, slot_buffers, sets)
    monkeypatch.setattr(timed_rounds, "stage", stage)
    times = time_config(ev, group, 0, cd, child, "c2cuda")
    assert len(times.candidate) >= 3
    # the inputs are drawn in the shared turn after the check, where a sibling may load (candidate_code free)
    assert {state for state, _ in seen.pop("inputs")} == {"shared"}
    assert seen == {"window": {"exclusive"}, "check": {("shared", True)}, "stage": {("exclusive", True)}}, seen
    assert _lock_state(ev.gpu_lock) == "free" and not ev.candidate_code.locked()
    assert len(idles) >= len(times.candidate)  # every turn passed with the evaluator's GPU work done
    assert times.parts_s["lock_wait"] > 0


def test_a_shared_hold_ends_with_the_holders_gpu_work_done(tmp_path):
    from pipeline.evaluation.gpu.lock import GpuLock
    order = []
    lock = GpuLock("8", str(tmp_path), idle=lambda: order.append(("idle", _lock_state(lock))))
    with lock.shared():
        order.append(("work", _lock_state(lock)))
    assert order == [("work", "shared"), ("idle", "shared")] and _lock_state(lock) == "free"


# --- timed calls judged as check calls are --------------------------------------------------------------------
def _max_task_inputs(seed, draw="task"):
    """x declared uniform(0, 1), as a generated max-reduction task's; y, the output, broadcasts max(x) (inout here:
    the harness's layout). "adversarial": the timed rounds' draw (fidelity.adversarial_uniform_torch)."""
    from pipeline.evaluation.checks.fidelity import adversarial_uniform_torch
    g = torch.Generator().manual_seed(seed)
    x = adversarial_uniform_torch(g, N, 0.0, 1.0, torch.float32, "cpu") if draw == "adversarial" \
        else torch.rand(N, generator=g)
    return {0: x, 1: torch.rand(N, generator=g)}


def _row_max(n, x, y):
    return torch.full_like(y, float(x.max()))


@pytest.mark.parametrize("key", ["size", "call count"])
def test_a_constant_written_only_on_timed_calls_fails_on_the_adversarial_timed_draw(key):
    """The maximum of many uniform(0, 1) draws is 1 within a tolerance: a kernel that writes it on timed calls
    (keyed on their size, or on calls after the first few) passed the task's own draw; the timed rounds' draw has
    a secret range, and it fails."""
    from pipeline.core.records import Tolerance
    top = 1 - 1 / (N + 1)  # the expected maximum of N uniform draws
    constant = (lambda n, x, y: torch.full_like(y, top)) if key == "size" else \
        (lambda n, x, y: _row_max(n, x, y) if n <= 3 else torch.full_like(y, top))
    tol = Tolerance(rtol=1e-2, atol=0.0)
    ev, group, cd, child = make(constant, baseline=_row_max, fresh=_max_task_inputs, tolerance=tol)
    time_config(ev, group, 0, cd, child, "c2cuda")  # version 17's timed draw: paid as correct
    ev, group, cd, child = make(constant, baseline=_row_max, fresh=_max_task_inputs, tolerance=tol)
    cd.timed_draw = "adversarial"
    with pytest.raises(Stop) as stop:
        time_config(ev, group, 0, cd, child, "c2cuda")
    assert stop.value.verdict == "incorrect"  # by the check after the batch, or by the checksum inside the window
    assert {"wrong-in-timed-call", "unfinished-at-done"} & set(stop.value.flags)
    ev, group, cd, child = make(_row_max, baseline=_row_max, fresh=_max_task_inputs, tolerance=tol)
    cd.timed_draw = "adversarial"
    time_config(ev, group, 0, cd, child, "c2cuda")  # the honest kernel passes the same rounds


def _saxpy_anchor(fresh_set, expected):
    """The float64 anchor of a saxpy call, as ConfigData.timed_anchor gives it."""
    from pipeline.evaluation.checks.fidelity import anchor_allowance
    ref64 = 1.5 * fresh_set[0].double() + fresh_set[1].double()
    return {1: (ref64, anchor_allowance(expected[1], ref64, list(fresh_set.values())))}


def test_lower_precision_on_timed_calls_fails_the_anchor_of_a_secret_call_every_round():
    """At a loose tolerance, a kernel that computes in bfloat16 only on calls after its first few passes every
    elementwise check; one secret call of each round is held to the float64 anchor, and it fails there."""
    from pipeline.core.records import Tolerance
    from pipeline.evaluation.timing import timed_rounds
    tol = Tolerance(rtol=2e-2, atol=2e-2)

    def lowered(n, x, y):
        return saxpy(x, y) if n <= 2 else saxpy(x.bfloat16(), y.bfloat16()).float()
    ev, group, cd, child = make(lowered, tolerance=tol)
    time_config(ev, group, 0, cd, child, "c2cuda")  # without an anchor on timed calls: paid as correct
    ev, group, cd, child = make(lowered, tolerance=tol)
    cd.timed_anchor = _saxpy_anchor
    with pytest.raises(Stop) as stop:
        time_config(ev, group, 0, cd, child, "c2cuda")
    assert stop.value.verdict == "incorrect" and "float64 reference" in stop.value.reason
    ev, group, cd, child = make(lambda n, x, y: saxpy(x, y), tolerance=tol)
    cd.timed_anchor = _saxpy_anchor
    anchored = []
    real = timed_rounds.anchored_calls
    timed_rounds.anchored_calls = lambda n, count: anchored.append(real(n, count)) or anchored[-1]
    try:
        time_config(ev, group, 0, cd, child, "c2cuda")  # honest: passes, with anchored calls every round
    finally:
        timed_rounds.anchored_calls = real
    assert len(anchored) >= 4 and all(anchored)  # the warm-up and every timed round, at least one call each
    # secret places, drawn anew for every round (asked of the draw itself: a loaded host's batches can be so short
    # that a round of 2 calls picks the same place as the last one by chance)
    assert len({tuple(real(8, 1)) for _ in range(64)}) > 1
    assert max(len(a) for a in anchored) == 1  # eval.timing_anchored_calls


def test_timed_inputs_use_the_configurations_timed_draw():
    cd = ConfigData("large", False, True, {}, [0, 1], [])
    cd.fresh = _max_task_inputs
    task_draw, adversarial = cd.timed_inputs(5)[0], None
    cd.timed_draw = "adversarial"
    adversarial = cd.timed_inputs(5)[0]
    assert not torch.equal(task_draw, adversarial)
    assert 0.0 <= float(adversarial.min()) and float(adversarial.max()) < 1.0  # the declared domain
    tops = [float(cd.timed_inputs(seed)[0].max()) for seed in range(8)]
    assert max(tops) - min(tops) > 0.01  # a secret range: the maximum moves from draw to draw


@pytest.mark.integration
def test_a_stride_two_read_of_a_dot_product_is_off_on_the_timed_draw_and_not_on_the_tasks_own():
    """Bounded positive inputs (uniform(0, 1)): the even and odd halves of a long dot product agree within the
    task's rtol on the task's own draw, whatever the scale; the timed draw's pattern of a secret period puts a
    stride-2 read off whenever the period is even. Each timed call draws its own, so a batch meets several."""
    from pipeline.evaluation.checks.group_data import Buffer as Buf
    from pipeline.evaluation.checks.reference_c import _c2cuda_fresh
    task = next(t for t in load_tasks("builtin") if t.id == "c2cuda/dot")
    n = 1 << 22
    fresh = _c2cuda_fresh(task, {"n": n}, [Buf("x", "float32", (n,), "in"), Buf("y", "float32", (n,), "in"),
                                          Buf("r", "float32", (1,), "out")], device="cpu")

    def off(draw: str, seed: int) -> bool:
        inputs = fresh(seed, draw)
        x, y = inputs[0].double(), inputs[1].double()
        return abs(float(2 * (x[::2] * y[::2]).sum() / (x * y).sum()) - 1) > task.tolerance.rtol
    assert not any(off("task", s) for s in range(12))
    assert sum(off("adversarial", s) for s in range(12)) >= 6
