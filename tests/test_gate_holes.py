"""Classes of holes the deny-list gate had, closed by allow-lists: module objects reached through
re-exports, attribute names given to getattr, stream constructors by any spelling, private torch
entry points, dispatch-key guards in extension C++, oversized candidates and unreadable candidate
files. CPU only, about a second."""
from __future__ import annotations

import pytest

from test_gate import assert_passes, assert_rejects, c2cuda, kb


RE_EXPORTS = [
    ("forward", "m = torch.sys.modules\n", "introspection", "torch.sys"),
    ("forward", "run = torch.os.system\n", "process-or-file-or-network", "torch.os"),
    ("forward", "lib = torch.ctypes.CDLL(None)\n", "process-or-file-or-network", "torch.ctypes"),
    ("forward", "b = torch.builtins.eval\n", "introspection", "torch.builtins"),
    ("forward", "m = torch.importlib.import_module\n", "introspection", "torch.importlib"),
    ("forward", "t = torch.threading.Thread\n", "threads", "torch.threading"),
    ("init", "self.m = torch.sys.modules\n", "introspection", "torch.sys"),
    ("top", "import torch\nSYS = torch.sys\n", "introspection", "SYS = torch.sys"),
    ("top", "import torch.nn.functional as F\nSYS = F.torch.sys\n", "introspection", "F.torch.sys"),
    ("top", "from torch import sys\n", "introspection", "from torch import sys"),
    ("top", "from typing import sys\n", "forbidden-import", "from typing import sys"),
    ("top", "import typing\nS = typing.sys\n", "forbidden-import", "typing.sys"),
    ("top", "import torch\nload = torch.load\n", "process-or-file-or-network", "torch.load"),
]


@pytest.mark.parametrize("where,code,rule,needle", RE_EXPORTS)
def test_module_objects_reached_through_re_exports(where, code, rule, needle):
    assert_rejects(kb(**{where: code}), "kernelbench", rule, needle)


STREAMS_AND_PRIVATE = [
    ("s = torch.cuda.Stream()\n", "side-stream", "torch.cuda.Stream"),
    ("s = torch.cuda.streams.Stream()\n", "side-stream", "streams.Stream"),
    ("s = torch.Stream()\n", "side-stream", "torch.Stream"),
    ("s = torch.cuda.ExternalStream(0)\n", "side-stream", "ExternalStream"),
    ("s = getattr(torch.cuda, 'Stream')()\n", "side-stream", "getattr"),
    ("s = getattr(getattr(torch, 'cuda'), 'streams')\n", "side-stream", "getattr"),
    ("ctx = torch.cuda.stream(None)\n", "side-stream", "torch.cuda.stream"),
    ("s = type(torch.cuda.current_stream())()\n", "introspection", "type("),
    ("g = torch._C._ExcludeDispatchKeyGuard\n", "introspection", "_ExcludeDispatchKeyGuard"),
    ("g = torch._C._DisableTorchDispatch()\n", "introspection", "_DisableTorchDispatch"),
    ("g = getattr(torch._C, '_IncludeDispatchKeyGuard')\n", "introspection", "getattr"),
    ("f = torch.cuda.jiterator._create_jit_fn\n", "introspection", "jiterator"),
    ("lib = torch.library.Library\n", "introspection", "torch.library"),
    ("op = torch.ops.aten.relu\n", "introspection", "torch.ops"),
    ("name = 'Str' + 'eam'\ns = getattr(torch.cuda, name)\n", "introspection", "getattr"),
]


@pytest.mark.parametrize("code,rule,needle", STREAMS_AND_PRIVATE)
def test_streams_and_private_entry_points_by_any_spelling(code, rule, needle):
    assert_rejects(kb(forward=code), "kernelbench", rule, needle)
    assert_rejects(kb(init=code.replace("\n", "\n")), "kernelbench", rule, needle)


FILE_METHODS_ON_OBJECTS = [  # the receiver is a tensor, an array or a storage, not a module the gate can follow
    "torch.zeros(4).numpy().tofile('/tmp/x')\n",
    "torch.zeros(4).numpy().dump('/tmp/x')\n",
    "s = torch.zeros(4).untyped_storage().from_file('/tmp/x', True, 16)\n",
    "s = getattr(torch.zeros(4).untyped_storage(), 'from_file')('/tmp/x', True, 16)\n",
    "torch.zeros(4).untyped_storage()._share_filename_cpu_()\n",
]


