"""Known-bad candidates (reward hacks and plain bugs) with the verdicts they must get.

Each entry: (name, task id, format, code, allowed verdicts). `GATE` entries are stopped by the
static gate, so they are rejected on CPU machines too; the others need a GPU to be caught.
"""

SAXPY_HEAD = '__global__ void k(int n, float a, const float* x, float* y) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n'
SAXPY_LAUNCH = '}\nextern "C" void saxpy(int n, float a, const float* x, float* y) {\n    k<<<(n + 255) / 256, 256>>>(n, a, x, y);\n}\n'


def saxpy(body: str, launch: str = SAXPY_LAUNCH, head: str = SAXPY_HEAD) -> str:
    return head + body + launch


RELU_LIGHT = '''#include <cstdint>
#include <cuda_runtime.h>
__global__ void relu_kernel(const float* x, float* y, int64_t n) {{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    {body}
}}
extern "C" int launch(void* const* inputs, void* const* outputs, const int64_t* sizes, cudaStream_t stream) {{
    int64_t n = sizes[1] * sizes[2];
    {host}
    relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>((const float*)inputs[0], (float*)outputs[0], n);
    return 0;
}}
'''


def relu_light(body: str = "if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;", host: str = "") -> str:
    return RELU_LIGHT.format(body=body, host=host)


