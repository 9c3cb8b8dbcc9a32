"""How the user can run `cudaperf` again from where they are: the name a printed hint starts with, so that a
hint pastes as printed. `cudaperf` where the shell finds this same program on PATH; otherwise the path the user
ran (`.venv/bin/cudaperf` from the checkout), or `python -m pipeline.cli` with this interpreter."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def program_name(argv0: str | None = None, cwd: str | Path | None = None) -> str:
    """`cudaperf`, or the command that runs this program from `cwd` when `cudaperf` is not on PATH."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    cwd = Path(cwd or os.getcwd())
    ran = Path(argv0)
    if ran.name == "cudaperf":
        found = shutil.which("cudaperf")
        if found and ran.exists() and Path(found).resolve() == ran.resolve():
            return "cudaperf"
        return _relative(ran, cwd)
    found = shutil.which("cudaperf")
    if found and Path(found).resolve().parent == Path(sys.executable).resolve().parent:
        return "cudaperf"
    return f"{_relative(Path(sys.executable), cwd)} -m pipeline.cli"


def _relative(path: Path, cwd: Path) -> str:
    """`path` as the user can type it from `cwd`: relative below cwd (`.venv/bin/cudaperf`), else absolute."""
    full = path if path.is_absolute() else cwd / path
    try:
        rel = os.path.relpath(full, cwd)
    except ValueError:
        return str(full)
    if rel.startswith(".."):
        return str(full)
    return rel if "/" in rel else f"./{rel}"
