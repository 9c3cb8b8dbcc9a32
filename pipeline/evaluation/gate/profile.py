"""Gate profiles: what one `eval.gate_profile` accepts beyond the rules every profile keeps."""
from __future__ import annotations

from dataclasses import dataclass


# --- profiles -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GateProfile:
    """What one `eval.gate_profile` accepts beyond the rules every profile keeps.

    Every profile refuses what can carry a hack: threads, extra streams, events and graphs, patched
    timers or torch, tensor subclasses, the reference, the harness, introspection, files, processes
    and network, try/except fallbacks, precision below the task's, torch's global settings,
    load-time code. A profile decides only how much of the work an answer may leave to torch and
    vendor libraries (kernelbench-format candidates; c2cuda and light builds have a fixed link line).
    """
    name: str
    torch_compute: bool                 # torch ops and modules may compute in ModelNew.forward and in the
                                        # extension's C++ (static rules and the child's runtime check)
    includes: frozenset[str]            # headers of load_inline sources beyond the common allow-list
    modules: frozenset[str]             # Python modules beyond the common allow-list (import and reach)
    ldflags: frozenset[str]             # linker flags load_inline may pass (extra_ldflags or among the cflags)
    include_paths: bool                 # load_inline extra_include_paths: relative (inside the build
                                        # directory) or a CUDA or torch include directory
    kernel_required: bool = True        # False: an extension without a __global__ kernel of its own (one


PROFILES = {
    # The RL default: every computation in the candidate's own kernels.
    "strict": GateProfile("strict", torch_compute=False, includes=frozenset(), modules=frozenset(),
                          ldflags=frozenset(), include_paths=False),
    # What KernelBench's own harness accepts: torch for the parts an answer does not replace, cuBLAS.
    "kernelbench": GateProfile("kernelbench", torch_compute=True,
                               includes=frozenset({"cublas_v2.h", "cublas_api.h", "cublasLt.h"}),
                               modules=frozenset({"numpy", "numpy.random", "numpy.linalg", "numpy.fft"}),
                               ldflags=frozenset({"-lcublas", "-lcublasLt"}), include_paths=True,
                               kernel_required=False),
}


def gate_profile(name: str) -> GateProfile:
    """The profile called `name` (the value of eval.gate_profile)."""
    if name not in PROFILES:
        raise ValueError(f"unknown gate profile {name!r}; use one of {', '.join(PROFILES)} (eval.gate_profile)")
    return PROFILES[name]
