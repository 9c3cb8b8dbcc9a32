"""The live evaluation of `cudaperf train` (train.live_eval_tasks): which held-out tasks a step gets, and
that a live source the run also trains on is refused."""
import pytest

from pipeline.core.config import ConfigError, load_config
from pipeline.tasks.reader import TaskReader
from pipeline.rl.loop import live_eval_reader, live_tasks


def test_a_steps_live_tasks_depend_on_the_step_alone_and_wrap_around_epochs(builtin_tasks):
    reader = TaskReader(list(builtin_tasks.values()), seed=3)
    n, size = 3, len(reader)
    steps = [live_tasks(reader, step, n) for step in range(size)]  # 3 epochs' worth
    again = TaskReader(list(builtin_tasks.values()), seed=3)  # a resumed run's own reader
    assert [t.id for t in live_tasks(again, 5, n)] == [t.id for t in steps[5]]  # draws the same tasks
    flat = [t.id for s in steps for t in s]
    for epoch in range(n):  # each epoch is every task once, in that epoch's seeded order
        assert flat[epoch * size:(epoch + 1) * size] == [t.id for t in reader.order(epoch)]
    assert reader.order(0) != reader.order(1)


def test_a_live_source_that_the_run_trains_on_is_refused():
    cfg = load_config(None, ["train.live_eval_tasks=2", "train.live_eval_source=builtin", "tasks.source=builtin"])
    training = TaskReader.from_sources("builtin", kinds=cfg.tasks.kinds)
    with pytest.raises(ConfigError, match="shares .* tasks with tasks.source 'builtin'.*generated:heldout"):
        live_eval_reader(cfg, training)
    off = load_config(None, ["train.live_eval_tasks=0", "tasks.source=builtin"])
    assert live_eval_reader(off, training) is None


def test_the_heldout_split_beside_the_train_split_is_a_valid_live_evaluation():
    cfg = load_config(None, ["train.live_eval_tasks=2", "tasks.source=generated:train",
                             "data.allow_unchecked_tasks=true"])  # the splits, whatever the registry holds
    training = TaskReader.from_sources("generated:train", kinds=cfg.tasks.kinds, allow_unchecked=True)
    live = live_eval_reader(cfg, training)
    assert len(live) > 300 and {t.family for t in live.tasks} <= {t.family for t in training.tasks}
