"""The structural score from the attacker's side: a resource report printed at compile time, kernels that
never run, and scores that must stay finite. Compiles real kernels with nvcc (no GPU needed)."""
import math

import pytest

from pipeline.core.config import CompileSection
from pipeline.evaluation.build.compile import Compiler
from pipeline.structure.analyze import analyze_source
from pipeline.structure.ptxas import compile_resources, parse_ptxas_report
from pipeline.structure.reach import C_ENTRY
from pipeline.structure.resources import filter_report, neutralise_strings, ptxas_options
from pipeline.structure.score import ScoreWeights, combine, conservative_combine, score_components, structural_score

from test_ptxas import SPILL as HEAVY  # noqa: E402  one spilling kernel for both files
FAKE = ("ptxas info    : Compiling entry function '_Z5heavyPKfPfi' for 'sm_90'\\n"
        "ptxas info    : Function properties for _Z5heavyPKfPfi\\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\\n"
        "ptxas info    : Used 16 registers, used 0 barriers\\n")
FORGERIES = {
    "pragma": f'#pragma message "\\n{FAKE}"\n',
    "_Pragma": f'_Pragma("message \\"\\n{FAKE.replace(chr(92), chr(92) * 2)}\\"")\n',
    "warning": "#warning 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n",
    "deprecated": f'__attribute__((deprecated("\\n{FAKE}"))) void old_api() {{}}\nvoid use_old() {{ old_api(); }}\n',
    "inline_asm": r'''__global__ void noise(float* a) { asm volatile(".pragma \"x\n''' + FAKE.replace("\\n", "\n").replace(
        "\n", r"\n") + r'''\";"); a[0] = 1; }''' + "\n",
}


@pytest.fixture(scope="module")
def compiler(compile_cfg):
    return Compiler(compile_cfg)


def _features(compiler, source):
    comp = compiler.compile_cuda(source)
    assert comp.ok, comp.log
    a = analyze_source(source, "sm_90", ptxas_log=comp.ptxas_log or None, run_nvcc=False, entries=[C_ENTRY])
    return comp, a


@pytest.mark.integration
@pytest.mark.parametrize("how", sorted(FORGERIES))
def test_a_printed_report_changes_neither_score_nor_features(compiler, nvcc, how):
    _, honest = _features(compiler, HEAVY)
    comp, forged = _features(compiler, FORGERIES[how] + HEAVY)
    assert honest.features()["ptxas.spill_bytes"] > 600  # the honest kernel spills
    keys = [k for k in honest.features() if k.startswith(("ptxas.", "struct.", "occ.")) and k not in ("struct.errors", "struct.unlaunched")]
    assert {k: forged.features()[k] for k in keys} == {k: honest.features()[k] for k in keys}
    assert forged.score == honest.score
    assert "Used 16 registers" not in comp.ptxas_log


@pytest.mark.integration
def test_trusted_report_matches_the_compiles_own(compiler, nvcc):
    from _kernels import kernel_files
    sources = [HEAVY] + [p.read_text() for p in kernel_files()[:6]]
    for src in sources:
        comp = compiler.compile_cuda(src)
        assert comp.ok, comp.log
        ours = parse_ptxas_report(comp.ptxas_log, "sm_90")
        theirs = compile_resources(src, "sm_90", extra_flags=("-O3", "-lineinfo"))
        assert ours.keys() == theirs.keys() and ours
        for name, r in theirs.items():
            o = ours[name]
            assert (o.registers, o.spill_store_bytes, o.spill_load_bytes, o.shared_bytes, o.barriers,
                    o.stack_frame_bytes) == (r.registers, r.spill_store_bytes, r.spill_load_bytes, r.shared_bytes,
                                             r.barriers, r.stack_frame_bytes), name


def test_report_filter_keeps_only_ptxas_own_lines_for_defined_functions():
    text = ("ptxas warning : Pragma 'x\nptxas info    : Compiling entry function '_Z1kPf' for 'sm_90'\n"
            "ptxas info    : Used 1 registers' unsupported\n"
            "ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90'\n"
            "ptxas info    : Function properties for _Z1kPf\n"
            "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
            "ptxas info    : Used 10 registers, used 0 barriers\n"
            "ptxas info    : Compiling entry function '_Z5ghostv' for 'sm_90'\n"
            "ptxas info    : Used 2 registers, used 0 barriers\n")
    r = parse_ptxas_report(filter_report(text, {"_Z1kPf"}), "sm_90")
    assert set(r) == {"_Z1kPf"} and r["_Z1kPf"].registers == 10
    ptx = '.pragma "x\nptxas info : Used 1 registers";\n// a "quote\n.file 1 "/tmp/k.cu"\n'
    assert neutralise_strings(ptx) == '.pragma "x";\n// a "quote\n.file 1 "/tmp/k.cu"\n'
    assert ptxas_options(["-arch=sm_90", "-lineinfo", "-maxrregcount=32", "-Xptxas", "-v,-O2"]) == [
        "--generate-line-info", "--maxrregcount=32", "-O2"]


