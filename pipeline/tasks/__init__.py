"""Task files in, validated `Task` records out (plain Python, no Ray), in layers: `expressions` and
`c_types` at the bottom, `reference_module`, then `validation`, then `sources` (loaders and
`select_tasks`). This module re-exports what the rest of the project uses.

In: task YAML files (one `Task` each, the fields of `pipeline.core.records.Task`), the built-in set under
`pipeline/assets/builtin_tasks/`, a directory of YAML files, a KernelBench checkout or one KernelBench
problem file, and candidate files (`.cu`, `.py`) for a given task.
Out: `Task` and `Candidate` records. Every problem a user can cause raises `TaskError` with one
sentence per problem naming the file, the field and the fix.

Size, init and work expressions (`"n"`, `"4*rows*cols"`, `"randint(0, bins)"`) are evaluated by
`eval_expr`, a small evaluator over Python's `ast` that allows numbers, the config's params,
arithmetic and a few whitelisted functions, nothing else.
"""
from pipeline.tasks.c_types import CTYPE_DTYPES, arg_dtype, is_pointer, split_ctype
from pipeline.core.errors import TaskError
from pipeline.tasks.expressions import eval_expr, expr_names, parse_init
from pipeline.tasks.reference_module import REQUIRED_DEFS, ModuleNames, config_params, module_names
from pipeline.tasks.sources import (BUILTIN_DIR, TASK_SUFFIXES, is_kernelbench_checkout, kernelbench_family,
                                    kernelbench_task, load_candidate_file, load_generated, load_kernelbench,
                                    load_task_arg, load_tasks, select_tasks)
from pipeline.tasks.validation import load_task_file, task_from_dict, validate_task

__all__ = ["BUILTIN_DIR", "CTYPE_DTYPES", "REQUIRED_DEFS", "TASK_SUFFIXES", "ModuleNames", "TaskError", "arg_dtype",
           "config_params", "eval_expr", "expr_names", "is_kernelbench_checkout", "is_pointer", "kernelbench_family",
           "kernelbench_task", "load_candidate_file", "load_generated", "load_kernelbench", "load_task_arg",
           "load_task_file", "load_tasks", "module_names", "parse_init", "select_tasks", "split_ctype",
           "task_from_dict", "validate_task"]
