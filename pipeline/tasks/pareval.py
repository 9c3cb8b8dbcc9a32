"""ParEval's CUDA problems as c2cuda tasks (the `pareval` task source and bench suite).

ParEval (Nichols et al., HPDC'24; its licence in `pipeline/assets/pareval_tasks/LICENSE`) gives each problem a serial
reference and a CUDA driver that launches the candidate's `__global__` kernel with a fixed launch
configuration. Here each problem is a c2cuda task (`pipeline/assets/pareval_tasks/<type>/<problem>.yaml`):
- `reference`: the serial reference of ParEval's `baseline.hpp`, rewritten over pointers, named
  `function` (`run_<kernel>`: the kernel keeps its own name);
- `args`: the kernel's parameters in order, with ParEval's input distributions;
- `pareval`: the kernel's name, the driver's launch (`grid`, `block`), the outputs the driver fills
  before the launch (`fill`), ParEval's prompt, device helpers the driver provides (`helpers`: a
  struct such as `Point`, `#include <cuComplex.h>`), and the arguments the kernel takes as another
  type (`casts`: complex numbers and structs travel as flat arrays of their doubles, the layout
  they have in memory, and the kernel receives them as ParEval declares them);
- `pareval.kernels` in the file (not in the task record): kernels in ParEval's form, at least a
  `naive` one. The loader turns each into a c2cuda implementation by `launch_wrapper`.
So one problem serves two uses. In ParEval's form (`cudaperf bench --suite pareval`) the candidate
writes only the kernel, and `kernel_candidate` appends the harness's launch, as ParEval's driver
makes it. In the c2cuda form (the `pareval` task source) the candidate translates the serial function
and chooses its own launch. Either way the evaluator's protocol applies unchanged: fresh inputs,
poisoned outputs, inputs checked unchanged, every configuration checked, trusted timing.
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from pipeline.core.assets import PAREVAL_DIR
from pipeline.core.records import Candidate, Task
from pipeline.tasks.c_source import defines, without_comments
from pipeline.core.errors import TaskError
from pipeline.tasks.validation import task_from_dict


WRAPPER_MARK = "// ---- the harness's launch, as ParEval's driver makes it (not part of the answer) ----"


def _is_zero(value: str) -> bool:
    return value.strip() in ("0", "0.0", "0.0f")


def in_kernel_form(task: Task) -> bool:
    """Whether the policy (or an answer) writes the kernel of ParEval's prompt, which the harness launches."""
    return task.pareval is not None and task.pareval.kernel_form


def _c_params(task: Task) -> str:
    return ", ".join(f"{a.ctype} {a.name}" for a in task.args)


def _spec(task: Task):
    if task.pareval is None:
        raise TaskError(f"task {task.id} is not a ParEval problem (it has no 'pareval' section); load ParEval's "
                        f"problems with the task source 'pareval' or 'pareval:kernel'")
    return task.pareval


def _elem(task: Task, arg: str, field: str) -> str:
    ctypes = {a.name: a.ctype for a in task.args}
    if arg not in ctypes:
        raise TaskError(f"{task.source_path or task.id}: field 'pareval.{field}' names '{arg}', which is not one of "
                        f"the arguments; name an argument of the kernel.")
    return ctypes[arg].replace("*", "").replace("const", "").strip()


def launch_prologue(task: Task) -> str:
    """What the harness puts before the answer: the values the driver fills outputs with (evaluated here, so
    that no macro of the answer can change them) and the fill kernel."""
    spec, lines, params = _spec(task), [], _c_params(task)
    for k, f in enumerate(spec.fill):
        elem = _elem(task, f.arg, "fill")
        if not _is_zero(f.value):  # a value may use the arguments (N + 1) and the system's macros (INT_MAX)
            lines.append(f"static {elem} pareval_fill_value_{k}({params}) {{ return ({elem})({f.value}); }}")
    if lines:
        lines.insert(0, "template <typename T> __global__ void pareval_fill(T* p, size_t n, T v) {\n"
                        "    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;"
                        " i += (size_t)gridDim.x * blockDim.x) p[i] = v;\n}")
    return "\n".join(lines) + "\n" if lines else ""


