"""The task stream on Ray Data: a `pipeline.tasks.reader.TaskReader`'s rows as a streaming Dataset.

The selection, the seeded order and the position live in the reader (plain Python); this only
hands its rows to Ray Data, in order, so consumers on the cluster stream them block by block.

    reader = TaskReader.from_sources(["generated", "/data/KernelBench"], splits=["train"], seed=1)
    reader.restore(saved_state)                      # optional: continue where a run stopped
    for row in task_dataset(reader).iter_rows():
        task = task_of_row(row); ...; reader.consumed(row)
    save(reader.state())
"""
from __future__ import annotations

import ray

from pipeline.tasks.reader import TaskReader


def task_dataset(reader: TaskReader, epochs: int = 1, rows_per_block: int = 64) -> ray.data.Dataset:
    """The reader's rows from its current position (then `epochs - 1` whole epochs more), in order."""
    rows = list(reader.rows(epochs))
    ds = ray.data.from_items(rows, override_num_blocks=max(1, -(-len(rows) // rows_per_block)))
    ds.context.execution_options.preserve_order = True
    return ds
