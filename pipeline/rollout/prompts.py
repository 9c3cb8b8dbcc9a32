"""Prompts: a Task in, the opening messages of an episode out (system prompt and task statement).

Both task kinds ask for one `.cu` file in one fenced ```cuda block, the answer format that
parsing.py reads back:
- c2cuda: the C reference, the exact `extern "C"` signature to define, what each argument holds
  (device pointers, which are read, written or both, their element counts) and the sizes used;
  the last line states the signature again, next to where the answer starts.
- a ParEval problem in its own form (task source `pareval:kernel`): ParEval's prompt, the launch the
  harness gives the kernel, and the request for the complete kernel (pipeline/tasks/pareval.py);
- torch2cuda: the PyTorch reference and the light calling convention (light_abi.py, the one
  definition), with the tensor list and shapes of one small configuration, computed by running
  the reference module on CPU, and the reminder that shapes change between configurations.
Wording is deliberately plain: the same prompt serves a tiny random model and a 32B one.
"""
from __future__ import annotations

import functools
import inspect
import re

from pipeline.core.errors import UserError
from pipeline.evaluation import light_abi
from pipeline.core.records import CandidateFormat, Task
from pipeline.tasks import config_params
from pipeline.tasks.pareval import in_kernel_form, launch_text

SYSTEM_PROMPT = (
    "You are an expert CUDA engineer. You write CUDA code for NVIDIA GPUs (sm_90) that is correct first "
    "and then as fast as possible. Answer with the complete .cu file in exactly one fenced code block "
    "that starts with ```cuda and ends with ```. Text outside the block is ignored; keep it short."
)

ROLE_TEXT = {"in": "input, read only", "out": "output: write every element (its prior contents are garbage)",
             "inout": "input and output: read it, then overwrite it", "scalar": "passed by value"}


class PromptError(UserError, ValueError):
    """A task the prompts cannot describe (our data, not the policy's fault)."""


def candidate_format(task: Task) -> CandidateFormat:
    """The format the policy writes for a task: c2cuda for C tasks, light for PyTorch tasks."""
    return "c2cuda" if task.kind == "c2cuda" else "light"


def entry_point(task: Task) -> str:
    """The function a candidate must define: the task's C-linkage function, `launch` for the light format,
    or the kernel of a ParEval problem in its own form."""
    if in_kernel_form(task):
        return task.pareval.kernel
    return task.function if task.kind == "c2cuda" else light_abi.ENTRY_POINT


@functools.lru_cache(maxsize=4096)
def _declaration(function: str) -> re.Pattern:
    """The return type and name of `function` in a C reference (compiled once per name)."""
    return re.compile(rf"([A-Za-z_][\w\s\*]*?)\s*\b{re.escape(function)}\s*\(")


def c_signature(task: Task) -> str:
    """`extern "C" <ret> <function>(<args>)` from the task's argument list and the reference's return type."""
    match = _declaration(task.function).search(task.reference)
    ret = match.group(1).split()[-1] if match else "void"
    args = ", ".join(f"{a.ctype} {a.name}" for a in task.args)
    return f'extern "C" {ret} {task.function}({args})'


def _fenced(lang: str, code: str) -> str:
    return f"```{lang}\n{code.rstrip()}\n```"


def c2cuda_prompt(task: Task) -> str:
    lines = [f"Translate this C function to CUDA: {task.description}." if task.description
             else "Translate this C function to CUDA.", "", _fenced("c", task.reference), "",
             "Write one .cu file that defines, with C linkage and these exact parameters:",
             f"    {c_signature(task)}",
             "It is called from the host. Pointer arguments are device pointers the caller allocated; launch "
             "your own kernels on the default stream and do not copy data back to the host. Arguments:"]
    for a in task.args:
        size = f", {a.size} elements" if a.size else ""
        lines.append(f"- {a.name} ({a.ctype}): {ROLE_TEXT[a.role]}{size}")
    checked = [c for c in task.configs if c.check]
    timed = [c for c in task.configs if c.time]
    show = lambda cs: "; ".join(f"{c.name}: " + ", ".join(f"{k}={v}" for k, v in c.params.items()) for c in cs)
    if checked:
        lines.append(f"Checked against the C function on: {show(checked)}.")
    if timed:
        lines.append(f"Timed against a naive one-thread-per-element CUDA version on: {show(timed)}.")
    lines.append(f"Reply with the complete file in one ```cuda block. It defines {c_signature(task)}")
    return "\n".join(lines)


