"""The trusted clock: how long a batch of calls took, measured where the candidate cannot reach.

The evaluator (trusted) times a batch from "go" to "done" with its own host clock, then queues a
tiny operation of its own on the GPU and waits for it: the batch ends when the trusted side has
seen the GPU get past the work, not when the worker says so. This times the candidate (a batch in
its child process); whatever overhead it adds is measured on its own (a trusted calibration batch of
the same kind, timed_rounds.py) and subtracted. Trusted code is timed by its own CUDA events: the
naive CUDA baseline in a trusted child (a batch opened on an idle GPU, as the candidate's), and the
PyTorch reference in this process, whose window opens behind a queued L2 flush (`events(...,
flush_first=True)`), so the host's first launch of a Python model is not in it. The candidate's
batch still opens on an idle GPU; what its first launch adds is, per call, the calibration's
launch gap against the candidate's, a few microseconds over a batch of about `eval.timing_batch_s`.

    clock = TrustedClock(driver)
    t = clock.batch(run)   # run() sends "go" and waits for "done" (or launches the calls in-process)
    t.seconds, t.probe_before_s, t.probe_after_s

`probe_before_s` / `probe_after_s` are how long the GPU took to run the trusted probe just before
"go" and just after "done". The GPU time-slices between processes, so a probe that waits far longer
than on an idle GPU means some other context still had work running: a worker that answered
"done" while its kernels were still running, or that kept a kernel running between calls, is
caught by `probe_after_s` / `probe_before_s` above `eval.busy_probe_limit_s`.

`time_calls` is the in-process procedure of dataset measurement (trusted code timed with CUDA
events of the trusted process itself); candidates are never timed with it. `ratio_settled` is the adaptive
stop's test (eval.timing_ci): whether the rounds' candidate/baseline ratios pin the ratio down;
`believed_times` which of the candidate's times count: its own events within the calibrations' noise
(`claim_noise_ms` of `overhead_samples`), the trusted clock's otherwise.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable


@dataclass
class BatchTime:
    seconds: float          # trusted wall clock: "go" until the trusted probe after "done" completed
    probe_before_s: float   # latency of the trusted probe just before "go"
    probe_after_s: float    # latency of the trusted probe just after "done"


class TrustedClock:
    """Batches timed by the trusted process's clock (see the module docstring)."""

    def __init__(self, driver, flush_ptr: int = 0, flush_bytes: int = 0):
        self.driver = driver
        self.flush_ptr, self.flush_bytes = flush_ptr, flush_bytes
        self.probe_ptr = driver.alloc(256)
        self._flushes = 0

    def probe(self) -> float:
        """Seconds for a 4-byte memset of the trusted side to complete on the GPU."""
        t0 = time.perf_counter()
        self.driver.memset_async(self.probe_ptr, 0, 4)
        self.driver.synchronize()
        return time.perf_counter() - t0

    def flush_l2(self) -> None:
        """Evict the L2 (outside any timed window) so every batch starts cold."""
        self._queue_flush()
        self.driver.synchronize()

    def _queue_flush(self) -> None:
        """Queue the L2 flush (a memset of a new byte over the flush buffer) without waiting for it."""
        if self.flush_bytes:
            self._flushes += 1
            self.driver.memset_async(self.flush_ptr, self._flushes & 0xFF, self.flush_bytes)

    def batch(self, run: Callable[[], None]) -> BatchTime:
        before = self.probe()
        t0 = time.perf_counter()
        run()
        t1 = time.perf_counter()
        self.driver.memset_async(self.probe_ptr, 1, 4)
        self.driver.synchronize()
        t2 = time.perf_counter()
        return BatchTime(t2 - t0, before, t2 - t1)

    def events(self, run: Callable[[], None], flush_first: bool = False) -> float:
        """Seconds of work launched by `run` in this (trusted) process, from its own CUDA events.
        flush_first: the device idle first, then the L2 flush queued just before the window opens, so
        the GPU is still busy with it while the host launches the first call (KernelBench's procedure:
        the window holds the calls' GPU time, not the host's first launch)."""
        if not hasattr(self, "_events"):
            self._events = (self.driver.event(), self.driver.event())
        if flush_first:
            self.driver.synchronize()
            self._queue_flush()
        self.driver.record(self._events[0])
        run()
        self.driver.record(self._events[1])
        self.driver.synchronize()
        return self.driver.elapsed_ms(*self._events) / 1e3

    def calls(self, calls: list[Callable[[], object]], flush_first: bool = False) -> tuple[float, list]:
        """(seconds, results) of trusted calls in this process, each timed as KernelBench times a trial: the
        device synchronised, an event, the call, an event; the seconds are the sum of the calls' own event
        pairs, the same shape as a candidate's batch (child/main.py `run`). flush_first: the L2 flush queued
        before the first call (the calls' inputs are cold, as the candidate's are)."""
        pairs = getattr(self, "_pairs", [])
        while len(pairs) < len(calls):
            pairs.append((self.driver.event(), self.driver.event()))
        self._pairs = pairs
        if flush_first:
            self.driver.synchronize()
            self._queue_flush()
        results = []
        for call, (start, end) in zip(calls, pairs):
            self.driver.synchronize()
            self.driver.record(start)
            results.append(call())
            self.driver.record(end)
        self.driver.synchronize()
        return sum(self.driver.elapsed_ms(s, e) for s, e in pairs[:len(calls)]) / 1e3, results

    def overhead(self, run_empty: Callable[[], None], repeats: int = 15) -> float:
        """Median seconds of an empty batch of this kind (what every batch costs besides its calls)."""
        return statistics.median(self.batch(run_empty).seconds for _ in range(repeats))


