"""The gate reads the text the compiler reads (gate/source_text.py, gate/text_rules.py, gate/load_time.py), written
from the attacker's side: bytes that mean one thing to a regex and another to gcc, file-existence probes in every
spelling, load-time code in every spelling, and host assembly placed where the gate used to think it device code.
CPU only, about two seconds."""
from __future__ import annotations

import pytest

from pipeline.core.records import Candidate
from pipeline.evaluation.gate import check_candidate, extract_load_inline, gated_sources
from pipeline.evaluation.gate.source_text import compiler_text
from test_gate import C2CUDA, KB, RELU, SAXPY, c2cuda, kb


def errors(code: str, fmt: str = "c2cuda", profile: str = "strict"):
    task = SAXPY if fmt == "c2cuda" else RELU
    return [f for f in check_candidate(Candidate(task_id=task.id, code=code, format=fmt), task, profile)
            if f.severity == "error"]


def assert_refused(code: str, rule: str, line: int, fmt: str = "c2cuda") -> None:
    found = errors(code, fmt)
    assert any(f.rule == rule and f.line == line and f"line {line}:" in f.message and f"[{rule}]" in f.message
               for f in found), f"expected {rule} at line {line}, got {[f.message for f in found]}"


# --- 1. bytes with no single meaning ------------------------------------------------------------
TOP = '#include <cuda_runtime.h>\n'
SNEAK = [  # (name, text placed after line 1, rule, line of the finding)
    ("lone-cr-include", '//\r#include "/etc/passwd"\n', "source-text", 2),
    ("lone-cr-line", '// x\r#line 1 "saxpy.cu"\n', "source-text", 2),
    ("lone-cr-ifunc", '//\rstatic void* r() { return 0; } void f() __attribute__((ifunc("r")));\n', "source-text", 2),
    ("cr-splice", '// a \\\r#include "/etc/passwd"\n', "source-text", 2),
    ("form-feed", 'static int a;\f\n', "source-text", 2),
    ("vertical-tab", 'static int a;\v\n', "source-text", 2),
    ("nul", 'static int a;\0\n', "source-text", 2),
    ("bom-inside", '\ufeff#include "/etc/passwd"\n', "source-text", 2),
    ("u2028", '// x\u2028#include "/etc/passwd"\n', "source-text", 2),
    ("u2029", '// x\u2029#include "/etc/passwd"\n', "source-text", 2),
    ("nel", '// x\x85#include "/etc/passwd"\n', "source-text", 2),
    ("lone-surrogate", '// \ud800\n', "source-text", 2),
    ("escape", '// \x1b[2J\n', "source-text", 2),
    ("trigraph-hash", '??=include "/etc/passwd"\n', "source-text", 2),
    ("trigraph-splice", '// x ??/\n#include "/etc/passwd"\n', "source-text", 2),
    ("blank-splice", '// x \\   \n#include "/etc/passwd"\n', "source-text", 2),
    ("comment-splice", '// x \\\n#include "/etc/passwd"\n', "source-text", 2),
    ("token-splice", 'void f() { sys\\\ntem("id"); }\n', "source-text", 2),
]


@pytest.mark.parametrize("name,text,rule,line", SNEAK, ids=[s[0] for s in SNEAK])
def test_bytes_with_two_meanings_are_refused(name, text, rule, line):
    assert_refused(TOP + text + C2CUDA, rule, line)


@pytest.mark.parametrize("text", ['\r', '\x0c', '\u2028', '\x00', '??='])
def test_bytes_with_two_meanings_inside_a_load_inline_source_are_refused(text):
    code = kb(cuda=f"// {text}x\n")
    assert "source-text" in {f.rule for f in errors(code, "kernelbench")}
    escaped = kb(cuda=f"// {text.encode('unicode_escape').decode()}x\n")  # the escape in the Python string
    assert "source-text" in {f.rule for f in errors(escaped, "kernelbench")}


def test_a_lone_carriage_return_in_the_python_file_is_refused():
    assert_refused(KB.replace("import torch.nn as nn\n", "import torch.nn as nn\r"), "source-text", 2, "kernelbench")


def test_crlf_files_pass_and_the_compile_builds_the_text_the_gate_read():
    crlf = c2cuda().replace("\n", "\r\n")
    assert not errors(crlf)
    assert compiler_text(crlf) == c2cuda()
    assert gated_sources(Candidate(task_id=SAXPY.id, code=crlf, format="c2cuda"))[0][0] == c2cuda()
    kb_crlf = kb().replace("\n", "\r\n")
    assert not errors(kb_crlf, "kernelbench")
    for call in extract_load_inline(kb_crlf):
        assert not any("\r" in s for s in call["cpp_sources"] + call["cuda_sources"])


