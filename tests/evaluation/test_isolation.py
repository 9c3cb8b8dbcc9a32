"""From the attacker's side: one answer's input, or our own code failing on it, never breaks the others'
evaluation; no verdict is given without the tool it needs; a cached result is served only under the
settings and tools that made it. CPU only (real nvcc, no GPU: honest answers are `not_executed`)."""
import math
import shutil
import sys

import pytest

from pipeline.core.config import CompileSection, EvalSection, RewardSection
from pipeline.core.records import Candidate, ConfigResult, EvalResult, Timing
from pipeline.evaluation.evaluator import Evaluator
from pipeline.evaluation.feedback import format_feedback
from pipeline.evaluation.intake import finite_result
from pipeline.evaluation.result_cache import LEFT_OUT, settings_digest
from pipeline.rl.reward import compute_reward, reward_notes


@pytest.fixture(scope="module")
def ev(compile_cfg):
    return Evaluator(EvalSection(result_cache_dir=""), compile_cfg, use_gpu=False)


@pytest.fixture(scope="module")
def saxpy(builtin_tasks):
    return builtin_tasks["c2cuda/saxpy"]


def honest(task, tag=""):
    return Candidate(task_id=task.id, code=task.implementations[0].code + tag, format="c2cuda")


class _Unencodable(str):
    def encode(self, *a, **k):
        raise RuntimeError("encode of a candidate's own type")

    def __format__(self, spec):
        raise RuntimeError("format of a candidate's own type")


