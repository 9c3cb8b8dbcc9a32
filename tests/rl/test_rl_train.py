"""The training driver on a real local Ray (CPU): an evaluator actor killed mid-step loses no episode; two
steps of `cudaperf train` end to end (transformers generator, DeepSpeed learner on gloo, CPU evaluator,
offline wandb); the generators hold the learner's weights after every sync; and a run resumed from the
first checkpoint repeats the second step's metrics exactly (reproducible mode, staleness 0, the
evaluation results cached), up to the last bit of the generator's float32 logprobs.

The tiny random policy writes no usable code, so every reward is format_error's and the advantages are
0; a strong AdamW weight decay still moves every matrix at each step (by lr x weight_decay = 5 %), so
the sampled tokens and logprobs of a step depend on the weights the generators hold, and a resume
that restored the wrong weights, step count or task position would not repeat the step.
"""
import shutil
import threading
from pathlib import Path

import pytest
import ray

from rollout_fakes import ScriptedGenerator

from pipeline.core.config import load_config

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).parents[2]
TIMING = ("time/", "busy/", "learner/tokens_per_s", "learner/update_s")


@pytest.fixture(scope="module")
def ray_local():
    ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def saxpy_only(tmp_path_factory):
    d = tmp_path_factory.mktemp("tasks")
    shutil.copy(REPO / "pipeline" / "assets" / "builtin_tasks" / "c2cuda" / "saxpy.yaml", d / "saxpy.yaml")
    return d


@pytest.fixture(scope="module")
def dot_only(tmp_path_factory):
    d = tmp_path_factory.mktemp("live_tasks")
    shutil.copy(REPO / "pipeline" / "assets" / "builtin_tasks" / "c2cuda" / "dot.yaml", d / "dot.yaml")
    return d


def train_cfg(tmp_path, task_dir, **extra):
    overrides = {"run.output_dir": tmp_path, "run.name": "run", "tasks.source": task_dir,
                 "model.tiny_dir": tmp_path / "tiny", "model.max_model_len_tokens": 1024, "rollout.backend": "transformers", "rollout.device": "cpu",
                 "rollout.samples_per_task": 4, "rollout.max_turns": 2, "rollout.max_new_tokens": 96,
                 "rollout.temperature": 0.6, "train.steps": 2, "train.tasks_per_step": 1, "train.reproducible": True,
                 "train.checkpoint_every_steps": 1, "train.progress_bar": False, "compile.workers": 1,
                 "compile.cache_dir": tmp_path / "compile", "eval.result_cache_dir": tmp_path / "results",
                 "learner.lr": 1e-2, "learner.weight_decay": 5.0, "learner.lr_warmup_steps": 3, **extra}
    return load_config(REPO / "configs" / "local.yaml", [f"{k}={v}" for k, v in overrides.items()])


def test_evaluator_killed_mid_step_loses_no_episode(ray_local, tmp_path, builtin_tasks):
    """The driver's evaluation queue (compile pool, then evaluator pool): a compiler killed during an
    nvcc run and an evaluator killed with a group in flight are replaced, their work retried."""
    from actors.evaluators import CompileThenEvaluate, make_compiler_pool, make_evaluator_pool
    from pipeline.core.config import CompileSection, EvalSection, ModelSection, RolloutSection
    from pipeline.rollout.conversation import ChatFormat
    from pipeline.rollout.scheduler import EpisodeScheduler, ThreadQueue
    from pipeline.rollout.tiny_model import resolve_model_path

    tasks = [builtin_tasks["c2cuda/saxpy"], builtin_tasks["c2cuda/vector_add"]] \
        if "c2cuda/vector_add" in builtin_tasks else [builtin_tasks["c2cuda/saxpy"]]
    codes = {t.id: t.baseline().code for t in tasks}
    names = {t.id: t.function for t in tasks}

    def respond(prompt_text, k):
        task_id = next(t for t, fn in names.items() if f" {fn}(" in prompt_text)
        return f"```cuda\n{codes[task_id]}```\nvariant {k}"
    model_path = resolve_model_path(ModelSection(tiny_dir=str(tmp_path / "tiny")))
    gen = ScriptedGenerator(model_path, 2048, respond)
    compile_cfg = CompileSection(cache_dir=str(tmp_path / "cc"), workers=1)
    compilers = make_compiler_pool(compile_cfg, max_retries=2)
    evaluators = make_evaluator_pool(EvalSection(gpus=0, result_cache_dir=""), compile_cfg, num_gpus_available=0)
    victims = {"compiler": ray.get(compilers.actors[0].pid.remote()),
               "evaluator": ray.get(evaluators.actors[0].pid.remote())}

    def kill_on_first(pool, delay_s):  # the first call of `pool` finds its actor killed while it works
        submit = pool.submit

        def killing_submit(*args):
            ticket = submit(*args)
            if not getattr(pool, "killed", False):
                pool.killed = True
                threading.Timer(delay_s, lambda: ray.kill(pool.actors[0], no_restart=True)).start()
            return ticket
        pool.submit = killing_submit
    kill_on_first(compilers, 0.5)  # an nvcc compile takes seconds
    kill_on_first(evaluators, 0.0)  # with the group already submitted to it
    cfg = RolloutSection(samples_per_task=2, max_turns=2, max_new_tokens=600)
    try:
        with ThreadQueue(gen.generate, 1) as generation:
            scheduler = EpisodeScheduler(cfg, ChatFormat(gen.tokenizer), 2048, generation,
                                         CompileThenEvaluate(compilers, evaluators))
            outcomes, stats = scheduler.run(tasks)
        assert compilers.restarts == 1 and ray.get(compilers.actors[0].pid.remote()) != victims["compiler"]
        assert evaluators.restarts == 1 and ray.get(evaluators.actors[0].pid.remote()) != victims["evaluator"]
    finally:
        compilers.shutdown()
        evaluators.shutdown()
    assert len(outcomes) == 2 * len(tasks)
    for o in outcomes:
        assert o.trajectory.stop_reason == "turn_budget" and not o.error
        assert o.fully_judged and len(o.turns) == 2
        assert all(r.verdict in ("not_executed", "compile_error") for r in o.results())  # judged, not lost


