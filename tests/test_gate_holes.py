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
    from pipeline.cli import candidate_file_problem
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
