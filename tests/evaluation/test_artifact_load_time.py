"""The artefact check sees load-time code that has no init-array entry (ifunc resolvers, thread-local initialisers
and data), in a candidate's object and in an extension library, and reads a kernelbench cpp_sources string as the
host code it is. Needs nvcc (and gcc for the library); nothing built here runs."""
import shutil
import subprocess
import textwrap

import pytest

from pipeline.evaluation.build import artifact
from pipeline.evaluation.gate import gate_profile

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")

from test_artifact import saxpy  # noqa: E402  the same saxpy source, TOP and BODY filled in
IFUNC = 'extern "C" { static void real() {} static void (*pick())() { return real; } void hook() __attribute__((ifunc("pick"))); }'
LOAD_TIME = [
    ("ifunc", IFUNC, "ifunc"),
    ("tls-dynamic", "static int seed() { return 1; }\nthread_local int tls = seed();\nint peek() { return tls; }",
     "thread-local"),
    ("tls-plain", "static __thread int tls;\nint peek(int v) { tls += v; return tls; }", "thread-local"),
]


def object_of(code: str, compile_cfg, tmp_path) -> str:
    assert artifact.build_object(code, compile_cfg, str(tmp_path)) == ""
    return str(tmp_path / "candidate.o")


@pytest.mark.parametrize("name,top,needle", LOAD_TIME, ids=[c[0] for c in LOAD_TIME])
def test_load_time_code_without_an_init_array_entry_is_refused(compile_cfg, tmp_path, name, top, needle):
    code = saxpy(top)
    found = artifact.object_findings(code, object_of(code, compile_cfg, tmp_path), str(tmp_path), "c2cuda", True,
                                     gate_profile("strict"))
    hits = [f for f in found if f.rule == "load-time-code" and needle in f.message]
    assert hits and all("[load-time-code]" in f.message for f in hits), [f.message for f in found]


def test_an_honest_object_has_no_resolvers_or_thread_locals(compile_cfg, tmp_path):
    code = saxpy()
    obj = object_of(code, compile_cfg, tmp_path)
    assert not artifact.resolver_findings(code, artifact.nm_symbols(obj, str(tmp_path)), obj, str(tmp_path))


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_an_ifunc_in_an_extension_library_is_refused(tmp_path):
    (tmp_path / "ext.cpp").write_text(IFUNC + "\nint entry() { return 0; }\n")
    subprocess.run(["g++", "-shared", "-fPIC", "-o", "ext.so", "ext.cpp"], cwd=tmp_path, check=True)
    found = artifact.extension_findings(IFUNC, str(tmp_path / "ext.so"), str(tmp_path), gate_profile("kernelbench"))
    assert any(f.rule == "load-time-code" and "ifunc" in f.message for f in found), [f.message for f in found]


def test_a_device_function_of_cpp_sources_is_host_code_after_preprocessing(compile_cfg, tmp_path):
    """kernelbench cpp_sources are built by the host compiler, where __device__ means nothing: asm there is host."""
    cpp = textwrap.dedent("""\
        #define PROBE(n) asm volatile("" : "+r"(n))
        __device__ static long probe(long n) { PROBE(n); return n; }
    """)
    kwargs = dict(cfg=compile_cfg, scratch=str(tmp_path), fmt="kernelbench", float32=True,
                  profile=gate_profile("strict"), drop_includes=True, line_offset=10)
    host = artifact.preprocessed_findings(cpp, host_only=True, **kwargs)
    assert ("inline-asm-host", 12) in {(f.rule, f.line) for f in host}, [f.message for f in host]
