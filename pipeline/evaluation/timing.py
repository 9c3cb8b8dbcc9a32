"""The one timing function of the project: CUDA events around a call, L2 flushed before each trial.

Used on both sides of the evaluator (the trusted process times the PyTorch reference, the
child's harness code times the candidate or the naive baseline) and by dataset measurement, so
every figure the project reports comes from the same procedure:
  warm-up calls; then per trial: write `flush_bytes` (evicts the 60 MiB L2 of an H200) on the
  legacy default stream, record a start event, call, record an end event on the legacy default
  stream (it waits for every blocking stream), synchronise the whole device so no trial's work
  leaks into the next. Trials stop at `max_trials` or when `budget_s` of wall time is spent.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable


def time_calls(driver, call: Callable[[], None], flush_ptr: int, flush_bytes: int,
               warmup: int, max_trials: int, budget_s: float) -> list[float]:
    """Per-trial milliseconds of `call()`; `driver` is a cuda_driver.Driver bound to the device."""
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


def summarize(times_ms: list[float]):
    """Median, interquartile range and minimum of trial times, as a records.Timing."""
    from pipeline.records import Timing  # imported here: the child process uses time_calls only
    if not times_ms:
        raise ValueError("summarize() needs at least one trial time")
    ordered = sorted(times_ms)
    q = statistics.quantiles(ordered, n=4) if len(ordered) >= 2 else [ordered[0]] * 3
    return Timing(median_ms=statistics.median(ordered), iqr_ms=q[2] - q[0], min_ms=ordered[0], trials=len(ordered))
