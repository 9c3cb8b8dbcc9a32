"""Splits by family: deterministic, disjoint, near the intended shares, KernelBench apart; the held-out
tasks of the training families."""
import pytest

from pipeline.tasks.splits import (FRACTIONS, SPLITS, balanced_seed, shares_ok, split_of_family, split_of_task,
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
    for t in tasks:  # the family's split, or held out of a training family
        assert split_of_task(t) == split_of_family(t.family) or \
            (split_of_task(t) == "heldout" and split_of_family(t.family) == "train")
    kb = tasks[0].model_copy(update={"id": "kernelbench/level1/19_ReLU"})
    assert split_of_task(kb) == "kernelbench"


def test_a_task_without_family_is_an_error():
    with pytest.raises(ValueError, match="family"):
        split_of_family("")


def test_known_families_get_exact_shares():
    from pipeline.tasks.splits import assign_splits
    for n in (3, 7, 18, 45, 60):
        fams = [f"fam{i}" for i in range(n)]
        counts = {s: list(assign_splits(fams, 0).values()).count(s) for s in SPLITS}
        assert counts["test"] == max(1, round(0.15 * n)) == counts["val"] and sum(counts.values()) == n
    assert assign_splits(["a", "b", "c", "d"], 1) == assign_splits(["d", "c", "b", "a"], 1)


def test_the_generated_dataset_has_a_test_share():
    from pipeline.tasks.generate import cached_tasks
    fams = {t.family for t in cached_tasks(0)}
    shares = split_shares(fams, 0)
    assert len(fams) >= 3 and 0.10 <= shares["test"] <= 0.20 + 1 / len(fams) and shares["val"] > 0, shares


def test_generated_split_sources_follow_the_configured_split_seed():
    """'generated:test' and the reader's split filter use one seed, data.split_seed."""
    from pipeline.tasks.reader import TaskReader
    from pipeline.tasks import load_tasks
    for seed in (0, 5):
        test = load_tasks("generated:test", split_seed=seed)
        assert test and all(split_of_family(t.family, seed) == "test" for t in test)
        read = TaskReader.from_sources("generated:test", splits=["test"], split_seed=seed, shuffle=False,
                                       allow_unchecked=True)  # the split, whatever the degeneracy registry holds
        assert len(read) == len(test)
    assert {t.family for t in load_tasks("generated:test", split_seed=0)} != \
        {t.family for t in load_tasks("generated:test", split_seed=5)}


def test_heldout_tasks_are_unseen_tasks_of_training_families_at_exact_shares_per_family_and_kind():
    from collections import Counter

    from pipeline.tasks.generate import cached_tasks
    from pipeline.tasks.splits import HELDOUT_FRACTION, heldout_ids
    tasks = cached_tasks(0)
    held = heldout_ids(tasks, 0)
    assert {split_of_task(t) for t in tasks if t.id in held} == {"heldout"}
    assert all(split_of_family(t.family) == "train" for t in tasks if t.id in held)
    per_kind = Counter(t.kind for t in tasks if t.id in held)
    assert per_kind["c2cuda"] >= 150 and per_kind["torch2cuda"] >= 150, per_kind  # a 5-point difference is visible
    groups = Counter((t.family, t.kind) for t in tasks if split_of_family(t.family) == "train")
    got = Counter((t.family, t.kind) for t in tasks if t.id in held)
    assert all(got[g] == round(HELDOUT_FRACTION * n) for g, n in groups.items())
    assert heldout_ids(tasks, 1) != held  # seeded


def test_generated_heldout_and_train_sources_are_disjoint_and_cover_the_training_families():
    from pipeline.tasks import load_tasks
    train, held = load_tasks("generated:train"), load_tasks("generated:heldout")
    assert held and not {t.id for t in train} & {t.id for t in held}
    assert {t.family for t in held} <= {t.family for t in train}
    assert len(train) + len(held) == sum(split_of_family(t.family) == "train" for t in load_tasks("generated"))


def test_the_data_card_counts_heldout_tasks_within_training_families():
    from pipeline.dataset.card import task_counts
    from pipeline.tasks.generate import cached_tasks
    tasks = cached_tasks(0)
    splits = task_counts(tasks)["splits"]
    assert sum(s["tasks"] for s in splits.values()) == len(tasks)
    assert splits["heldout"]["tasks"] == sum(splits["heldout"]["per_kind"].values()) > 300
    assert splits["heldout"]["families"] == splits["train"]["families"]
