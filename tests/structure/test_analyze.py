"""analyze_source end to end (real nvcc), the features it hands to EvalResult, and the CLI."""
import json

import pytest

from pipeline.core.records import EvalResult
from pipeline.cli import main as cudaperf
from pipeline.structure.analyze import analyze_source, format_analysis
from pipeline.structure.ptxas import compile_resources

from _kernels import DATA

MATMUL = (DATA / "tiled_matmul.cu").read_text()


def test_tiled_matmul(nvcc):
    a = analyze_source(MATMUL)
    assert not a.errors
    (k,) = a.kernels
    assert k.name == "matmul_tiled" and k.threads == 256 and k.block_source.startswith("source line")
    assert k.resources.shared_bytes == 2 * 16 * 16 * 4 and k.resources.registers > 0
    assert k.occupancy.occupancy > 0 and set(k.components) >= {"coalescing", "occupancy", "spills", "bank_conflicts"}
    assert 0.0 <= a.score <= 1.0 and a.score == pytest.approx(k.score)


def test_features_fit_an_eval_result(nvcc):
    a = analyze_source(MATMUL, block=128)
    f = a.features()
    assert f["occ.threads_per_block"] == 128 and f["ptxas.available"] and f["struct.score"] == pytest.approx(a.score)
    assert f["static.kernels"] == 1 and f["static.barriers"] == 2
    r = EvalResult(task_id="t", candidate_hash="h", format="c2cuda", verdict="not_executed", features=f)
    assert EvalResult.model_validate_json(r.model_dump_json()).features == f
    json.dumps(a.to_dict(), default=str)


def test_evaluator_compile_log_is_used_instead_of_nvcc(nvcc):
    src = (DATA / "smem_padded.cu").read_text()
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/k.cu"
        open(path, "w").write(src)
        log = subprocess.run([nvcc, "-arch=sm_80", "-cubin", "-Xptxas", "-v", "-o", f"{d}/k.cubin", path],
                             capture_output=True, text=True).stderr
    a = analyze_source(src, arch="sm_80", block=32, ptxas_log=log, run_nvcc=False)
    assert a.kernels[0].resources.shared_bytes == 32 * 33 * 4 and a.kernels[0].resources.arch == "sm_80"
    b = analyze_source(src, block=32, ptxas_log="nvcc: compiled, no report")
    assert b.kernels[0].resources is None and "ptxas_flags()" in b.errors[0]


def test_compile_error_is_reported_and_static_features_remain(nvcc):
    src = MATMUL.replace("acc += As[ty][k]", "acc += undeclared + As[ty][k]")
    a = analyze_source(src)
    assert a.errors and "undeclared" in a.errors[0]
    assert a.kernels[0].static.global_loads == 2 and a.kernels[0].resources is None
    assert "undeclared" in a.compile_log


def test_dynamic_shared_memory_from_the_source_and_opt_in(nvcc):
    src = """
    __global__ void k(const float* a, float* b) {
        extern __shared__ float s[];
        s[threadIdx.x] = a[blockIdx.x * blockDim.x + threadIdx.x];
        __syncthreads();
        b[blockIdx.x * blockDim.x + threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
    }
    void run(const float* a, float* b, int n) { k<<<n / 256, 256, 80 * 1024>>>(a, b); }
    """
    a = analyze_source(src)
    assert a.kernels[0].dynamic_smem == 80 * 1024 and a.kernels[0].occupancy.limiter == "launch_fails"
    assert any(f.rule == "launch_fails" for f in a.findings)
    opted = src.replace("void run(const float* a, float* b, int n) {", "void run(const float* a, float* b, int n) {"
                        " cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 80 * 1024);")
    o = analyze_source(opted).kernels[0].occupancy
    assert o.limiter == "shared_memory" and o.active_blocks == 2


def test_runtime_launches_override_the_source(nvcc):
    a = analyze_source(MATMUL, launches={"matmul_tiled": (64, 0)})
    assert a.kernels[0].threads == 64 and a.kernels[0].block_source == "runtime"


def test_format_analysis_and_cli(tmp_path, capsys, nvcc):
    text = format_analysis(analyze_source((DATA / "smem_bank_conflict.cu").read_text(), block=32))
    assert "kernel col_sums" in text and "32-way" in text and "pad the row to 33" in text
    f = tmp_path / "k.cu"
    f.write_text((DATA / "strided_row_width.cu").read_text())
    assert cudaperf(["analyze", str(f), "--block", "128", "--arch", "sm_89"]) == 0
    out = capsys.readouterr().out
    assert "arch sm_89" in out and "128 threads per block (argument)" in out and "strided by K" in out
    assert cudaperf(["analyze", str(f), "--json", "--no-nvcc", "--block", "16x8"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["kernels"][0]["threads"] == 128 and d["kernels"][0]["resources"] is None
    assert cudaperf(["analyze", str(tmp_path / "missing.cu")]) == 2
    assert cudaperf(["analyze", str(f), "--arch", "sm_42"]) == 2
    assert "unknown architecture" in capsys.readouterr().err
    assert cudaperf(["analyze", str(f), "--block", "0"]) == 2
    assert "give threads per block" in capsys.readouterr().err


def test_kernel_known_only_to_ptxas_is_still_reported(nvcc):
    src = "#define K(name) __global__ void name(float* a) { a[threadIdx.x] = 1.f; }\nK(from_macro)\n"
    assert compile_resources(src, "sm_90")
    a = analyze_source(src, block=256)
    assert [k.name for k in a.kernels] == ["from_macro"] and a.kernels[0].static is None
    assert a.kernels[0].occupancy.occupancy == 1.0
