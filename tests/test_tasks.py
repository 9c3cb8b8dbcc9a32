"""Task loading (pipeline/tasks/) and the built-in task set: schema, validation messages,
KernelBench conversion, CLI arguments, and that every built-in implementation and C reference
compiles (real nvcc and gcc)."""
from __future__ import annotations

import ast
import concurrent.futures as cf
import ctypes
import math
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from pipeline.core.records import Task
from pipeline.tasks import (
    TaskError, arg_dtype, config_params, eval_expr, expr_names, is_pointer, load_candidate_file,
    load_kernelbench, load_task_arg, load_task_file, load_tasks, parse_init,
)

DATA = Path(__file__).parent / "data"
KB_ROOT = DATA / "kernelbench"
BUILTIN = load_tasks("builtin")


def _pointer_sizes(task: Task, cfg) -> list[int]:
    return [int(eval_expr(a.size, cfg.params)) for a in task.args if is_pointer(a)]


# ---------------------------------------------------------------------------------------------
# The built-in set
# ---------------------------------------------------------------------------------------------

def test_builtin_ids_unique_and_enough_of_each_kind():
    ids = [t.id for t in BUILTIN]
    assert len(ids) == len(set(ids))
    assert ids == sorted(ids)
    for kind in ("c2cuda", "torch2cuda"):
        tasks = [t for t in BUILTIN if t.kind == kind]
        assert len(tasks) >= 10, kind
        families = [t.family for t in tasks]
        assert len(families) == len(set(families)), f"{kind} families repeat: {families}"
        for t in tasks:
            assert t.id.startswith(kind + "/")


@pytest.mark.parametrize("task", BUILTIN, ids=[t.id for t in BUILTIN])
def test_builtin_task_is_complete(task: Task):
    assert task.description and task.family
    assert len(task.configs) >= 3
    assert any(c.time for c in task.configs), "needs a timing config"
    assert sum(1 for c in task.configs if c.check and not c.time) >= 2, "needs small check configs"
    light_or_c = [i for i in task.implementations if i.format != "kernelbench"]
    assert len(light_or_c) >= 3
    assert task.implementations[0].strategy == "naive"
    assert len({i.strategy for i in light_or_c}) >= 3, "strategies must differ"
    assert len({i.name for i in task.implementations}) == len(task.implementations)
    assert task.baseline() is task.implementations[0]
    # some configuration has a size that is not a multiple of 256 (tails must be handled)
    if task.kind == "c2cuda":
        sizes = [s for c in task.configs for s in _pointer_sizes(task, c)]
    else:
        sizes = [int(v) for c in task.configs for v in c.params.values()]
    assert any(s % 256 for s in sizes)
    for cfg in task.configs:
        flops = eval_expr(task.work.flops, config_params(task, cfg))
        nbytes = eval_expr(task.work.bytes, config_params(task, cfg))
        assert flops >= 0 and nbytes > 0
    # the round trip through JSON keeps everything
    assert Task.model_validate_json(task.model_dump_json()) == task


def test_builtin_timing_configs_are_sized_for_the_gpu():
    """Timed configs move at least 32 MB or do at least 1 GFLOP (~20 us and up on an H100)."""
    for task in BUILTIN:
        for cfg in task.configs:
            if cfg.time:
                p = config_params(task, cfg)
                big = eval_expr(task.work.bytes, p) >= 32e6 or eval_expr(task.work.flops, p) >= 1e9
                assert big, f"{task.id} config {cfg.name} is too small to time"


def test_builtin_c2cuda_args_are_well_formed():
    for task in (t for t in BUILTIN if t.kind == "c2cuda"):
        for a in task.args:
            arg_dtype(a)  # a supported C type
            if is_pointer(a) and a.role in ("in", "inout"):
                kind, _, _ = parse_init(a.init)
                assert kind in ("uniform", "randint"), (task.id, a.name)
                if arg_dtype(a).startswith("int"):
                    assert kind == "randint", (task.id, a.name)
        assert any(a.role in ("out", "inout") for a in task.args)


