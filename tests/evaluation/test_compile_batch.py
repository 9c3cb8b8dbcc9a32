"""Batched builds (`Compiler.compile_cuda_batch`, real nvcc, no GPU): one library exporting every
source's entry under its own symbol, macros kept to their source, a broken source failing the batch,
and the ptxas report cut per source."""
import ctypes

import pytest

from pipeline.evaluation.build.compile import Compiler, batch_source, batch_symbol, batch_tag, split_ptxas_report


@pytest.fixture(scope="module")
def compiler(compile_cfg):
    return Compiler(compile_cfg)


KERNEL = r'''
#include <cuda_runtime.h>
__global__ void k(int n, float* y) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] *= 2.0f; }
extern "C" void f(int n, float* y) { k<<<(n + 255) / 256, 256>>>(n, y); }
'''


def test_one_library_exports_each_entry_under_its_own_symbol(compiler, builtin_tasks):
    saxpy = builtin_tasks["c2cuda/saxpy"]
    sources = [i.code for i in saxpy.implementations]
    members = compiler.compile_cuda_batch(sources, ["saxpy"] * len(sources))
    assert members is not None and len({m.result.artifact for m in members}) == 1
    lib = ctypes.CDLL(members[0].result.artifact)  # loads without a GPU: the CUDA runtime is linked statically
    for i, m in enumerate(members):
        assert m.result.ok and m.symbol == batch_symbol(i, "saxpy") == f"cpbatch{i}z_saxpy"
        getattr(lib, m.symbol)
        assert batch_tag(i) in m.result.ptxas_log and "Used" in m.result.ptxas_log
        assert not any(batch_tag(j) in m.result.ptxas_log for j in range(len(members)) if j != i)
    with pytest.raises(AttributeError):
        lib.saxpy  # the plain name would collide between sources: it is never exported
    again = compiler.compile_cuda_batch(sources, ["saxpy"] * len(sources))
    assert again[0].result.cached and [m.result.ptxas_log for m in again] == [m.result.ptxas_log for m in members]


def test_macros_and_includes_stay_with_their_source(compiler):
    defines = KERNEL.replace("2.0f", "(float)BS").replace("#include <cuda_runtime.h>",
                                                          "#include <cuda_runtime.h>\n#define BS 128")
    checks = "#include <cstdint>\n#ifdef BS\n#error BS leaked from the source before\n#endif\n" + KERNEL
    combined = batch_source([defines, checks], ["f", "f"])
    assert combined.index("#include <cstdint>") < combined.index("namespace cpbatch0z")  # hoisted, once each
    assert combined.count("#include <cuda_runtime.h>") == 1 and "#undef BS" in combined
    members = compiler.compile_cuda_batch([defines, checks], ["f", "f"])
    assert members is not None and [m.symbol for m in members] == ["cpbatch0z_f", "cpbatch1z_f"]


def test_a_broken_source_fails_the_whole_batch(compiler):
    assert compiler.compile_cuda_batch([KERNEL, "this is not CUDA", KERNEL], ["f"] * 3) is None
    assert compiler.compile_cuda_batch([], []) == []
    with pytest.raises(ValueError, match="2 sources but 1 entries"):
        compiler.compile_cuda_batch([KERNEL, KERNEL], ["f"])


def test_the_ptxas_report_is_cut_per_source():
    tags = [batch_tag(i) for i in range(12)]
    report = "\n".join([
        "ptxas info    : 272 bytes gmem",
        "ptxas info    : Compiling entry function '_ZN10cpbatch11z4kernEPd' for 'sm_90'",
        "ptxas info    : Function properties for _ZN10cpbatch11z4kernEPd",
        "    40 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
        "ptxas info    : Used 32 registers, used 0 barriers, 40 bytes cumulative stack size",
        "ptxas info    : Function properties for __internal_trig_reduction_slowpathd",  # callee of the entry above
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
        "ptxas info    : Compiling entry function '_ZN9cpbatch1z4kernEPf' for 'sm_90'",
        "ptxas info    : Used 8 registers, used 0 barriers",
        "ptxas info    : Function properties for _ZN9cpbatch1z6helperEf",
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
    ])
    logs = split_ptxas_report(report, tags)
    assert all(log.startswith("ptxas info    : 272 bytes gmem") for log in logs)
    assert "cpbatch11z" in logs[11] and "slowpathd" in logs[11] and "cpbatch1z" not in logs[11]
    assert "Used 8 registers" in logs[1] and "helper" in logs[1] and "slowpathd" not in logs[1]
    assert logs[0] == logs[2] == "ptxas info    : 272 bytes gmem"
    untagged_entry = report + "\nptxas info    : Compiling entry function 'plain_c_kernel' for 'sm_90'"
    assert split_ptxas_report(untagged_entry, tags) is None
    first_untagged = "ptxas info    : Function properties for __internal_f\n" + report
    assert split_ptxas_report(first_untagged, tags) is None
    cuobjdump = "Function _ZN9cpbatch0z1kEv: REG:10 STACK:0 SHARED:0 LOCAL:0 TEXTURE:0 SURFACE:0 SAMPLER:0"
    assert split_ptxas_report(cuobjdump, tags)[0] == cuobjdump and split_ptxas_report(cuobjdump, tags)[1] == ""
