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


# --- the frozen table: adding a family moves no other ------------------------------------------------------
def _new_family_names(n: int = 400) -> list[str]:
    import random
    import string
    rng = random.Random(0)
    return ["".join(rng.choices(string.ascii_lowercase + "_", k=12)) for _ in range(n)]


@pytest.fixture
def fresh_split_caches():
    """Forget the generated dataset's splits cached before and after a test that patches the dataset."""
    from pipeline.tasks import splits
    caches = [splits._dataset_splits, splits._dataset_heldout]
    for c in caches:
        c.cache_clear()
    yield
    for c in caches:
        c.cache_clear()


def test_a_new_family_moves_no_existing_family_nor_held_out_task(monkeypatch, fresh_split_caches):
    """Adding a family to the generated dataset (400 random names, one at a time) leaves every existing
    family in its split at the default seed, and every held-out task held out."""
    from pipeline.tasks import splits
    from pipeline.tasks.generate import cached_tasks
    tasks = list(cached_tasks(0))
    families = sorted({t.family for t in tasks})
    before = {f: split_of_family(f, 0) for f in families}
    held_before = {t.id for t in tasks if split_of_task(t, 0) == "heldout"}
    moved, held_moved = {}, {}
    for k, name in enumerate(_new_family_names()):
        extra = tasks[0].model_copy(update={"id": f"c2cuda/{name}/v0", "family": name})
        monkeypatch.setattr(splits, "_generated_tasks", lambda extra=extra: tasks + [extra])
        splits._dataset_splits.cache_clear()
        splits._dataset_heldout.cache_clear()
        now = {f: split_of_family(f, 0) for f in families}
        moved.update({f"{f} (adding {name})": f"{before[f]} -> {now[f]}" for f in families if now[f] != before[f]})
        if k < 10:  # the held-out ranking is per family: checked on a few names (4,000 task hashes each)
            held = {t.id for t in tasks if split_of_task(t, 0) == "heldout"}
            held_moved.update({name: len(held ^ held_before)} if held != held_before else {})
    assert moved == {}, f"{len(moved)} existing families moved, e.g. {sorted(moved.items())[:3]}"
    assert held_moved == {}, f"held-out tasks that changed, per new family: {held_moved}"


def test_a_new_family_gets_the_split_its_own_hash_gives_before_and_after_freezing():
    from pipeline.tasks.splits import frozen_table, generated_families, refrozen, threshold_split
    table = frozen_table()
    for name in _new_family_names(50):
        after = refrozen(generated_families() | {name}, table)
        assert after["added"] == {**table["added"], name: split_of_family(name, 0)}
        assert split_of_family(name, 0) == threshold_split(name, 0)
        assert after["ranked"] == table["ranked"]  # freezing moves nothing already there


def test_the_shipped_table_is_what_the_frozen_rules_give_the_current_families(tmp_path):
    """pipeline/assets/splits.json names exactly the generated families; its `ranked` part is a cut of the
    hash order at seed 0 (as `assign_splits` makes at a rebalance), its `added` part each family's own
    hash; the shares are met; and it is written as `cudaperf data splits --freeze` writes it."""
    from pipeline.core.assets import SPLITS_TABLE
    from pipeline.tasks.splits import (_unit, frozen_table, generated_families, refrozen, threshold_split,
                                       write_frozen_table)
    table, families = frozen_table(), generated_families()
    named = set(table["ranked"]) | set(table["added"])
    assert named == families, (f"new families {sorted(families - named)}, gone {sorted(named - families)}: run "
                               "`cudaperf data splits --freeze` and commit pipeline/assets/splits.json")
    assert not set(table["ranked"]) & set(table["added"])
    assert refrozen(families, table) == table
    order = sorted(table["ranked"], key=lambda f: (_unit(f, 0), f))
    cut = [table["ranked"][f] for f in order]
    assert cut == sorted(cut, key=["test", "val", "train"].index), "the ranked families are not a cut of the hash order"
    assert all(s == threshold_split(f, 0) for f, s in table["added"].items())
    shares = split_shares(families, 0)
    assert shares_ok(shares) and min(shares.values()) > 0, \
        f"{shares}: rebalance with `cudaperf data splits --rebalance` (it moves families)"
    assert {f: split_of_family(f, 0) for f in families} == {**table["ranked"], **table["added"]}
    write_frozen_table(table, str(tmp_path / "splits.json"))
    frozen_table.cache_clear()
    assert (tmp_path / "splits.json").read_text() == SPLITS_TABLE.read_text()


