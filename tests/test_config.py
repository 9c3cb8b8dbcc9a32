"""The run configuration: every shipped YAML loads, and every mistake is reported at once,
naming the key, the closest valid key, or the expected type."""
from pathlib import Path

import pytest

from pipeline.core.config import ConfigError, RunConfig, load_config
from pipeline.core.config_messages import describe_schema

CONFIGS = sorted((Path(__file__).parents[1] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_every_shipped_config_loads(path):
    cfg = load_config(path)
    assert cfg.run.name


def test_overrides_are_typed():
    cfg = load_config(None, ["eval.timing_trials=50", "compile.extra_flags=[-O2, -lineinfo]", "eval.result_cache_dir="])
    assert cfg.eval.timing_trials == 50 and cfg.compile.extra_flags == ["-O2", "-lineinfo"]
    assert cfg.eval.result_cache_dir == ""


def test_all_problems_reported_at_once(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("eval:\n  timng_trials: 5\n  warmup_trials: lots\ncompil:\n  arch: sm_90\n")
    with pytest.raises(ConfigError) as e:
        load_config(f, ["run.sead=1"])
    text = str(e.value)
    assert "4 problem(s)" in text
    assert "'eval.timng_trials'; did you mean 'eval.timing_trials'" in text
    assert "'eval.warmup_trials' = 'lots'" in text and "expected int" in text
    assert "did you mean 'compile'" in text and "did you mean 'run.seed'" in text


def test_file_errors_are_one_sentence(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    f = tmp_path / "list.yaml"
    f.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(f)
    with pytest.raises(ConfigError, match="has no '='"):
        load_config(None, ["eval.timing_trials"])


def test_every_field_is_described():
    lines = describe_schema(RunConfig)
    assert lines and all("# None" not in line and "#" in line for line in lines)
