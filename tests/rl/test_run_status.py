"""What a training run tells its user: the status line while actors start, the summary at the end."""
import io
import time
from pathlib import Path

from pipeline.core.config import load_config
from pipeline.rl.loop import starting
from pipeline.rl.tracking import METRICS_FILE, StatusLine, run_summary
from pipeline.commands.train_command import next_commands


def test_status_line_reports_the_wait_and_its_end():
    out = io.StringIO()
    with StatusLine("starting 1 generator", every_s=0.02, stream=out) as status:
        time.sleep(0.15)
        took = status.done()
        assert status.done() == took  # once
    lines = out.getvalue().splitlines()
    assert lines[0] == "starting 1 generator ..."
    assert any(ln.startswith("starting 1 generator: ") and ln.endswith("s so far") for ln in lines[1:-1])
    assert lines[-1] == f"starting 1 generator: ready after {took:.0f} s" and took >= 0.15
    n = len(lines)
    time.sleep(0.06)
    assert len(out.getvalue().splitlines()) == n  # nothing more once done, also on leaving the block


def test_status_line_says_when_start_up_failed():
    out = io.StringIO()
    try:
        with StatusLine("starting", every_s=10, stream=out):
            raise RuntimeError("engine died")
    except RuntimeError:
        pass
    assert out.getvalue().splitlines()[-1].startswith("starting: stopped (RuntimeError) after ")


def _row(step, verdicts, adv, loss):
    row = {"step": step, "rollout/turns": 16.0, "reward/advantage_abs_mean": adv, "learner/loss": loss}
    row.update({f"verdict/{k}": v / 16 for k, v in verdicts.items()})
    return row


def test_summary_of_a_run_that_learned_nothing(tmp_path: Path):
    (tmp_path / METRICS_FILE).write_text("{}\n")
    text = run_summary([_row(1, {"format_error": 16}, 0.0, 0.0)], tmp_path, ["cudaperf bench --help"])
    assert "step 1: 16 candidates: format_error 16; rewards all equal within every group; loss 0" in text
    assert "every advantage was 0" in text and "cudaperf sft" in text
    assert f"metrics per step (every figure): {tmp_path / METRICS_FILE}" in text
    assert "training curves" not in text  # only files there
    assert text.splitlines()[-1] == "  next: cudaperf bench --help"


def test_summary_of_a_run_whose_rewards_varied(tmp_path: Path):
    text = run_summary([_row(1, {"format_error": 12, "not_executed": 4}, 0.3, 0.02),
                        _row(2, {"not_executed": 10, "compile_error": 6}, 0.4, 0.03)], tmp_path, [])
    assert "step 1: 16 candidates: format_error 12, not_executed 4; rewards varied within groups" in text
    assert "step 2: 16 candidates: not_executed 10, compile_error 6; rewards varied" in text
    assert "every advantage was 0" not in text


def test_start_up_and_next_steps_in_words(tmp_path: Path):
    cfg = load_config("configs/local.yaml", [])
    assert starting(cfg, 0) == ("1 generator (vllm engine, model tiny-sft), 1 learner rank, a CPU evaluator, "
                                 "2 compilers")
    h200 = load_config("configs/h200.yaml", ["eval.workers_per_gpu=4"])
    assert ", 8 GPU evaluators, " in starting(h200, 2)
    (tmp_path / "checkpoints/step_3").mkdir(parents=True)
    (tmp_path / "checkpoints/step_3/run_state.json").write_text("{}")
    cmds = next_commands(cfg, tmp_path, "configs/local.yaml", ["run.name=my run", "train.steps=3"])
    assert cmds[0].startswith(f"cudaperf train --config configs/local.yaml --resume {tmp_path} 'run.name=my run' "
                              "train.steps=8")  # the run's own overrides repeated, its step count raised
    assert any("configs/h200.yaml" in c for c in cmds)
    assert not any("--resume" in c for c in next_commands(cfg, tmp_path / "empty", None))
    venv = next_commands(cfg, tmp_path, "configs/local.yaml", [], program=".venv/bin/cudaperf")
    assert all(c.startswith(".venv/bin/cudaperf ") for c in venv)  # pasteable where cudaperf is not on PATH


def test_summary_comes_first_then_details_files_and_hints_last(tmp_path: Path):
    (tmp_path / "samples.jsonl").write_text("{}\n")
    text = run_summary([_row(1, {"not_executed": 16}, 0.3, 0.02)], tmp_path, ["cudaperf bench --help"],
                       details=["step 1: reward 0.1"], samples_per_step=4)
    lines = text.splitlines()
    assert lines[0] == "summary of 1 step(s):"
    assert lines.index("details per step:") < lines.index(f"files in {tmp_path}:")
    assert "the first 4 episodes of each step (train.samples_per_step)" in text  # what samples.jsonl holds
    assert lines[-1] == "  next: cudaperf bench --help"


def test_program_name_is_what_the_user_can_paste(tmp_path: Path, monkeypatch):
    from pipeline.commands.program import program_name
    script = tmp_path / ".venv/bin/cudaperf"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # not on PATH: the path the user ran, from where they are
    assert program_name(str(script), cwd=tmp_path) == ".venv/bin/cudaperf"
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")  # on PATH: the bare name
    assert program_name(str(script), cwd=tmp_path) == "cudaperf"
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert program_name("-m", cwd=tmp_path).endswith(" -m pipeline.cli")  # python -m pipeline.cli
