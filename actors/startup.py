"""Waiting for a job's actors to start, and saying so when the cluster cannot start them.

Ray keeps an actor whose resources no node has free in PENDING_CREATION for ever, and a job waiting on it
prints nothing useful. `wait_started(refs, timeout_s)` waits on the actors' first calls; when they are not
all done after `timeout_s` (`cluster.start_timeout_s`) and Ray holds some of this job's actors pending for
resources (Ray's state API: their `required_resources`, against what the cluster has free and in all), it
stops with `ClusterTooSmall`: one sentence naming what is missing and the fixes. Actors that are only slow
(a model still loading) are waited for without end, as before.
"""
from __future__ import annotations

import time
from collections import Counter

import ray

from pipeline.core.errors import UserError

FIXES = ("start Ray with more of it (for example `ray start --head --num-cpus N` on this machine), add nodes, or "
         "use a smaller config (fewer compile.workers, rollout.generator_actors or learner.ranks); if an "
         "autoscaler is adding nodes, raise cluster.start_timeout_s")


class ClusterTooSmall(UserError, RuntimeError):
    """This job's actors wait for resources the cluster does not have free."""


def _round(resources: dict[str, float]) -> dict[str, float]:
    """CPU, GPU and custom resources (not memory or node ids), rounded for a sentence."""
    return {k: round(v, 3) for k, v in sorted(resources.items())
            if not k.startswith("node:") and k not in ("memory", "object_store_memory") and v}


def pending_demand() -> tuple[list[str], dict[str, float]] | None:
    """(class names, summed required resources) of this job's actors that Ray holds in PENDING_CREATION with no
    process yet (waiting for resources, not constructing), or None when Ray's state API cannot say (no dashboard)."""
    try:
        from ray.util.state import list_actors
        context = ray.get_runtime_context()
        pending = list_actors(address=context.gcs_address,  # this job's cluster, when a host runs several
                              filters=[("state", "=", "PENDING_CREATION"), ("job_id", "=", context.get_job_id())],
                              detail=True, raise_on_missing_output=False, timeout=10)
    except Exception:  # the state API needs the dashboard, which a plain local ray.init may not start
        return None
    pending = [a for a in pending if not a.pid]  # the others have a process: their constructor is running
    demand: Counter = Counter()
    for actor in pending:
        demand.update(actor.required_resources or {})
    return [a.class_name.rsplit(".", 1)[-1] for a in pending], dict(demand)


def shortfall(demand: dict[str, float], free: dict[str, float]) -> dict[str, float]:
    """What `demand` needs beyond what is `free`, per resource ({} when it fits)."""
    return {k: v - free.get(k, 0.0) for k, v in demand.items() if v > free.get(k, 0.0) + 1e-9}


def shortfall_sentence(classes: list[str], demand: dict[str, float], free: dict[str, float],
                       total: dict[str, float]) -> str:
    """The one sentence of ClusterTooSmall: which actors wait, for what, what the cluster has, and the fixes."""
    counts = ", ".join(f"{n} {name}" for name, n in sorted(Counter(classes).items()))
    missing = shortfall(demand, free)
    return (f"the cluster cannot start {len(classes)} of this job's actors ({counts}): they need "
            f"{_round(demand)} and the cluster has {_round(free)} free of {_round(total)} in all, "
            f"{_round(missing) or 'nothing'} short; {FIXES}")


def wait_started(refs: list, timeout_s: float, poll_s: float = 2.0) -> None:
    """Wait until every one of `refs` (the first call of each actor) is done or failed; ClusterTooSmall when,
    after `timeout_s`, some of this job's actors still wait for resources the cluster does not have free."""
    refs = list(refs)
    deadline = time.monotonic() + timeout_s
    while refs:
        _, refs = ray.wait(refs, num_returns=len(refs), timeout=poll_s)
        if refs and time.monotonic() > deadline:
            found, free = pending_demand(), ray.available_resources()
            if found and shortfall(found[1], free):
                raise ClusterTooSmall(shortfall_sentence(*found, free, ray.cluster_resources()))
            deadline = time.monotonic() + timeout_s  # slow to start, not short of resources: keep waiting
