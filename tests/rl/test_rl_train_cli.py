"""`cudaperf train` through the command line: mistakes the user can fix end in one line, before Ray starts."""
import sys

from pipeline.cli import main


def test_a_model_path_that_does_not_exist_is_one_line_and_exit_2(capsys, tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr("pipeline.cli.open_cluster", lambda *a, **k: started.append(a))
    code = main(["train", "--config", "configs/local.yaml", f"model.path={tmp_path / 'nope'}",
                 f"run.output_dir={tmp_path}"])
    err = capsys.readouterr().err
    assert code == 2 and not started
    assert err.startswith("cudaperf") and "nope" in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_a_run_directory_with_checkpoints_is_not_overwritten(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("pipeline.cli.open_cluster", lambda *a, **k: (_ for _ in ()).throw(AssertionError("started")))
    cut_off = tmp_path / "local" / "checkpoints" / "step_000002"
    (cut_off / "hf").mkdir(parents=True)  # stopped before its run_state.json: nothing to resume from
    argv = ["train", "--config", "configs/local.yaml", f"run.output_dir={tmp_path}", "run.name=local"]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "only incomplete checkpoints" in err and "delete" in err and len(err.strip().splitlines()) == 1
    complete = tmp_path / "local" / "checkpoints" / "step_000001"
    complete.mkdir()
    (complete / "run_state.json").write_text("{}")
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "--resume" in err and len(err.strip().splitlines()) == 1