class _EqualsAll(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


class _Unprintable(int):
    def __repr__(self):
        raise RuntimeError("repr of a candidate's own type")

    __str__ = __repr__


BAD_INPUTS = {  # name -> (how to make the candidate from honest code, the rule of its verdict)
    "surrogate in code": (lambda c: Candidate(task_id=c.task_id, code=c.code + "// \ud800\n", format=c.format),
                          "unreadable-text"),
    "surrogate in a load_inline cuda_sources": (
        lambda c: Candidate(task_id=c.task_id, format="kernelbench", code="from torch.utils.cpp_extension import "
                            "load_inline\nm = load_inline(name='m', cpp_sources='', cuda_sources='\ud800', "
                            "functions=['f'])\n"), "unreadable-text"),
    "NUL byte": (lambda c: Candidate(task_id=c.task_id, code=c.code + "/*\0*/\n", format=c.format), "nul-byte"),
    "absurd size": (lambda c: Candidate(task_id=c.task_id, code=c.code + "//" + "x" * (64 << 20), format=c.format),
                    "too-large"),
    "code of the wrong type": (lambda c: Candidate.model_construct(task_id=c.task_id, code=b"__global__", format=c.format,
                                                                   turn=0), "malformed-candidate"),
    "code missing": (lambda c: Candidate.model_construct(task_id=c.task_id, format=c.format, turn=0),
                     "malformed-candidate"),
    "unknown format": (lambda c: c.model_copy(update={"format": "fortran"}), "malformed-candidate"),
    "turn of the wrong type": (lambda c: c.model_copy(update={"turn": "1"}), "malformed-candidate"),
    # subclasses that validation never makes, redefining what the evaluator calls on them
    "code a str subclass whose encode raises": (lambda c: c.model_copy(update={"code": _Unencodable(c.code)}),
                                                "malformed-candidate"),
    "format a str subclass equal to anything": (lambda c: c.model_copy(update={"format": _EqualsAll("x")}),
                                                "malformed-candidate"),
    "turn an int subclass whose str raises": (lambda c: c.model_copy(update={"turn": _Unprintable(1)}),
                                              "malformed-candidate"),
}


@pytest.mark.integration
@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_one_unreadable_answer_is_its_own_verdict_and_the_others_are_judged(ev, saxpy, name):
    make, rule = BAD_INPUTS[name]
    bad = make(honest(saxpy))
    results = ev.evaluate(saxpy, [honest(saxpy), bad, honest(saxpy, "\n// second")])
    assert [r.verdict for r in results] == ["not_executed", "format_error", "not_executed"], results[1].reason
    assert results[1].flags == [rule] and results[1].reason
    assert results[1].reason.isascii()  # the reason quotes nothing the next prompt or a JSON file cannot hold
    text = format_feedback(results[1])
    text.encode("utf-8")
    assert results[1].model_dump_json()  # the result itself serialises (cache, logs)
    reward, _ = compute_reward(results[1], RewardSection())
    assert reward == RewardSection().format_error


@pytest.mark.integration
def test_an_exception_of_our_own_code_in_one_candidate_is_its_evaluator_error(compile_cfg, saxpy, tmp_path,
                                                                               monkeypatch):
    """Our structure analysis raising on one candidate: that candidate is `evaluator_error` naming the exception
    (never cached, rewarded nor blamed); the candidates before and after it are judged as usual."""
    ev = Evaluator(EvalSection(result_cache_dir=str(tmp_path / "results")), compile_cfg, use_gpu=False)
    real = ev.structure_features

    def structure(cand, comp, *entry):
        if "poison" in cand.code:
            raise ZeroDivisionError("float division by zero")
        return real(cand, comp, *entry)
    monkeypatch.setattr(ev, "structure_features", structure)
    cands = [honest(saxpy), honest(saxpy, "\n// poison"), honest(saxpy, "\n// other")]
    results = ev.evaluate(saxpy, cands)
    assert [r.verdict for r in results] == ["not_executed", "evaluator_error", "not_executed"]
    assert "ZeroDivisionError: float division by zero" in results[1].reason and "gate and compile" in results[1].reason
    assert compute_reward(results[1], RewardSection())[0] == 0.0
    monkeypatch.setattr(ev, "structure_features", real)  # the failure was ours: evaluated afresh, not served
    again = ev.evaluate(saxpy, cands)
    assert again[1].verdict == "not_executed" and not again[1].cached and again[0].cached


@pytest.mark.integration
def test_an_exception_while_reporting_one_candidate_leaves_the_others(ev, saxpy, monkeypatch):
    real = ev._not_executed

    def report(task, cand, prep):
        if "poison" in cand.code:
            raise KeyError("struct.kernels")
        return real(task, cand, prep)
    monkeypatch.setattr(ev, "_not_executed", report)
    results = ev.evaluate(saxpy, [honest(saxpy, "\n// a1"), honest(saxpy, "\n// poison 2"), honest(saxpy, "\n// a3")])
    assert [r.verdict for r in results] == ["not_executed", "evaluator_error", "not_executed"]
    assert "KeyError" in results[1].reason


@pytest.mark.parametrize("field,value", [("speedup", math.nan), ("speedup", math.inf), ("speedup", 0.0),
                                         ("speedup_compiled", math.nan)])
def test_a_non_finite_speedup_is_an_evaluator_error_never_a_correct_verdict(field, value):
    r = EvalResult(task_id="t", candidate_hash="h", format="c2cuda", verdict="correct", **{"speedup": 2.0, field: value})
    out = finite_result(r)
    assert out.verdict == "evaluator_error" and field in out.reason and out.speedup is None


@pytest.mark.parametrize("value", [10 ** 400, -(2 ** 1100)], ids=["10**400", "-2**1100"])
def test_an_int_feature_past_floats_range_never_reaches_the_reward(value):
    r = EvalResult(task_id="t", candidate_hash="h", format="c2cuda", verdict="not_executed",
                   features={"struct.score": value, "static.global_loads": value, "occupancy": 0.5})
    out = finite_result(r)
    assert out.features == {"occupancy": 0.5}
    cfg = RewardSection(struct_not_executed=True)
    assert compute_reward(r, cfg) == compute_reward(out, cfg)  # the reward never raises on it either
    assert reward_notes(r)


def test_a_non_finite_time_or_feature_never_leaves_the_evaluator():
    t = Timing(median_ms=math.nan, iqr_ms=0.0, min_ms=0.0, trials=3)
    r = EvalResult(task_id="t", candidate_hash="h", format="c2cuda", verdict="correct", speedup=2.0,
                   configs=[ConfigResult(name="large", time=t)], features={"struct.score": math.nan, "occupancy": 0.5})
    out = finite_result(r)
    assert out.verdict == "evaluator_error" and "large time" in out.reason
    assert out.features == {"occupancy": 0.5}
    assert any(f.rule == "non-finite-feature" and "struct.score" in f.message for f in out.findings)
    kept = EvalResult(task_id="t", candidate_hash="h", format="c2cuda", verdict="correct", speedup=2.0)
    assert finite_result(kept) is kept


# --- no verdict without its tool ------------------------------------------------------------------------------
def test_without_nvcc_and_with_allow_unbuilt_nothing_is_said_to_compile(saxpy, tmp_path):
    """nvcc missing, allow_unbuilt on: a correct file and one with a syntax error are both `unbuilt`, earn
    nothing under every reward config, and no feedback says they compile; nothing is cached."""
    cfg = CompileSection(nvcc=str(tmp_path / "no-such-nvcc"), cache_dir=str(tmp_path / "compile"))
    ev = Evaluator(EvalSection(result_cache_dir=str(tmp_path / "results"), allow_unbuilt=True), cfg, use_gpu=False)
    broken = honest(saxpy).code.replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + ;")
    results = ev.evaluate(saxpy, [honest(saxpy), Candidate(task_id=saxpy.id, code=broken, format="c2cuda")])
    for r in results:
        assert r.verdict == "unbuilt", r.reason
        assert "no-such-nvcc" in r.reason
        assert "compiles" not in format_feedback(r) and "not built" in format_feedback(r)
        for reward_cfg in (RewardSection(), RewardSection(struct_not_executed=True, compiled_value=0.2)):
            reward, terms = compute_reward(r, reward_cfg)
            assert reward == 0.0 and set(terms.values()) == {0.0}
    assert not ev.evaluate(saxpy, [honest(saxpy)])[0].cached


def test_the_cache_key_changes_with_the_toolchain(saxpy, tmp_path, compile_cfg):
    here = Evaluator(EvalSection(result_cache_dir=""), compile_cfg, use_gpu=False)
    missing = Evaluator(EvalSection(result_cache_dir=""), compile_cfg.model_copy(
        update={"nvcc": str(tmp_path / "no-such-nvcc")}), use_gpu=False)
    assert here._cache_key(saxpy, honest(saxpy)) != missing._cache_key(saxpy, honest(saxpy))


def _changed(value):
    """A different value of the same type as `value`."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 2 + 1
    if isinstance(value, list):
        return value + ["-DX"]
    if isinstance(value, dict):
        return {**value, "float32": 1.0}
    if hasattr(value, "model_fields"):  # a nested section (eval.limits): one of its fields changed
        first = next(iter(type(value).model_fields))
        return value.model_copy(update={first: _changed(getattr(value, first))})
    return {"bracket": "every_round", "strict": "kernelbench", "bwrap": "none"}.get(value, value + "x")


@pytest.mark.parametrize("section,name", [("eval", n) for n in EvalSection.model_fields] +
                                         [("compile", n) for n in CompileSection.model_fields])
def test_every_verdict_relevant_setting_changes_the_cache_key(section, name):
    """Each field of the eval and compile sections changes the settings digest, but the ones LEFT_OUT names
    with a reason (paths of caches, worker counts...), which must not change it."""
    eval_cfg, compile_cfg = EvalSection(), CompileSection()
    base = settings_digest(eval_cfg, compile_cfg)
    target = eval_cfg if section == "eval" else compile_cfg
    new = shutil.which(target.nvcc) if name == "nvcc" else _changed(getattr(target, name))  # same nvcc, by its path
    changed = target.model_copy(update={name: new})
    other = settings_digest(changed, compile_cfg) if section == "eval" else settings_digest(eval_cfg, changed)
    if f"{section}.{name}" in LEFT_OUT:
        assert other == base
    else:
        assert other != base, f"{section}.{name} is not in the cache key; add it or name it in LEFT_OUT with why"


def test_left_out_names_only_fields_that_exist():
    fields = {f"eval.{n}" for n in EvalSection.model_fields} | {f"compile.{n}" for n in CompileSection.model_fields}
    assert set(LEFT_OUT) <= fields


def test_the_cache_key_changes_with_torch(monkeypatch):
    import types
    base = settings_digest(EvalSection(), CompileSection())
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="0.0", version=types.SimpleNamespace(
        cuda="1.0")))
    assert settings_digest(EvalSection(), CompileSection()) != base


# --- the GPU group path, with its GPU parts stood in for (the real one runs under -m gpu) ------------------------
def test_on_the_gpu_path_one_candidate_failing_to_start_or_run_leaves_the_others(ev, saxpy, monkeypatch):
    """`_run_all` over [ok, start raises, ok, run raises, ok]: each failure is that candidate's evaluator_error,
    naming the exception; the others get their own results, and every child started is closed."""
    import types
    import pipeline.evaluation.runner as runner
    closed = []

    class Child:
        def __init__(self, k):
            self.k = k

        def freeze(self): pass

        def thaw(self): pass

        def close(self):
            closed.append(self.k)

    def start_candidate(ev_, group, cand, prep, take):
        if "start-fails" in cand.code:
            raise OSError("no such file: the warm child's socket")
        return runner.Started(Child(cand.code), {}, None, 0.0)

    def run_candidate(ev_, group, cand, prep, started):
        if "run-fails" in cand.code:
            raise IndexError("list index out of range")
        started.child.close()
        return ev_.result_of(group.task, cand, "correct", speedup=2.0)
    monkeypatch.setattr(runner, "start_candidate", start_candidate)
    monkeypatch.setattr(runner, "run_candidate", run_candidate)
    monkeypatch.setattr(ev, "driver", types.SimpleNamespace(make_current=lambda: None), raising=False)
    group = types.SimpleNamespace(task=saxpy, configs=[])
    cands = [honest(saxpy, f"\n// {tag}") for tag in ("a", "start-fails", "b", "run-fails", "c")]
    preps = [types.SimpleNamespace(findings=[], stage_s={}, comp=types.SimpleNamespace(ptxas_log=""), features={})] * 5
    results = [None] * 5
    ev._run_all(group, cands, preps, list(range(5)), results)
    assert [r.verdict for r in results] == ["correct", "evaluator_error", "correct", "evaluator_error", "correct"]
    assert "OSError" in results[1].reason and "IndexError: list index out of range" in results[3].reason
    assert sorted(closed) == sorted(c.code for k, c in enumerate(cands) if k != 1)


def test_the_ranker_reads_an_infinite_feature_as_missing():
    from pipeline.ranker.features import ALLOWED_FEATURES, feature_vector
    name = next(n for n in ALLOWED_FEATURES if not n.startswith("occ.limiter="))
    vector = feature_vector({name: math.inf}, {})
    assert math.isnan(vector[list(ALLOWED_FEATURES).index(name)])
