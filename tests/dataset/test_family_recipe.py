"""The task-family recipe of docs/extending.md, performed on a scratch copy: the template
(docs/family_template.py) registered as a new family under another name generates tasks that validate and
pass the CPU checks of `cudaperf data build`, changes no existing task, gets a split without moving any
other family, and is refused by training until the degeneracy registry vouches for it. Also the guards the
recipe relies on for the shipped dataset."""
import importlib.util
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "docs" / "family_template.py"
SCRATCH = "scratch_family"


@pytest.fixture(scope="module")
def family():
    """The template as a module of its own with FAMILY renamed, as a contributor's copy would be."""
    spec = importlib.util.spec_from_file_location(f"pipeline.tasks.families.{SCRATCH}", TEMPLATE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.FAMILY = SCRATCH
    return module


@pytest.fixture(scope="module")
def registered(family):
    """generate_tasks(0) with the scratch module's entry added to the registry (pipeline/tasks/families)."""
    from pipeline.tasks import families
    from pipeline.tasks.generate import generate_tasks
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(families.MODULES, SCRATCH, family)
        return generate_tasks(0)


@pytest.fixture(scope="module")
def new_tasks(registered):
    return [t for t in registered if t.family == SCRATCH]


@pytest.mark.slow
def test_the_new_family_s_tasks_validate_and_meet_the_dataset_s_rules(new_tasks):
    from pipeline.commands.data_command import MIN_CONFIGS, MIN_TEST_IMPLS
    from pipeline.tasks.generate import cached_tasks, normalised_reference
    from pipeline.tasks.validation import validate_task
    assert {t.kind for t in new_tasks} == {"c2cuda", "torch2cuda"} and len(new_tasks) >= 8
    assert {t.id: validate_task(t) for t in new_tasks if validate_task(t)} == {}
    for t in new_tasks:
        assert len(t.configs) >= MIN_CONFIGS and len(t.implementations) >= MIN_TEST_IMPLS, t.id
        assert t.kind != "c2cuda" or t.implementations[0].strategy == "naive", t.id
    existing = {normalised_reference(t) for t in cached_tasks(0)}
    assert [t.id for t in new_tasks if normalised_reference(t) in existing] == []


def test_registering_a_family_changes_no_existing_task(registered):
    """Each registry entry draws from its own random stream, so the measured dataset still matches."""
    from pipeline.tasks.generate import cached_tasks
    old = {t.id: t.measured_hash() for t in cached_tasks(0)}
    now = {t.id: t.measured_hash() for t in registered if t.family != SCRATCH}
    assert now == old


@pytest.mark.slow
def test_the_new_family_passes_the_cpu_checks_of_data_build(new_tasks):
    from pipeline.dataset import checks
    assert checks.check_gate(new_tasks) == []
    assert checks.check_c_references(new_tasks, workers=1) == []
    assert checks.check_torch_references(new_tasks) == []


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_the_new_family_s_implementations_compile(new_tasks, tmp_path):
    from pipeline.core.config import CompileSection
    from pipeline.dataset import checks
    assert checks.check_compile(new_tasks, compile_cfg=CompileSection(cache_dir=str(tmp_path))) == []


def test_the_new_family_gets_a_split_and_moves_no_other(registered, new_tasks, monkeypatch):
    from pipeline.tasks import splits
    from pipeline.tasks.generate import cached_tasks
    old = list(cached_tasks(0))
    before = {t.id: splits.split_of_task(t) for t in old}
    monkeypatch.setattr(splits, "_generated_tasks", lambda: registered)
    splits._dataset_splits.cache_clear()
    splits._dataset_heldout.cache_clear()
    try:
        assert {t.id: splits.split_of_task(t) for t in old} == before
        split = splits.split_of_family(SCRATCH)
        assert split == splits.threshold_split(SCRATCH)
        assert {splits.split_of_task(t) for t in new_tasks} <= {split, splits.HELDOUT}
        frozen = splits.refrozen(splits.generated_families(), splits.frozen_table())
        assert frozen["added"][SCRATCH] == split  # freezing keeps the split it already had
        assert SCRATCH not in splits.frozen_splits()  # until frozen, the shipped-table test fails (test_splits.py)
    finally:
        splits._dataset_splits.cache_clear()
        splits._dataset_heldout.cache_clear()


def test_training_refuses_the_new_family_until_the_degeneracy_registry_vouches_for_it(new_tasks):
    from pipeline.core.errors import UserError
    from pipeline.tasks.degenerate import unchecked
    from pipeline.tasks.reader import TaskReader
    assert {why for _, why in unchecked(new_tasks)} == {"not in the registry"}
    with pytest.raises(UserError, match="cudaperf data degeneracy --source generated --update"):
        TaskReader(new_tasks)


def test_every_generated_task_is_in_the_degeneracy_registry():
    """A family committed without `cudaperf data degeneracy --source generated --family F --update` fails here,
    not in a training run that refuses its tasks."""
    from pipeline.tasks.degenerate import unchecked
    from pipeline.tasks.generate import cached_tasks
    missing = unchecked(list(cached_tasks(0)))
    assert missing == [], f"{len(missing)} generated tasks the registry does not vouch for, e.g. {missing[:3]}"
