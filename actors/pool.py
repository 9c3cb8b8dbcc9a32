"""SupervisedPool: the project's one pool of Ray actors that replaces dead actors and retries their work.

In: a factory `make_actor(slot) -> ActorHandle` (the driver sets resources with `.options(...)`),
a pool size and a retry budget. Out: method results per submitted item, in completion order
(`next_completed`) or input order (`map`). Every pool (compilers, evaluators, generators) uses it.
Dataset measurement's `WorkerPool` (pipeline/dataset/measure.py) is its counterpart for trusted code on
one host: plain processes, the same rule that a dead worker is replaced.

Failure rules:
- The actor died (killed, OOM, node lost: `RayActorError` and its subclasses `ActorDiedError`,
  `ActorUnavailableError`): the slot gets a fresh actor from the factory and the item is
  resubmitted, at most `max_retries` times; after that its result is an `ItemFailed` record,
  and the other items' results are unaffected. Work must therefore be idempotent.
- The method raised (`RayTaskError`: a bug in our code) or the actor's constructor failed: not
  retried; `PoolItemError` is raised to the caller naming the item. With more than one call in
  flight per actor, a call that kills its actor also costs a retry to the calls sharing it.

Work goes to the least loaded live actor as soon as one has room; the driver waits on every
in-flight call at once with `ray.wait` (no sleeping, no polling), of one pool (`next_completed`) or of
several (`wait_any`, `PoolWaiter`: the step loop's one wait over its generators, compilers and evaluators).
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import ray
from ray.actor import ActorHandle
from ray.exceptions import RayActorError, RayError, RayTaskError

from pipeline.core.lost_work import ItemFailed

# Arguments of these types are cheap to send with every call; anything else that several items
# of one `map` share is put in the object store once.
_INLINE_TYPES = (int, float, bool, str, bytes, type(None))


class PoolItemError(RuntimeError):
    """An item's method raised (or its actor could not be built); not retried. `ticket` names it."""

    def __init__(self, message: str, ticket: int, method: str):
        super().__init__(message)
        self.ticket = ticket
        self.method = method


@dataclass
class _Work:
    ticket: int
    method: str
    args: tuple
    deaths: int = 0


@dataclass(frozen=True)
class _Raised:
    """An outcome that raises when handed to the caller (kept in order with the other results)."""
    error: PoolItemError


# Options of every pooled actor: Ray's own restarts stay off (max_restarts=0, max_task_retries=0), since
# SupervisedPool replaces a dead actor and resubmits its work itself. With Ray restarting as well, the
# restarted actor would sit under the same handle that the pool then kills and replaces, and Ray's task
# retries would run an item again behind the pool's per-item retry budget.
NO_RAY_RESTARTS = {"max_restarts": 0, "max_task_retries": 0}