def time_calls(driver, call: Callable[[], None], flush_ptr: int, flush_bytes: int,
               warmup: int, max_trials: int, budget_s: float) -> list[float]:
    """Dataset measurement of trusted implementations in a trusted process: per-trial milliseconds of
    `call()` from CUDA events of this process, the L2 flushed before each trial, the device synchronised
    after each (so work on any stream counts). Candidates are timed by TrustedClock instead."""
    for _ in range(warmup):
        call()
    driver.synchronize()
    start, end = driver.event(), driver.event()
    times: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(times) < max_trials and (len(times) < 5 or time.perf_counter() < deadline):
        if flush_bytes:
            driver.memset_async(flush_ptr, len(times) & 0xFF, flush_bytes)
        driver.record(start)
        call()
        driver.record(end)
        driver.synchronize()
        times.append(driver.elapsed_ms(start, end))
    return times


def summarize(times_ms: list[float], calls_per_time: int = 1):
    """Median, interquartile range and minimum of per-call times, as a records.Timing. Where each time is a
    batch of `calls_per_time` calls divided by its calls (timed rounds), `trials` counts the calls."""
    from pipeline.core.records import Timing
    if not times_ms:
        raise ValueError("summarize() needs at least one trial time")
    ordered = sorted(times_ms)
    q = statistics.quantiles(ordered, n=4) if len(ordered) >= 2 else [ordered[0]] * 3
    return Timing(median_ms=statistics.median(ordered), iqr_ms=q[2] - q[0], min_ms=ordered[0],
                  trials=len(ordered) * calls_per_time)


T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)  # Student's t, 97.5 %, 1-10 degrees


def t_975(df: int) -> float:
    """Student's t quantile at 97.5 % for `df` degrees of freedom: the table to 10, then the Cornish-Fisher
    expansion around the normal quantile (within 0.001 of the exact value from 11 on)."""
    if df <= len(T_975):
        return T_975[df - 1]
    z = 1.959964
    return (z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * df ** 3))


def ratio_settled(candidate_ms: list[float], baseline_ms: list[float], ci: float) -> bool:
    """Whether the rounds' candidate/baseline ratios pin the ratio down to +- `ci` (a fraction) at 95 %:
    the t interval of the mean log ratio, half-width t * sd / sqrt(n), below log(1 + ci). At least two
    rounds; the baseline is timed in the same rounds, so a drift of the GPU's clocks cancels in each ratio."""
    logs = [math.log(c / b) for c, b in zip(candidate_ms, baseline_ms) if c > 0 and b > 0]
    n = len(logs)
    if n < 2:
        return False
    return t_975(n - 1) * statistics.stdev(logs) / math.sqrt(n) <= math.log1p(ci)


def overhead_samples(overheads: list[float], warm_overheads: list[float]) -> list[float]:
    """The calibrations' overheads (seconds) that measure a batch's fixed cost: the timed rounds', with the warm-up's
    while there are fewer than four; the first warm-up calibration is the configuration's first in-window checksum
    (cold): never a sample."""
    return overheads if len(overheads) >= 4 else overheads + warm_overheads[1:]


def claim_noise_ms(cfg, samples: list[float], n_calls: int) -> float:
    """How far below the trusted clock a claim may lie per call: eval.timing_noise_factor interquartile ranges of
    the calibrations' overheads, per call."""
    import statistics
    q = statistics.quantiles(samples, n=4) if len(samples) >= 2 else [samples[0]] * 3
    return 1e3 * cfg.timing_noise_factor * (q[2] - q[0]) / n_calls


def believed_times(claims_ms: list[float], trusted_ms: list[float], noise_ms: float) -> tuple[list[float], bool]:
    """The candidate's per-call times from its per-round claims and the trusted clock's per-round times.
    Its own CUDA events are precise, so they are its times when their median lies no more than `noise_ms`
    below the trusted clock's median (a claim can then gain at most the measured noise); otherwise they
    are not believed and the trusted times, less that noise, are its times."""
    import statistics
    if statistics.median(claims_ms) >= statistics.median(trusted_ms) - noise_ms:
        return list(claims_ms), True
    return [max(t - noise_ms, 1e-6) for t in trusted_ms], False