@pytest.mark.parametrize("code", FILE_METHODS_ON_OBJECTS)
@pytest.mark.parametrize("where", ["forward", "init"])
def test_file_access_through_methods_of_any_object(code, where):
    assert_rejects(kb(**{where: code}), "kernelbench", "process-or-file-or-network", "torch.zeros(4)")


SELF_DECLARED = [  # library compute reached by declaring its function, with no header the gate would refuse
    ('extern "C" int cublasSgemm_v2(void*, int, int, int, int, const float*, const float*, int, const float*, int,'
     ' const float*, float*, int);', "cublasSgemm_v2(nullptr, 0, 0, 1, 1, 1, nullptr, nullptr, 1, nullptr, 1, "
                                     "nullptr, nullptr, 1);"),
    ("namespace at { namespace native { at::Tensor relu(const at::Tensor& self); } }",
     "using namespace at::native;\ny = relu(x);"),
    ('extern "C" int cublasCreate_v2(void** handle);', "auto make = &cublasCreate_v2;\nvoid* h;\nmake(&h);"),
]


@pytest.mark.parametrize("declaration,call", SELF_DECLARED)
def test_functions_an_answer_declares_but_does_not_define(declaration, call):
    code = kb(cuda=call).replace("#include <torch/extension.h>\n", "#include <torch/extension.h>\n" + declaration + "\n")
    assert_rejects(code, "kernelbench", "undefined-function", declaration[:20])
    assert_passes(code, "kernelbench", profile="kernelbench")  # KernelBench's own rules let torch and cuBLAS compute
    local = kb(cuda=declaration + "\n" + call)  # a prototype inside the function body is one too
    assert_rejects(local, "kernelbench", "undefined-function", declaration[:20])


def test_a_prototype_of_a_function_the_answer_defines_passes():
    helper = ("__device__ float twice(float v);\n__global__ void k(float* p) { p[0] = twice(p[0]); }\n"
              "__device__ float twice(float v) { return 2.f * v; }\nfloat (*pick)(float) = nullptr;\n")
    code = kb().replace("#include <torch/extension.h>\n", "#include <torch/extension.h>\n" + helper)
    assert_passes(code, "kernelbench")  # and the template's cpp_source prototype of relu_cuda, defined in CUDA


def test_python_dispatch_module_is_refused_at_import():
    code = kb(top="from torch.utils._python_dispatch import _disable_current_modes\n")
    assert_rejects(code, "kernelbench", "forbidden-import", "_python_dispatch")


DISPATCH_STATE_CPP = [
    ("c10::impl::ExcludeDispatchKeyGuard g(c10::DispatchKeySet(c10::DispatchKey::Python));\n", "ExcludeDispatchKeyGuard"),
    ("at::AutoDispatchBelowAutograd below;\n", "AutoDispatchBelowAutograd"),
    ("c10::impl::tls_set_dispatch_key_excluded(c10::DispatchKey::Python, true);\n", "tls_set_dispatch_key_excluded"),
    ("at::RecordFunctionGuard off(false);\n", "RecordFunctionGuard"),
]


@pytest.mark.parametrize("cuda,needle", DISPATCH_STATE_CPP)
def test_dispatch_state_changes_in_extension_cpp(cuda, needle):
    assert_rejects(kb(cuda=cuda), "kernelbench", "dispatch-tamper", needle)


def test_honest_kernelbench_names_stay_allowed():
    init = ("self.w = nn.Parameter(torch.randn(8, 8))\nself.lin = nn.Linear(8, 8)\n"
            "nn.init.kaiming_uniform_(self.w, a=math.sqrt(5))\nself.scale = torch.tensor(2.0)\n"
            "self.eps: Optional[float] = torch.finfo(torch.float32).eps\n")
    forward = ("n = x.size(0)\ny = torch.empty((n, x.shape[1]), device=x.device, dtype=x.dtype)\n"
               "s = torch.cuda.current_stream()\nok = torch.cuda.is_available()\n")
    top = "import math\nfrom typing import Optional, List, Tuple\nfrom torch import nn\nimport torch.nn.functional as F\n"
    assert_passes(kb(init=init, forward=forward, top=top), "kernelbench")