# --- kernels that never run -------------------------------------------------------------------------
BAD = r'''
__global__ void bad(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i * 32];
}
'''
GOOD = r'''
__global__ void good(const float4* in, float4* out, int n) {
    for (int j = 0; j < 4096; ++j)
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) out[i] = in[i];
}
'''
_G = "good<<<1, 256>>>((const float4*)in, (float4*)out, n);"
ENTRY = 'extern "C" void entry(const float* in, float* out, int n) {{ {body} bad<<<(n + 255) / 256, 256>>>(in, out, n); }}\n'
DECOYS = {
    "never_named": ("", ""),
    "dead_host_function": ("static void unused(const float* in, float* out, int n) { good<<<1, 256>>>((const float4*)in, (float4*)out, n); }\n", ""),
    "if_0": ("", "if (0) { good<<<1, 256>>>((const float4*)in, (float4*)out, n); }"),
    "if_false_constexpr": ("constexpr bool kOn = false;\n", "if (kOn) good<<<1, 256>>>((const float4*)in, (float4*)out, n);"),
    "while_0": ("", "while (0) good<<<1, 256>>>((const float4*)in, (float4*)out, n);"),
    "preproc_if_0": ("", "\n#if 0\ngood<<<1, 256>>>((const float4*)in, (float4*)out, n);\n#endif\n"),
    "after_return": ("static void helper(const float* in, float* out, int n) { return; good<<<1, 256>>>((const float4*)in, (float4*)out, n); }\n",
                     "helper(in, out, n);"),
    "address_taken": ("", "void (*fp)(const float4*, float4*, int) = good; (void)fp;"),
    "launch_through_pointer": ("", "void (*fp)(const float4*, float4*, int) = good; if (n < 0) fp<<<1, 256>>>((const float4*)in, (float4*)out, n);"),
    "cudaLaunchKernel_dead": ("static void never(void** a) { cudaLaunchKernel((const void*)good, 1, 256, a, 0, 0); }\n", ""),
    "second_c_entry": ('extern "C" void decoy(const float* in, float* out, int n) { good<<<1, 256>>>((const float4*)in, (float4*)out, n); }\n', ""),
    # code that never runs although no branch is run-time: lambdas never called, overloads never called,
    # compile-time branches on template parameters, code after a call that never returns or a jump, constant
    # switches, ternaries and short-circuits, unevaluated operands, handlers of an empty try
    **{k: tuple(x.replace("GX", _G[:-1]).replace("G;", _G) for x in pair) for k, pair in {
        "lambda_never_called": ("", "auto never = [&]() { G; }; (void)never;"),
        "lambda_calls_dead_helper": ("static void h2(const float* in, float* out, int n) { G; }\n",
                                     "auto q = [&] { h2(in, out, n); }; (void)q;"),
        "overload_never_called": ("static void helper(const float* in, float* out, int n) { G; }\n"
                                  "static void helper(int n) { }\n", "helper(n);"),
        "c_entry_overload": ("void entry(int n, const float* in, float* out) { G; }\n", ""),
        "constexpr_if_template_false": ("template <bool B> static void run(const float* in, float* out, int n) "
                                        "{ if constexpr (B) { G; } }\n", "run<false>(in, out, n);"),
        "after_exit": ("#include <cstdlib>\n", "if (n < 0) { exit(0); G; }"),
        "after_abort_in_helper": ("#include <cstdlib>\nstatic void h(const float* in, float* out, int n) "
                                  "{ std::abort(); G; }\n", "if (n < -5) h(in, out, n);"),
        "after_unreachable": ("", "if (n < 0) { __builtin_unreachable(); G; }"),
        "after_break": ("", "for (int z = 0; z < 1; ++z) { break; G; }"),
        "after_continue": ("", "for (int z = 0; z < 1; ++z) { continue; G; }"),
        "after_goto": ("", "goto done; G; done:;"),
        "switch_constant": ("", "switch (0) { case 1: G; break; default: break; }"),
        "ternary_false": ("", "(void)(0 ? (GX, 0) : 0);"),
        "and_false": ("", "(void)(false && (GX, true));"),
        "if_nullptr": ("", "if (nullptr) { G; }"),
        "sizeof_operand": ("", "(void)sizeof((GX, 0));"),
        "decltype_operand": ("", "using T = decltype(GX); "),
        "catch_of_empty_try": ("", "try { } catch (...) { G; }"),
    }.items()},
}


def _score(src):
    return analyze_source(src, "sm_90", run_nvcc=True, entries=[C_ENTRY])


@pytest.mark.parametrize("how", sorted(DECOYS))
def test_a_kernel_that_never_runs_does_not_raise_the_score(nvcc, how):
    honest = _score(BAD + ENTRY.format(body=""))
    top, body = DECOYS[how]
    decorated = _score(BAD + GOOD + top + ENTRY.format(body=body))
    assert honest.score < 0.9 and decorated.score <= honest.score + 1e-9, (honest.score, decorated.score)
    assert decorated.features()["static.global_loads"] == honest.features()["static.global_loads"] or \
        decorated.score < honest.score


def _entry(body):
    return 'extern "C" void entry(const float* in, float* out, int n) { ' + body + ' }\n'


