"""The error of the task layer: a task file, task source or candidate file a user gave is unusable."""
from pipeline.errors import UserError


class TaskError(UserError, ValueError):
    """A task file, task source or candidate file a user gave is unusable; the message says why and how to fix it."""