def test_builtin_torch2cuda_references_and_kernelbench_implementations():
    kernelbench_tasks = 0
    for task in (t for t in BUILTIN if t.kind == "torch2cuda"):
        tree = ast.parse(task.reference)
        top = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        assert {"Model", "get_inputs", "get_init_inputs"} <= top
        assert "float16" not in task.reference and "cuda" not in task.reference  # float32, CPU inputs
        for impl in task.implementations:
            if impl.format != "kernelbench":
                continue
            kernelbench_tasks += 1
            mod = ast.parse(impl.code)
            constants = {t.id for n in mod.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
                         and isinstance(n.value.value, str) for t in n.targets if isinstance(t, ast.Name)}
            calls = [n for n in ast.walk(mod) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "load_inline"]
            assert len(calls) == 1
            for kw in calls[0].keywords:
                if kw.arg in ("cpp_sources", "cuda_sources"):
                    assert isinstance(kw.value, ast.Name) and kw.value.id in constants, (task.id, kw.arg)
            model_new = next(n for n in mod.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
            forward = next(n for n in model_new.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
            for call in (n for n in ast.walk(forward) if isinstance(n, ast.Call)):
                name = call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id
                assert name == "contiguous" or name.endswith("_cuda"), (task.id, name)
    assert kernelbench_tasks >= 3


# ---------------------------------------------------------------------------------------------
# The built-in references run on the CPU and write every output element
# ---------------------------------------------------------------------------------------------

_CTYPES = {"float32": ctypes.c_float, "float64": ctypes.c_double, "int32": ctypes.c_int32,
           "uint32": ctypes.c_uint32, "int64": ctypes.c_int64, "uint64": ctypes.c_uint64}


@pytest.fixture(scope="module")
def c_references(tmp_path_factory):
    assert shutil.which("gcc"), "gcc is not on PATH; the tests need it (apt-get install gcc)"
    out = {}
    for task in (t for t in BUILTIN if t.kind == "c2cuda"):
        d = tmp_path_factory.mktemp(task.id.replace("/", "_"))
        (d / "ref.c").write_text(task.reference)
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(d / "ref.so"), str(d / "ref.c"), "-lm"],
                       check=True, capture_output=True)
        out[task.id] = ctypes.CDLL(str(d / "ref.so"))
    return out


@pytest.mark.parametrize("task", [t for t in BUILTIN if t.kind == "c2cuda"], ids=lambda t: t.id)
def test_c_reference_writes_every_output(task: Task, c_references):
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(0)
    fn = getattr(c_references[task.id], task.function)
    for cfg in (c for c in task.configs if not c.time):
        values, arrays = [], {}
        for a in task.args:
            dtype = np.dtype(arg_dtype(a))
            if not is_pointer(a):
                values.append(_CTYPES[dtype.name](parse_init(a.init, cfg.params)[1]))
                continue
            n = int(eval_expr(a.size, cfg.params))
            if a.role == "out":
                arr = np.full(n, np.nan if dtype.kind == "f" else -123456789, dtype=dtype)
            else:
                kind, lo, hi = parse_init(a.init, cfg.params)
                arr = (rng.uniform(lo, hi, n) if kind == "uniform" else rng.integers(lo, hi, n)).astype(dtype)
            arrays[a.name] = (a, arr, arr.copy())
            values.append(ctypes.c_void_p(arr.ctypes.data))
        fn(*values)
        for a, arr, before in arrays.values():
            if a.role == "in":
                assert np.array_equal(arr, before), f"{task.id}/{cfg.name}: input {a.name} changed"
            elif a.role == "out":
                assert np.all(np.isfinite(arr)) if arr.dtype.kind == "f" else not np.any(arr == -123456789), \
                    f"{task.id}/{cfg.name}: output {a.name} not fully written"


