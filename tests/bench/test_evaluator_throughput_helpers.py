"""benchmarks/evaluator_throughput.py's pure helpers on CPU: the stage breakdown of a run and the
GRPO-shaped group of distinct samples."""
import pytest


@pytest.fixture(scope="module")
def bench(benchmark_script):
    return benchmark_script("evaluator_throughput")


def test_stage_breakdown_sums_per_stage_and_shares_the_top_level_stages(bench):
    per = {"a": {"stage_s": {"gate": 1.0, "compile": 3.0, "timing": 4.0, "timing_candidate": 1.0}},
           "b": {"stage_s": {"gate": 1.0, "compile": 1.0, "timing": 2.0, "timing_candidate": 0.5}},
           "lost": {"stage_s": {}}}
    out = bench.stage_breakdown(per)
    assert list(out)[:2] == ["timing", "compile"]  # largest first
    assert out["timing"] == {"total_s": 6.0, "mean_s": 3.0, "share": 0.5}
    assert out["gate"]["share"] == pytest.approx(2 / 12)
    assert out["timing_candidate"]["total_s"] == 1.5 and out["timing_candidate"]["share"] == pytest.approx(1.5 / 12)
    assert sum(out[s]["share"] for s in bench.TOP_STAGES if s in out) == pytest.approx(1.0)


def test_the_group_has_distinct_candidates_of_the_tasks_implementations(bench):
    from pipeline.tasks import load_tasks
    task = next(t for t in load_tasks("builtin") if t.id == "c2cuda/saxpy")
    group = bench.sample_group(task, 64)
    assert len(group) == 64 and len({c.code for c in group}) == 64
    impls = [i for i in task.implementations if i.format in ("c2cuda", "light")]
    assert all(c.code.startswith(impls[k % len(impls)].code) for k, c in enumerate(group))


def test_the_realistic_group_is_the_implementations_and_their_mutants(bench):
    """64 distinct answers: every c2cuda implementation of the task and its source mutants, the ones that keep the
    answer correct (a smaller block) beside ones that break it (an early return, a bound read past the end) and one
    that does not compile; repeats only past their number, each marked."""
    from pipeline.tasks import load_tasks
    task = next(t for t in load_tasks("builtin") if t.id == "c2cuda/saxpy")
    group = bench.realistic_group(task, 64)
    assert len(group) == 64 and len({c.code for c in group}) == 64 and {c.format for c in group} == {"c2cuda"}
    impls = [i for i in task.implementations if i.format == "c2cuda"]
    distinct = len(impls) + sum(len(bench.source_mutants(i.code)) for i in impls)
    assert distinct >= 4 * len(impls)
    assert [c.code for c in group[:len(impls)]] == [i.code for i in impls]
    assert all("// sample" not in c.code for c in group[:distinct]) and all("// sample" in c.code for c in group[distinct:])
    naive = dict(bench.source_mutants(impls[0].code))
    assert "if (blockIdx.x == 1) return;" in naive["skip_block"]
    assert "a * x[i] - y[i]" in naive["minus"] and "i <= n" in naive["bound_le"]
    assert naive["unclosed"].count("{") == naive["unclosed"].count("}") + 1
    assert bench.source_mutants("int main() { return 0; }") == [("unclosed", "int main() { return 0; ")]


def test_each_candidates_timed_rounds_and_the_runs_summary(bench):
    from pipeline.core.records import ConfigResult, Timing
    from types import SimpleNamespace
    t = lambda trials: Timing(median_ms=1.0, iqr_ms=0.1, min_ms=0.9, trials=trials)  # noqa: E731
    settled = SimpleNamespace(configs=[ConfigResult(name="small"), ConfigResult(
        name="large", time=t(36), calls_per_batch=12, timing_stop="settled", baseline_drift=0.004)])
    drifted = SimpleNamespace(configs=[ConfigResult(name="large", time=t(108), calls_per_batch=9,
                                                    timing_stop="trials", baseline_drift=0.05)])
    a, b = bench.timed_rounds_of(settled), bench.timed_rounds_of(drifted)
    assert list(a) == ["large"] and a["large"]["rounds"] == 3 and a["large"]["stop"] == "settled"
    out = bench.rounds_summary({"a": {"timed": a}, "b": {"timed": b}, "lost": {"verdict": "lost"}})
    assert out == {"configurations": 2, "rounds_mean": 7.5, "rounds_max": 12,
                   "stops": {"settled": 1, "trials": 1}, "drift_fallbacks": 1}
    assert bench.rounds_summary({}) == {}


def test_the_lock_trace_bounds_the_rate_by_its_exclusive_and_shared_time(bench, capsys):
    """From a run's lock report: per candidate, the GPU's exclusive and shared seconds and the rates they allow
    (the windows alone; the GPU as held); a trace with nothing held bounds nothing."""
    from pipeline.evaluation.gpu.lock_trace import lock_report
    records = [{"lock": "g", "pid": 1, "mode": "exclusive", "why": "w", "requested": 0.0, "granted": 0.0,
                "released": 1.0},
               {"lock": "g", "pid": 2, "mode": "shared", "why": "c", "requested": 0.5, "granted": 1.0, "released": 4.0},
               {"lock": "g", "pid": 3, "mode": "shared", "why": "c", "requested": 2.0, "granted": 2.0, "released": 5.0},
               {"lock": "g", "pid": 1, "mode": "exclusive", "why": "w", "requested": 5.0, "granted": 6.0,
                "released": 7.0}]
    bounds = bench.rate_bounds(lock_report(records), candidates=4)
    assert bounds["exclusive_s_per_candidate"] == pytest.approx(0.5)  # 2 s over 4 candidates
    assert bounds["shared_s_per_candidate"] == pytest.approx(1.0)  # the union 1-5 s, not the 6 s held in sum
    assert bounds["per_minute_if_only_windows"] == pytest.approx(120.0)
    assert bounds["per_minute_as_held"] == pytest.approx(40.0)
    bench.print_lock_trace({"lock_trace": lock_report(records), "rate_bounds": bounds})
    assert "exclusive 0.500 s (at most 120 a minute" in capsys.readouterr().out
    for report in (lock_report([]), lock_report(records)):  # no candidate: no rate, whatever was held
        empty = bench.rate_bounds(report, candidates=0)
        assert empty["per_minute_if_only_windows"] is None and empty["exclusive_s_per_candidate"] is None
        assert bench.bounds_line(empty) == "per candidate: no candidate in the run"