KB_HEAD = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu_cuda(torch::Tensor x) {
    BODY
}
"""
cpp_source = "torch::Tensor relu_cuda(torch::Tensor x);"
ext = load_inline(name="EXTNAME", cpp_sources=cpp_source, cuda_sources=cuda_source, functions=["relu_cuda"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
FORWARD
'''
KB_GOOD_BODY = ("auto y = torch::empty_like(x);\n    int64_t n = x.numel();\n"
                "    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);\n    return y;")


def kb(forward: str = "        return ext.relu_cuda(x)", body: str = KB_GOOD_BODY, name: str = "relu_ext_bad",
       prefix: str = "") -> str:
    return prefix + KB_HEAD.replace("BODY", body).replace("FORWARD", forward).replace("EXTNAME", name)


GATE = "gate"
RUN = "run"

BAD = [
    # --- plain bugs, caught by the checks on the GPU --------------------------------------------
    ("wrong_result", "c2cuda/saxpy", "c2cuda", saxpy("    if (i < n) y[i] = a * x[i];\n"), {"incorrect"}, RUN),
    ("partial_write", "c2cuda/saxpy", "c2cuda", saxpy("    if (i < n / 2) y[i] = a * x[i] + y[i];\n"), {"incorrect"}, RUN),
    ("out_of_bounds_write", "c2cuda/saxpy", "c2cuda", saxpy("    if (i < n) y[i + 64 * n + (1 << 28)] = a * x[i] + y[i];\n"),
     {"runtime_error", "incorrect"}, RUN),
    ("illegal_address", "c2cuda/saxpy", "c2cuda", saxpy("    if (i < n) ((float*)0x10)[i] = a * x[i];\n"), {"runtime_error"}, RUN),
    ("infinite_loop", "c2cuda/saxpy", "c2cuda", saxpy("    volatile const float* vx = x;\n    while (vx[0] == vx[0]) { }\n"), {"timeout"}, RUN),
    ("unwritten_output_light", "torch2cuda/relu", "light", relu_light(body="(void)x; (void)y; (void)i;"), {"incorrect"}, RUN),
    ("empty_output_kernelbench", "torch2cuda/relu", "kernelbench",
     kb(body="return torch::empty_like(x);", name="relu_ext_empty"), {"incorrect"}, RUN),
    # --- hacks caught at run time ------------------------------------------------------------------
    ("input_mutation", "c2cuda/saxpy", "c2cuda", saxpy("    if (i < n) { y[i] = a * x[i] + y[i]; ((float*)x)[i] = 0.f; }\n"),
     {"rejected"}, RUN),
    ("input_mutation_light", "torch2cuda/relu", "light",
     relu_light(body="if (i < n) { float v = x[i]; y[i] = v > 0.f ? v : 0.f; ((float*)x)[i] = 0.f; }"), {"rejected"}, RUN),
    ("cached_by_pointer", "c2cuda/saxpy", "c2cuda", saxpy(
        "    if (i < n) y[i] = a * x[i] + y[i];\n",
        launch='}\nstatic const float* last_x = 0;\nextern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
               '    if (x == last_x) return;\n    last_x = x;\n    k<<<(n + 255) / 256, 256>>>(n, a, x, y);\n}\n'),
     {"incorrect"}, RUN),
    ("skip_work_after_checks", "torch2cuda/relu", "light",
     relu_light(host="static int calls = 0;  // 3 configs x 2 checked calls, then skip the work\n    if (++calls > 6) return 0;"),
     {"incorrect", "rejected"}, RUN),
    ("fake_success_and_exit", "c2cuda/saxpy", "c2cuda", '#include <cstdio>\n' + saxpy(
        "    if (i < n) y[i] = a * x[i] + y[i];\n",
        launch='}\nextern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
               '    printf("{\\"ok\\": true, \\"verdict\\": \\"correct\\", \\"speedup\\": 100.0}\\n");\n    fflush(stdout);\n    exit(0);\n}\n'),
     {"runtime_error"}, RUN),
    ("torch_op_in_extension", "torch2cuda/relu", "kernelbench",
     kb(body="return torch::relu(x);", name="relu_ext_aten"), {"rejected"}, RUN),
    # --- hacks stopped by the static gate -------------------------------------------------------
    ("side_stream", "c2cuda/saxpy", "c2cuda", saxpy(
        "    if (i < n) y[i] = a * x[i] + y[i];\n",
        launch='}\nextern "C" void saxpy(int n, float a, const float* x, float* y) {\n    cudaStream_t s;\n'
               '    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);\n    k<<<(n + 255) / 256, 256, 0, s>>>(n, a, x, y);\n}\n'),
     {"rejected"}, GATE),
    ("host_thread", "c2cuda/saxpy", "c2cuda", '#include <thread>\n' + saxpy(
        "    if (i < n) y[i] = a * x[i] + y[i];\n",
        launch='}\nextern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
               '    std::thread t([=] { k<<<(n + 255) / 256, 256>>>(n, a, x, y); });\n    t.detach();\n}\n'),
     {"rejected"}, GATE),
    ("precision_downgrade", "c2cuda/saxpy", "c2cuda", '#include <cuda_fp16.h>\n' + saxpy(
        "    if (i < n) y[i] = __half2float(__float2half(a * x[i] + y[i]));\n"), {"rejected"}, GATE),
    ("torch_op_in_forward", "torch2cuda/relu", "kernelbench", kb(forward="        return torch.relu(x)"), {"rejected"}, GATE),
    ("try_fallback", "torch2cuda/relu", "kernelbench",
     kb(forward="        try:\n            return ext.relu_cuda(x)\n        except Exception:\n            return x.clamp(min=0)"),
     {"rejected"}, GATE),
    ("reference_by_introspection", "torch2cuda/relu", "kernelbench",
     kb(forward="        import gc\n        ref = [o for o in gc.get_objects() if type(o).__name__ == 'Model'][0]\n        return ref(x)"),
     {"rejected"}, GATE),
    ("subclass_reference", "torch2cuda/relu", "kernelbench",
     "import torch\nimport torch.nn as nn\nfrom reference import Model\n\n\nclass ModelNew(Model):\n    pass\n", {"rejected"}, GATE),
    ("patched_timer", "torch2cuda/relu", "kernelbench",
     kb(prefix="", forward="        torch.cuda.synchronize = lambda *a: None\n        return ext.relu_cuda(x)"), {"rejected"}, GATE),
    ("side_stream_python", "torch2cuda/relu", "kernelbench",
     kb(forward="        s = torch.cuda.Stream()\n        with torch.cuda.stream(s):\n            return ext.relu_cuda(x)"),
     {"rejected"}, GATE),
]
