"""The generated task dataset on CPU: counts, family shares, unique references, task shape, the
static gate, nvcc and gcc on samples, and the `generated` task source.

The whole set compiles with `cudaperf data build --check-compile` (minutes); here a
sample of one task per family and kind is compiled and its C references run."""
import math
import re

import pytest

from pipeline.dataset.checks import check_c_references, check_compile, check_torch_references, sample_tasks
from pipeline.tasks.generate import (cached_tasks, forward_operators, generate_tasks, kernelbench_overlap,
                                    normalised_reference)
from pipeline.tasks.splits import split_of_family
from pipeline.core.records import Candidate, Task
from pipeline.tasks import TaskError, config_params, eval_expr, load_tasks, validate_task


@pytest.fixture(scope="session")
def tasks() -> list[Task]:
    return list(cached_tasks(0))


@pytest.fixture(scope="session")
def sample(tasks) -> list[Task]:
    """One task per (family, kind)."""
    return sample_tasks(tasks, per_group=1)


def test_counts_meet_the_dataset_targets(tasks):
    kinds = [t.kind for t in tasks]
    assert kinds.count("c2cuda") >= 3000
    assert kinds.count("torch2cuda") >= 1000
    assert len({t.family for t in tasks}) >= 40


def test_no_family_holds_more_than_five_percent(tasks):
    counts: dict[str, int] = {}
    for t in tasks:
        counts[t.family] = counts.get(t.family, 0) + 1
    worst = max(counts, key=counts.get)
    assert counts[worst] <= 0.05 * len(tasks), f"{worst}: {counts[worst]} of {len(tasks)}"


def test_normalised_references_are_unique(tasks):
    seen: dict[str, str] = {}
    for t in tasks:
        key = normalised_reference(t)
        assert key not in seen, f"{t.id} has the same normalised reference as {seen[key]}"
        seen[key] = t.id


def _c_task(ref: str) -> Task:
    return Task(id="c2cuda/x/y", kind="c2cuda", family="x", reference=ref, configs=[])


def _py_task(ref: str) -> Task:
    return Task(id="torch2cuda/x/y", kind="torch2cuda", family="x", reference=ref, configs=[])


def test_normaliser_ignores_names_comments_and_layout_but_not_operators():
    a = "#include <math.h>\nvoid f(int n, const float* x, float* y) {  // apply\n  for (int i = 0; i < n; ++i) y[i] = expf(x[i]);\n}"
    b = "void g(int m,const float*in,float*out){/* c */for(int k=0;k<m;++k)out[k]=expf(in[k]);}"
    c = "void f(int n, const float* x, float* y) { for (int i = 0; i < n; ++i) y[i] = tanhf(x[i]); }"
    d = "void f(int n, const unsigned* x, unsigned* y) { for (int i = 0; i < n; ++i) y[i] = x[i] * 0x85ebca6bu; }"
    e = d.replace("0x85ebca6bu", "0xc2b2ae35u")
    assert normalised_reference(_c_task(a)) == normalised_reference(_c_task(b))
    assert normalised_reference(_c_task(a)) != normalised_reference(_c_task(c))
    assert normalised_reference(_c_task(d)) != normalised_reference(_c_task(e))
    p = ("import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        # relu\n"
         "        return torch.relu(x)\n\n\nn = 16\n\n\ndef get_inputs():\n    return [torch.randn(n)]\n")
    q = p.replace("x", "inp").replace("n = 16", "n = 4096").replace("# relu", "")
    r = p.replace("torch.relu", "torch.sigmoid")
    assert normalised_reference(_py_task(p)) == normalised_reference(_py_task(q))
    assert normalised_reference(_py_task(p)) != normalised_reference(_py_task(r))


def _is_odd_size(value) -> bool:
    return isinstance(value, int) and value > 1 and value % 32 != 0


@pytest.mark.integration
def test_every_task_is_complete_and_valid(tasks):
    for t in tasks:
        assert validate_task(t) == [], t.id
        assert re.fullmatch(r"(c2cuda|torch2cuda)/\w+/\w+", t.id), t.id
        kind, family, variant = t.id.split("/")
        assert kind == t.kind and family == t.family and variant
        assert t.kind == "torch2cuda" or t.function.isidentifier(), t.id
        assert len(t.configs) >= 3, t.id
        assert any(c.time for c in t.configs) and any(c.check and not c.time for c in t.configs), t.id
        assert any(_is_odd_size(v) for c in t.configs for v in c.params.values()), f"{t.id}: no size off the block grid"
        assert len(t.implementations) >= 3, t.id
        assert len({i.name for i in t.implementations}) == len(t.implementations), t.id
        assert all(i.strategy for i in t.implementations), t.id
        if t.kind == "c2cuda":
            assert t.implementations[0].strategy == "naive", t.id
        for c in t.configs:
            params = config_params(t, c)
            assert eval_expr(t.work.bytes, params) > 0 and math.isfinite(eval_expr(t.work.flops, params)), (t.id, c.name)