def test_honest_line_continuations_and_unicode_comments_pass():
    top = ('#define CHECK(x) do { \\\n    if (!(x)) return; \\\n} while (0)\n'
           '// für die Summe: σ = Σ x\n')
    assert not errors(c2cuda(top=top, body="CHECK(n > 0);\n"))


# --- 2. file-existence oracles ------------------------------------------------------------------
ORACLES = [
    ('#pragma GCC dependency "/etc/passwd"\n', "forbidden-include"),
    ('_Pragma("GCC dependency \\"/etc/passwd\\"")\n', "forbidden-include"),
    ('#define P(x) _Pragma(#x)\nP(GCC dependency "/etc/passwd")\n', "pragma"),
    ('#define S "GCC dependency \\"/etc/passwd\\""\n_Pragma(S)\n', "pragma"),
    ('__pragma(GCC dependency "/etc/passwd")\n', "pragma"),
    ('#if __has_include("/etc/passwd")\n#endif\n', "forbidden-include"),
    ('#if __has_include__("/etc/passwd")\n#endif\n', "forbidden-include"),
    ('#if __has_include_next(<x>)\n#endif\n', "forbidden-include"),
    ('#if __has_embed("/etc/passwd")\n#endif\n', "forbidden-include"),
    ('#include_next <stdio.h>\n', "forbidden-include"),
    ('#import "/etc/passwd"\n', "forbidden-include"),
    ('#embed "/etc/passwd"\n', "forbidden-include"),
    ('#define F "/etc/passwd"\n#include F\n', "forbidden-include"),
    ('/**/ # /**/ include "/etc/passwd"\n', "forbidden-include"),
    ('#pragma GCC system_header\n', "pragma"),
    ('#pragma GCC poison x\n', "pragma"),
    ('#pragma push_macro("x")\n', "pragma"),
    ('#pragma redefine_extname run system\n', "pragma"),
    ('#ident "x"\n', "directive"),
    ('#assert machine(x86)\n', "directive"),
    ('%:pragma GCC dependency "/etc/passwd"\n', "forbidden-include"),
]


@pytest.mark.parametrize("top,rule", ORACLES)
def test_file_existence_oracles_and_unlisted_directives_are_refused(top, rule):
    lines = top.count("\n")
    found = errors(c2cuda(top="#include <cuda_runtime.h>\n" + top))
    assert any(f.rule == rule and 2 <= f.line <= lines + 1 for f in found), [f.message for f in found]


def test_allowed_pragmas_pass():
    top = "#pragma once\n#pragma GCC diagnostic push\n#pragma nv_diag_suppress 177\n_Pragma(\"unroll\")\n"
    assert not errors(c2cuda(top=top, body="#pragma unroll 4\nfor (int k = 0; k < 4; ++k) {}\n"))


def test_digraphs_anywhere_are_refused():
    assert_refused(c2cuda(top="#define CAT(a, b) a %:%: b\n"), "digraph", 1)
    assert_refused(c2cuda(top="[[gnu::used]] static int u <: 1 :> ;\n"), "digraph", 1)


# --- 3. load-time code --------------------------------------------------------------------------
LOAD_TIME = [
    "[[gnu::constructor]] static void early() {}\n",
    "__attribute__((__constructor__(101))) static void early() {}\n",
    "static void* r() { return 0; }\nvoid early() __attribute__((ifunc(\"r\")));\n",
    "struct S { S(); };\nS s __attribute__((init_priority(200)));\n",
    "static int hook() { return 1; }\nstatic int started = hook();\n",
    "struct Warm { Warm() {} };\nstatic Warm warm;\n",
    "#include <vector>\nstd::vector<float> cache(16);\n",
    "thread_local int tls = 1;\n",
    "static __thread int tls;\n",
    "static auto early = [] { return 1; }();\n",
    "struct Holder { static inline int v = __builtin_abs(-1) + [] { return 1; }(); };\n",
    "namespace ns { static int* p = new int(1); }\n",
    'asm(".section .init_array,\\"aw\\"\\n.quad 0\\n.previous");\n',
]


@pytest.mark.parametrize("top", LOAD_TIME)
def test_load_time_code_in_any_spelling_is_refused(top):
    found = errors(c2cuda(top=top))
    assert {"load-time-code", "symbol-alias", "inline-asm-host"} & {f.rule for f in found}, [f.message for f in found]


def test_constant_globals_pass():
    top = ("constexpr int kBlock = 256;\nstatic const float kScale = 0.5f;\n__constant__ float weights[4];\n"
           "__device__ int counter;\nenum Mode { A, B };\nstatic Mode mode = A;\nstatic const char* name = \"saxpy\";\n"
           "static float* scratch = nullptr;\nstatic const dim3 kGrid(1, 1, 1);\nstatic int table[3] = {1, 2, 3};\n")
    assert not errors(c2cuda(top=top))


