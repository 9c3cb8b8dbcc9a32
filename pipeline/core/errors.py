"""The one base class of the mistakes a user can fix (bad config, missing file, bad task, bad model path).

In: nothing; out: `UserError`, and `TaskError` for the task layer. Every layer may import it, so this
module imports nothing.
Each module's own error class of that kind derives from it next to its usual base, e.g.
`class ConfigError(UserError, ValueError)`, and `pipeline/cli.py:main` catches it once.
Failures of our own code (a broken task, a CUDA error, a dead child) are not user errors: they
raise their own exceptions and keep their traceback.
"""


class UserError(Exception):
    """A mistake the user can fix; its message is one sentence naming the problem and the fix (a
    ConfigError lists every problem, one per line). Commands print it as one line (`cudaperf: <message>`)
    and exit with status 2."""


class TaskError(UserError, ValueError):
    """A task file, task source or candidate file a user gave is unusable; the message says why and how to fix it."""
