"""Pair construction: same task and configuration, the noise threshold, orientation and tags."""
import pytest

from pipeline.ranker.dataset import Impl, RankData
from pipeline.ranker.pairs import code_skeleton, make_pairs


def _data():
    def impl(task, name, strategy, times):
        return Impl(task, "fam", "train", "c2cuda", name, strategy, "c2cuda", f"__global__ void k_{name}() {{}}", {}, times)
    return RankData([
        impl("t1", "naive", "naive", {"large": 10.0, "odd": 4.0}),
        impl("t1", "tiled_16", "tiled_shared", {"large": 5.0, "odd": 3.9}),
        impl("t1", "tiled_32", "tiled_shared", {"large": 4.5, "odd": 1.0}),
        impl("t2", "naive", "naive", {"large": 1.0}),
        impl("t2", "vec", "vectorized", {"large": 1.19}),
    ], {})


def test_pairs_keep_only_gaps_beyond_noise_within_task_and_config():
    data = _data()
    pairs = make_pairs(data, min_gap=1.2)
    got = {(p.task_id, p.config, data.impls[p.faster].name, data.impls[p.slower].name) for p in pairs}
    assert got == {
        ("t1", "large", "tiled_16", "naive"), ("t1", "large", "tiled_32", "naive"),  # 2x, 2.22x
        ("t1", "odd", "tiled_32", "naive"), ("t1", "odd", "tiled_32", "tiled_16"),  # 4x, 3.9x
    }  # tiled_32 vs tiled_16 on large (1.11x), naive vs tiled_16 on odd (1.03x) and t2 (1.19x) are noise
    for p in pairs:
        assert p.gap >= 1.2
        assert data.impls[p.faster].times_ms[p.config] * p.gap == pytest.approx(data.impls[p.slower].times_ms[p.config])


def test_pair_tags_strategy_or_parameter_variant():
    data = _data()
    kinds = {(data.impls[p.faster].name, data.impls[p.slower].name, p.config): p.kind for p in make_pairs(data)}
    assert kinds[("tiled_32", "tiled_16", "odd")] == "variant"
    assert kinds[("tiled_32", "naive", "odd")] == "strategy"
    assert kinds[("tiled_16", "naive", "large")] == "strategy"


def test_same_code_up_to_numbers_is_a_variant_whatever_the_labels():
    tpl = "#define NT {nt}\n// {note}\n__global__ void k(float* x) {{ x[threadIdx.x * {s}] = 1.5e-3f; }}"
    a = Impl("t", "fam", "train", "c2cuda", "b256", "tiled_shared", "c2cuda", tpl.format(nt=256, s=1, note="one"), {},
             {"large": 1.0})
    b = Impl("t", "fam", "train", "c2cuda", "b1024", "block_size_1024", "c2cuda", tpl.format(nt=1024, s=2, note="x"),
             {}, {"large": 2.0})
    c = Impl("t", "fam", "train", "c2cuda", "other", "vectorized", "c2cuda", tpl.replace("x[", "y[").format(
        nt=256, s=1, note=""), {}, {"large": 4.0})
    assert code_skeleton(a.code) == code_skeleton(b.code) != code_skeleton(c.code)
    data = RankData([a, b, c], {})
    kinds = {(data.impls[p.faster].name, data.impls[p.slower].name): p.kind for p in make_pairs(data)}
    assert kinds == {("b256", "b1024"): "variant", ("b256", "other"): "strategy", ("b1024", "other"): "strategy"}


def test_threshold_is_configurable_and_checked():
    data = _data()
    assert len(make_pairs(data, 1.0)) == 7  # every pair of distinct times: 3 + 3 + 1
    assert len(make_pairs(data, 3.0)) == 2
    with pytest.raises(ValueError, match="min_gap"):
        make_pairs(data, 0.9)


def test_rankers_never_train_on_the_held_out_tasks_whatever_their_rows_say():
    from pipeline.tasks.generate import cached_tasks
    from pipeline.tasks.splits import split_of_task
    from pipeline.ranker.dataset import Impl, RankData, assign_splits
    from pipeline.ranker.fit import trains_rankers
    tasks = cached_tasks(0)
    held = next(t for t in tasks if split_of_task(t) == "heldout")
    kept = next(t for t in tasks if split_of_task(t) == "train" and t.family == held.family)
    test = next(t for t in tasks if split_of_task(t) == "test")

    def impl(task, split):  # rows measured before the held-out split say 'train' for its tasks
        return Impl(task.id, task.family, split, task.kind, "naive", "naive", "c2cuda", "", {})
    data = RankData([impl(held, "train"), impl(kept, "train"), impl(test, "")], {t.id: t for t in tasks})
    assign_splits(data)
    assert [im.split for im in data.impls] == ["heldout", "train", "test"]
    assert [trains_rankers(im) for im in data.impls] == [False, True, False]


@pytest.mark.parametrize("seed", [0, 5])
def test_the_ranker_splits_every_task_as_the_task_reader_does_whatever_its_row_recorded(seed):
    """One split for the ranker and for RL: `split_of_task` at the split seed, never a row's stored split (a row
    measured before a family moved, or under another seed, records another one)."""
    from pipeline.ranker.dataset import Impl, RankData, assign_splits
    from pipeline.tasks.generate import cached_tasks
    from pipeline.tasks.splits import split_of_task
    tasks = list(cached_tasks(0))
    picked = {}
    for t in tasks:  # a task of each split
        picked.setdefault(split_of_task(t, seed), t)
    stale = {"train": "val", "heldout": "test", "val": "train", "test": "train"}  # what an old row may say
    data = RankData([Impl(t.id, t.family, stale[s], t.kind, "naive", "naive", "c2cuda", "", {})
                     for s, t in picked.items()], {t.id: t for t in tasks})
    assign_splits(data, seed=seed)
    assert {im.task_id: im.split for im in data.impls} == {t.id: s for s, t in picked.items()}
