"""The measured dataset as Parquet: the schema (defined once), writing a shard, loading them all.

In: rows from `pipeline.dataset.measure` (one per task, implementation and input configuration).
Out: Parquet files under `pipeline/assets/measured/` (one per shard) and, from `load_measurements`,
one pyarrow Table of every row.

Columns (units in the names): task_id, kind, family, split (the task's split when measured, a record
only: readers ask `pipeline.tasks.splits.split_of_task`), impl_name, strategy, format, config,
correct (the implementation passed every check configuration of its task, both input sets
each), max_error (this configuration's worst normalised error, <= 1 passes; null when not
checked), median_ms / iqr_ms / min_ms / trials (null/0 on configurations that are not timed, or
when the implementation is not correct), features_json (pre-run structural features, the
evaluator's own), error (why it failed, '' when correct), task_hash (the task as measured, code
included: a changed task is measured again), gpu_name, sm_clock_mhz, mem_clock_mhz, driver,
cuda, torch_version, measured_at, generator_version. The PyTorch reference of a torch2cuda task
has impl_name 'pytorch_eager' and strategy 'reference'.
"""
from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.core.assets import MEASURED_DIR
from pipeline.core.errors import UserError


REFERENCE_IMPL = "pytorch_eager"
REFERENCE_STRATEGY = "reference"

SCHEMA = pa.schema([
    ("task_id", pa.string()), ("kind", pa.string()), ("family", pa.string()), ("split", pa.string()),
    ("impl_name", pa.string()), ("strategy", pa.string()), ("format", pa.string()), ("config", pa.string()),
    ("correct", pa.bool_()), ("max_error", pa.float64()),
    ("median_ms", pa.float64()), ("iqr_ms", pa.float64()), ("min_ms", pa.float64()), ("trials", pa.int32()),
    ("features_json", pa.string()), ("error", pa.string()), ("task_hash", pa.string()),
    ("gpu_name", pa.string()), ("sm_clock_mhz", pa.int32()), ("mem_clock_mhz", pa.int32()),
    ("driver", pa.string()), ("cuda", pa.string()), ("torch_version", pa.string()),
    ("measured_at", pa.timestamp("s", tz="UTC")), ("generator_version", pa.string()),
])


class MeasurementsError(UserError, ValueError):
    """Measurement files are missing or unreadable; the message says which and what to do."""


def rows_to_table(rows: list[dict]) -> pa.Table:
    """Rows (dicts with every column of SCHEMA) as a Table of SCHEMA."""
    missing = [c for c in SCHEMA.names if rows and c not in rows[0]]
    if missing:
        raise ValueError(f"measurement rows lack the columns {missing}; build them with pipeline.dataset.measure")
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def write_table(table: pa.Table, path: str | Path, metadata: dict[str, str] | None = None) -> None:
    """Write atomically (a temporary file renamed into place): a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if metadata:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                               **{k.encode(): v.encode() for k, v in metadata.items()}})
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def read_file(path: str | Path) -> pa.Table:
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as e:
        raise MeasurementsError(f"{path}: not a readable Parquet file ({e}); delete it and measure its shard "
                                f"again") from None
    missing = [c for c in SCHEMA.names if c not in table.column_names]
    if missing:
        raise MeasurementsError(f"{path}: lacks the columns {missing}; it was written by an older version, "
                                f"measure its shard again")
    return table.select(SCHEMA.names).cast(SCHEMA)


def parquet_files(path_or_dir: str | Path | None = None) -> list[Path]:
    path = Path(path_or_dir) if path_or_dir is not None else MEASURED_DIR
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(p for p in path.glob("*.parquet") if not p.name.startswith("."))
    return []


def load_measurements(path_or_dir: str | Path | None = None) -> pa.Table:
    """Every measurement row in one Parquet file or a directory of them (default
    pipeline/assets/measured/). A task measured more than once keeps only its latest measurement."""
    files = parquet_files(path_or_dir)
    if not files:
        where = path_or_dir if path_or_dir is not None else MEASURED_DIR
        raise MeasurementsError(f"no measurement files (*.parquet) in {where}; run `cudaperf data measure` on a "
                                f"GPU host and copy its files there")
    table = pa.concat_tables([read_file(f) for f in files])
    return latest_per_task(table)


def latest_per_task(table: pa.Table) -> pa.Table:
    """Drop rows of a task that belong to an older measurement of it (by measured_at)."""
    if table.num_rows == 0:
        return table
    latest = table.group_by("task_id").aggregate([("measured_at", "max")])
    keyed = table.append_column("_row", pa.array(range(table.num_rows), pa.int64()))
    joined = keyed.join(latest, keys="task_id")
    keep = pc.equal(joined["measured_at"], joined["measured_at_max"])
    rows = pc.sort_indices(joined.filter(keep)["_row"])
    return table.take(joined.filter(keep)["_row"].take(rows))


def current_rows(table: pa.Table, tasks) -> tuple[pa.Table, int]:
    """The rows of tasks that exist in `tasks` with the content they were measured with (same
    task_hash), and how many measured tasks were left out (changed or removed since)."""
    if table.num_rows == 0:
        return table, 0
    now = {t.id: t.measured_hash() for t in tasks}
    keys = list(zip(table["task_id"].to_pylist(), table["task_hash"].to_pylist()))
    keep = [now.get(tid) == h for tid, h in keys]
    return table.filter(pa.array(keep)), len({tid for (tid, _), k in zip(keys, keep) if not k})
