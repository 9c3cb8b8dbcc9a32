"""benchmarks/tools/learning_state.py: a directory travels between device calls in parts that fit a call, and comes
back whole, bit for bit, or not at all."""
import json
import os

import pytest


@pytest.fixture(scope="module")
def state(benchmark_script):
    return benchmark_script("tools.learning_state")


def _policy(root, seed: int = 0):
    hf = root / "sft" / "sft" / "hf"
    hf.mkdir(parents=True)
    rnd = __import__("random").Random(seed)
    (hf / "model.safetensors").write_bytes(bytes(rnd.randrange(256) for _ in range(300_000)))
    (hf / "config.json").write_text('{"hidden_size": 512}')
    (hf / "sub").mkdir()
    (hf / "sub" / "tokenizer.json").write_text("{}")
    return hf


def test_a_policy_goes_out_over_calls_and_comes_back_whole(state, tmp_path):
    runs = tmp_path / "runs"
    hf = _policy(runs)
    calls, first = [], 0
    while first is not None:  # each call returns at most RETURN_MIB: here 0.2 MiB in parts of 0.07 MiB
        out = tmp_path / f"out{len(calls)}"
        first = state.pack(runs, "sft/sft/hf", out, first, part_mib=0.07, return_mib=0.2)
        calls.append(out)
    assert len(calls) == 2
    manifest = json.loads((calls[0] / "sft_sft_hf.manifest.json").read_text())
    assert manifest["parts"] == 5 and len(list(calls[0].glob("*.part*"))) == 2
    os.utime(hf / "config.json", (1, 1))  # a later pack of the same files packs the same bytes
    again = tmp_path / "again"
    state.pack(runs, "sft/sft/hf", again, 0, part_mib=0.07, return_mib=1)
    assert (again / "sft_sft_hf.part001").read_bytes() == (calls[0] / "sft_sft_hf.part001").read_bytes()

    into, stash = tmp_path / "elsewhere", tmp_path / "stash"
    assert state.unpack(calls[0], into, stash) == state.MISSING  # parts still to come: nothing unpacked
    assert not into.exists()
    assert state.unpack(calls[1], into, stash) == 0
    back = into / "sft" / "sft" / "hf"
    for f in ("model.safetensors", "config.json", "sub/tokenizer.json"):
        assert (back / f).read_bytes() == (hf / f).read_bytes()
    from pipeline.rl.tracking import weights_fingerprint
    assert manifest["weights_sha256"] == weights_fingerprint(back) == weights_fingerprint(hf)


def test_parts_of_another_pack_are_refused(state, tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    _policy(a, seed=0)
    _policy(b, seed=1)
    out_a, out_b = tmp_path / "out_a", tmp_path / "out_b"
    state.pack(a, "sft/sft/hf", out_a, 0, part_mib=0.1, return_mib=1)
    state.pack(b, "sft/sft/hf", out_b, 0, part_mib=0.1, return_mib=1)
    (out_a / "sft_sft_hf.part001").write_bytes((out_b / "sft_sft_hf.part001").read_bytes())
    assert state.unpack(out_a, tmp_path / "into", tmp_path / "stash") == 1
    assert "sha256 differs" in capsys.readouterr().err and not (tmp_path / "into").exists()