@functools.lru_cache(maxsize=256)
def _light_layout(reference: str, params_items: tuple, task_id: str) -> tuple:
    """(names, shapes, dtypes) of the light tensors (inputs, parameters, outputs) for one configuration."""
    import torch
    from pipeline.evaluation.checks.reference_torch import load_reference_module

    ns = load_reference_module(Task(id=task_id, kind="torch2cuda", family="", reference=reference, configs=[]),
                               dict(params_items))
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]()).eval()
    inputs = list(ns["get_inputs"]())
    if not all(isinstance(x, torch.Tensor) for x in inputs):
        raise PromptError(f"task {task_id}: get_inputs() returns non-tensor values, which the light format "
                          "cannot pass; make every input a tensor")
    with torch.no_grad():
        out = model(*inputs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    arg_names = [p for p in inspect.signature(model.forward).parameters if p not in ("args", "kwargs")]
    names = [f"{arg_names[i]} (forward argument)" if i < len(arg_names) else f"get_inputs()[{i}]"
             for i in range(len(inputs))]
    names += [f"{k} (module state_dict entry)" for k in model.state_dict()]
    names += [f"result {j}" if len(outs) > 1 else "the result" for j in range(len(outs))]
    tensors = inputs + list(model.state_dict().values()) + outs
    return (tuple(names), tuple(tuple(t.shape) for t in tensors),
            tuple(str(t.dtype).removeprefix("torch.") for t in tensors), len(tensors) - len(outs))


def light_prompt(task: Task) -> str:
    config = next((c for c in task.configs if c.check), task.configs[0])
    params = config_params(task, config)
    names, shapes, dtypes, n_in = _light_layout(task.reference, tuple(sorted(params.items())), task.id)
    described = light_abi.describe(list(shapes[:n_in]), list(shapes[n_in:])).splitlines()
    lines = [f"Replace this PyTorch module with CUDA: {task.description}." if task.description
             else "Replace this PyTorch module with CUDA.", "", _fenced("python", task.reference), "",
             "Write one .cu file (CUDA runtime only, no torch headers) that exports", f"    {described[0]}",
             "- inputs: device pointers to the tensors of get_inputs(), then the module's parameters and buffers "
             "in state_dict() order; contiguous; do not modify them.",
             "- outputs: device pointers to the output tensors, contiguous, preallocated; write every element.",
             f"- sizes: {light_abi.SIZES_STRIDE} int64 per tensor, inputs first then outputs: the rank, then the "
             "extent of each dimension.",
             "- stream: launch every kernel on it; no other streams or threads. Return 0.",
             f"For example, with {', '.join(f'{k}={v}' for k, v in config.params.items()) or 'the defaults'}:"]
    for text, name, dtype in zip(described[1:], names, dtypes):
        lines.append(f"    {text}  {name}, {dtype}")
    lines += ["Shapes differ between the configurations the code is checked and timed on, so read every extent "
              "from sizes.", "Reply with the complete file in one ```cuda block."]
    return "\n".join(lines)


def pareval_kernel_prompt(task: Task) -> str:
    """ParEval's own prompt (a comment stating the problem and the kernel's opening line), with the launch it
    gets and this project's answer format around it."""
    show = lambda cs: "; ".join(", ".join(f"{k}={v}" for k, v in c.params.items()) for c in cs)  # noqa: E731
    lines = ["Complete this CUDA kernel.", "", _fenced("cuda", task.pareval.prompt), "",
             f"The harness launches it on the default stream as {launch_text(task)}. Pointer arguments are device "
             "pointers."]
    checked, timed = [c for c in task.configs if c.check], [c for c in task.configs if c.time]
    if checked:
        lines.append(f"Checked against a serial C version on: {show(checked)}.")
    if timed:
        lines.append(f"Timed against a simple CUDA kernel on: {show(timed)}.")
    lines.append("Reply with the complete kernel, its first line included, in one ```cuda block; __device__ helper "
                 "functions may come before it. Write no host code and launch nothing: the harness does.")
    return "\n".join(lines)


def task_prompt(task: Task) -> str:
    """The user message that states a task."""
    if in_kernel_form(task):
        return pareval_kernel_prompt(task)
    return c2cuda_prompt(task) if task.kind == "c2cuda" else light_prompt(task)


def opening_messages(task: Task) -> tuple[str, str]:
    """`(system, user)` messages that open every episode of `task`."""
    return SYSTEM_PROMPT, task_prompt(task)

