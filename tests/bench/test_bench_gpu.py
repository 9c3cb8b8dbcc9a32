"""On the H200: the torch.compile baseline, bench on ready answers (correct, timed, fast_p), and
a short SFT run in bf16 whose checkpoint samples on the GPU."""
import json

import pytest

from pipeline.core.records import Candidate

pytestmark = pytest.mark.gpu


def test_torch_compile_baseline(eval_cfg, compile_cfg, builtin_tasks):
    from pipeline.evaluation.evaluator import Evaluator
    task = builtin_tasks["torch2cuda/relu"]
    light = [i for i in task.implementations if i.format == "light"]
    ev = Evaluator(eval_cfg.model_copy(update={"compile_baseline": True, "timing_trials": 30}), compile_cfg,
                   use_gpu=True)
    results = ev.evaluate(task, [Candidate(task_id=task.id, code=i.code, format="light") for i in light])
    for r in results:
        assert r.verdict == "correct", r.reason
        timed = [c for c in r.configs if c.time is not None]
        assert timed and all(c.compiled_baseline_time and c.compiled_baseline_time.median_ms > 0 for c in timed)
        assert r.speedup_compiled and r.speedup_compiled > 0 and r.speedup > 0


def test_bench_answers_on_gpu(tmp_path):
    from pipeline.cli import main as cudaperf
    from pipeline.tasks import load_tasks
    tasks = [t for t in load_tasks("builtin") if t.kind == "c2cuda"][:3]
    for t in tasks:
        (tmp_path / "answers" / t.id).mkdir(parents=True)
        for impl in t.implementations:
            (tmp_path / "answers" / t.id / f"{impl.name}.cu").write_text(impl.code)
    out = tmp_path / "report"
    assert cudaperf(["bench", "--answers", str(tmp_path / "answers"), "--suite", "c2cuda", "--tasks", "builtin", "--limit", "3",
                 "--out", str(out), "--config", "configs/h200.yaml", "eval.result_cache_dir="]) == 0
    s = json.loads((out / "report.json").read_text())["summary"]
    assert s["verdicts"] == {"correct": s["samples"]} and s["execute_rate"] == 1.0
    assert s["fast_p"]["0"] == 1.0 and s["pass_at_k"]["pass@1"] == 1.0
    assert s["speedup"]["n"] == s["samples"] and s["speedup"]["geomean"] > 0
    assert s["fast_p_best"]["1"] > 0  # every task here has an implementation faster than its naive baseline


def test_short_sft_on_gpu(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM
    from pipeline.cli import main as cudaperf
    out = tmp_path / "sft"
    assert cudaperf(["sft", "--config", "configs/sft_h200.yaml", "tasks.source=builtin", "tasks.kinds=[c2cuda]",
                 f"sft.output_dir={out}", "sft.max_train_s=40", "sft.sequences_per_step=16",
                 "sft.heldout_source=builtin", "sft.heldout_samples_per_task=1", "rollout.max_new_tokens=512",
                 f"model.tiny_dir={tmp_path / 'tiny'}"]) == 0
    summary = json.loads((out / "sft_summary.json").read_text())
    assert summary["precision"] == "bf16" and summary["last_loss"] < 0.7 * summary["first_loss"]
    assert summary["heldout"]["samples"] == 12
    model = AutoModelForCausalLM.from_pretrained(str(out / "hf"), dtype=torch.bfloat16).cuda()
    assert next(model.parameters()).is_cuda
    print("short SFT:", {k: summary[k] for k in ("parameters", "steps", "train_s", "first_loss", "last_loss")},
          summary["heldout"])
