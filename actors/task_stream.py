"""The task stream on Ray Data: a `pipeline.tasks.reader.TaskReader`'s rows as a streaming Dataset.

The selection, the seeded order and the position live in the reader (plain Python); this only
hands its rows to Ray Data, in order, so consumers on the cluster stream them block by block.

    reader = TaskReader.from_sources(["generated", "/data/KernelBench"], splits=["train"], seed=1)
    reader.restore(saved_state)                      # optional: continue where a run stopped
    for row in task_dataset(reader, model_path=path).iter_rows():
        task = task_of_row(row); ids = unpack_ids(row["opening_ids"]); ...; reader.consumed(row)
    save(reader.state())
"""
from __future__ import annotations

from pathlib import Path

import ray

from pipeline.rollout.openings import add_opening_ids
from pipeline.tasks.reader import TaskReader


def task_dataset(reader: TaskReader, epochs: int = 1, rows_per_block: int = 64,
                 model_path: str | Path | None = None) -> ray.data.Dataset:
    """The reader's rows from its current position (then `epochs - 1` whole epochs more), in order. With
    `model_path`, each row also carries its task's opening prompt ids (`opening_ids`, packed), tokenized by the
    stream's workers a block at a time (pipeline/rollout/openings.py), not by the consumer."""
    rows = list(reader.rows(epochs))
    ds = ray.data.from_items(rows, override_num_blocks=max(1, -(-len(rows) // rows_per_block)))
    ds.context.execution_options.preserve_order = True
    if model_path is not None:
        # num_cpus=0: the run's actors may hold every CPU of the cluster (a local run asks Ray for exactly what
        # they need); tokenizing a block is light, and a task waiting for a CPU would stall the run for ever.
        ds = ds.map_batches(add_opening_ids, fn_kwargs={"model_path": str(model_path)}, batch_format="numpy",
                            batch_size=rows_per_block, num_cpus=0)
    return ds
