"""C and CUDA source as text: the source without its comments, and whether it defines a function."""
from __future__ import annotations

import re
from functools import lru_cache

COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def without_comments(code: str) -> str:
    """`code` with every comment replaced by a space."""
    return COMMENTS.sub(" ", code)


@lru_cache(maxsize=4096)
def _definition(name: str) -> re.Pattern:
    return re.compile(rf"\b{re.escape(name)}\s*\([^;{{}}]*\)\s*(?:noexcept\s*)?\{{")


def defines(code: str, name: str) -> bool:
    """Whether `code` defines function `name` with a body (comments ignored)."""
    return _definition(name).search(without_comments(code)) is not None
