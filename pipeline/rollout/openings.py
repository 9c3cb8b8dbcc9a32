"""The opening prompt of a task as token ids: made once per task, where the tasks are streamed.

In: tasks (or the task stream's rows, which carry each task as JSON) and the policy's tokenizer. Out: each
task's opening prompt ids (system and user messages, then the header of the reply), the first context of every
episode of the task. On a cluster the task stream's Ray Data workers call `add_opening_ids` on each block of
rows, so the driver, which runs every episode, never tokenizes a task statement (actors/task_stream.py); the
episode scheduler tokenizes only the tasks that reach it without their ids (held-out tasks of the live
evaluation, local runs). The ids travel as little-endian int32 bytes: one column of plain bytes per row.
"""
from __future__ import annotations

import functools

import numpy as np

from pipeline.core.records import Task
from pipeline.rollout.conversation import ChatFormat
from pipeline.rollout.prompts import opening_messages

OPENING_COLUMN = "opening_ids"


def opening_ids(tasks: list[Task], chat: ChatFormat) -> list[list[int]]:
    """The opening prompt ids of each task, in one batched tokenizer call."""
    return chat.encode_many([chat.opening_text(*opening_messages(t)) for t in tasks])


def pack_ids(ids: list[int]) -> bytes:
    """Token ids as bytes for a stream row."""
    return np.asarray(ids, dtype="<i4").tobytes()


def unpack_ids(data: bytes) -> list[int]:
    """The token ids `pack_ids` packed."""
    return np.frombuffer(data, dtype="<i4").tolist()


@functools.lru_cache(maxsize=2)
def _chat_format(model_path: str) -> ChatFormat:
    """One ChatFormat per model and worker process (a stream worker serves many blocks)."""
    from pipeline.rollout.tiny_model import load_tokenizer
    return ChatFormat(load_tokenizer(model_path))


def add_opening_ids(batch: dict, model_path: str) -> dict:
    """A block of task-stream rows (numpy columns) with the column `opening_ids` added: each task's packed ids."""
    tasks = [Task.model_validate_json(text) for text in batch["task_json"]]
    packed = [pack_ids(ids) for ids in opening_ids(tasks, _chat_format(model_path))]
    return {**batch, OPENING_COLUMN: np.array(packed, dtype=object)}
