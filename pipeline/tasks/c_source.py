"""C and CUDA source as text: the source without its comments, and whether it defines a function."""
from __future__ import annotations

import re

COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def without_comments(code: str) -> str:
    """`code` with every comment replaced by a space."""
    return COMMENTS.sub(" ", code)


def defines(code: str, name: str) -> bool:
    """Whether `code` defines function `name` with a body (comments ignored)."""
    definition = rf"\b{re.escape(name)}\s*\([^;{{}}]*\)\s*(?:noexcept\s*)?\{{"
    return re.search(definition, without_comments(code)) is not None
