"""Splits by family: deterministic, disjoint, near the intended shares, KernelBench apart."""
import pytest

from pipeline.data.splits import (FRACTIONS, SPLITS, balanced_seed, shares_ok, split_of_family, split_of_task,
                                  split_shares)


def test_deterministic_and_seeded():
    fams = [f"family_{i}" for i in range(200)]
    first = [split_of_family(f, 0) for f in fams]
    assert first == [split_of_family(f, 0) for f in fams]
    assert first != [split_of_family(f, 1) for f in fams]
    assert set(first) == set(SPLITS)


def test_shares_close_to_fractions_over_many_families():
    shares = split_shares([f"f{i}" for i in range(4000)], seed=0)
    for s in SPLITS:
        assert abs(shares[s] - FRACTIONS[s]) < 0.03, shares


def test_balanced_seed_gives_every_split_its_share():
    fams = [f"op_{i}" for i in range(45)]
    seed = balanced_seed(fams)
    shares = split_shares(fams, seed)
    assert shares_ok(shares) and 0.10 <= shares["test"] <= 0.20, shares
    assert all(abs(shares[s] - FRACTIONS[s]) <= 0.05 + 1e-9 for s in SPLITS)


def test_tasks_follow_their_family_and_kernelbench_is_apart(builtin_tasks):
    tasks = list(builtin_tasks.values())
    by_family = {}
    for t in tasks:
        by_family.setdefault(t.family, set()).add(split_of_task(t))
    assert all(len(s) == 1 for s in by_family.values())
    kb = tasks[0].model_copy(update={"id": "kernelbench/level1/19_ReLU"})
    assert split_of_task(kb) == "kernelbench"


def test_a_task_without_family_is_an_error():
    with pytest.raises(ValueError, match="family"):
        split_of_family("")


def test_known_families_get_exact_shares():
    from pipeline.data.splits import assign_splits
    for n in (3, 7, 18, 45, 60):
        fams = [f"fam{i}" for i in range(n)]
        counts = {s: list(assign_splits(fams, 0).values()).count(s) for s in SPLITS}
        assert counts["test"] == max(1, round(0.15 * n)) == counts["val"] and sum(counts.values()) == n
    assert assign_splits(["a", "b", "c", "d"], 1) == assign_splits(["d", "c", "b", "a"], 1)


def test_the_generated_dataset_has_a_test_share():
    from pipeline.data.generate import cached_tasks
    fams = {t.family for t in cached_tasks(0)}
    shares = split_shares(fams, 0)
    assert len(fams) >= 3 and 0.10 <= shares["test"] <= 0.20 + 1 / len(fams) and shares["val"] > 0, shares


def test_generated_split_sources_follow_the_configured_split_seed():
    """'generated:test' and the reader's split filter use one seed, data.split_seed."""
    from pipeline.data.reader import TaskReader
    from pipeline.tasks import load_tasks
    for seed in (0, 5):
        test = load_tasks("generated:test", split_seed=seed)
        assert test and all(split_of_family(t.family, seed) == "test" for t in test)
        read = TaskReader.from_sources("generated:test", splits=["test"], split_seed=seed, shuffle=False)
        assert len(read) == len(test)
    assert {t.family for t in load_tasks("generated:test", split_seed=0)} != \
        {t.family for t in load_tasks("generated:test", split_seed=5)}
