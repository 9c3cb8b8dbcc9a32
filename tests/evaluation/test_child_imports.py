"""The candidate's child runs in a sandbox that may see only the project, the Python standard library
and torch (a private /tmp hides packages installed there, for one). So the harness code it runs must
never import the project's other dependencies, such as pydantic (through records or config) or the
gate's parsers: such an import would fail inside the sandbox only, on the GPU host."""
import subprocess
import sys

import pytest

CHILD_MODULES = ["pipeline.evaluation.child.main", "pipeline.evaluation.child.torch_guard", "pipeline.evaluation.gpu.device_views",
                 "pipeline.evaluation.gpu.driver", "pipeline.evaluation.child.seccomp", "pipeline.evaluation.child.landlock",
                 "pipeline.evaluation.compute_ops", "pipeline.evaluation.checks.numerics"]


@pytest.mark.integration
def test_the_child_harness_imports_nothing_beyond_torch_and_the_standard_library():
    code = ("import sys\n"
            + "".join(f"import {m}\n" for m in CHILD_MODULES)
            + "from pipeline.evaluation.child.main import TorchRunner, NativeRunner\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'yaml', 'tree_sitter', "
            "'tree_sitter_cuda', 'numpy_financial', 'ray', 'transformers') or m in ('pipeline.core.records', "
            "'pipeline.core.config', 'pipeline.evaluation.gate', 'pipeline.tasks'))\n"
            "print(','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "", f"the child harness imports {out.stdout.strip()}"


def test_no_import_anywhere_in_the_child_harness_reaches_beyond_torch_and_the_standard_library():
    """Function-level imports too (they run only in the child, so the test above cannot see them)."""
    import ast
    import importlib.util
    allowed_roots = set(sys.stdlib_module_names) | {"torch", "__future__"}
    found = []
    for module in CHILD_MODULES:
        tree = ast.parse(open(importlib.util.find_spec(module).origin).read())
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [f"{node.module}.{a.name}" if node.module else a.name for a in node.names] \
                if isinstance(node, ast.ImportFrom) else []
            for name in names:
                root = name.split(".")[0]
                if root in allowed_roots or any(name == m or name.startswith(m + ".") or m.startswith(name)
                                                for m in CHILD_MODULES):
                    continue
                found.append(f"{module}: {name}")
    assert not found, f"the child harness imports {found}"