def test_train_two_steps_then_resume_repeats_the_second(ray_local, tmp_path, saxpy_only, dot_only):
    from actors.cluster import Cluster
    from pipeline.rl.loop import run_training
    from pipeline.rl.tracking import SAMPLES_FILE, checkpoint_dir, read_metrics

    cfg = train_cfg(tmp_path, saxpy_only, **{"train.live_eval_tasks": 1, "train.live_eval_source": dot_only})
    run_dir = tmp_path / "run"
    cluster = Cluster(cfg)
    rows = run_training(cfg, run_dir, cluster)
    assert [r["step"] for r in rows] == [1, 2] == [r["step"] for r in read_metrics(run_dir)]
    first, second = rows
    assert first["rollout/episodes"] == 4 and first["verdict/format_error"] == 1.0  # the live episodes apart
    assert first["live/rollout/episodes"] == 4 and first["live/verdict/format_error"] == 1.0  # scored, not trained
    assert first["learner/step"] == 1 and second["learner/step"] == 2
    assert second["learner/lr"] == pytest.approx(2 * first["learner/lr"])  # warm-up: the step count matters
    # weight sync: step 2 was sampled by version 1, and the generator's logprobs are the learner's
    assert first["rollout/weight_version"] == 0 and second["rollout/weight_version"] == 1
    for row in rows:
        assert row["learner/ratio_mean_first"] == pytest.approx(1.0, abs=2e-3)
        assert 0 <= row["busy/generator"] <= 1 and 0 < row["busy/learner"] <= 1 and "busy/evaluator" in row
    for step in (1, 2):
        ckpt = checkpoint_dir(run_dir, step)
        assert (ckpt / "hf" / "config.json").is_file() and (ckpt / "run_state.json").is_file()
    assert (run_dir / "training_curves.png").stat().st_size > 0 and (run_dir / "wandb").is_dir()

    samples = read_metrics(run_dir, SAMPLES_FILE)  # the first episodes' turns, what the policy wrote
    assert {r["step"] for r in samples} == {1, 2} and all(r["verdict"] == "format_error" for r in samples)
    assert {r["task"] for r in samples} == {"c2cuda/saxpy"}  # the live task's episodes are not the step's own
    assert len({(r["step"], r["sample"]) for r in samples}) == 2 * 4 and all(r["response"] for r in samples)

    resumed = run_training(cfg, run_dir, cluster, resume_from=checkpoint_dir(run_dir, 1))
    assert [r["step"] for r in resumed] == [2] and [r["step"] for r in read_metrics(run_dir)] == [1, 2]
    assert [r["step"] for r in read_metrics(run_dir, SAMPLES_FILE)] == [r["step"] for r in samples]
    again = resumed[0]
    same = {k for k in second if not k.startswith(TIMING)}
    assert same == {k for k in again if not k.startswith(TIMING)}
    # The generator's float32 logprobs may differ in the last bit on a token between two processes,
    # and so may what is computed from them (the ratio to the learner's); the sampled tokens, rewards,
    # losses and every other learner number are identical.
    from_logprobs = {"rollout/logprob_mean", "live/rollout/logprob_mean", "learner/ratio_mean",
                     "learner/ratio_mean_first"}
    differing = {k: (second[k], again[k]) for k in same - from_logprobs if second[k] != again[k]
                 and not (second[k] != second[k] and again[k] != again[k])}  # NaN == NaN here
    assert not differing
    for k in from_logprobs:
        assert again[k] == pytest.approx(second[k], rel=1e-7)