class SupervisedPool:
    """A fixed number of actor slots, each kept alive and busy; see the module docstring for failures."""

    def __init__(self, make_actor: Callable[[int], ActorHandle], size: int, max_retries: int,
                 max_in_flight_per_actor: int = 1):
        problems = [f"{name} = {value!r}: must be at least {low}"
                    for name, value, low in (("size", size, 1), ("max_retries", max_retries, 0),
                                             ("max_in_flight_per_actor", max_in_flight_per_actor, 1))
                    if value < low]
        if problems:
            raise ValueError("SupervisedPool: " + "; ".join(problems))
        self._make_actor = make_actor
        self._max_retries = max_retries
        self._max_in_flight = max_in_flight_per_actor
        self._actors: list[ActorHandle] = [make_actor(slot) for slot in range(size)]
        self._generation = [0] * size        # bumped when a slot's actor is replaced
        self._load = [0] * size              # calls in flight on the slot's current actor
        self._pending: deque[_Work] = deque()
        self._in_flight: dict[ray.ObjectRef, tuple[_Work, int, int]] = {}  # ref -> work, slot, generation
        self._done: deque[tuple[int, Any]] = deque()  # finished, not yet handed to the caller
        self._abandoned: set[int] = set()
        self._next_ticket = 0
        self._closed = False
        self.restarts = 0
        """Actors replaced after dying, over the pool's life."""

    @property
    def size(self) -> int:
        """Number of actor slots."""
        return len(self._actors)

    @property
    def actors(self) -> tuple[ActorHandle, ...]:
        """The live actor of each slot (a slot's handle changes when its actor is replaced)."""
        return tuple(self._actors)

    @property
    def capacity(self) -> int:
        """Calls the pool runs at once: its actors, times the calls each serves at once."""
        return len(self._actors) * self._max_in_flight

    def outstanding(self) -> int:
        """Items submitted whose results have not been handed out yet."""
        return len(self._pending) + len(self._in_flight) + len(self._done) - len(self._abandoned)

    def submit(self, method_name: str, *args: Any) -> int:
        """Queue `actor.method_name(*args)` on the next free actor and return its ticket.

        Arguments may be ObjectRefs (Ray passes their values): put a large object shared by many
        calls in the store once with `ray.put` and pass the ref.
        """
        if self._closed:
            raise RuntimeError("SupervisedPool.submit after shutdown(); build a new pool")
        if not hasattr(self._actors[0], method_name):
            raise ValueError(f"SupervisedPool.submit: the actors have no method '{method_name}'")
        work = _Work(self._next_ticket, method_name, tuple(args))
        self._next_ticket += 1
        self._pending.append(work)
        self._dispatch()
        return work.ticket

    def next_completed(self, timeout_s: float | None = None) -> tuple[int, Any]:
        """Return `(ticket, result)` of the next finished item; the result may be `ItemFailed`.

        Raises PoolItemError when that item's method raised, TimeoutError when nothing finished
        within `timeout_s`, RuntimeError when no work is outstanding.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self._done:
            self._done.extend(self._collect(deadline))
        return self._pop_done()

    def poll(self) -> tuple[int, Any] | None:
        """`(ticket, result)` of an item already settled (by `wait_any` or an earlier wait), or None; no waiting."""
        return self._pop_done() if self._done else None

    def _pop_done(self) -> tuple[int, Any]:
        ticket, outcome = self._done.popleft()
        if isinstance(outcome, _Raised):
            raise outcome.error
        return ticket, outcome

    def map(self, method_name: str, arg_tuples: Sequence[tuple]) -> list[Any]:
        """Run `method_name(*args)` for every tuple; results in input order (`ItemFailed` for lost items).

        Items stream through the pool. A non-trivial argument object shared by several items is
        put in the object store once. If an item's method raises, the remaining items of this
        call are abandoned and PoolItemError names the item's index in `arg_tuples`.
        """
        shared = _share_repeated(arg_tuples)
        tickets = [self.submit(method_name, *args) for args in shared]
        mine = set(tickets)
        results: dict[int, Any] = {}
        finished = list(self._done)  # some may have finished before we wait
        self._done.clear()
        while True:
            for ticket, outcome in finished:
                if ticket in mine:
                    results[ticket] = outcome
                else:  # another caller's item: keep it for next_completed
                    self._done.append((ticket, outcome))
            if len(results) == len(tickets):
                break
            finished = self._collect(None)
        for i, ticket in enumerate(tickets):
            outcome = results[ticket]
            if isinstance(outcome, _Raised):
                self._abandon(mine - results.keys())
                raise PoolItemError(f"map item {i}: {outcome.error}", ticket, method_name) from outcome.error.__cause__
        return [results[t] for t in tickets]

    def shutdown(self) -> None:
        """Kill every actor and forget all outstanding work; the pool cannot be used afterwards."""
        if self._closed:
            return
        for actor in self._actors:
            ray.kill(actor, no_restart=True)
        self._pending.clear()
        self._in_flight.clear()
        self._done.clear()
        self._closed = True

    def __enter__(self) -> SupervisedPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    # -- internals -------------------------------------------------------------------------------

    def _dispatch(self) -> None:
        """Send pending work to the least loaded actors while any has room."""
        while self._pending:
            slot = min(range(len(self._actors)), key=self._load.__getitem__)
            if self._load[slot] >= self._max_in_flight:
                return
            work = self._pending.popleft()
            ref = getattr(self._actors[slot], work.method).remote(*work.args)
            self._in_flight[ref] = (work, slot, self._generation[slot])
            self._load[slot] += 1

    def _collect(self, deadline: float | None) -> list[tuple[int, Any]]:
        """Wait for at least one in-flight call, handle every call already finished, return their outcomes.

        Retried calls yield no outcome, so the list may be empty.
        """
        return [outcome for _, outcome in _wait_round([self], deadline)]

    def _settle(self, ref: ray.ObjectRef, fetched: dict | None = None) -> tuple[int, Any] | None:
        """Turn one finished call into `(ticket, outcome)`, or None when it was requeued or abandoned. `fetched`:
        values already got for several refs at once (`_fetch`); a ref not in it is got here."""
        work, slot, generation = self._in_flight.pop(ref)
        if generation == self._generation[slot]:
            self._load[slot] -= 1
        try:
            outcome: Any = fetched[ref] if fetched and ref in fetched else ray.get(ref)
        except RayTaskError as e:  # checked first: the method raised, whatever the cause's type
            cause = e.cause if e.cause is not None else e
            outcome = _raised(work, f"raised {type(cause).__name__}: {cause}; remote traceback:\n", e)
        except RayActorError as e:
            if e.actor_init_failed:
                outcome = _raised(work, f"the actor of slot {slot} failed in its constructor "
                                        "(not retried: a new one would fail alike):", e)
            else:
                self._replace(slot, generation)
                work.deaths += 1
                if work.deaths <= self._max_retries and work.ticket not in self._abandoned:
                    self._pending.appendleft(work)
                    return None
                outcome = ItemFailed(work.ticket, work.method, work.deaths, str(e))
        except RayError as e:  # e.g. an argument's object was lost: surfaced, not retried
            outcome = _raised(work, "failed in Ray:", e)
        if work.ticket in self._abandoned:
            self._abandoned.discard(work.ticket)
            return None
        return work.ticket, outcome

    def _replace(self, slot: int, generation: int) -> None:
        """Give `slot` a fresh actor, once per death (later failures of the same actor find it done)."""
        if generation != self._generation[slot]:
            return
        # ActorUnavailableError may be transient, but a replacement is certain to serve; kill the
        # old one so it cannot come back holding resources.
        ray.kill(self._actors[slot], no_restart=True)
        self._actors[slot] = self._make_actor(slot)
        self._generation[slot] += 1
        self._load[slot] = 0
        self.restarts += 1

    def _abandon(self, tickets: Any) -> None:
        """Drop results of `tickets`: pending ones are removed, in-flight ones discarded when they end."""
        drop = set(tickets)
        self._pending = deque(w for w in self._pending if w.ticket not in drop)
        self._done = deque(d for d in self._done if d[0] not in drop)
        self._abandoned |= {w.ticket for w, _, _ in self._in_flight.values() if w.ticket in drop}


def _wait_round(pools: Sequence[SupervisedPool], deadline: float | None) -> list[tuple[SupervisedPool, tuple]]:
    """One `ray.wait` over the in-flight calls of all `pools`: settle every call already finished and give
    freed actors their pool's pending work at once (not one per call of ours). Returns (pool, outcome) of
    each settled call (retried calls yield none, so it may be empty). TimeoutError past `deadline`,
    RuntimeError when no pool has work in flight."""
    owner = {ref: p for p in pools for ref in p._in_flight}
    if not owner:
        raise RuntimeError("SupervisedPool: no work outstanding; submit() before waiting for results")
    timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
    refs = list(owner)
    ready, rest = ray.wait(refs, num_returns=1, timeout=timeout)
    if not ready:
        raise TimeoutError(f"SupervisedPool: no call finished within the timeout ({len(refs)} in flight)")
    if rest:
        more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
        ready += more
    fetched = _fetch(ready)
    settled = [(owner[ref], outcome) for ref in ready if (outcome := owner[ref]._settle(ref, fetched)) is not None]
    for pool in pools:
        pool._dispatch()
    return settled


def _fetch(refs: list[ray.ObjectRef]) -> dict:
    """The values of finished calls in one `ray.get` (one round trip, not one per call); {} when one of them
    failed, so that each is then got alone and its failure settled as its own."""
    try:
        return dict(zip(refs, ray.get(refs)))
    except RayError:
        return {}


def wait_any(pools: Sequence[SupervisedPool], timeout_s: float | None = None) -> None:
    """One wait over the in-flight calls of all `pools`; returns once at least one pool holds a settled
    result for `poll` (at once when one already does). TimeoutError when none finished within `timeout_s`,
    RuntimeError when none has work in flight."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while not any(p._done for p in pools):
        for pool, outcome in _wait_round(pools, deadline):
            pool._done.append(outcome)


