"""How a candidate's run ends early: `Stop` carries the verdict, and the child's replies are read here.

A reply is only ever taken as bad news: a reported failure or a runtime-check flag ends the run;
a reply that says all went well decides nothing (the trusted side checks its own buffers).
"""
from __future__ import annotations

from pipeline.evaluation.checks.numerics import DOWNGRADE_FLAG
from pipeline.evaluation.child.sandbox import ChildFailed

REJECTING_FLAGS = ("torch-compute-in-forward", "timing-tamper", "threads", "side-stream", "dispatch-tamper",
                  DOWNGRADE_FLAG)


class Stop(Exception):
    """Ends a candidate's run with a verdict."""

    def __init__(self, verdict: str, reason: str, flags: list[str] | None = None):
        super().__init__(reason)
        self.verdict, self.reason, self.flags = verdict, reason, flags or []


def judge_reply(reply: dict, stage: str) -> None:
    """Turn a child's reply into a Stop when it reports a failure or a runtime-check flag."""
    flags = reply.get("flags") or []
    rejecting = [f for f in flags if f.startswith(REJECTING_FLAGS)]
    if rejecting:
        raise Stop("rejected", rejecting[0], [f.split(":")[0] for f in rejecting])
    if flags:
        raise Stop("incorrect", flags[0], [])
    if not reply.get("ok"):
        what = "a CUDA error" if reply.get("cuda") else "an error"
        raise Stop("runtime_error", f"{stage}: {what}: {reply.get('error', '')}")


def child_failure(e: ChildFailed, stage: str) -> Stop:
    if e.timeout:
        return Stop("timeout", f"{stage}: {e}")
    return Stop("runtime_error", f"{stage}: {e}")
