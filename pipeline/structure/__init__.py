"""Structural analysis of CUDA kernels (docs/protocol.md, step 6), plain Python without Ray.

- `ptxas`: the ptxas resource report (registers, shared memory, spills, stack, barriers).
- `resources`: that report made by the trusted side's own ptxas/cuobjdump run on a build.
- `reach`: which kernels the host entry points launch (only those are scored).
- `occupancy`: theoretical occupancy per architecture; launch configurations in a source.
- `static`: per-kernel static features from tree-sitter parses. Its machinery: `cuda_ast`
  (parsing, macros, constants), `symbolic` (index values as polynomials in threadIdx.x),
  `lanes` (per-warp sectors and bank conflicts), `memory` (records), `expressions` and
  `access` (the abstract interpreter over a kernel's expressions and statements).
- `roofline`: arithmetic intensity and roofline position from a task's work model.
- `score`: the structural score in [0, 1] and the fitting of its weights.
- `hints`: findings for the feedback message.
- `analyze`: everything at once (`analyze_source`), and the `cudaperf analyze` entry point.
- `validate_gpu`: a script for the H200 that checks occupancy and coalescing against the GPU.
Nothing is imported here; `ptxas` and `occupancy` need neither tree-sitter nor pydantic.
"""
