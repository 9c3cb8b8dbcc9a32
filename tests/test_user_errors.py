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
    ("pipeline.evaluation.checks.group_data", "TaskBroken"),
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


# --- where a bad value came from, how to list the valid ones, exit codes a script can use --------------------
def test_a_bad_value_names_its_source_file_or_command_line(capsys, tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("rl:\n  clip_eps: high\n")
    rc, err = run_cli(["config", "--config", str(cfg), "train.steps=many"], capsys)
    assert rc == 2
    assert f"'rl.clip_eps' = 'high'" in err and f"(in {cfg})" in err.split("'rl.clip_eps'")[1].splitlines()[0]
    assert "(from the command line)" in err.split("'train.steps'")[1].splitlines()[0]
    assert "cudaperf config --describe" in err


def test_config_given_a_directory_says_so_and_names_a_file_in_it(capsys, tmp_path):
    (tmp_path / "mine.yaml").write_text("{}\n")
    rc, err = run_cli(["config", "--config", str(tmp_path)], capsys)
    assert rc == 2
    assert_one_line(err, "cudaperf config: ", f"--config {tmp_path} is a directory")
    assert "mine.yaml" in err and "does not exist" not in err


def test_unknown_task_says_how_to_list_every_task(capsys, tmp_path):
    rc, err = run_cli(["eval", "c2cuda/saxpyy", _candidate_file(tmp_path)], capsys)
    assert rc == 2
    assert_one_line(err, "cudaperf eval: ", "did you mean 'c2cuda/saxpy'?")
    assert "softmax" not in err and "cudaperf eval --list-tasks" in err
    from pipeline.cli import main
    assert main(["eval", "--list-tasks"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert any(line.split() == ["c2cuda/saxpy", "c2cuda"] for line in listed) and len(listed) >= 20


def test_eval_check_gives_a_nonzero_status_for_a_verdict_other_than_correct(capsys, tmp_path):
    from pipeline.cli import main
    argv = ["eval", "c2cuda/saxpy", _candidate_file(tmp_path), f"compile.cache_dir={tmp_path}/c",
            "eval.result_cache_dir=", "eval.gpus=0"]
    assert main(argv) == 0  # judged: 0 without --check, whatever the verdict
    out = capsys.readouterr().out
    assert "verdict   compile_error" in out
    assert main(argv + ["--check"]) == 1
    assert main(argv + ["--check", "--json"]) == 1


@pytest.mark.integration
def test_a_closed_pipe_ends_quietly_with_status_141():
    import subprocess
    import sys
    proc = subprocess.run(f"{sys.executable} -m pipeline.cli config --describe | head -1", shell=True,
                          capture_output=True, text=True, executable="/bin/bash")
    assert proc.stdout.count("\n") == 1
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    for _ in range(3):  # the writer's status, when the reader left before it finished
        proc = subprocess.run(f"{sys.executable} -m pipeline.cli config --describe | (exit 0); "
                              "echo ${PIPESTATUS[0]}", shell=True, capture_output=True, text=True,
                              executable="/bin/bash")
        assert proc.stdout.strip() in ("0", "141") and "Traceback" not in proc.stderr, proc.stderr
