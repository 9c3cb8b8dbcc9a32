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
    (tmp_path / "local" / "checkpoints").mkdir(parents=True)
    code = main(["train", "--config", "configs/local.yaml", f"run.output_dir={tmp_path}", "run.name=local"])
    err = capsys.readouterr().err
    assert code == 2 and "--resume" in err and len(err.strip().splitlines()) == 1