def launch_wrapper(task: Task) -> str:
    """The c2cuda entry point that launches `task.pareval.kernel` as ParEval's driver does: the listed
    outputs filled first (ParEval's drivers fill them before every launch), then one launch with the
    driver's grid and block. It comes after the answer, preceded by an #undef of every identifier it
    uses, so no macro of the answer can change it."""
    spec = _spec(task)
    lines = [f'extern "C" void {task.function}({_c_params(task)}) {{']
    for k, f in enumerate(spec.fill):
        elem = _elem(task, f.arg, "fill")
        if _is_zero(f.value):
            lines.append(f"    cudaMemsetAsync({f.arg}, 0, (size_t)({f.count}) * sizeof({elem}), 0);")
        else:
            lines.append(f"    pareval_fill<{elem}><<<1024, 256>>>({f.arg}, (size_t)({f.count}), "
                         f"pareval_fill_value_{k}({', '.join(a.name for a in task.args)}));")
    for name in spec.casts:
        _elem(task, name, "casts")
    grid = ", ".join(f"(unsigned)({g})" for g in spec.grid)
    block = ", ".join(str(b) for b in spec.block)
    call = ", ".join(f"({spec.casts[a.name]}){a.name}" if a.name in spec.casts else a.name for a in task.args)
    # `::` because ParEval names some kernels as one of their own parameters (ranks(..., size_t *ranks, ...))
    lines.append(f"    ::{spec.kernel}<<<dim3({grid}), dim3({block})>>>({call});")
    lines.append("}")
    body = "\n".join(lines) + "\n"
    undefs = "".join(f"#undef {name}\n" for name in sorted(set(re.findall(r"[A-Za-z_]\w*", body))))
    return f"{WRAPPER_MARK}\n{undefs}{body}"


def _top_level_items(code: str) -> list[str]:
    """`code` split into its top-level declarations and definitions (preprocessor lines on their own)."""
    items, depth, start, k = [], 0, 0, 0
    while k < len(code):
        ch = code[k]
        if depth == 0 and ch == "#" and code[start:k].strip() == "":
            end = code.find("\n", k)
            end = len(code) if end < 0 else end
            items.append(code[k:end])
            start = k = end + 1
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                m = re.match(r"\s*;", code[k + 1:])
                end = k + 1 + (m.end() if m else 0)
                items.append(code[start:end])
                start = k = end
                continue
        elif ch == ";" and depth == 0:
            items.append(code[start:k + 1])
            start = k + 1
        k += 1
    if code[start:].strip():
        items.append(code[start:])
    return [i.strip() for i in items if i.strip()]


