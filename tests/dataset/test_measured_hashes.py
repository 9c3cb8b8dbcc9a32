"""Every task of the measured dataset is still the task that was measured: its `task_hash` in the
committed measurements equals `Task.measured_hash()` of the task the generator makes today. A change
to a family, its registry name or its seed key, or to how tasks are hashed, fails here instead of
silently invalidating the measurements."""
import pyarrow.parquet as pq

from pipeline.tasks.measured import parquet_files
from pipeline.tasks import load_tasks


def test_every_measured_task_hash_is_unchanged():
    tasks = {t.id: t for t in load_tasks("generated")}
    measured = {}
    for f in parquet_files(None):
        table = pq.read_table(f, columns=["task_id", "task_hash"])
        measured.update(zip(table["task_id"].to_pylist(), table["task_hash"].to_pylist()))
    assert len(measured) > 4000
    missing = sorted(set(measured) - set(tasks))
    changed = sorted(k for k, h in measured.items() if k in tasks and tasks[k].measured_hash() != h)
    assert missing == [] and changed == [], f"{len(missing)} measured tasks gone, {len(changed)} changed"


def test_every_family_module_is_in_the_registry():
    from pathlib import Path

    import pipeline.tasks.families as families
    names = {p.stem for p in Path(families.__file__).parent.glob("*.py") if not p.stem.startswith("_")}
    listed = set(families.MODULES) | {m.__name__.rsplit(".", 1)[1] for parts in families.PARTS.values() for m in parts}
    listed |= {m.__name__.rsplit(".", 1)[1] for m in families.HELPERS}
    assert names == listed
    assert set(families.PARTS) <= set(families.MODULES)