@pytest.mark.parametrize("task", [t for t in BUILTIN if t.kind == "torch2cuda"], ids=lambda t: t.id)
def test_torch_reference_runs_on_small_configs(task: Task):
    torch = pytest.importorskip("torch")
    for cfg in (c for c in task.configs if not c.time):
        scope: dict = {}
        exec(compile(task.reference, task.id, "exec"), scope)
        scope.update(cfg.params)
        torch.manual_seed(0)
        model = scope["Model"](*scope["get_init_inputs"]())
        inputs = scope["get_inputs"]()
        assert all(x.dtype == torch.float32 and x.device.type == "cpu" for x in inputs)
        params = list(model.state_dict().values())
        assert all(p.dtype == torch.float32 for p in params)
        with torch.no_grad():
            out = model(*inputs)
        assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
        assert torch.isfinite(out).all()


# ---------------------------------------------------------------------------------------------
# Every built-in CUDA implementation and C reference compiles
# ---------------------------------------------------------------------------------------------

def _compile(job):
    name, ext, code, workdir = job
    src = workdir / f"src.{ext}"
    src.write_text(code)
    if ext == "c":
        cmd = ["gcc", "-O2", "-shared", "-fPIC", "-o", str(workdir / "lib.so"), str(src), "-lm"]
    else:
        cmd = ["nvcc", "-arch=sm_90", "-O3", "-shared", "-Xcompiler", "-fPIC", "-o", str(workdir / "lib.so"), str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return name, proc.returncode, proc.stderr[-2000:]


@pytest.mark.integration
def test_every_builtin_implementation_and_reference_compiles(tmp_path):
    assert shutil.which("nvcc") and shutil.which("gcc"), "nvcc and gcc are needed on PATH (install the CUDA toolkit)"
    jobs = []
    for task in BUILTIN:
        items = [(f"{task.id}:reference", "c", task.reference)] if task.kind == "c2cuda" else []
        items += [(f"{task.id}:{i.name}", "cu", i.code) for i in task.implementations if i.format != "kernelbench"]
        for name, ext, code in items:
            d = tmp_path / name.replace("/", "_").replace(":", "__")
            d.mkdir()
            jobs.append((name, ext, code, d))
    with cf.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(_compile, jobs))
    failures = [f"{name}:\n{log}" for name, rc, log in results if rc != 0]
    assert not failures, "\n\n".join(failures)


# ---------------------------------------------------------------------------------------------
# Task file errors: one clear sentence naming the file, the field and the fix
# ---------------------------------------------------------------------------------------------

def _saxpy_raw() -> dict:
    return yaml.safe_load((Path(__file__).parents[1] / "pipeline/assets/builtin_tasks/c2cuda/saxpy.yaml").read_text())


def _relu_raw() -> dict:
    return yaml.safe_load((Path(__file__).parents[1] / "pipeline/assets/builtin_tasks/torch2cuda/relu.yaml").read_text())