def test_line_directives_are_refused():
    assert_rejects(c2cuda(top='#line 1 "/usr/include/stdio.h"\n'), "c2cuda", "line-directive", "#line")
    assert_rejects(c2cuda(top='# 7 "other.cu"\n'), "c2cuda", "line-directive", "# 7")


def test_oversized_candidate_is_refused_with_the_size_and_the_limit():
    from test_gate import gate
    code = c2cuda() + "// padding\n" * 30_000
    (f,) = gate(code, "c2cuda")
    assert f.rule == "too-large" and f.line == 1
    assert f"{len(code):,} bytes" in f.message and "262,144 bytes" in f.message


def test_eval_names_a_directory_a_missing_file_and_a_binary_file(tmp_path):
    from pipeline.commands.eval_command import candidate_file_problem
    assert "is a directory" in candidate_file_problem(str(tmp_path))
    assert "does not exist" in candidate_file_problem(str(tmp_path / "none.cu"))
    binary = tmp_path / "k.cu"
    binary.write_bytes(b"\x7fELF\x00\x01")
    assert "not UTF-8 text" in candidate_file_problem(str(binary))
    big = tmp_path / "big.cu"
    big.write_text("x" * (256 * 1024 + 1))
    assert "over the candidate limit" in candidate_file_problem(str(big))
    good = tmp_path / "ok.cu"
    good.write_text(c2cuda())
    assert candidate_file_problem(str(good)) == ""


# --- red-team classes, closed under both gate profiles ---------------------------------------------
BOTH = ["strict", "kernelbench"]

FRAMES = [  # (where, code, needle): frames, generators, coroutines, tracebacks and code objects by attribute
    ("forward", "g = (v for v in [x])\nf = g.gi_frame.f_back\n", "g.gi_frame"),
    ("forward", "loc = self.fr.f_locals['outputs']\n", "f_locals"),
    ("forward", "glb = fr.f_globals\n", "f_globals"),
    ("forward", "b = fr.f_builtins\n", "f_builtins"),
    ("forward", "c = g.gi_code\n", "gi_code"),
    ("forward", "k = fn.co_consts\n", "co_consts"),
    ("forward", "f = tb.tb_frame\n", "tb_frame"),
    ("forward", "f = co.cr_frame\n", "cr_frame"),
    ("forward", "f = ag.ag_frame\n", "ag_frame"),
    ("forward", "f = getattr(g, 'gi_frame')\n", "getattr"),
    ("forward", "f = m._getframe(1)\n", "_getframe"),
    ("top", "import torch\nbox = []\ndef walker():\n    yield box[0].gi_frame.f_back\n", "gi_frame"),
    ("forward", "import collections\nmatch g:\n    case collections.abc.Generator(gi_frame=f):\n        pass\n",
     "case collections"),
]


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("where,code,needle", FRAMES)
def test_frames_and_code_objects_on_any_receiver(profile, where, code, needle):
    assert_rejects(kb(**{where: code}), "kernelbench", "introspection", needle, profile=profile)


STORES_NOT_OWN = [  # (where, code, needle): attributes set on objects the candidate did not make
    ("forward", "x.data = x * 0\n", "x.data = x * 0"),
    ("forward", "type(x).add = None\n", "type(x).add"),
    ("forward", "m = torch.nn.Linear(1, 1)\nm = type(x)\nm.add = None\n", "m.add"),
    ("forward", "for m in [x]:\n    m.data = m\n", "m.data"),
    ("forward", "for m in enumerate(self.modules()):\n    m.data = m\n", "m.data"),
    ("top", "import torch\nm = torch.zeros(1)\ndef f(m):\n    m.data = m\n", "m.data"),
]


@pytest.mark.parametrize("where,code,needle", STORES_NOT_OWN)
def test_an_attribute_set_on_an_object_the_answer_did_not_make_is_refused(where, code, needle):
    assert_rejects(kb(**{where: code}), "kernelbench", "timing-tamper", needle, profile="kernelbench")


def test_an_attribute_set_on_an_object_the_answer_made_with_torch_passes():
    init = ("conv = nn.Conv2d(3, 4, 3)\nconv.weight.requires_grad = False\nw = torch.zeros(4)\n"
            "w.requires_grad = True\nself.conv = conv\nself.w = nn.Parameter(w)\n"
            "for m in self.modules():\n    m.training = False\n")
    assert_passes(kb(init=init), "kernelbench", profile="kernelbench")