# --- 4. host asm wherever it is placed ------------------------------------------------------------
def test_asm_in_a_device_function_of_cpp_sources_is_host_code():
    code = KB.replace('cpp_source = "torch::Tensor relu_cuda(torch::Tensor x);"',
                      'cpp_source = """torch::Tensor relu_cuda(torch::Tensor x);\n'
                      '__device__ static long probe(long n) { long r; asm volatile("mov %1, %0" : "=r"(r) : "r"(n)); '
                      'return r; }\n"""')
    found = errors(code, "kernelbench")
    line = code[:code.index("probe")].count("\n") + 1
    assert any(f.rule == "inline-asm-host" and f.line == line for f in found), [f.message for f in found]


@pytest.mark.parametrize("asm", ['".byte 0x0f, 0x05"', '".long 0x050f"', '".inst 0xd4000001"', '"sys" "call"',
                                 '".incbin \\"/etc/passwd\\""', '".pushsection .text"', '"int $0x80"'])
def test_encoded_instructions_in_device_asm_are_refused(asm):
    top = f"__device__ void probe() {{ asm volatile({asm}); }}\n"
    found = errors(c2cuda(top=top))
    assert {"inline-asm-host", "process-or-file-or-network"} & {f.rule for f in found if f.line == 1}, \
        [f.message for f in found]


def test_ptx_in_device_asm_passes():
    top = ('__device__ unsigned lane() { unsigned r; asm volatile("mov.u32 %0, %%laneid;" : "=r"(r)); return r; }\n'
           '__device__ float ld(const float* p) { float v; asm("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(p)); '
           'return v; }\n')
    assert not errors(c2cuda(top=top))


def test_reserved_macros_in_build_flags_are_refused():
    code = KB.replace('functions=["relu_cuda"])', 'functions=["relu_cuda"], extra_cflags=["-D__CUDA_ARCH__=900"])')
    assert "compile-flags" in {f.rule for f in errors(code, "kernelbench")}


# --- 5. literals the gate and the compiler lex differently --------------------------------------
PASSWD_PROBE = '#if __has_include("/etc/passwd")\nint exists;\n#endif\n'
LEXING = [  # (name, text after line 1, rule, line): each hid a probe from the gate and compiled with nvcc
    ("glued-raw-prefix", '#define xR\nconst char* s = xR"(";\n' + PASSWD_PROBE + 'const char* t = ")";\n',
     "forbidden-include", 4),
    ("glued-raw-prefix-pragma", '#define xR\nconst char* s = xR"(";\n_Pragma("GCC dependency \\"/etc/passwd\\"")\n'
                                'const char* t = ")";\n', "forbidden-include", 4),
    ("quote-in-raw-delimiter", 'const char* s = R"x"( " )x""; _Pragma("GCC dependency \\"/etc/passwd\\"") // "\n',
     "forbidden-include", 2),
    ("digit-separator-before-char", '#define IGN(...)\n#if IGN(1\'"\') __has_include("/etc/passwd")\nint e;\n#endif\n',
     "forbidden-include", 3),
]


@pytest.mark.parametrize("name,text,rule,line", LEXING, ids=[s[0] for s in LEXING])
def test_literals_lexed_as_the_compiler_does(name, text, rule, line):
    assert_refused(TOP + text + C2CUDA, rule, line)


def test_odd_raw_string_openings_are_source_text():
    assert_refused(TOP + '#define xR\nconst char* s = xR"(";\nconst char* t = ")";\n' + C2CUDA, "source-text", 3)
    assert_refused(TOP + 'const char* s = R"x"(a)x"";\n' + C2CUDA, "source-text", 2)


def test_honest_raw_strings_and_digit_separators_pass():
    top = TOP + ('const char* a = u8R"d(*/ #include "x" /*)d";\nconst char* b = R"(/*)";\n'
                 'static const int big = 1\'000\'000;\n')
    assert not errors(top + C2CUDA)


# --- 6. asm the syntax tree cannot read whole ----------------------------------------------------
@pytest.mark.parametrize("text,line", [
    ('#define D ".by" "te 0x90"\nasm(D);\n', 3),                     # host asm whose text is a macro
    ('#define D(x) #x\nasm(D(.byte 0x90));\n', 3),                   # built by a function-like macro
    ('#define A __asm__\nA(".byte 0x90");\n', 2),                    # the keyword itself a macro
    ('#define A(x) asm(x)\nA(".byte 0x90");\n', 2),
])
def test_asm_through_a_macro_is_refused(text, line):
    assert_refused(TOP + text + C2CUDA, "inline-asm-host", line)