def _write(tmp_path: Path, raw: dict, name: str = "task.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(raw, sort_keys=False))
    return p


def _error(tmp_path, raw) -> str:
    path = _write(tmp_path, raw)
    with pytest.raises(TaskError) as e:
        load_task_file(path)
    msg = str(e.value)
    assert str(path) in msg
    return msg


def test_valid_copy_loads(tmp_path):
    task = load_task_file(_write(tmp_path, _saxpy_raw()))
    assert task.id == "c2cuda/saxpy" and task.source_path.endswith("task.yaml")


def test_missing_field(tmp_path):
    raw = _saxpy_raw()
    del raw["configs"]
    msg = _error(tmp_path, raw)
    assert "'configs' is missing" in msg and "add it" in msg


def test_missing_function_and_args_of_c2cuda(tmp_path):
    raw = _saxpy_raw()
    del raw["function"]
    del raw["args"]
    msg = _error(tmp_path, raw)
    assert "'function' is missing" in msg and "'args' is missing" in msg


def test_unknown_field_suggests_the_closest(tmp_path):
    raw = _saxpy_raw()
    raw["tolerence"] = {"rtol": 0.1}
    msg = _error(tmp_path, raw)
    assert "unknown field 'tolerence'" in msg and "did you mean 'tolerance'" in msg


def test_unknown_nested_field(tmp_path):
    raw = _saxpy_raw()
    raw["args"][2]["sise"] = "n"
    msg = _error(tmp_path, raw)
    assert "unknown field 'args[2].sise'" in msg and "'size'" in msg


def test_bad_expression(tmp_path):
    raw = _saxpy_raw()
    raw["args"][2]["size"] = "n +* 2"
    msg = _error(tmp_path, raw)
    assert "args[2] ('x').size" in msg and "not valid syntax" in msg


def test_unsafe_expression_is_refused(tmp_path):
    raw = _saxpy_raw()
    raw["work"]["flops"] = "__import__('os').getpid()"
    msg = _error(tmp_path, raw)
    assert "work.flops" in msg and "not allowed" in msg


def test_missing_param(tmp_path):
    raw = _saxpy_raw()
    raw["configs"][1]["params"] = {"m": 4099}
    msg = _error(tmp_path, raw)
    assert "config 'odd'" in msg and "'n'" in msg and "add it to the config's params" in msg


def test_pointer_without_size(tmp_path):
    raw = _saxpy_raw()
    del raw["args"][2]["size"]
    msg = _error(tmp_path, raw)
    assert "args[2] ('x').size' is missing" in msg


def test_no_configs(tmp_path):
    raw = _saxpy_raw()
    raw["configs"] = []
    assert "'configs' is empty" in _error(tmp_path, raw)


def test_c2cuda_needs_a_naive_implementation(tmp_path):
    raw = _saxpy_raw()
    raw["implementations"] = [i for i in raw["implementations"] if i["strategy"] != "naive"]
    assert "strategy: naive" in _error(tmp_path, raw)


def test_constant_fill_of_an_input_is_refused(tmp_path):
    raw = _saxpy_raw()
    raw["args"][2]["init"] = "1"
    assert "uniform(lo, hi)" in _error(tmp_path, raw)


def test_torch2cuda_reference_must_define_the_kernelbench_names(tmp_path):
    raw = _relu_raw()
    raw["reference"] = raw["reference"].replace("def get_init_inputs", "def get_init")
    msg = _error(tmp_path, raw)
    assert "does not define get_init_inputs" in msg


def test_torch2cuda_reference_must_parse(tmp_path):
    raw = _relu_raw()
    raw["reference"] += "\ndef broken(:\n"
    assert "not valid Python" in _error(tmp_path, raw)


def test_torch2cuda_config_params_must_be_module_globals(tmp_path):
    raw = _relu_raw()
    raw["configs"][0]["params"]["rows"] = 3
    msg = _error(tmp_path, raw)
    assert "configs[0].params.rows" in msg and "module-level" in msg


REASSIGNED = """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale

batch_size = 4
height = width = 2048
steps = 3
steps += 1
channels = 2
channels = channels * 4
height, width = 8, 16

def get_inputs():
    return [torch.rand(batch_size, channels, height, width)]

def get_init_inputs():
    return [2.0]
"""


def test_a_kernelbench_problem_runs_at_the_sizes_its_module_ends_with(tmp_path):
    """A size assigned twice (KernelBench level 2/11: `height = width = 2048`, later `height, width = 32, 32`) is
    the last value, as KernelBench's own run of the module has it; a size computed or updated is the module's own."""
    import torch
    from pipeline.evaluation.checks.footprint import config_bytes
    from pipeline.evaluation.checks.reference_torch import load_reference_module
    from pipeline.tasks.sources import kernelbench_task
    path = tmp_path / "level2" / "11_Reassigned.py"
    path.parent.mkdir()
    path.write_text(REASSIGNED)
    task = kernelbench_task(path)
    params = config_params(task, task.configs[-1])
    assert params == {"batch_size": 4, "height": 8, "width": 16}
    from pipeline.tasks.reference_module import module_names
    assert module_names("h, w = 2, 3\nh, w = dims\n[a, b] = 4, 5\nc: int = 6\nc = None\nd = -7\n").literals == {
        "d": -7}  # unpacked from a name, a list target, a non-number: no literal left
    ns = load_reference_module(task, params)
    assert tuple(ns["get_inputs"]()[0].shape) == (4, 8, 8, 16) and ns["steps"] == 4
    assert config_bytes(task)[-1].inputs == torch.Size((4, 8, 8, 16)).numel() * 4


def test_not_yaml_and_not_a_mapping(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("id: [unclosed\n")
    with pytest.raises(TaskError, match="not valid YAML"):
        load_task_file(p)
    p.write_text("- a\n- b\n")
    with pytest.raises(TaskError, match="mapping of fields"):
        load_task_file(p)


def test_duplicate_ids_in_a_directory_name_both_files(tmp_path):
    _write(tmp_path, _saxpy_raw(), "a.yaml")
    (tmp_path / "sub").mkdir()
    _write(tmp_path / "sub", _saxpy_raw(), "b.yaml")
    with pytest.raises(TaskError) as e:
        load_tasks(tmp_path)
    assert "a.yaml" in str(e.value) and "b.yaml" in str(e.value) and "defined twice" in str(e.value)


def test_directory_source_is_recursive_and_sorted(tmp_path):
    relu = _relu_raw()
    _write(tmp_path, relu, "z.yaml")
    (tmp_path / "deep").mkdir()
    _write(tmp_path / "deep", _saxpy_raw(), "a.yaml")
    assert [t.id for t in load_tasks(tmp_path)] == ["c2cuda/saxpy", "torch2cuda/relu"]


def test_bad_source(tmp_path):
    with pytest.raises(TaskError, match="neither 'builtin' nor an existing"):
        load_tasks(tmp_path / "missing")
    with pytest.raises(TaskError, match="no \\*.yaml task files"):
        load_tasks(tmp_path)


# ---------------------------------------------------------------------------------------------
# Expressions
# ---------------------------------------------------------------------------------------------

def test_eval_expr():
    p = {"n": 1000, "m": 7}
    assert eval_expr("4*n + 1", p) == 4001
    assert eval_expr("n // m", p) == 142 and eval_expr("n % m", p) == 6
    assert eval_expr("(n - 1)//2 + 1", p) == 500
    assert eval_expr("2**10", p) == 1024 and eval_expr("-m", p) == -7
    assert eval_expr("min(n, m) + max(n, m)", p) == 1007
    assert eval_expr("ceil(n / 3)", p) == 334 and eval_expr("cdiv(n, 256)", p) == 4
    assert math.isclose(eval_expr("sqrt(n*n)", p), 1000.0)
    assert eval_expr(12, p) == 12 and eval_expr("1.5", p) == 1.5
    assert expr_names("min(n, m) + cdiv(k, 2)") == {"n", "m", "k"}


@pytest.mark.parametrize("text", ["n.real", "__import__('os')", "open('x')", "[n]", "n if n else 1",
                                  "lambda: 1", "'abc'", "n < 2", "2**1000", "n / 0", "q", "n +", ""])
def test_eval_expr_refuses(text):
    with pytest.raises(TaskError):
        eval_expr(text, {"n": 3})


def test_parse_init():
    assert parse_init("uniform(-1, 1)") == ("uniform", "-1", "1")
    assert parse_init("randint(0, n)") == ("randint", "0", "n")
    assert parse_init("randint(0, n)", {"n": 5}) == ("randint", 0, 5)
    assert parse_init("uniform(0, 2*n)", {"n": 1.5}) == ("uniform", 0, 3.0)
    assert parse_init("n") == ("value", "n")
    assert parse_init("n * 2", {"n": 4}) == ("value", 8)
    with pytest.raises(TaskError, match="exactly two bounds"):
        parse_init("uniform(1)")
    with pytest.raises(TaskError, match="below the upper bound"):
        parse_init("randint(5, 5)", {})


def test_parse_init_of_records():
    text = "records(randint(0, m), randint(0, k), uniform(-1, 1), sorted_by=2)"
    assert parse_init(text) == ("records", (("randint", "0", "m"), ("randint", "0", "k"), ("uniform", "-1", "1")), 2)
    assert parse_init(text, {"m": 5, "k": 3}) == (
        "records", (("randint", 0, 5), ("randint", 0, 3), ("uniform", -1, 1)), 2)
    assert parse_init("records(uniform(0, 1))") == ("records", (("uniform", "0", "1"),), 0)
    for bad, words in [("records()", "at least one field"), ("records(randint(0, 2), 5)", "each field"),
                       ("records(randint(0, 2), order=1)", "one keyword"),
                       ("records(uniform(0, 1), randint(0, 2), sorted_by=1)", "leading randint fields"),
                       ("records(randint(0, 2), sorted_by=2)", "leading randint fields")]:
        with pytest.raises(TaskError, match=words):
            parse_init(bad)


def test_parse_init_of_a_graph_and_its_size(tmp_path):
    assert parse_init("graph(n, 1.0 / n)") == ("graph", "n", "1.0 / n")
    assert parse_init("graph(n, 1.0 / n)", {"n": 4}) == ("graph", 4, 0.25)
    for bad, words in [("graph(n)", "node count and the edge probability"), ("graph(n, 2)", "strictly between 0 and 1"),
                       ("graph(n, 0)", "same graph every time"), ("graph(n, 1.0)", "strictly between")]:
        with pytest.raises(TaskError, match=words):
            parse_init(bad, {"n": 4})
    raw = _saxpy_raw()
    raw["args"][2].update(ctype="const int*", size="n*n", init="graph(n, 0.5)")
    load_task_file(_write(tmp_path, raw))
    raw["args"][2]["size"] = "n"
    assert "not the 1000 x 1000 of the graph's adjacency matrix" in _error(tmp_path, raw)


def _records_task(ctype: str = "const size_t*", size: str = "2*n") -> dict:
    raw = _saxpy_raw()
    raw["args"][2].update(ctype=ctype, size=size, init="records(randint(0, n), uniform(-1, 1), sorted_by=1)")
    return raw


def test_records_need_a_pointer_to_whole_records_of_4_or_8_byte_integers(tmp_path):
    load_task_file(_write(tmp_path, _records_task()))
    msg = _error(tmp_path, _records_task(ctype="const float*"))
    assert "args[2] ('x').init" in msg and "draws records" in msg and "'const size_t*'" in msg
    msg = _error(tmp_path, _records_task(size="2*n + 1"))
    assert "config 'small'" in msg and "not a whole number of records of 2 fields" in msg
    raw = _records_task()
    raw["args"][2]["init"] = "records(randint(-3, 3), uniform(-1, 1), sorted_by=1)"
    assert "draws negative numbers into 'const size_t*'" in _error(tmp_path, raw)  # unsigned: sorted as huge ones
    raw["args"][2]["ctype"] = "const long*"
    load_task_file(_write(tmp_path, raw))  # a signed type holds them


# ---------------------------------------------------------------------------------------------
# KernelBench
# ---------------------------------------------------------------------------------------------

def test_kernelbench_loader_on_a_fake_checkout(caplog):
    skipped: list = []
    with caplog.at_level("WARNING"):
        tasks = load_kernelbench(KB_ROOT, skipped=skipped)
    ids = [t.id for t in tasks]
    assert ids == ["kernelbench/level1/1_Scaled_Tanh", "kernelbench/level1/2_Row_Sum",
                   "kernelbench/level2/1_Linear_GELU"]
    assert [t.family for t in tasks] == ["scaled_tanh", "row_sum", "linear_gelu"]
    for t in tasks:
        assert t.kind == "torch2cuda" and t.implementations == []
        assert t.reference == Path(t.source_path).read_text()
        assert [(c.name, c.params, c.time) for c in t.configs] == [
            ("seed0", {}, False), ("seed1", {}, False), ("timing", {}, True)]
        assert (t.work.flops, t.work.bytes) == ("0", "0")
    assert len(skipped) == 1 and skipped[0][0].endswith("2_Broken_Clamp.py")
    assert "2_Broken_Clamp.py" in caplog.text


def test_kernelbench_levels_and_layouts(tmp_path):
    assert [t.id for t in load_kernelbench(KB_ROOT, levels=[2])] == ["kernelbench/level2/1_Linear_GELU"]
    # root/level1 without the KernelBench/ folder is accepted too
    shutil.copytree(KB_ROOT / "KernelBench" / "level1", tmp_path / "level1")
    (tmp_path / "level1" / "3_No_Inputs.py").write_text("import torch\nclass Model:\n    pass\n")
    skipped: list = []
    tasks = load_kernelbench(tmp_path, levels=[1], skipped=skipped)
    assert len(tasks) == 2 and "get_inputs" in skipped[0][1]
    with pytest.raises(TaskError, match="level 2 is missing"):
        load_kernelbench(tmp_path, levels=[1, 2])
    with pytest.raises(TaskError, match="neither .*KernelBench/level<N>/ nor"):
        load_kernelbench(tmp_path / "nothing")
    # load_tasks recognises a checkout
    assert len(load_tasks(KB_ROOT, kernelbench_levels=[1])) == 2


# ---------------------------------------------------------------------------------------------
# CLI arguments: TASK and CANDIDATE of `cudaperf eval`
# ---------------------------------------------------------------------------------------------

def test_load_task_arg(tmp_path):
    assert load_task_arg("c2cuda/saxpy").id == "c2cuda/saxpy"
    assert load_task_arg(_write(tmp_path, _relu_raw())).id == "torch2cuda/relu"
    kb = load_task_arg(KB_ROOT / "KernelBench" / "level1" / "2_Row_Sum.py")
    assert kb.id == "kernelbench/level1/2_Row_Sum" and kb.family == "row_sum"
    with pytest.raises(TaskError, match="did you mean 'c2cuda/saxpy'"):
        load_task_arg("c2cuda/saxpi")
    with pytest.raises(TaskError, match="not valid Python"):
        load_task_arg(KB_ROOT / "KernelBench" / "level2" / "2_Broken_Clamp.py")
    (tmp_path / "t.txt").write_text("x")
    with pytest.raises(TaskError, match=".yaml task file or a KernelBench problem"):
        load_task_arg(tmp_path / "t.txt")


def test_load_candidate_file(tmp_path):
    saxpy, relu = load_task_arg("c2cuda/saxpy"), load_task_arg("torch2cuda/relu")
    cu = tmp_path / "cand.cu"
    cu.write_text("// kernel")
    py = tmp_path / "cand.py"
    py.write_text("class ModelNew: pass\n")
    assert load_candidate_file(cu, saxpy).format == "c2cuda"
    cand = load_candidate_file(cu, relu)
    assert (cand.format, cand.task_id, cand.code) == ("light", "torch2cuda/relu", "// kernel")
    assert load_candidate_file(py, relu).format == "kernelbench"
    with pytest.raises(TaskError, match="cannot solve the c2cuda task"):
        load_candidate_file(py, saxpy)
    (tmp_path / "cand.txt").write_text("x")
    with pytest.raises(TaskError, match="extension '.txt'"):
        load_candidate_file(tmp_path / "cand.txt", saxpy)
    with pytest.raises(TaskError, match="does not exist"):
        load_candidate_file(tmp_path / "none.cu", saxpy)