BAD_LAUNCH = "bad<<<(n + 255) / 256, 256>>>(in, out, n);"
RUNS = {  # code that runs: the kernels it launches count for certain
    "lambda_called": _entry(f"auto run = [&](int b) {{ {_G} }}; run(256);"),
    "lambda_invoked_at_once": _entry(f"[&]() {{ {_G} }}();"),
    "switch_matching_case": _entry(f"switch (1) {{ case 1: {_G} break; default: break; }}"),
    "after_an_early_return": _entry(f"if (n <= 0) return; {_G}"),
    "constexpr_true": "constexpr bool V = true;\n" + _entry(f"if constexpr (V) {{ {_G} }} else {{ {BAD_LAUNCH} }}"),
    "ternary_true": _entry(f"(void)(1 ? ({_G[:-1]}, 0) : 0);"),
    "after_a_local_exit_that_returns": "static void exit(int) {}\n" + _entry(f"exit(0); {_G}"),
}


@pytest.mark.parametrize("how", sorted(RUNS))
def test_a_kernel_that_runs_counts_for_certain(nvcc, how):
    a = _score(BAD + GOOD + RUNS[how])
    assert a.static.reach.definite == {"good"}, a.static.reach


def test_a_kernel_behind_a_label_in_a_block_after_a_return_still_counts(nvcc):
    """A jump can enter a block the walk would skip as dead: the bad kernel it launches must count."""
    a = _score(BAD + GOOD + _entry(f"{_G} if (n > 0) goto X; return; {{ X: {BAD_LAUNCH} }}"))
    assert a.static.reach.definite == {"good", "bad"}, a.static.reach


def test_never_launched_kernel_gets_a_hint_and_a_launched_one_counts(nvcc):
    a = _score(BAD + GOOD + ENTRY.format(body=""))
    assert [k.name for k in a.kernels] == ["bad"] and a.features()["struct.unlaunched"] == 1
    assert any(f.rule == "unlaunched_kernel" and "good" in f.message for f in a.findings)
    both = _score(BAD + GOOD + ENTRY.format(body="good<<<1, 256>>>((const float4*)in, (float4*)out, n);"))
    assert {k.name for k in both.kernels} == {"bad", "good"} and both.score > a.score


def test_a_launch_hidden_in_a_macro_still_counts(nvcc):
    hidden = "#define RUN(k, ...) k<<<1, 256>>>(__VA_ARGS__)\n" + \
        'extern "C" void entry(const float* in, float* out, int n) { RUN(bad, in, out, n); }\n'
    plain = _score(BAD + ENTRY.format(body=""))
    alone = _score(BAD + hidden)
    assert [k.name for k in alone.kernels] == ["bad"]  # (its block size is not read through the macro)
    with_decoy = _score(BAD + GOOD + hidden)  # good is never launched, bad only through the macro
    assert with_decoy.score <= plain.score + 1e-9 and "good" not in [k.name for k in with_decoy.kernels]


def test_kernelbench_roots_are_the_bound_functions(nvcc):
    src = BAD + GOOD + r'''
#include <torch/extension.h>
torch::Tensor forward(torch::Tensor x) { bad<<<1, 256>>>(0, 0, 0); return x; }
torch::Tensor unused(torch::Tensor x) { good<<<1, 256>>>(0, 0, 0); return x; }
'''
    a = analyze_source(src, "sm_90", run_nvcc=False, entries=["forward"])
    assert [k.name for k in a.kernels] == ["bad"]
    bound = src + 'PYBIND11_MODULE(m, m) { m.def("forward", &forward); }\n'
    assert [k.name for k in analyze_source(bound, "sm_90", run_nvcc=False, entries=[]).kernels] == ["bad"]


# --- always a finite number in [0, 1] ---------------------------------------------------------------
def test_scores_are_finite_in_range_whatever_goes_in():
    odd = [0.0, -1.0, 2.0, math.nan, math.inf, -math.inf, 1e308]
    for v in odd:
        for w in odd:
            s = structural_score({"coalescing": v, "occupancy": w})
            assert math.isfinite(s) and 0.0 <= s <= 1.0, (v, w, s)
            c = combine([(v, w), (0.5, w), (w, v)])
            assert math.isfinite(c) and 0.0 <= c <= 1.0, (v, w, c)
            total, _ = conservative_combine([(v, w)], [(w, v), (0.1, math.inf)])
            assert math.isfinite(total) and 0.0 <= total <= 1.0
    assert combine([]) == 0.5 and conservative_combine([], [])[0] == 0.5
    zero = ScoreWeights(occupancy_target=0.0, spill_scale_bytes=0.0)

    class Occ:
        occupancy, error = 0.0, ""

    class Res:
        spill_bytes, spills_known = 64, True
    comps = score_components(None, Occ(), Res(), math.nan, zero)
    assert all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in comps.values()) and "roofline" not in comps
    assert math.isfinite(structural_score(comps, zero))
    assert structural_score({"coalescing": 1.0}, ScoreWeights(coalescing=math.inf)) == 0.5