def test_device_asm_from_a_string_macro_is_read_expanded():
    assert_refused(TOP + '#define D ".by" "te 0x90"\n__device__ void p() { asm volatile(D); }\n' + C2CUDA,
                   "inline-asm-host", 3)
    honest = TOP + ('#define TY "u32"\n__device__ unsigned lane() { unsigned r; '
                    'asm volatile("mov." TY " %0, %%laneid;" : "=r"(r)); return r; }\n')
    assert not errors(honest + C2CUDA)


# --- 7. globals built at load time, spelled as allowed types ------------------------------------
LOAD_TIME = [  # (name, text after line 1, line): each built an object or ran an operator from .init_array
    ("auto-braced", 'struct S { S() { } };\nauto s = S{};\n', 3),
    ("reference-to-temporary", 'struct S { S() { } };\nconst S& r = S{};\n', 3),
    ("rvalue-reference", 'struct S { S() { } };\nS&& r = S();\n', 3),
    ("reference-to-new", 'struct S { S() { } };\nS& r = *new S;\n', 3),
    ("class-named-like-cuda", 'struct cudaEvil_t { cudaEvil_t() { } };\ncudaEvil_t g;\n', 3),
    ("own-float4", 'namespace n { struct float4 { float4() { } }; float4 g; }\n', 2),
    ("enum-name-reused", 'namespace a { enum E { X }; }\nnamespace b { struct E { E() { } }; E g; }\n', 3),
    ("alias-of-class", 'struct S { S() { } };\nusing real_t = S;\nreal_t g;\n', 4),
    ("user-defined-literal", 'int operator""_ev(unsigned long long x) { return (int)x + 1; }\nint g = 5_ev;\n', 3),
    ("unary-operator", 'struct T { };\nint operator+(T) { return 1; }\nint g = +T{};\n', 4),
    ("conversion-of-constexpr-object", 'struct T { constexpr T() {} operator int() const { return 3; } };\n'
                                       'constexpr T t{};\nint g = t;\n', 4),
    ("operator-on-constexpr-object", 'struct T { constexpr T() {} };\nint operator+(T) { return 1; }\n'
                                     'constexpr T t{};\nint g = +t;\n', 5),
    ("cast-to-class", 'struct S { S(int) { } };\nauto s = (S)1;\n', 3),
    ("comma-operator", 'struct T {};\nint operator,(T, int) { return 1; }\nint g = (T{}, 1);\n', 4),
    ("typeof-class", 'struct S { S() { } };\n__typeof__(S{}) g;\n', 3),
]


@pytest.mark.parametrize("name,text,line", LOAD_TIME, ids=[s[0] for s in LOAD_TIME])
def test_globals_built_at_load_time_in_allowed_spellings(name, text, line):
    assert_refused(TOP + text + C2CUDA, "load-time-code", line)


def test_constant_globals_of_allowed_types_and_aliases_pass():
    top = TOP + ('enum Mode { A, B };\ntypedef float real;\nusing idx_t = int;\nstatic const int N = 256;\n'
                 'static int cached = -1;\nstatic float* buf = nullptr;\nconst int K = N / 2 + sizeof(float);\n'
                 'static Mode mode = B;\nreal scale = (real)1.5;\nidx_t first = (idx_t)0;\nint table[] = {1, 2, N};\n'
                 'static float table_f[4];\nconst float* p0 = &table_f[1];\nfloat& r0 = table_f[0];\n'
                 'constexpr float4 zero4 = {0.f, 0.f, 0.f, 0.f};\n')
    assert not errors(top + C2CUDA), [f.message for f in errors(top + C2CUDA)]


# --- 8. names reserved to the compiler, and the host clock through libcu++ --------------------------------
@pytest.mark.parametrize("directive", ["#define __CUDA_ARCH__ 900", "#undef __CUDACC__", "#define _GLIBCXX_ASSERTIONS 1",
                                       "#  define __STDC_HOSTED__ 0", "%:undef __cplusplus"])
def test_defining_a_reserved_name_is_refused(directive):
    """What the system headers and the compiler's passes mean is not the candidate's to change (in build flags
    -D__CUDA_ARCH__ is refused the same way)."""
    found = errors(c2cuda(top=directive + "\n"))
    assert any(f.rule in ("reserved-macro", "digraph") and f.line == 1 for f in found), [f.message for f in found]


def test_own_macros_and_the_math_defines_pass():
    assert errors(c2cuda(top="#define _USE_MATH_DEFINES\n#define BLOCK_ 256\n#define my__name 1\n#undef BLOCK_\n")) == []


def test_the_host_clock_through_libcudacxx_is_refused():
    found = errors(c2cuda("auto t = cuda::std::chrono::system_clock::now(); (void)t;\n",
                          top="#include <cuda/std/chrono>\n"))
    assert any(f.rule == "timing-tamper" for f in found), [f.message for f in found]
