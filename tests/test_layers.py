"""The layers of docs/ARCHITECTURE.md, checked on the source: what each part may import.

Every import counts, at module level or inside a function, so a lazy import cannot hide a
dependency that the layers forbid."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMPOSITION_ROOT = ROOT / "pipeline" / "cli.py"  # the one module of pipeline/ that may reach Ray (open_cluster)


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            base = ROOT.joinpath(*node.module.split("."))
            names.update(f"{node.module}.{a.name}" for a in node.names  # `from pkg import submodule` too
                         if (base / f"{a.name}.py").is_file() or (base / a.name).is_dir())
    return names


def offending(paths, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    out = {}
    for path in paths:
        bad = sorted(m for m in imported_modules(path) if m.split(".")[0] in forbidden)
        if bad:
            out[str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name] = bad
    return out


def test_pipeline_never_imports_ray_or_actors_except_the_composition_root():
    paths = [p for p in (ROOT / "pipeline").rglob("*.py") if p != COMPOSITION_ROOT]
    assert len(paths) > 50
    assert offending(paths, ("ray", "actors")) == {}


def test_the_composition_root_reaches_ray_only_through_the_cluster_facade():
    assert imported_modules(COMPOSITION_ROOT) & {"ray", "actors.pool", "actors.evaluators", "actors.generators",
                                                 "actors.learners", "actors.rankers", "actors.task_stream"} == set()
    assert "actors.cluster" in imported_modules(COMPOSITION_ROOT)


def test_the_check_finds_a_lazy_import(tmp_path):
    f = tmp_path / "probe.py"
    f.write_text("import json\n\ndef later():\n    from actors.cluster import Cluster\n    import ray.data\n")
    assert offending([f], ("ray", "actors")) == {"probe.py": ["actors.cluster", "ray.data"]}


# The layers of docs/ARCHITECTURE.md, bottom first: a module may import its own layer and those below.
LAYERS = [  # (layer, its folders under pipeline/), bottom first
    ("core", ("core",)),
    ("tasks", ("tasks",)),
    ("structure", ("structure",)),
    ("evaluation", ("evaluation",)),
    ("ranking", ("ranker",)),
    ("rollout", ("rollout",)),
    ("rl", ("rl",)),
    ("jobs", ("sft", "dataset", "scoring")),
    ("commands", ("commands",)),
    ("root", ("cli",)),
]


def test_every_folder_of_pipeline_is_one_layer():
    folders = {p.name for p in (ROOT / "pipeline").iterdir() if (p / "__init__.py").is_file()} | {"cli"}
    assert folders == {f for _, fs in LAYERS for f in fs}


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "pipeline" or len(parts) < 2:
        return None
    return next((i for i, (_, folders) in enumerate(LAYERS) if parts[1] in folders), None)


def upward_imports() -> set[tuple[str, str]]:
    found = set()
    for path in (ROOT / "pipeline").rglob("*.py"):
        mod = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        src = layer_of(mod)
        for dst_mod in imported_modules(path):
            dst = layer_of(dst_mod)
            if src is not None and dst is not None and dst > src:
                found.add((mod, dst_mod))
    return found


def test_no_module_imports_a_layer_above_its_own():
    assert upward_imports() == set(), "an import against the layers of docs/ARCHITECTURE.md"


def test_the_layer_check_sees_an_upward_import():
    assert layer_of("pipeline.evaluation.timing.timed_rounds") < layer_of("pipeline.rl.loop") < layer_of("pipeline.cli")
    assert layer_of("pipeline.commands.train_command") > layer_of("pipeline.rl.step")
    assert layer_of("pipeline.commands.rank_command") > layer_of("pipeline.ranker.fit")


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def import_cycles(modules: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each a cycle of imports."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in modules.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(modules):
        if v not in index:
            visit(v)
    return out


def project_imports() -> dict[str, set[str]]:
    paths = [p for d in ("pipeline", "actors") for p in (ROOT / d).rglob("*.py")]
    known = {module_of(p) for p in paths}
    graph = {}
    for path in paths:
        deps = set()
        for m in imported_modules(path):
            while m and m not in known:  # `from pkg.mod import name` counts as pkg.mod
                m = m.rpartition(".")[0]
            if m and m != module_of(path):
                deps.add(m)
        graph[module_of(path)] = deps
    return graph


def test_no_import_cycles_anywhere():
    assert import_cycles(project_imports()) == []


def test_the_cycle_check_finds_a_cycle():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_two_modules_share_a_name():
    names: dict[str, list[str]] = {}
    for d in ("pipeline", "actors"):
        for p in (ROOT / d).rglob("*.py"):
            if p.name not in ("__init__.py", "__main__.py"):
                names.setdefault(p.name, []).append(str(p.relative_to(ROOT)))
    assert {n: ps for n, ps in names.items() if len(ps) > 1} == {}


# ---- the evaluation harness (pipeline/evaluation/harness.py) ----------------------------------------------

EVALUATOR_OWN = {"pipeline/evaluation/evaluator.py", "pipeline/evaluation/runner.py",
                 "pipeline/evaluation/timing/timed_rounds.py"}  # the evaluator itself, split by job


def evaluator_attributes(path: Path) -> set[str]:
    """Attributes read from an evaluator in a module: `ev.X`, `evaluator.X`, `self.ev.X`."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Attribute):
            v = node.value
            if (isinstance(v, ast.Name) and v.id in ("ev", "evaluator")) or (
                    isinstance(v, ast.Attribute) and v.attr == "ev" and isinstance(v.value, ast.Name)
                    and v.value.id == "self"):
                found.add(node.attr)
    return found