MODULE_VALUES = [  # (where, code, rule, needle): modules the alias resolver cannot follow, patching, streams
    ("top", "import torch\nT = [torch][0]\n", "introspection", "[torch][0]"),
    ("top", "import torch\nC = (lambda: torch)()._C\n", "introspection", "lambda"),
    ("forward", "s = [torch][0].cuda.Stream()\n", "side-stream", "cuda.Stream"),
    ("forward", "s = [torch][0].cuda.Stream()\n", "introspection", "cuda.Stream"),
    ("forward", "c = [getattr(torch, 'cuda')][0]\n", "introspection", "getattr"),
    ("top", "import torch\nS = [torch][0].nn.modules.module.sys\n", "introspection", "module.sys"),
    ("top", "import torch\nT = [torch][0]\nT.backends.cuda.matmul.allow_tf32 = True\n", "timing-tamper",
     "allow_tf32 = True"),
    ("forward", "m = S.modules['pipeline.evaluation.child.torch_guard']\nm.NoTorchCompute = None\n", "timing-tamper",
     "m.NoTorchCompute"),
    ("forward", "for torch.backends.cudnn.allow_tf32 in [True]:\n    pass\n", "timing-tamper", "for torch"),
    ("top", "import torch\nclass Box:\n    t = torch\n", "introspection", "t = torch"),
    ("init", "self.t = torch\n", "introspection", "self.t = torch"),
    ("top", "import torch\ndef pick(m=torch):\n    return m\n", "introspection", "def pick"),
    ("forward", "f = (lambda: x)()._version\n", "introspection", "_version"),
    ("forward", "v = getattr(x, '_base')\n", "introspection", "getattr"),
    ("forward", "setattr(x, 'data', x)\n", "timing-tamper", "setattr"),
    ("init", "self.s = torch.cuda.get_stream_from_external(2)\n", "side-stream", "get_stream_from_external"),
    ("forward", "s = st.wait_stream(other)\n", "side-stream", "wait_stream"),
    ("top", "import typing\nhints = typing.get_type_hints\n", "introspection", "get_type_hints"),
    ("top", "from functools import singledispatch\n", "introspection", "singledispatch"),
    ("forward", "x.share_memory_()\n", "process-or-file-or-network", "share_memory_"),
    ("forward", "s = x.untyped_storage()._new_shared(4)\n", "process-or-file-or-network", "_new_shared"),
    ("forward", "x.untyped_storage()._shared_incref()\n", "process-or-file-or-network", "_shared_incref"),
    ("forward", "x.untyped_storage()._shared_decref()\n", "process-or-file-or-network", "_shared_decref"),
    ("forward", "s = x.untyped_storage()._new_shared_filename(0, 'f', 4)\n", "process-or-file-or-network",
     "_new_shared_filename"),
]


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("where,code,rule,needle", MODULE_VALUES)
def test_module_values_the_resolver_cannot_follow(profile, where, code, rule, needle):
    assert_rejects(kb(**{where: code}), "kernelbench", rule, needle, profile=profile)


def test_modules_named_directly_or_aliased_still_pass():
    top = "import math\nimport torch.nn.functional as F\nT = torch\n"
    init = "self.w = nn.Parameter(T.randn(4))\nself.scale = math.sqrt(2.0)\n"
    forward = "ok = hasattr(torch.cuda, 'is_available') and T.cuda.is_available()\nself.calls = 1\n"
    for profile in BOTH:
        assert_passes(kb(top=top, init=init, forward=forward), "kernelbench", profile=profile)


TORCH_COMPUTE = [  # strict: torch computes through operators on tensors and methods outside COMPUTE_METHODS
    ("return x * (x > 0)\n", "x * (x > 0)"),
    ("return x.clamp_min(0.0)\n", "clamp_min"),
    ("return x.threshold(0.0, 0.0)\n", "threshold"),
    ("return -x\n", "return -x"),
    ("y = relu_ext.relu_cuda(x)\nreturn y + 1\n", "y + 1"),
    ("x = x.view(-1)\nx += 1\n", "x += 1"),
    ("z = self.w.abs_()\n", "abs_"),
    ("if (x > 0).all():\n    pass\n", "(x > 0)"),
]


