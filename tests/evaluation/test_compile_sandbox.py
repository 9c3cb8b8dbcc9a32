"""Compilers run under bwrap: they build as before, but the caches and the home directory do not exist for them."""
from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from pipeline.core.config import CompileSection
from pipeline.evaluation.build.compile import Compiler

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


@pytest.fixture
def home_cache():
    d = Path.home() / ".cache" / f"cudaperf-compile-test-{uuid.uuid4().hex[:8]}"
    d.mkdir(parents=True)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_compiler_builds_but_cannot_see_caches_or_home(home_cache):
    compiler = Compiler(CompileSection(cache_dir=str(home_cache)))
    ok = compiler.compile_cuda('extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1; }\n')
    assert ok.ok and Path(ok.artifact).is_file() and str(home_cache) in ok.artifact
    secret = home_cache / "secret.h"
    secret.write_text("#define SECRET 1\n")
    bad = compiler.compile_cuda(f'#include "{secret}"\nextern "C" __global__ void k2(float* x) {{ x[0] = SECRET; }}\n')
    assert not bad.ok and "secret.h" in bad.log and "No such file" in bad.log
    gcc = compiler.compile_c_reference(f'#include "{Path.home()}/.bashrc"\nint f(int x) {{ return x; }}\n')
    assert not gcc.ok and "No such file" in gcc.log


def test_compile_sandbox_none_still_builds(tmp_path):
    compiler = Compiler(CompileSection(cache_dir=str(tmp_path), sandbox="none"))
    assert compiler.compile_c_reference("int f(int x) { return x + 1; }\n").ok