def harness_members() -> set[str]:
    from pipeline.evaluation.harness import GroupHarness
    return {n for n in vars(GroupHarness) if not n.startswith("_")} | set(GroupHarness.__annotations__)


def test_the_evaluator_implements_the_group_harness():
    import inspect

    from pipeline.evaluation.evaluator import Evaluator
    from pipeline.evaluation.harness import GroupHarness
    init = inspect.getsource(Evaluator.__init__)
    for name in harness_members():
        if name in GroupHarness.__annotations__:
            assert f"self.{name} =" in init, f"Evaluator never sets {name}"
            continue
        theirs, ours = inspect.signature(getattr(Evaluator, name)), inspect.signature(getattr(GroupHarness, name))
        assert list(theirs.parameters) == list(ours.parameters), name


def test_nothing_outside_the_evaluator_reaches_past_the_harness():
    """Dataset measurement and the benchmarks use the harness's members only, never a private one."""
    allowed = harness_members() | {"evaluate", "close"}
    users = [ROOT / "pipeline/dataset/measure_worker.py"] + sorted((ROOT / "benchmarks").glob("*.py"))
    beyond = {str(p.relative_to(ROOT)): sorted(evaluator_attributes(p) - allowed) for p in users}
    assert {k: v for k, v in beyond.items() if v} == {}
    private = {}
    for p in [*(ROOT / "pipeline").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py"), *(ROOT / "actors").glob("*.py")]:
        rel = str(p.relative_to(ROOT))
        if rel not in EVALUATOR_OWN and any(a.startswith("_") for a in evaluator_attributes(p)):
            private[rel] = sorted(a for a in evaluator_attributes(p) if a.startswith("_"))
    assert private == {}


def test_the_harness_check_finds_a_private_call(tmp_path):
    f = tmp_path / "probe.py"
    f.write_text("def go(ev, self):\n    ev._check_config(1)\n    self.ev._stage_inputs(2)\n    ev.prepare_group(3)\n")
    assert evaluator_attributes(f) == {"_check_config", "_stage_inputs", "prepare_group"}


# ---- the generator interface (pipeline/rollout/generation.py) ------------------------------------------------

def generator_members() -> set[str]:
    from pipeline.rollout.generation import Generator
    return {n for n in vars(Generator) if not n.startswith("_")} | set(Generator.__annotations__)


def generator_reads(path: Path) -> set[str]:
    """Attributes read from a generator in a module: `gen.X`, `generator.X`, `self._generator.X`."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Attribute):
            v = node.value
            if (isinstance(v, ast.Name) and v.id in ("gen", "generator")) or (
                    isinstance(v, ast.Attribute) and v.attr in ("_generator", "generator")
                    and isinstance(v.value, ast.Name) and v.value.id == "self"):
                found.add(node.attr)
    return found


def generator_users() -> list[Path]:
    """Modules that use a generator without naming one backend: a `backend="..."` literal makes a module a test
    of that backend, free to read its own members (the transformers backend's `model`)."""
    markers = ("pipeline.rollout.backends", "pipeline.rollout.generation", "generator_of", "vllm_generator",
               "hf_generator")
    users = []
    for path in sorted(p for d in ("pipeline", "actors", "benchmarks", "tests") for p in (ROOT / d).rglob("*.py")):
        text = path.read_text()
        if any(m in text for m in markers) and not any(
                isinstance(n, ast.keyword) and n.arg == "backend" and isinstance(n.value, ast.Constant)
                for n in ast.walk(ast.parse(text))):
            users.append(path)
    return users


def test_callers_read_only_members_the_generator_interface_declares():
    """What callers read of a generator (the end-of-turn token `eos_id`, `device`, ...) is declared on the
    interface, so the check of every backend (tests/rollout/test_rollout_backends.py) covers it."""
    members = generator_members()
    users = generator_users()
    assert len(users) > 5
    beyond = {str(p.relative_to(ROOT)): sorted(generator_reads(p) - members) for p in users}
    assert {k: v for k, v in beyond.items() if v} == {}


def test_the_generator_check_finds_an_undeclared_read(tmp_path):
    f = tmp_path / "probe.py"
    f.write_text("def go(gen, self):\n    gen.eos_id\n    self._generator.secret()\n    gen.generate([], s)\n")
    assert generator_reads(f) == {"eos_id", "secret", "generate"}