class PoolWaiter:
    """The rollout's one wait over several pools (pipeline/rollout/scheduler.py's `Waiter`)."""

    def __init__(self, pools: Sequence[SupervisedPool]):
        self.pools = tuple(pools)

    def wait(self, timeout_s: float | None = None) -> None:
        wait_any(self.pools, timeout_s)


def _raised(work: _Work, what: str, cause: RayError) -> _Raised:
    """An error outcome naming the item; `what` says what went wrong, `cause`'s text follows."""
    error = PoolItemError(f"item {work.ticket} ({work.method}) {what} {cause}", work.ticket, work.method)
    error.__cause__ = cause
    return _Raised(error)


def _share_repeated(arg_tuples: Sequence[tuple]) -> list[tuple]:
    """Replace each non-trivial argument object used by more than one item with one ObjectRef."""
    seen: dict[int, int] = {}
    for args in arg_tuples:
        for arg in args:
            if not isinstance(arg, (_INLINE_TYPES, ray.ObjectRef)):
                seen[id(arg)] = seen.get(id(arg), 0) + 1
    refs: dict[int, ray.ObjectRef] = {}
    out = []
    for args in arg_tuples:
        new = []
        for arg in args:
            if seen.get(id(arg), 0) > 1:
                if id(arg) not in refs:
                    refs[id(arg)] = ray.put(arg)
                arg = refs[id(arg)]
            new.append(arg)
        out.append(tuple(new))
    return out
