"""The task stream: filters, seeded order, save and resume (plain and through a real local Ray)."""
from pathlib import Path

import pytest

from pipeline.tasks.reader import DataError, TaskReader, load_source, task_of_row
from pipeline.tasks.splits import split_of_task

KERNELBENCH = str(Path(__file__).parents[1] / "data" / "kernelbench")


@pytest.fixture(scope="module")
def tasks():
    return load_source("builtin") + load_source(KERNELBENCH)  # the KernelBench problems of tests/data: unchecked


def ids(rows):
    return [r["task_id"] for r in rows]


def test_filters_by_kind_family_and_split(tasks):
    r = TaskReader(tasks, allow_unchecked=True, kinds=["c2cuda"])
    assert len(r) == 12 and all(row["kind"] == "c2cuda" for row in r.rows())
    r = TaskReader(tasks, allow_unchecked=True, families=["blas1_axpy", "activation_relu"])
    assert sorted(ids(r.rows())) == ["c2cuda/saxpy", "torch2cuda/relu"]
    r = TaskReader(tasks, allow_unchecked=True, splits=["kernelbench"])
    assert len(r) == 3 and all(t.startswith("kernelbench/") for t in ids(r.rows()))
    test = TaskReader(tasks, allow_unchecked=True, splits=["test"])
    assert len(test) > 0 and all(split_of_task(task_of_row(row)) == "test" for row in test.rows())
    train_fams = {row["family"] for row in TaskReader(tasks, allow_unchecked=True, splits=["train"]).rows()}
    assert train_fams.isdisjoint({row["family"] for row in test.rows()})


def test_seeded_order(tasks):
    a, b, c = (list(ids(TaskReader(tasks, allow_unchecked=True, seed=s).rows())) for s in (1, 1, 2))
    assert a == b and a != c and sorted(a) == sorted(c) == sorted(t.id for t in tasks)
    assert ids(TaskReader(tasks, allow_unchecked=True, shuffle=False).rows()) == sorted(t.id for t in tasks)


def test_resume_gives_exactly_the_remaining_tasks_and_epochs_roll_over(tasks):
    r = TaskReader(tasks, allow_unchecked=True, seed=7)
    full = list(r.rows(epochs=2))
    n = len(r)
    for row in full[:10]:
        r.consumed(row)
    state = r.state()
    again = TaskReader(tasks, allow_unchecked=True, seed=7).restore(state)
    rest = list(again.rows(epochs=1))
    assert ids(rest) == ids(full[10:n])
    for row in rest:
        again.consumed(row)
    assert again.state()["epoch"] == 1 and again.state()["position"] == 0
    assert ids(again.rows()) == ids(full[n:])
    assert ids(full[n:]) != ids(full[:n])  # a new order each epoch


def test_a_state_of_another_selection_is_refused(tasks):
    state = TaskReader(tasks, allow_unchecked=True, seed=1).state()
    with pytest.raises(DataError, match="another task selection"):
        TaskReader(tasks, allow_unchecked=True, seed=2).restore(state)
    with pytest.raises(DataError, match="another task selection"):
        TaskReader(tasks, allow_unchecked=True, seed=1, kinds=["c2cuda"]).restore(state)
    with pytest.raises(DataError, match="malformed"):
        TaskReader(tasks, allow_unchecked=True, seed=1).restore({"position": 3})


def test_unknown_split_of_generated_source_is_a_clear_error():
    with pytest.raises((DataError, ValueError), match="split|generated"):
        load_source("generated:holdout")


@pytest.mark.integration
def test_ray_data_stream_resumes_from_a_saved_position(tasks):
    ray = pytest.importorskip("ray")
    from actors.task_stream import task_dataset
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        reader = TaskReader.from_sources(["builtin", KERNELBENCH], seed=3, allow_unchecked=True)
        expected = ids(reader.rows())
        seen = []
        for row in task_dataset(reader, rows_per_block=4).iter_rows():
            task = task_of_row(row)
            assert task.id == row["task_id"]
            seen.append(task.id)
            reader.consumed(row)
            if len(seen) == 9:
                break
        saved = reader.state()
        resumed = TaskReader(tasks, allow_unchecked=True, seed=3).restore(saved)
        rest = [row["task_id"] for row in task_dataset(resumed, rows_per_block=4).iter_rows()]
        assert seen == expected[:9]
        assert rest == expected[9:]
        # With the policy's path, the stream's workers add each task's opening prompt ids, in order, even while the
        # run's actors hold every CPU of the cluster (as a local run's do).
        hog = ray.remote(num_cpus=1)(type("Hog", (), {"ping": lambda self: 1})).remote()
        assert ray.get(hog.ping.remote()) == 1
        from pipeline.rollout.conversation import ChatFormat
        from pipeline.rollout.openings import opening_ids, unpack_ids
        from pipeline.rollout.tiny_model import load_tokenizer, resolve_model_path
        from pipeline.core.config import ModelSection
        path = resolve_model_path(ModelSection(path="tiny-sft"))
        rows = list(task_dataset(TaskReader(tasks[:6], allow_unchecked=True, seed=3), rows_per_block=4,
                                 model_path=path).iter_rows())
        chat = ChatFormat(load_tokenizer(path))
        assert [unpack_ids(r["opening_ids"]) for r in rows] == opening_ids([task_of_row(r) for r in rows], chat)
    finally:
        ray.shutdown()


def test_tasks_the_registry_does_not_vouch_for_are_refused_unless_allowed(tasks, tmp_path):
    import json
    from pipeline.tasks.degenerate import load_registry, registry_hash
    saxpy, relu = (next(t for t in tasks if t.id == i) for i in ("c2cuda/saxpy", "torch2cuda/relu"))
    path = tmp_path / "degeneracy.json"
    path.write_text(json.dumps({"tasks": {"c2cuda/saxpy": {"hash": registry_hash(saxpy), "verdict": "ok"},
                                          "torch2cuda/relu": {"hash": "0" * 16, "verdict": "ok"}}}))
    load_registry.cache_clear()
    assert len(TaskReader([saxpy], registry=str(path))) == 1
    with pytest.raises(DataError, match=r"torch2cuda/relu \(changed since it was checked\).*--update.*"
                                        r"data.allow_unchecked_tasks=true"):
        TaskReader([saxpy, relu], registry=str(path))
    kb = [t for t in tasks if t.id.startswith("kernelbench/")]
    with pytest.raises(DataError, match="not in the registry.*--kernelbench-dir DIR --levels"):
        TaskReader(kb, registry=str(path))
    assert len(TaskReader([saxpy, relu] + kb, registry=str(path), allow_unchecked=True)) == 2 + len(kb)