@pytest.mark.parametrize("seed", [0, 7])
def test_test_split_families_carry_five_implementations(tasks, seed):
    for t in tasks:
        if split_of_family(t.family, seed) == "test":
            assert len(t.implementations) >= 5, t.id


@pytest.mark.integration
def test_generation_is_deterministic_and_seeded(tasks):
    import numpy as np
    from pipeline.tasks.families import elementwise
    again = generate_tasks(0)
    assert [t.id for t in again] == [t.id for t in tasks]
    assert [t.content_hash() for t in again[::97]] == [t.content_hash() for t in tasks[::97]]
    ids = [{t.id for t in elementwise.generate(np.random.default_rng([seed, 1]))} for seed in (0, 1)]
    assert ids[0] != ids[1]


@pytest.mark.integration
def test_sample_passes_the_static_gate(tasks):
    from pipeline.evaluation.gate import check_candidate
    for t in sample_tasks(tasks, per_group=2):
        for impl in t.implementations:
            errors = [f.message for f in check_candidate(Candidate(task_id=t.id, code=impl.code, format=impl.format), t)
                      if f.severity == "error"]
            assert not errors, f"{t.id}/{impl.name}: {errors}"


@pytest.mark.integration
def test_sample_compiles_with_nvcc(sample, compile_cfg):
    assert check_compile(sample, workers=2, batch=60, compile_cfg=compile_cfg) == []


@pytest.mark.integration
def test_sample_c_references_compile_and_run(sample, compile_cfg):
    c_tasks = [t for t in sample if t.kind == "c2cuda"]
    assert len(c_tasks) >= 40
    assert check_c_references(c_tasks, compile_cfg=compile_cfg) == []


def test_sample_torch_references_run_on_cpu(sample):
    torch_tasks = [t for t in sample if t.kind == "torch2cuda"]
    assert len(torch_tasks) >= 30
    assert check_torch_references(torch_tasks) == []


def test_c_reference_check_catches_a_reference_that_ignores_its_input(tasks, compile_cfg):
    t = next(t for t in tasks if t.id.startswith("c2cuda/elementwise_unary/"))
    broken = t.model_copy(update={"reference": re.sub(r"r = [^;]*;", "r = 1.0;", t.reference, count=1)})
    failures = check_c_references([broken], compile_cfg=compile_cfg)
    assert failures and "do not depend on the inputs" in failures[0]


@pytest.mark.integration
def test_compile_check_names_the_failing_implementation(tasks, compile_cfg):
    t = next(t for t in tasks if t.kind == "c2cuda")
    bad = t.implementations[1].model_copy(update={"code": t.implementations[1].code.replace("run(", "run_(", 1)})
    broken = t.model_copy(update={"implementations": [t.implementations[0], bad]})
    failures = check_compile([broken], batch=10, compile_cfg=compile_cfg)
    assert len(failures) == 1 and failures[0].startswith(f"{t.id}/{bad.name}:")


def test_kernelbench_overlap_counts_operator_patterns():
    def module(body):
        return (f"import torch\nimport torch.nn.functional as F\n\n\nclass Model(torch.nn.Module):\n"
                f"    def forward(self, x, w):\n        return {body}\n")
    refs = [module("torch.relu(x)"), module("F.gelu(torch.matmul(x, w))"), module("torch.relu(x) * x.tanh()"),
            module("x.cumsum(-1)")]
    tasks = [_py_task(r) for r in refs]
    assert forward_operators(refs[1]) == {"gelu", "matmul"}
    assert kernelbench_overlap(tasks) == {"torch2cuda": 4, "level1_pattern": 2, "level2_pattern": 1}


@pytest.mark.integration
def test_generated_task_source_splits_by_family(tasks):
    parts = {s: load_tasks(f"generated:{s}") for s in ("train", "heldout", "val", "test")}
    assert sum(len(p) for p in parts.values()) == len(load_tasks("generated")) == len(tasks)
    families = {s: {t.family for t in p} for s, p in parts.items()}
    assert not (families["train"] & families["val"]) and not (families["train"] & families["test"])
    assert families["heldout"] <= families["train"]  # unseen tasks of the training families
    assert all(split_of_family(f) == ("train" if s == "heldout" else s) for s, fams in families.items() for f in fams)
    with pytest.raises(TaskError, match="unknown split"):
        load_tasks("generated:holdout")