def test_a_rebalance_gives_exact_shares_and_other_seeds_rank_afresh():
    from pipeline.tasks.splits import assign_splits, frozen_table, generated_families, refrozen
    families = generated_families()
    rebalanced = refrozen(families, frozen_table(), rebalance=True)
    assert rebalanced == {"ranked": assign_splits(families, 0), "added": {}}
    n = len(families)
    assert list(rebalanced["ranked"].values()).count("test") == round(0.15 * n)
    assert {f: split_of_family(f, 7) for f in families} == assign_splits(families, 7)  # an experiment's seed


def test_a_missing_or_bad_table_is_one_clear_error(tmp_path):
    from pipeline.tasks.splits import SplitsTableError, frozen_table
    with pytest.raises(SplitsTableError, match="missing or unreadable.*cudaperf data splits --rebalance"):
        frozen_table(str(tmp_path / "none.json"))
    (tmp_path / "bad.json").write_text('{"ranked": {"gemm": "tset"}, "added": {}}')
    with pytest.raises(SplitsTableError, match="unknown splits.*'gemm': 'tset'"):
        frozen_table(str(tmp_path / "bad.json"))


def test_every_measured_row_records_the_split_the_reader_gives_its_task():
    """The measured dataset's `split` column agrees with `split_of_task` at seed 0 (rows measured before the
    held-out split say 'train' for its tasks): the card, the ranker and RL see one split."""
    import pyarrow.parquet as pq

    from pipeline.tasks.generate import cached_tasks
    from pipeline.tasks.measured import parquet_files
    tasks = {t.id: t for t in cached_tasks(0)}
    recorded = {}
    for f in parquet_files(None):
        table = pq.read_table(f, columns=["task_id", "split"])
        recorded.update(zip(table["task_id"].to_pylist(), table["split"].to_pylist()))
    assert len(recorded) > 4000
    wrong = {i: (s, split_of_task(tasks[i], 0)) for i, s in recorded.items()
             if s != split_of_task(tasks[i], 0) and not (s == "train" and split_of_task(tasks[i], 0) == "heldout")}
    assert wrong == {}, f"{len(wrong)} measured tasks record another split, e.g. {sorted(wrong.items())[:3]}"


def test_the_splits_command_reports_freezes_and_rebalances(tmp_path, monkeypatch, capsys):
    from pipeline.cli import main as cudaperf
    from pipeline.core.assets import SPLITS_TABLE
    from pipeline.tasks import splits
    table = tmp_path / "splits.json"
    table.write_text(SPLITS_TABLE.read_text())
    assert cudaperf(["data", "splits", "--table", str(table)]) == 0
    assert "is up to date" in capsys.readouterr().out
    families = splits.generated_families()
    name = _new_family_names(1)[0]
    monkeypatch.setattr(splits, "generated_families", lambda: families | {name})
    assert cudaperf(["data", "splits", "--table", str(table)]) == 1
    out = capsys.readouterr().out
    assert f"new    {name}: {split_of_family(name, 0)}" in out and "run `cudaperf data splits --freeze`" in out
    assert "moved" not in out
    assert cudaperf(["data", "splits", "--freeze", "--table", str(table)]) == 0
    written = splits.frozen_table(str(table))
    assert written["added"] == {name: split_of_family(name, 0)} and written["ranked"] == splits.frozen_table()["ranked"]
    assert cudaperf(["data", "splits", "--table", str(table)]) == 0
    assert cudaperf(["data", "splits", "--rebalance", "--table", str(table)]) == 0  # the new family ranked too
    assert splits.frozen_table(str(table)) == {"ranked": splits.assign_splits(families | {name}, 0), "added": {}}