def _defined_name(item: str) -> tuple[str, str] | None:
    """(kind, name) of what one top-level item defines: a struct or class, a function, a variable."""
    text = without_comments(item)
    m = re.match(r"\s*(?:typedef\s+)?(?:struct|class)\s+([A-Za-z_]\w*)", text)
    if m:
        return "struct", m.group(1)
    head = text.split("{", 1)[0]
    m = re.search(r"([A-Za-z_]\w*)\s*\([^()]*(?:\([^()]*\)[^()]*)*\)\s*(?:const\s*)?$", head.strip())
    if m and "{" in text:
        return "function", m.group(1)
    m = re.search(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*(?:=|;)", text)
    return ("variable", m.group(1)) if m else None


def _answer_defines(answer: str, kind: str, name: str) -> bool:
    if kind == "function":
        return defines(answer, name)
    code, n = without_comments(answer), re.escape(name)
    if kind == "struct":
        return re.search(rf"\b(?:struct|class)\s+{n}\s*\{{", code) is not None
    return re.search(rf"\b{n}\s*(?:\[[^\]]*\]\s*)*=", code) is not None


def driver_helpers(task: Task, answer: str) -> str:
    """The device code ParEval's driver provides beside the kernel (`pareval.helpers`), less the
    definitions the answer makes itself: ParEval's prompt shows them, and an answer may repeat them."""
    kept = []
    for item in _top_level_items(_spec(task).helpers):
        what = _defined_name(item) if not item.startswith("#") else None
        if what is None or not _answer_defines(answer, *what):
            kept.append(item)
    return "\n\n".join(kept) + "\n\n" if kept else ""


def kernel_code(task: Task, kernel: str) -> str:
    """c2cuda code of a kernel in ParEval's form: the driver's helpers, the fill values, the kernel (the
    answer), then the harness's launch (`launch_wrapper`)."""
    return f"{driver_helpers(task, kernel)}{launch_prologue(task)}{kernel.rstrip()}\n\n{launch_wrapper(task)}"


def launch_text(task: Task) -> str:
    """How the harness launches the kernel, in words, for the prompt."""
    spec = task.pareval
    fills = "; ".join(f"the first {f.count} elements of {f.arg} are set to {f.value}" if f.count.strip() != "1"
                      else f"{f.arg}[0] is set to {f.value}" for f in spec.fill)
    return (f"{spec.kernel}<<<dim3({', '.join(spec.grid)}), dim3({', '.join(map(str, spec.block))})>>>"
            f"({', '.join(a.name for a in task.args)})" + (f"; before the launch {fills}" if fills else ""))


def kernel_candidate(task: Task, kernel: str, turn: int = 0) -> Candidate:
    """An answer in ParEval's form (the `__global__` kernel, helpers of its own allowed) as the c2cuda
    candidate the evaluator runs. An answer that defines the task's entry point itself fails to compile
    (the harness defines it), so the launch is always the driver's. An answer that does not define the
    kernel is taken as ParEval's own outputs are, a completion of its prompt: the prompt goes before it."""
    if not defines(kernel, _spec(task).kernel):
        kernel = task.pareval.prompt.rstrip() + "\n" + kernel
    return Candidate(task_id=task.id, code=kernel_code(task, kernel), format="c2cuda", turn=turn)


def problem_kernels(task: Task) -> dict[str, str]:
    """The kernels of a ParEval problem's file in ParEval's form, by name (answers to test the harness with)."""
    raw = yaml.safe_load(Path(task.source_path).read_text())
    return {k["name"]: k["code"] for k in raw["pareval"]["kernels"]}


def task_from_file(path: Path) -> Task:
    """One ParEval problem file as a task: its `pareval.kernels` become c2cuda implementations."""
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise TaskError(f"{path}: cannot be read as a YAML task file ({' '.join(str(e).split())}); fix it.") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("pareval"), dict):
        raise TaskError(f"{path}: a ParEval problem file needs a 'pareval' section (kernel, grid, block, prompt, "
                        f"kernels); see pipeline/tasks/pareval.py.")
    if "implementations" in raw:
        raise TaskError(f"{path}: a ParEval problem file lists its kernels under 'pareval.kernels', in ParEval's "
                        f"form, not under 'implementations'; move them there.")
    spec = dict(raw["pareval"])
    if "kernel_form" in spec:
        raise TaskError(f"{path}: field 'pareval.kernel_form' is set by the task source ('pareval:kernel'), not by "
                        f"the file; remove it.")
    kernels = spec.pop("kernels", None) or []
    if not isinstance(kernels, list) or not all(isinstance(k, dict) and {"name", "strategy", "code"} <= set(k)
                                                for k in kernels):
        raise TaskError(f"{path}: field 'pareval.kernels' must list kernels with name, strategy and code; "
                        f"give at least the naive one.")
    if not any(k["strategy"] == "naive" for k in kernels):
        raise TaskError(f"{path}: field 'pareval.kernels' has no kernel with 'strategy: naive'; add a simple, "
                        f"verified kernel in ParEval's form as the GPU baseline.")
    raw = {**raw, "pareval": spec, "implementations": []}
    shell = task_from_dict({**raw, "implementations": [{"name": "x", "strategy": "naive", "format": "c2cuda",
                                                        "code": f'extern "C" void {raw.get("function", "")}()'}]},
                           str(path))  # the fields checked before the kernels can be wrapped
    raw["implementations"] = [{"name": k["name"], "strategy": k["strategy"], "format": "c2cuda",
                               "code": kernel_code(shell, k["code"])} for k in kernels]
    return task_from_dict(raw, str(path))


def load_pareval(directory: Path = PAREVAL_DIR, kernel_form: bool = False) -> list[Task]:
    """Every ParEval problem file under `directory` (load_tasks('pareval') sorts them and refuses a duplicate
    id); kernel_form: in ParEval's own form (the policy completes the kernel of ParEval's prompt,
    `ParEvalSpec.kernel_form`)."""
    files = sorted(directory.rglob("*.yaml"))
    if not files:
        raise TaskError(f"the ParEval task directory {directory} holds no problem files; reinstall cudaperf.")
    tasks = [task_from_file(f) for f in files]
    for t in tasks:
        t.pareval.kernel_form = kernel_form
    return tasks
