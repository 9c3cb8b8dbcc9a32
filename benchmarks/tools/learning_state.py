"""Carry a directory of the learning experiment (a policy, a run) between device calls and sessions, in parts.

A device call takes at most 64 MiB in (the working tree included) and brings at most 8 files of 16 MiB, 64 MiB
together, back in $OUT; the machine keeps its files only while it stays warm, and each session starts a bare
one. The experiment's policies are larger than one call (the 38M SFT policy's weights: 76 MB in bf16), and
every RL arm must start from the same SFT policy, bit for bit. So a directory travels in parts:

    python3 benchmarks/tools/learning_state.py pack runs/learning sft/sft/hf --out $OUT [--first K]
        (on the GPU machine) a tar of RUNS/PATH with sorted names and zeroed times and owners, so that every
        call packs the same bytes; cut into parts of PART_MIB; writes the parts from K on that fit one call's
        return, and NAME.manifest.json (the tar's sha256 and size, the part count, the weights' fingerprint
        where the directory is a policy); prints the --first of the next call, or that every part is out.
    python3 benchmarks/tools/learning_state.py unpack .learning-state/NAME --into runs/learning [--stash DIR]
        (on the GPU machine, the folder carried) adds the carried parts to the stash (default
        /tmp/learning-state/NAME, which lasts while the machine is warm); once every part is there, checks
        the sha256 and unpacks into RUNS; says which parts are still missing. Exit status 0 once unpacked,
        3 while parts are missing, 1 on a damaged part.

Between calls the parts wait here in an ignored folder (.learning-state/NAME/, from the call's files); a call
can carry as many as fit beside the working tree (benchmarks/tools/learning_h200.sh says how the session goes).
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import shutil
import sys
import tarfile
from pathlib import Path

PART_MIB = 15  # four parts and the manifest fit one call's return (8 files of 16 MiB, 64 MiB together)
RETURN_MIB = 62  # what one call's parts may bring back together
MISSING = 3  # unpack's exit status while parts are still to come


def state_name(path: str) -> str:
    return path.strip("/").replace("/", "_")


def deterministic_tar(root: Path, path: str) -> bytes:
    """RUNS/PATH as an uncompressed tar whose bytes depend only on the files' names and contents."""
    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        info.mode = 0o755 if info.isdir() else 0o644
        return info
    base = root / path
    if not base.is_dir():
        raise SystemExit(f"learning_state: {base} is not a directory; pack a policy or run directory under RUNS")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for p in [base, *sorted(base.rglob("*"))]:
            tar.add(p, arcname=str(p.relative_to(root)), recursive=False, filter=clean)
    return buf.getvalue()


def pack(root: Path, path: str, out: Path, first: int, part_mib: float = PART_MIB,
         return_mib: float = RETURN_MIB) -> int | None:
    """Write the parts from `first` that fit one return, and the manifest; the next call's first, or None."""
    data = deterministic_tar(root, path)
    size = int(part_mib * 2 ** 20)
    parts = [data[k:k + size] for k in range(0, len(data), size)]
    name = state_name(path)
    manifest = {"name": name, "path": path, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
                "parts": len(parts), "part_bytes": size}
    weights = root / path
    if any(weights.glob("*.safetensors")):
        from pipeline.rl.tracking import weights_fingerprint
        manifest["weights_sha256"] = weights_fingerprint(weights)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.manifest.json").write_text(json.dumps(manifest, indent=1))
    budget, k = return_mib * 2 ** 20, first
    while k < len(parts) and (k == first or budget >= len(parts[k])):
        (out / f"{name}.part{k:03d}").write_bytes(parts[k])
        budget -= len(parts[k])
        k += 1
    print(f"learning_state: {name}: parts {first}..{k - 1} of {len(parts)} written to {out}"
          + (f"; call again with --first {k}" if k < len(parts) else "; every part is out"))
    return k if k < len(parts) else None


def unpack(carried: Path, into: Path, stash: Path | None = None) -> int:
    """Add the carried parts to the stash; unpack once all are there (module docstring). Exit status."""
    manifests = sorted(carried.glob("*.manifest.json"))
    if not manifests:
        print(f"learning_state: {carried} holds no *.manifest.json; carry the folder pack's files went to",
              file=sys.stderr)
        return 1
    manifest = json.loads(manifests[0].read_text())
    name = manifest["name"]
    stash = stash or Path("/tmp/learning-state") / name
    stash.mkdir(parents=True, exist_ok=True)
    for part in sorted(carried.glob(f"{name}.part*")):
        shutil.copyfile(part, stash / part.name)
    missing = [k for k in range(manifest["parts"]) if not (stash / f"{name}.part{k:03d}").is_file()]
    if missing:
        print(f"learning_state: {name}: parts {missing} of {manifest['parts']} still to carry (stash {stash}, kept "
              f"while this machine stays warm)")
        return MISSING
    h, chunks = hashlib.sha256(), []
    for k in range(manifest["parts"]):
        chunk = (stash / f"{name}.part{k:03d}").read_bytes()
        h.update(chunk)
        chunks.append(chunk)
    if h.hexdigest() != manifest["sha256"]:
        print(f"learning_state: {name}: the parts do not add up to the packed tar (sha256 differs); pack them "
              f"again and carry them from one pack", file=sys.stderr)
        return 1
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(b"".join(chunks)), mode="r") as tar:
        tar.extractall(into, filter="data")
    note = f", weights {manifest['weights_sha256'][:12]}" if "weights_sha256" in manifest else ""
    print(f"learning_state: {name}: unpacked into {into / manifest['path']}{note}")
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="verb", required=True)
    a = sub.add_parser("pack", help="write one call's parts of RUNS/PATH to --out")
    a.add_argument("runs")
    a.add_argument("path")
    a.add_argument("--out", required=True)
    a.add_argument("--first", type=int, default=0)
    b = sub.add_parser("unpack", help="add carried parts to the stash; unpack once all are there")
    b.add_argument("carried")
    b.add_argument("--into", required=True)
    b.add_argument("--stash", default=None)
    args = p.parse_args(argv)
    if args.verb == "pack":
        pack(Path(args.runs), args.path, Path(args.out), args.first)
        return 0
    return unpack(Path(args.carried), Path(args.into), Path(args.stash) if args.stash else None)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.exit(main(sys.argv[1:]))
