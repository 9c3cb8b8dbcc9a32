"""Work lost on every retry: the record that stands for it in a list of results.

A supervised pool (actors/pool.py) replaces an actor that died and resubmits its work; an item whose
actor died on every attempt comes back as an `ItemFailed` in place of its result, and the other
items' results are unaffected. Code that reads results asks `isinstance(value, ItemFailed)`; it lives
here, without Ray, so that the plain-Python stages (rollout, verify, bench) can ask it too.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ItemFailed:
    """The result of an item whose actor died on every attempt (1 + max_retries of them)."""
    ticket: int
    method: str
    attempts: int
    error: str = field(repr=False)

    def __str__(self) -> str:
        return (f"item {self.ticket} ({self.method}) lost its actor on all {self.attempts} attempts; "
                f"last error: {self.error.strip().splitlines()[-1] if self.error.strip() else '?'}")
