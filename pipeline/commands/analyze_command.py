"""`cudaperf analyze FILE.cu [--block N] [--arch sm_90]`: the structural analysis of one CUDA source."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from pipeline.core.errors import UserError

HELP = "structural analysis of a CUDA file"


def _block_arg(text: str):
    parts = [int(p) for p in text.lower().replace(",", "x").split("x") if p]
    if not parts or len(parts) > 3 or min(parts) <= 0:
        raise argparse.ArgumentTypeError(f"--block '{text}': give threads per block (256) or dims (16x16)")
    return parts[0] if len(parts) == 1 else tuple(parts)


def add_parser(commands) -> argparse.ArgumentParser:
    p = commands.add_parser("analyze", help=HELP, description="Structural analysis of a CUDA source: "
                            "ptxas resources, occupancy, coalescing, bank conflicts, barriers, score, hints.")
    p.add_argument("file", help="a .cu file")
    p.add_argument("--block", type=_block_arg, default=None, help="threads per block (256) or dims (16x16); "
                   "default: from the source's <<<...>>>")
    p.add_argument("--arch", default="sm_90", help="target architecture (default sm_90)")
    p.add_argument("--dynamic-smem", type=int, default=0, help="dynamic shared memory bytes per block")
    p.add_argument("--no-nvcc", action="store_true", help="skip the ptxas report (no nvcc needed)")
    p.add_argument("--json", action="store_true", help="print the full analysis as JSON")
    return p


def run(args, open_cluster=None) -> int:
    """Print the structural analysis of one file; a bad file or --arch is a UserError (one line)."""
    from pipeline.structure.analyze import analyze_source, format_analysis
    from pipeline.structure.occupancy import arch_limits
    path = Path(args.file)
    if not path.is_file():
        raise UserError(f"'{path}' is not a file; pass the path of a .cu source")
    try:
        arch_limits(args.arch)
    except ValueError as e:  # an unknown --arch; a ValueError of the analysis itself is our bug and raises
        raise UserError(str(e)) from None
    try:
        source = path.read_text()
    except UnicodeDecodeError:
        raise UserError(f"'{path}' is not UTF-8 text; pass the path of a .cu source") from None
    a = analyze_source(source, args.arch, args.block, args.dynamic_smem, run_nvcc=not args.no_nvcc)
    print(json.dumps(a.to_dict(), indent=1, default=str) if args.json else format_analysis(a))
    return 0