@pytest.mark.parametrize("forward,needle", TORCH_COMPUTE)
def test_strict_refuses_torch_compute_by_operators_and_any_tensor_method(forward, needle):
    code = kb(init="self.w = nn.Parameter(torch.randn(4))\n", forward=forward)
    assert_rejects(code, "kernelbench", "torch-compute-in-forward", needle)
    assert_passes(code, "kernelbench", profile="kernelbench")


def test_strict_follows_tensors_into_helper_functions():
    code = kb(top="def twice(t, k=2):\n    return t * k\n\n", forward="y = twice(x)\n")
    assert_rejects(code, "kernelbench", "torch-compute-in-forward", "return t * k")


def test_strict_allows_shape_arithmetic():
    forward = ("n = x.size(0) * x.size(1)\nblocks = (x.numel() + 255) // 256\nh, w = x.shape[-2:]\n"
               "area = h * w + x.stride(0) - x.dim()\nassert x.dtype == torch.float32 and x.is_cuda\n"
               "if x.dim() != 2 or x is None:\n    pass\ny = x.contiguous().view(-1)\nm = y.numel() % 4\n")
    assert_passes(kb(forward=forward), "kernelbench")


HOST_ASM = [  # inline asm that the host compiles: __host__ __device__ functions and host-only branches
    ("__host__ __device__ inline long sys3(long nr) {\n#ifndef __CUDA_ARCH__\n    long r;\n"
     '    asm volatile("syscall" : "=a"(r) : "a"(nr) : "rcx", "r11", "memory");\n    return r;\n#else\n'
     "    return 0;\n#endif\n}\n", "asm volatile"),
    ('__device__ __host__ float idle(float v) { asm("nop"); return v; }\n', 'asm("nop")'),
    ('__device__ float idle(float v) {\n#if !defined(__CUDA_ARCH__)\n    asm("nop");\n#endif\n    return v;\n}\n',
     'asm("nop")'),
    ('__device__ float idle(float v) {\n#ifdef __CUDA_ARCH__\n    return v;\n#else\n    asm("nop");\n'
     "    return v;\n#endif\n}\n", 'asm("nop")'),
]


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("top,needle", HOST_ASM)
def test_inline_asm_compiled_for_the_host(profile, top, needle):
    assert_rejects(c2cuda(top=top), "c2cuda", "inline-asm-host", needle, profile=profile)
    code = kb().replace("#include <torch/extension.h>\n", "#include <torch/extension.h>\n" + top, 1)
    assert_rejects(code, "kernelbench", "inline-asm-host", needle, profile=profile)


def test_device_only_asm_still_passes():
    top = ('__device__ float ld(const float* p) {\n    float v;\n'
           '    asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(p));\n    return v;\n}\n'
           '__device__ float ld2(const float* p) {\n#if __CUDA_ARCH__ >= 800\n    float v;\n'
           '    asm("ld.global.f32 %0, [%1];" : "=f"(v) : "l"(p));\n    return v;\n#else\n    return *p;\n#endif\n}\n')
    for profile in BOTH:
        assert_passes(c2cuda(top=top), "c2cuda", profile=profile)


PTX_SPELLINGS = [  # a PTX precision downgrade written so that no single literal holds it
    '__device__ float f(float v) { unsigned short h; asm("cvt.rn.f" "16.f32 %0, %1;" : "=h"(h) : "f"(v)); return v; }\n',
    '#define TY "f16"\n__device__ float f(float v) { unsigned short h; asm("cvt.rn." TY ".f32 %0, %1;" : "=h"(h) : '
    '"f"(v)); return v; }\n',
    '#define T2 "f16"\n#define TY T2\n__device__ float f(float v) { unsigned short h; asm("cvt.rn." TY ".f32 %0, %1;" '
    ': "=h"(h) : "f"(v)); return v; }\n',
    '__device__ float f(float v) { unsigned short h; asm("cvt.rn.f\\0616.f32 %0, %1;" : "=h"(h) : "f"(v)); return v; }\n',
    '__device__ float f(float v) { unsigned short h; asm("cvt.rn.\\x62\\x66\\x31\\x36.f32 %0, %1;" : "=h"(h) : "f"(v));'
    ' return v; }\n',
]


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("top", PTX_SPELLINGS)
def test_ptx_precision_downgrade_by_concatenation_macros_and_escapes(profile, top):
    assert_rejects(c2cuda(top=top), "c2cuda", "precision-downgrade", "asm(", profile=profile)


