"""Versioned ranker checkpoints: one directory per version, with a manifest.

Layout: `ROOT/v0001/`, `ROOT/v0002/`, ... each holding `manifest.json` and the model's files
(gbt: `model.txt`, LightGBM's text format; neural: `model.pt` and `normalisation.json`).
The manifest records: the checkpoint format, the version, the ranker kind and its settings, the
feature list it reads (`FEATURE_NAMES` at training time: a checkpoint whose list differs from the
code's is refused, since its columns would be misread), the hash of the training data, the
training and validation metrics, and when it was written. `load_ranker(ROOT)` takes the highest
version; `load_ranker(ROOT/v0002)` that one.
"""
from __future__ import annotations

import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path

from pipeline.core.errors import UserError
from pipeline.ranker.base import Ranker
from pipeline.ranker.features import ANALYSIS_VERSION, FEATURE_NAMES

FORMAT = 1
_VERSION_DIR = re.compile(r"^v(\d{4,})$")


class CheckpointError(UserError, ValueError):
    """A checkpoint is missing or unusable; the message says which and what to do."""


def _versions(root: Path) -> list[int]:
    if not root.is_dir():
        return []
    return sorted(int(m.group(1)) for p in root.iterdir() if (m := _VERSION_DIR.match(p.name)) and p.is_dir())


def save_checkpoint(ranker: Ranker, root: str | Path, data_hash: str, metrics: dict, extra: dict | None = None) -> Path:
    """Write `ranker` as the next version under `root`; returns its directory."""
    root = Path(root).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    version = (_versions(root) or [0])[-1] + 1
    final = root / f"v{version:04d}"
    tmp = root / f".v{version:04d}.{os.getpid()}.tmp"
    tmp.mkdir()
    settings = ranker.save_files(tmp)
    manifest = {"format": FORMAT, "version": version, "kind": ranker.kind, "settings": settings,
                "feature_names": list(FEATURE_NAMES), "analysis_version": ANALYSIS_VERSION,
                "data_hash": data_hash, "metrics": metrics,
                "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), **(extra or {})}
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str))
    os.replace(tmp, final)  # a reader never sees a half-written version
    return final


def resolve(path: str | Path) -> Path:
    """A version directory: `path` itself if it holds a manifest, else its highest version; a directory that
    `cudaperf rank train --out` filled with a single kind's folder stands for that kind."""
    path = Path(path).expanduser()
    if (path / "manifest.json").is_file():
        return path
    versions = _versions(path)
    if not versions:
        kinds = sorted(d.name for d in path.iterdir() if d.is_dir() and _versions(d)) if path.is_dir() else []
        if len(kinds) == 1:  # `cudaperf rank train --out DIR` of one kind: DIR/<kind>/v0001
            return resolve(path / kinds[0])
        if kinds:
            raise CheckpointError(f"{path} holds rankers of several kinds ({', '.join(kinds)}); name one, e.g. "
                                  f"ranker.checkpoint={path / kinds[0]}")
        raise CheckpointError(f"{path}: no ranker checkpoint (manifest.json or v0001/...) there; train one with "
                              "`cudaperf rank train --out DIR`")
    return path / f"v{versions[-1]:04d}"


def read_manifest(path: str | Path) -> dict:
    return json.loads((resolve(path) / "manifest.json").read_text())


def load_ranker(path: str | Path, cache_dir: str = "") -> tuple[Ranker, dict]:
    """The ranker saved at `path` (a version directory or a root) and its manifest."""
    directory = resolve(path)
    manifest = json.loads((directory / "manifest.json").read_text())
    if manifest.get("format") != FORMAT:
        raise CheckpointError(f"{directory}: checkpoint format {manifest.get('format')} is not {FORMAT}; "
                              "train it again")
    if manifest["feature_names"] != list(FEATURE_NAMES):
        raise CheckpointError(f"{directory}: trained on another feature list than this code's; train it again with "
                              "`cudaperf rank train`")
    kind = manifest["kind"]
    if kind == "gbt":
        from pipeline.ranker.gbt import GBTRanker
        return GBTRanker.load_files(directory, manifest["settings"]), manifest
    if kind == "neural":
        from pipeline.ranker.neural import NeuralRanker
        return NeuralRanker.load_files(directory, manifest["settings"], cache_dir), manifest
    raise CheckpointError(f"{directory}: unknown ranker kind '{kind}'")
