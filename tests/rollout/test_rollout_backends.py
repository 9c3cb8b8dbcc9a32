"""The table of generator backends (pipeline/core/generator_backends.py): every backend it names implements the
whole `Generator` interface (a missing member fails here, not in a run; tests/test_layers.py checks that callers
read nothing the interface does not declare), the config takes exactly the table's names, and a backend added to
the table is built by the factory the rollout uses and drives episodes (docs/extending.md's recipe, on a scratch
entry)."""
import inspect

import pytest
from rollout_fakes import CannedGenerator, FakeEvaluator

from pipeline.core.config import ConfigError, RolloutSection, load_config
from pipeline.core.config_messages import describe_schema
from pipeline.core.generator_backends import BACKENDS, Backend
from pipeline.rollout.backends import generator_class, make_generator
from pipeline.rollout.generation import GenerationRequest, Generator, SamplingSpec

CANNED = Backend("rollout_fakes.CannedGenerator", (), "nothing (a test's fake)", "canned answers, for tests")


def interface_members() -> dict[str, str]:
    """Every member of the Generator interface -> 'attribute' (declared with a type), 'method' (public) or
    'abstract' (what each backend implements)."""
    members = {name: "attribute" for name in Generator.__annotations__}
    members |= {name: "method" for name, value in vars(Generator).items()
                if not name.startswith("_") and (callable(value) or isinstance(value, classmethod))}
    return members | {name: "abstract" for name in Generator.__abstractmethods__}


def constructor_sources(cls: type) -> str:
    """The source of every constructor a `cls()` call runs: its own, then its parent's while each hands on."""
    sources = []
    for klass in cls.__mro__:
        if "__init__" in vars(klass):
            sources.append(inspect.getsource(klass.__init__))
            if klass is Generator or "super().__init__(" not in sources[-1]:
                break
    return "\n".join(sources)


def missing_members(cls: type, name: str) -> list[str]:
    """What backend class `cls`, named `name` in the table, lacks of the interface, each with why; [] when whole."""
    if not (isinstance(cls, type) and issubclass(cls, Generator)):
        return [f"{cls!r} is not a Generator subclass"]
    init = constructor_sources(cls)
    missing = []
    for member, kind in interface_members().items():
        if member == "backend":
            if cls.backend != name:
                missing.append(f"backend: the class says {cls.backend!r}, the table {name!r}")
        elif kind == "attribute" and f"self.{member} =" not in init:
            missing.append(f"{member}: no constructor it runs sets self.{member}")
        elif kind == "abstract" and member in cls.__abstractmethods__:
            missing.append(f"{member}: not implemented")
        elif kind == "method":
            if member == "from_config" and cls.from_config.__func__ is Generator.from_config.__func__:
                missing.append("from_config: not defined, so make_generator cannot build it")
            elif list(inspect.signature(getattr(cls, member)).parameters) != \
                    list(inspect.signature(getattr(Generator, member)).parameters):
                missing.append(f"{member}: parameters differ from the interface's")
    return missing


@pytest.mark.parametrize("name", list(BACKENDS))
def test_every_backend_of_the_table_implements_the_whole_interface(name):
    assert {"eos_id", "device", "tokenizer", "weight_version", "from_config"} <= set(interface_members())
    assert missing_members(generator_class(name), name) == []


def test_the_member_check_finds_what_a_backend_lacks():
    class NoEos(Generator):
        backend = "noeos"

        def __init__(self, model_path):  # never hands on to Generator.__init__: no tokenizer, no eos_id
            self.device = "cpu"

        def _generate(self, requests, sampling):
            return []

    class Partial(Generator):
        backend = "partial"

        def __init__(self, model_path):
            super().__init__(model_path, 128)

        def close(self, now):
            pass

    no_eos = missing_members(NoEos, "noeos")
    assert any(m.startswith("eos_id:") for m in no_eos) and any(m.startswith("tokenizer:") for m in no_eos)
    assert "_load_weights: not implemented" in no_eos and any(m.startswith("from_config:") for m in no_eos)
    partial = missing_members(Partial, "other")
    assert "backend: the class says 'partial', the table 'other'" in partial
    assert any(m.startswith("device:") for m in partial) and "close: parameters differ from the interface's" in partial
    assert not any(m.startswith("eos_id:") for m in partial)  # set by the interface's own constructor