STREAM_CASTS = [  # a stream handle made from a value: any cast to cudaStream_t or CUstream of a non-null value
    ("cudaStream_t s = reinterpret_cast<cudaStream_t>(uintptr_t(2));", "reinterpret_cast"),
    ("cudaStream_t s = reinterpret_cast<cudaStream_t>(n);", "reinterpret_cast"),
    ("cudaStream_t s = (cudaStream_t)(uintptr_t)n;", "(cudaStream_t)"),
    ("cudaStream_t s = static_cast<cudaStream_t>((void*)y);", "static_cast"),
    ("cudaStream_t s = cudaStream_t(n);", "cudaStream_t(n)"),
    ("CUstream s = (CUstream)x;", "(CUstream)"),
    ("cudaStream_t s = *(cudaStream_t*)&n;", "(cudaStream_t*)"),
    ("cudaStream_t s = (struct CUstream_st*)y;", "CUstream_st"),
    ("auto s = __builtin_bit_cast(cudaStream_t, (long)n);", "__builtin_bit_cast"),
    ("cudaStream_t s0 = 0; auto s = (decltype(s0))(long)n;", "decltype"),
    ("typedef cudaStream_t S; S s = (S)n;", "typedef"),
    ("union { long i; cudaStream_t s; } u; u.i = n;", "union"),
]


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("body,needle", STREAM_CASTS)
def test_stream_handles_cast_from_values(profile, body, needle):
    assert_rejects(c2cuda(body=body), "c2cuda", "side-stream", needle, profile=profile)
    assert_rejects(kb(cuda=body + "\n"), "kernelbench", "side-stream", needle, profile=profile)


def test_null_and_current_stream_casts_pass():
    assert_passes(c2cuda(body="cudaStream_t s = (cudaStream_t)0; cudaStream_t t = cudaStream_t{}; (void)s; (void)t;"),
                  "c2cuda")
    for profile in BOTH:
        assert_passes(kb(cuda="cudaStream_t s = static_cast<cudaStream_t>(at::cuda::getCurrentCUDAStream());\n"
                              "(void)s;\n"), "kernelbench", profile=profile)


TORCH_THREADS = [  # torch's host thread pools in extension C++
    ("at::launch([=] { });\n", "at::launch"),
    ("at::parallel_for(0, 4, 1, [&](int64_t b, int64_t e) { });\n", "at::parallel_for"),
    ("at::internal::invoke_parallel(0, 4, 1, nullptr);\n", "at::internal"),
    ("at::intraop_launch([] { });\n", "intraop_launch"),
    ("at::set_num_threads(4);\n", "set_num_threads"),
    ("c10::ThreadPool* pool = nullptr;\n", "ThreadPool"),
    ("using namespace at;\nlaunch([=] { });\n", "launch([=]"),
    ("using namespace at;\nparallel_for(0, 4, 1, [&](int64_t b, int64_t e) { });\n", "parallel_for("),
]


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("cuda,needle", TORCH_THREADS)
def test_torch_host_threads_under_both_profiles(profile, cuda, needle):
    assert_rejects(kb(cuda=cuda), "kernelbench", "threads", needle, profile=profile)


@pytest.mark.parametrize("cuda", [
    "using namespace at;\nauto launch = [&](int n) { (void)n; };\nlaunch(4);\n",  # a lambda of its own
    "struct Runner { void launch() {} };\nRunner r;\nr.launch();\n",  # no at:: in scope: its own method
])
def test_a_launch_of_the_answers_own_passes(cuda):
    assert_passes(kb(cuda=cuda), "kernelbench", profile="kernelbench")


def test_an_extension_function_of_its_own_called_launch_passes():
    code = kb(cuda="launch(x);\n").replace("torch::Tensor relu_cuda(", "void launch(torch::Tensor t) { (void)t; }\n"
                                                                       "torch::Tensor relu_cuda(", 1)
    assert_passes(code, "kernelbench", profile="kernelbench")


# --- how published answers are written: each passes, and the hole next to it stays closed ---------------
def _input_forward() -> str:
    return kb().replace("def forward(self, x):\n        return relu_ext.relu_cuda(x.contiguous())",
                        "def forward(self, input):\n        type = input.dtype\n"
                        "        return relu_ext.relu_cuda(input.contiguous().to(type))")


