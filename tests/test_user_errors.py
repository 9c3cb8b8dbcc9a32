"""Every user-fixable error derives from UserError, and `cudaperf` turns any of them into one line on
stderr and exit status 2 (pipeline/core/errors.py, pipeline/cli.py:main)."""
import importlib

import pytest

from pipeline.core.errors import UserError

# Listed by hand so that a new error class that forgets the base, or an existing one that loses it, fails.
USER_ERRORS = [
    ("pipeline.core.config", "ConfigError"),
    ("pipeline.tasks", "TaskError"),
    ("pipeline.tasks.reader", "DataError"),
    ("pipeline.tasks.measured", "MeasurementsError"),
    ("pipeline.dataset.measure", "MeasureError"),
    ("pipeline.rollout.tiny_model", "ModelPathError"),
    ("pipeline.rollout.conversation", "ChatTemplateError"),
    ("pipeline.rollout.prompts", "PromptError"),
    ("pipeline.scoring.bench", "BenchError"),
    ("pipeline.scoring.kernelbench", "BaselineError"),
    ("pipeline.sft", "SFTError"),
    ("pipeline.ranker.dataset", "RankDataError"),
    ("pipeline.ranker.checkpoint", "CheckpointError"),
    ("pipeline.evaluation.child.sandbox", "SandboxUnavailable"),
    ("pipeline.commands.preflight", "NoCompiler"),
]

# Failures of our own code keep their traceback.
INTERNAL_ERRORS = [
    ("pipeline.rollout.generation", "GenerationError"),
    ("pipeline.evaluation.checks.reference", "TaskBroken"),
    ("pipeline.evaluation.gpu.driver", "CudaError"),
    ("pipeline.evaluation.child.sandbox", "ChildFailed"),
    ("pipeline.evaluation.gpu.memory_budget", "MemoryTooLarge"),
    ("pipeline.structure.ptxas", "CompileFailed"),
]


@pytest.mark.parametrize("module, name", USER_ERRORS)
def test_user_errors_derive_from_user_error(module, name):
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, UserError), f"{module}.{name} must derive from pipeline.core.errors.UserError"


@pytest.mark.parametrize("module, name", INTERNAL_ERRORS)
def test_internal_failures_are_not_user_errors(module, name):
    assert not issubclass(getattr(importlib.import_module(module), name), UserError)


def test_user_errors_keep_their_second_base():
    from pipeline.core.config import ConfigError
    from pipeline.evaluation.child.sandbox import SandboxUnavailable
    assert issubclass(ConfigError, ValueError) and issubclass(SandboxUnavailable, RuntimeError)


def run_cli(argv, capsys) -> tuple[int, str]:
    from pipeline.cli import main
    rc = main(argv)
    return rc, capsys.readouterr().err


def assert_one_line(err: str, prefix: str, words: str):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix) and words in lines[0], err
    assert "Traceback" not in err


def test_missing_config_file_is_one_line(capsys):
    rc, err = run_cli(["config", "--config", "/nonexistent/run.yaml"], capsys)
    assert rc == 2
    assert_one_line(err, "cudaperf config: ", "config file '/nonexistent/run.yaml' does not exist")


def test_unknown_config_key_names_it_without_a_traceback(capsys):
    rc, err = run_cli(["config", "eval.nope=1"], capsys)
    # a ConfigError lists every problem, one per line, under one `cudaperf:` line
    assert rc == 2 and err.startswith("cudaperf config: ") and "unknown key 'eval.nope'" in err
    assert "Traceback" not in err


def test_bench_user_error_is_one_line(capsys):
    rc, err = run_cli(["bench", "--suite", "c2cuda", "--answers", "/nonexistent", "--tasks", "builtin"], capsys)
    assert rc == 2
    assert_one_line(err, "cudaperf bench: ", "--answers /nonexistent is not a directory")


def test_module_command_without_its_own_catch_still_ends_in_one_line(capsys, monkeypatch):
    """`cudaperf train model.path=/nope`: the ModelPathError reaches pipeline/cli.py:main."""
    import pipeline.cli as cli
    from pipeline.core.config import load_config
    from pipeline.rollout.tiny_model import resolve_model_path

    def train_without_a_catch(args, open_cluster):
        resolve_model_path(load_config(None, args.overrides).model)
    monkeypatch.setattr(cli.COMMANDS["train"], "run", train_without_a_catch)
    rc, err = run_cli(["train", "model.path=/nope"], capsys)
    assert rc == 2
    assert_one_line(err, "cudaperf train: ", "model.path '/nope' is not a directory")


# --- no verdict without its tool: commands that evaluate stop at start without nvcc -------------------------
def _candidate_file(tmp_path):
    from pipeline.tasks import load_tasks
    task = next(t for t in load_tasks("builtin") if t.id == "c2cuda/saxpy")
    path = tmp_path / "saxpy.cu"
    path.write_text(task.implementations[0].code.replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + ;"))
    return str(path)


@pytest.mark.parametrize("command", [["eval", "c2cuda/saxpy", "CANDIDATE"], ["train"], ["verify"],
                                     ["bench", "--suite", "c2cuda", "--answers", "/nonexistent", "--tasks", "builtin"]])
def test_without_nvcc_a_command_that_evaluates_stops_at_start_in_one_sentence(command, capsys, tmp_path):
    argv = [_candidate_file(tmp_path) if a == "CANDIDATE" else a for a in command]
    rc, err = run_cli(argv + [f"compile.nvcc={tmp_path}/no-such-nvcc", f"run.output_dir={tmp_path}/runs",
                              "eval.gpus=0"], capsys)
    assert rc == 2
    assert_one_line(err, f"cudaperf {command[0]}: ", f"compile.nvcc = '{tmp_path}/no-such-nvcc' is not an nvcc")
    assert "set compile.nvcc=" in err and "eval.allow_unbuilt=true" in err
    assert not (tmp_path / "runs").exists()  # stopped before anything was written


def test_without_nvcc_allow_unbuilt_gives_unbuilt_and_never_says_compiles(capsys, tmp_path):
    from pipeline.cli import main
    rc = main(["eval", "c2cuda/saxpy", _candidate_file(tmp_path), f"compile.nvcc={tmp_path}/no-such-nvcc",
               "eval.allow_unbuilt=true", f"compile.cache_dir={tmp_path}/c", "eval.result_cache_dir=", "eval.gpus=0"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "verdict   unbuilt" in out and "compiles" not in out and "not built" in out