# ---- the config takes the table's names ----------------------------------------------------------------------

def test_the_config_takes_exactly_the_tables_names():
    assert RolloutSection().backend in BACKENDS
    for name in BACKENDS:
        assert load_config(None, [f"rollout.backend={name}"]).rollout.backend == name
    with pytest.raises(ConfigError) as e:
        load_config(None, ["rollout.backend=tensorrt"])
    assert f"unknown generator backend 'tensorrt'; use one of: {', '.join(BACKENDS)}" in str(e.value)
    described = next(line for line in describe_schema(RolloutSection) if line.startswith("backend ="))
    assert all(f"'{name}': {b.description}" in described for name, b in BACKENDS.items())
    assert RolloutSection.model_json_schema()["properties"]["backend"]["enum"] == list(BACKENDS)
    with pytest.raises(ConfigError, match="use one of: " + ", ".join(BACKENDS)):
        make_generator(None, RolloutSection(), seed=0, backend="tensorrt")


# ---- the recipe, on a scratch entry ---------------------------------------------------------------------------

def test_a_backend_added_to_the_table_is_built_and_runs_episodes(monkeypatch, model_cfg, rollout_cfg, builtin_tasks):
    """Adding a row is all a new backend needs: the config takes its name, the member check passes, the
    factory the rollout uses (make_generator, as GeneratorActor calls it) builds it, and episodes run on it."""
    from pipeline.rollout.scheduler import run_episodes_locally

    with pytest.raises(ValueError, match="unknown generator backend 'canned'"):
        RolloutSection(backend="canned")
    monkeypatch.setitem(BACKENDS, "canned", CANNED)
    cfg = rollout_cfg.model_copy(update={"max_turns": 2})
    assert RolloutSection(backend="canned").backend == "canned"
    refused = pytest.raises(ConfigError, load_config, None, ["rollout.backend=tgi"]).value
    assert f"use one of: {', '.join(BACKENDS)}" in str(refused) and str(refused).count("canned") == 1
    assert missing_members(generator_class("canned"), "canned") == []

    canned = make_generator(model_cfg, RolloutSection(backend="canned"), seed=3)
    assert isinstance(canned, CannedGenerator) and canned.seed == 3 and canned.device == "cpu"
    (sample,), = canned.generate([GenerationRequest([1, 2, 3])], SamplingSpec(64)).samples
    assert sample.text == CannedGenerator.CANNED_ANSWER and sample.token_ids[-1] == canned.eos_id
    tasks = [builtin_tasks["c2cuda/saxpy"]]
    outcomes, stats = run_episodes_locally(tasks, canned, FakeEvaluator(lambda task, cand: ("incorrect", None)), cfg)
    assert len(outcomes) == cfg.samples_per_task and stats.turns == cfg.samples_per_task * 2
    assert all(o.trajectory.turns[-1].response_ids[-1] == canned.eos_id for o in outcomes)


def test_a_backend_whose_modules_are_missing_says_what_to_install(monkeypatch, model_cfg):
    monkeypatch.setitem(BACKENDS, "canned", Backend(CANNED.generator, ("no_such_engine_module",),
                                                    "no-such-engine==1.0", CANNED.description))
    with pytest.raises(ConfigError) as e:
        make_generator(model_cfg, RolloutSection(backend="canned"), seed=0)
    text = str(e.value)
    assert "no_such_engine_module cannot be imported" in text and "install no-such-engine==1.0" in text
    assert f"set rollout.backend to one of: {', '.join(n for n in BACKENDS if n != 'canned')}" in text