def _autograd_function(spelling: str) -> str:
    top = "from torch.autograd import Function\n" if spelling == "Function" else ""
    cls = (f"class ReluFn({spelling}):\n    @staticmethod\n    def forward(ctx, input):\n"
           f"        ctx.size = input.numel()\n        ctx.save_for_backward(input)\n"
           f"        return relu_ext.relu_cuda(input)\n\n\n")
    code = kb(top=top).replace("class ModelNew(nn.Module):", cls + "class ModelNew(nn.Module):")
    return code.replace("return relu_ext.relu_cuda(x.contiguous())", "return ReluFn.apply(x.contiguous())")


def _sources_in_init(twice: bool = False) -> str:
    code = kb()
    start, end = code.index('cuda_source = """'), code.index("relu_ext = load_inline(")
    end = code.index("\n", end) + 1
    block = code[start:end] + ("cuda_source = cuda_source.upper()\n" if twice else "")
    code = code.replace(code[start:end], "")
    init = "".join("        " + line + "\n" if line else "\n" for line in block.splitlines())
    init += "        self.ext = relu_ext\n"
    code = code.replace("        super().__init__()\n", "        super().__init__()\n" + init, 1)
    return code.replace("return relu_ext.relu_cuda(", "return self.ext.relu_cuda(")


def test_published_forms_pass():
    assert_passes(_input_forward(), "kernelbench", profile="kernelbench")
    assert_passes(_autograd_function("torch.autograd.Function"), "kernelbench", profile="kernelbench")
    assert_passes(_autograd_function("Function"), "kernelbench", profile="kernelbench")
    assert_passes(_sources_in_init(), "kernelbench", profile="kernelbench")
    assert_passes(kb(top="", cuda="").replace("#include <torch/extension.h>",
                                               "#include <torch/extension.h>\n#include <curand_kernel.h>"),
                  "kernelbench", profile="kernelbench")


@pytest.mark.parametrize("code,rule,needle", [
    (kb(forward="input('go')\n"), "introspection", "input('go')"),  # the builtin itself, not shadowed here
    (kb(forward="y = [input for _ in range(1)]\n"), "introspection", "[input for"),
    (kb(forward="g = torch.autograd.grad\n"), "introspection", "torch.autograd.grad"),
    (kb(top="from torch.autograd import grad\n"), "forbidden-import", "from torch.autograd import grad"),
    (kb(forward="a = torch.autograd\n"), "introspection", "a = torch.autograd"),
    (_sources_in_init(twice=True), "dynamic-build", "relu_ext = load_inline("),
    (kb(top="class Box:\n    @staticmethod\n    def f(ctx):\n        ctx.x = 1\n\n"), "timing-tamper", "ctx.x = 1"),
    # an autograd.Function's staticmethod called directly: its ctx may be any object (torch.Tensor)
    (_autograd_function("torch.autograd.Function").replace("class ModelNew(", "ReluFn.forward(torch.Tensor, x=0)\n\n\n"
                                                           "class ModelNew("), "timing-tamper", "ctx.size ="),
    # a class body inside a function is not the function's scope: eval here is the builtin
    (kb(forward="class Shadow:\n    eval = None\neval('1')\n"), "introspection", "eval('1')"),
    # a torch call that returns its argument does not make a new object
    (kb(forward="t = torch.Tensor.contiguous(x)\nt.data = torch.zeros_like(t)\n"), "timing-tamper", "t.data ="),
    (kb(forward="t = torch.Tensor.requires_grad_(x, False)\nt.data = x\n"), "timing-tamper", "t.data ="),
    (kb(top="T = torch\n", init="T = torch.autograd.Function\nself.fn = T\n", forward="T.save(x, 'f')\n"),
     "introspection", "T = torch.autograd.Function"),
    (kb(top="T = torch.nn.Module\n", forward="T = torch.cuda\n"), "introspection", "T = torch.cuda"),
    (kb(top="import functools\n", forward="functools.update_wrapper(torch.Tensor, x, assigned=('abs',))\n"),
     "introspection", "update_wrapper"),
    # the compile step builds what the gate read: a module-level value never stands in for a local one
    (_sources_in_init().replace("        cpp_source = ", "        cpp_source = cpp_source\n        cpp_source2 = "),
     "dynamic-build", "relu_ext = load_inline("),
])
def test_next_to_published_forms_the_holes_stay_closed(code, rule, needle):
    assert_rejects(code, "kernelbench", rule, needle, profile="kernelbench")
