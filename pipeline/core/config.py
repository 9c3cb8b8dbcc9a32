"""The run configuration: one typed tree, loaded once from YAML plus `section.key=value` overrides.

In: a YAML file (or none, for all defaults) and a list of dotted overrides from the command line.
Out: a `RunConfig`; each stage receives only its own section. Defaults live only here, but for the
`reward` section, which lives beside the table of terms it weights (reward_terms.py).
Every problem in a file is reported at once, each naming the key, the value and the fix; an
unknown key names the closest valid one.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from pipeline.core.config_messages import describe_error, error_source, override_keys
from pipeline.core.errors import UserError
from pipeline.core.generator_backends import BACKENDS, describe_backends, unknown_backend
from pipeline.core.reward_terms import RewardSection


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class RunSection(Section):
    name: str = Field("cudaperf", description="run name; the run directory is output_dir/name")
    output_dir: str = Field("runs", description="where run directories are written")
    seed: int = Field(0, description="seed of every random choice the run makes")


class TasksSection(Section):
    source: str = Field("builtin", description="'builtin', 'generated' or 'generated:<split>' (train/val/test/heldout), a directory of "
                        "task YAML files, or a KernelBench checkout")
    kernelbench_levels: list[int] = Field([1, 2], description="KernelBench levels to load when source is a checkout")
    kinds: list[Literal["c2cuda", "torch2cuda"]] = Field(["c2cuda", "torch2cuda"], description="task kinds used")


class CompileSection(Section):
    arch: str = Field("sm_90", description="GPU architecture compiled for (nvcc -arch)")
    nvcc: str = Field("nvcc", description="the nvcc executable")
    extra_flags: list[str] = Field(["-O3"], description="flags added to every nvcc call")
    timeout_s: float = Field(120.0, description="wall-clock limit of one compilation")
    memory_limit_bytes: int = Field(8 << 30, description="address-space limit of the compiler process")
    sandbox: Literal["bwrap", "none"] = Field("bwrap", description="isolation of compiler processes: 'bwrap' (no "
                                              "network, read-only system, only the scratch directory writable, caches "
                                              "invisible) or 'none' (limits only)")
    kernelbench_timeout_s: float = Field(300.0, description="wall-clock limit of one load_inline build")
    cpu_budget_s: float = Field(60.0, gt=0, description="CPU seconds all builds of one c2cuda or light candidate may "
                                "use together (its compile, the artefact check's preprocessing and object build); "
                                "past it the candidate is a compile_error that names this budget")
    kernelbench_cpu_budget_s: float = Field(600.0, gt=0, description="the same budget for one kernelbench candidate's "
                                            "load_inline builds")
    tmp_bytes: int = Field(1 << 30, description="size of the compiler's private /tmp (memory, a tmpfs); with "
                           "sandbox 'bwrap' every file a compiler writes but its products lands there")
    cache_dir: str = Field("~/.cache/cudaperf/compile", description="content-addressed artefact cache")
    workers: int = Field(2, description="CPU compile workers in the pool")
    candidates_per_call: int = Field(4, ge=1, description="candidates of one group that one call to a compile "
                                     "worker carries (compiled one after another there): fewer round trips for the "
                                     "driver; 1 spreads every candidate over the workers")
    log_chars: int = Field(2000, description="compiler output kept in a result, trimmed to the errors")
    output_bytes: int = Field(1 << 20, gt=0, description="compiler output (stdout and stderr, each) read from one "
                              "build; a build that succeeds with more (a ptxas report of thousands of kernels) is a "
                              "compile_error naming this cap, a failing one keeps the first bytes")
    preprocessed_bytes: int = Field(64 << 20, gt=0, description="largest preprocessed pass of a candidate (nvcc's "
                                    "kept .ii files) that is read for the artefact check; past it the candidate is a "
                                    "compile_error naming this cap (macro expansion bombs)")


class TrustedLimits(Section):
    """Caps of the trusted stages that read candidate text in the evaluator's or a compile worker's Python, each
    run in a forked worker with OS limits (evaluation/bounded.py); past one the verdict names it."""
    gate_wall_s: float = Field(30.0, gt=0, description="wall-clock limit of the static gate on one candidate")
    gate_cpu_s: float = Field(20.0, gt=0, description="CPU seconds of the static gate on one candidate")
    check_wall_s: float = Field(240.0, gt=0, description="wall-clock limit of the artefact check on one candidate "
                                "(its nvcc -E, nvcc -c, nm and objdump runs included)")
    check_cpu_s: float = Field(30.0, gt=0, description="CPU seconds of the artefact check's own Python (its tools "
                               "are charged to compile.cpu_budget_s)")
    structure_wall_s: float = Field(30.0, gt=0, description="wall-clock limit of the structural analysis of one "
                                    "candidate")
    structure_cpu_s: float = Field(20.0, gt=0, description="CPU seconds of the structural analysis of one candidate")
    memory_bytes: int = Field(4 << 30, gt=0, description="address space each stage's worker process may map beyond "
                              "what its fork server preloaded (torch included)")
    result_bytes: int = Field(16 << 20, gt=0, description="largest result (pickled) a stage's worker may hand back")


class EvalSection(Section):
    gpus: int = Field(-1, description="evaluator actors, one per GPU; -1 uses every GPU Ray sees, 0 runs CPU-only")
    workers_per_gpu: int = Field(1, ge=1, description="evaluator actors sharing one GPU: loading and checking "
                                 "overlap, timing stays exclusive (a lock per GPU)")
    warm_children: int = Field(1, ge=0, description="children per kind kept through their trusted start (sandbox, "
                               "Python, CUDA context, the group's buffers mapped) before a candidate needs one; each "
                               "serves one candidate and holds a CUDA context (some hundreds of MiB of device memory) "
                               "while it waits")
    run_timeout_s: float = Field(30.0, description="wall-clock limit of one candidate's child process per phase")
    child_memory_limit_bytes: int = Field(32 << 30, description="address-space limit of the child (host memory)")
    warmup_trials: int = Field(3, description="dataset measurement: untimed calls before timing a trusted "
                               "implementation (candidates get a checked warm-up round instead)")
    timing_trials: int = Field(100, description="timed calls of the candidate per timing configuration to aim for "
                               "(rounds continue until reached, or until timing_budget_s)")
    timing_rounds: int = Field(3, ge=1, description="at least this many timed rounds per configuration, each a "
                               "baseline batch and a candidate batch on fresh inputs")
    timing_budget_s: float = Field(2.0, description="stop starting new rounds of a configuration after this long "
                                   "(once timing_rounds are done)")
    timing_ci: float = Field(0.03, ge=0, description="stop a configuration's rounds early, once timing_rounds are "
                             "done, when the 95 % confidence interval of the candidate/baseline time ratio (from "
                             "the rounds' per-call times the result reports: the candidate's own events where they "
                             "are believed, the trusted clock's otherwise) lies within +- this fraction; 0 keeps "
                             "timing to timing_trials calls or timing_budget_s")
    timing_baseline: Literal["bracket", "chained", "every_round"] = Field(
        "bracket", description="when the baseline is timed: 'bracket' at a configuration's first timed round and once "
        "more at its end (further apart than 2 %, timing_rounds more rounds time it in every round instead; between, "
        "it runs untimed for each round's expected outputs); 'chained' as bracket, but a candidate's start bracket is "
        "the end bracket of the group's candidate before it on this evaluator (its drift check passed, the GPU idle), "
        "so each candidate times the baseline once per configuration; 'every_round' beside every candidate batch")
    timing_batch_s: float = Field(0.005, gt=0, description="aim of one timed batch's length: calls per batch are "
                                  "chosen from the baseline's time so a batch lasts about this long")
    timing_slots_max: int = Field(32, ge=1, description="most calls in one timed batch, each on its own set of "
                                  "buffers (slot) so every call is checked")
    timing_memory_bytes: int = Field(4 << 30, description="device memory for the slots of one timing "
                                     "configuration (a slot costs about twice its inputs and outputs); at least "
                                     "one slot is always made")
    group_rounds: bool = Field(False, description="make a timing round's inputs and the reference's outputs on them "
                               "once per group: the rounds whose baseline is not timed reuse, in each later "
                               "candidate's own secret order, the sets the group's first candidate was given (at "
                               "most timing_memory_bytes of them per configuration); rounds that time the baseline "
                               "draw afresh")
    lock_trace_path: str = Field("", description="a file to which every hold of the GPU's lock is appended (mode, "
                                 "reason, times; all evaluators of the GPU share it): `python -m "
                                 "pipeline.evaluation.gpu.lock_trace FILE` reports it; empty: no trace")
    busy_probe_limit_s: float = Field(0.002, description="a trusted probe on the GPU that waits longer than this "
                                      "just before a round or around a timed batch means other work was running: "
                                      "the round is repeated, and after three the candidate is not_executed")
    timing_anchored_calls: int = Field(1, ge=1, description="calls of each timed round, chosen in secret, whose "
                                       "outputs are also held to the float64 anchor, as a check configuration's are "
                                       "(every timed call meets the tolerance on the adversarial draw)")
    timing_noise_factor: float = Field(3.0, ge=0, description="a candidate's own CUDA-event time of a batch may lie "
                                       "below the trusted clock's time by at most this many interquartile ranges "
                                       "of the fixed cost of a batch; it never lowers the time further")
    gpu_memory_fraction: float = Field(0.9, gt=0, le=1, description="share of each GPU's memory that its evaluators "
                                       "reserve from, together: a group waits until its estimated peak fits "
                                       "(evaluation/gpu/memory_budget.py), so workers wait for memory instead of running out")
    memory_wait_s: float = Field(900.0, description="longest wait for device memory held by other evaluators of the "
                                 "GPU; then the group's verdict is evaluator_error")
    l2_flush_bytes: int = Field(256 << 20, description="bytes written before each timed batch to flush the L2")
    peak_bandwidth_bytes_per_s: float = Field(4.8e12, description="DRAM peak for the roofline floor (H200: 4.8 TB/s)")
    peak_flops_per_s_by_dtype: dict[str, float] = Field(
        {"float32": 67e12, "float64": 67e12, "float16": 989e12, "bfloat16": 989e12},
        description="compute peak for the roofline floor by the task's floating dtype (H200: fp32 FMA 67 TFLOP/s, "
                    "fp64 tensor 67, fp16/bf16 dense tensor 989); the largest among a task's dtypes applies")
    implausible_fraction: float = Field(0.5, description="reject times below this fraction of the roofline floor")
    unprivileged_user: str = Field("nobody", description="sandbox 'none' only: user the child runs as when the evaluator "
                                   "is root; '' keeps the user (with 'bwrap' the child is uid 65534 in its namespace)")
    sandbox: Literal["bwrap", "none"] = Field("bwrap", description="isolation of candidate children: 'bwrap' (user, "
                                              "pid, net, mount namespaces with read-only mounts, seccomp allow-list) "
                                              "or 'none' (rlimits only; an opt-out noted in every result)")
    bwrap_path: str = Field("", description="bubblewrap executable; '' takes bwrap on PATH, then .sandbox-tools/bin")
    libseccomp_path: str = Field("", description="libseccomp.so.2 for the child's filter; '' takes the system's, then "
                                 ".sandbox-tools/lib")
    result_cache_dir: str = Field("~/.cache/cudaperf/results", description="EvalResult cache by content; '' disables")
    cache_confirmations: int = Field(2, ge=1, description="a correct result is served from the result cache only "
                                     "after this many evaluations of the candidate passed, each on new inputs (a racy "
                                     "kernel's lucky pass is not reused); one failure among them replaces the passes")
    max_retries: int = Field(2, description="times a candidate is resubmitted after its actor died")
    compile_baseline: bool = Field(False, description="torch2cuda: also time the reference under torch.compile (where "
                                   "it builds) and report speedup_compiled; costs a compilation per configuration "
                                   "and group (cudaperf bench turns it on for KernelBench)")
    allow_unbuilt: bool = Field(False, description="evaluate without a compiler for a format (no nvcc, or no CUDA "
                                "build of torch for KernelBench answers): such candidates are `unbuilt`, earn no "
                                "reward and their feedback says they were not built; false stops eval, train, bench, "
                                "verify and sft at start when compile.nvcc is missing")
    gate_profile: Literal["strict", "kernelbench"] = Field(
        "strict", description="what the anti-hack gate accepts: 'strict' (all compute in the candidate's own kernels, "
        "the RL default) or 'kernelbench' (also torch ops and modules in ModelNew and cuBLAS, as KernelBench's harness "
        "accepts); the hack rules hold under both")
    limits: TrustedLimits = Field(default_factory=TrustedLimits, description="caps of the trusted stages that read "
                                  "candidate text (gate, artefact check, structural analysis)")


class ModelSection(Section):
    path: str = Field("tiny", description="'tiny' builds a randomly initialised tiny Qwen2 with a tokenizer trained on "
                      "this project's code (CPU runs, tests); 'tiny-sft' is that model after a short supervised "
                      "warm start on the built-in tasks, shipped with the project (configs/sft_local.yaml rebuilds "
                      "it; the main job's default); otherwise a local directory holding a Hugging Face causal LM "
                      "and its tokenizer")
    dtype: Literal["float32", "bfloat16", "float16"] = Field("float32", description="dtype of the generators' weights "
                                                             "and activations (bfloat16 on GPUs)")
    max_model_len_tokens: int = Field(2048, ge=256, description="context length of a generator: prompt plus response, "
                                      "in tokens")
    tiny_dir: str = Field("~/.cache/cudaperf/tiny-model", description="where tiny models are built, one directory per "
                          "corpus and size")
    tiny_hidden_size: int = Field(128, ge=64, description="tiny model: hidden size")
    tiny_layers: int = Field(2, ge=1, description="tiny model: decoder layers")
    tiny_heads: int = Field(2, ge=1, description="tiny model: attention heads; tiny_hidden_size / tiny_heads (the head "
                            "size) must be a whole number of at least 64, which vLLM's CPU attention needs")
    tiny_vocab_size: int = Field(4096, ge=512, description="tiny model: BPE vocabulary size the tokenizer is "
                                 "trained to")
    tiny_init_seed: int = Field(0, description="tiny model: seed of the random initialisation")

    @field_validator("tiny_heads")
    @classmethod
    def _head_size_at_least_64(cls, heads: int, info: ValidationInfo) -> int:
        hidden = info.data.get("tiny_hidden_size")
        if hidden is not None and (hidden % heads or hidden // heads < 64):
            raise ValueError(f"head size tiny_hidden_size / tiny_heads = {hidden} / {heads} must be a whole number "
                             f"of at least 64; use tiny_heads={max(1, hidden // 64)} or a larger tiny_hidden_size")
        return heads


class RolloutSection(Section):
    backend: str = Field("vllm", description=f"generator backend, one of {describe_backends()}",
                         json_schema_extra=lambda schema: schema.update(enum=list(BACKENDS)))
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="device of the transformers backend; 'auto' "
                                                   "takes cuda when torch sees one, else cpu")
    samples_per_task: int = Field(4, ge=1, description="episodes per task per step: the group advantages are "
                                  "normalised within")
    max_turns: int = Field(3, ge=1, description="turn budget of one episode")
    max_new_tokens: int = Field(1024, ge=1, description="limit of one response, in tokens")
    temperature: float = Field(1.0, gt=0, description="sampling temperature; logprobs are those of logits / "
                               "temperature")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling mass; below 1, logprobs are those of the "
                         "truncated distribution actually sampled from")
    stop_when_speedup_at_least: float | None = Field(1.0, description="an episode ends once a turn is correct with at "
                                                     "least this speedup; null runs every turn")
    history_turns_kept: int | None = Field(None, ge=1, description="earlier turns (response and feedback) kept in the "
                                           "context, newest first; null keeps as many as fit in "
                                           "model.max_model_len_tokens; older turns are dropped whole, the system and "
                                           "task messages always stay")
    max_episodes_in_flight: int = Field(64, ge=1, description="episodes the scheduler interleaves at once")
    max_sequences_per_batch: int = Field(64, ge=1, description="sequences (samples, not prompts) per generation call")
    max_evaluations_in_flight: int = Field(4, ge=1, description="evaluation calls (one task's candidates each) in "
                                           "flight at once")
    generator_actors: int = Field(1, ge=1, description="generator actors, one engine each")
    vllm_gpu_memory_fraction: float = Field(0.5, gt=0, le=1, description="share of GPU memory one vLLM engine takes "
                                            "(the learner shares the GPU)")
    vllm_cpu_kv_cache_bytes: int = Field(1 << 30, ge=1 << 24, description="KV cache of one vLLM engine on CPU")
    vllm_compile: bool = Field(False, description="torch.compile and CUDA graphs in the vLLM engine: slower start "
                               "(about 30 s more on CPU), faster steps; turn on for GPU runs")

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, name: str) -> str:
        if problem := unknown_backend(name):
            raise ValueError(problem)
        return name


class RLSection(Section):
    """Returns, advantages and the policy loss (pipeline/rl/advantages.py, loss.py)."""
    gamma: float = Field(0.4, ge=0, le=1, description="discount of later turns' rewards in a turn's return "
                         "(Kevin-style multi-turn; 0 uses each turn's own reward)")
    advantage_estimator: Literal["grpo", "rloo"] = Field("grpo", description="baseline within a group (same task, "
                                                          "same turn index): grpo = group mean, rloo = mean of the "
                                                          "others")
    normalise_by_std: bool = Field(True, description="grpo only: divide advantages by the group's standard deviation")
    std_eps: float = Field(1e-6, gt=0, description="added to the group standard deviation before dividing")
    clip_eps: float = Field(0.2, gt=0, description="PPO clip range of the probability ratio, below 1")
    clip_eps_high: float | None = Field(None, gt=0, description="PPO clip range above 1 (clip-higher); null uses "
                                        "clip_eps")
    kl_coef: float = Field(0.0, ge=0, description="weight of the k3 KL estimate to the frozen reference; 0 runs no "
                           "reference model")
    token_aggregation: Literal["token_mean", "seq_mean_token_sum", "seq_mean_token_mean"] = Field(
        "token_mean", description="how per-token losses become one number: mean over every policy token of the step, "
        "or mean over turns of each turn's token sum or token mean")
    ppo_epochs: int = Field(1, ge=1, description="passes over one step's trajectories")
    minibatches_per_epoch: int = Field(1, ge=1, description="optimizer steps per pass (the turns split evenly)")
    staleness_steps: int = Field(0, ge=0, description="how many weight versions a trajectory may lag the learner; "
                                 "0 = synchronous")
    negative_advantage_weight: float = Field(1.0, ge=0, le=1, description="multiplies every negative advantage after "
                                             "the group's normalisation: 1 is plain GRPO; below 1 the failures of a "
                                             "group push less than its successes pull (a saturated policy's "
                                             "successes carry almost no gradient, so with 1 its update is mostly "
                                             "unlikelihood on failures; 0 learns from successes alone)")
    shuffle_advantages: bool = Field(False, description="a control, never for training: each group's advantages "
                                     "are permuted among its samples, so an update no longer follows the reward "
                                     "(the learning experiment's third arm, benchmarks/learning_cpu.py)")


class LearnerSection(Section):
    """The DeepSpeed learner (pipeline/rl/learner.py)."""
    zero_stage: Literal[2, 3] = Field(2, description="DeepSpeed ZeRO stage: 2 shards optimizer state and gradients, "
                                      "3 also the weights")
    ranks: int = Field(1, ge=1, description="learner processes (data-parallel ranks): one per GPU on GPU hosts, gloo "
                       "processes on CPU")
    precision: Literal["auto", "bf16", "fp32"] = Field("auto", description="training precision: 'auto' is bf16 when a "
                                                       "GPU is present and fp32 on CPU")
    lr: float = Field(1e-6, ge=0, description="AdamW learning rate; 0 computes every update but changes no weight "
                      "(a control: the learning experiment's no-update arm)")
    lr_warmup_steps: int = Field(0, ge=0, description="optimizer steps of linear warm-up from 0 to lr")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay of matrices (never biases or norms)")
    adam_betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas")
    max_grad_norm: float = Field(1.0, ge=0, description="clip the global gradient norm to this; 0 disables")
    max_tokens_per_microbatch: int = Field(8192, ge=16, description="padded tokens (sequences x longest) in one "
                                           "forward pass; longer sequences are an error")
    gradient_checkpointing: bool = Field(False, description="recompute activations in backward to save memory")
    log_entropy: bool = Field(True, description="compute the policy's mean token entropy for the metrics (one more "
                              "pass over the vocabulary), logged every step as learner/entropy")
    lora_rank: int = Field(0, ge=0, description="LoRA adapter rank on every linear layer (needs peft); 0 trains "
                           "every weight")
    lora_alpha: float = Field(16.0, gt=0, description="LoRA scale numerator: adapters add lora_alpha / lora_rank * B A")
    sync_bucket_bytes: int = Field(512 << 20, ge=1 << 20, description="weight sync and export gather parameters in "
                                   "buckets of about this size")


class SFTSection(Section):
    """The supervised warm start, `cudaperf sft` (pipeline/sft/). Optimiser settings come from `learner`;
    sampling (rejection mode, held-out check) from `rollout`; the model to start from is `model.path`."""
    mode: Literal["supervised", "rejection"] = Field("supervised", description="supervised: train on the tasks' known "
                                                     "implementations; rejection: sample the policy, evaluate, train "
                                                     "on the samples whose verdict is in rejection_keep")
    output_dir: str = Field("", description="where the Hugging Face checkpoint (model + tokenizer) is written; '' "
                            "writes run.output_dir/run.name/sft")
    epochs: int = Field(1, ge=1, description="passes over the training pairs (in rejection mode: per round)")
    max_train_s: float | None = Field(None, gt=0, description="stop training after this many seconds (checked between "
                                      "optimizer steps); null runs every epoch")
    max_steps: int | None = Field(None, ge=1, description="supervised: stop after this many optimizer steps; unlike "
                                  "max_train_s the same budget on every machine, so a run can be redone exactly")
    sequences_per_step: int = Field(32, ge=1, description="training sequences (prompt + response) per optimizer step")
    keep_fastest_per_task: int = Field(0, ge=0, description="supervised: keep this many implementations per task, "
                                       "fastest first (measured times in pipeline/assets/measured/ when present, "
                                       "strategy order otherwise); 0 keeps all")
    rename_copies_per_pair: int = Field(0, ge=0, description="c2cuda: extra copies of each pair with the function "
                                        "renamed, so the policy learns to take the name from the prompt")
    rename_keep_original: bool = Field(True, description="c2cuda, with rename_copies_per_pair > 0: also keep the pair "
                                       "under its own name (false: every name must be copied from the prompt)")
    entry_first: bool = Field(False, description="c2cuda: answers define the extern \"C\" entry right after the "
                              "includes (its kernels' host code declared ahead), so the name and parameters to copy "
                              "from the prompt come first, not after hundreds of tokens of kernels")
    entry_name_weight: float = Field(1.0, ge=1.0, description="supervised: loss weight of the response tokens that "
                                     "spell the entry point's name (c2cuda), against 1 for every other token: the name "
                                     "must be copied from the prompt, and it is a few tokens among hundreds of "
                                     "boilerplate ones the model learns first")
    name_drills_per_pair: int = Field(0, ge=0, description="supervised, c2cuda: short extra sequences per pair, the "
                                      "task renamed to a made-up name with the answer's opening up to the end of its "
                                      "extern \"C\" entry as response: many cheap lessons in copying the name and "
                                      "parameters from the prompt (needs entry_first)")
    rejection_rounds: int = Field(1, ge=1, description="rejection: rounds of sample, evaluate, keep, train")
    rejection_keep: list[Literal["correct", "not_executed", "incorrect"]] = Field(
        ["correct"], description="rejection: verdicts of the samples trained on (not_executed only for CPU tests)")
    heldout_source: str = Field("", description="task source sampled after training to report compile, execute and "
                                "correct rates (e.g. 'generated:test'); '' skips the check")
    heldout_samples_per_task: int = Field(4, ge=1, description="samples per held-out task in that check")
    log_every_steps: int = Field(10, ge=1, description="optimizer steps between progress lines; every step is "
                                 "logged to the JSONL file")

    @model_validator(mode="after")
    def _drills_need_entry_first(self) -> "SFTSection":
        if self.name_drills_per_pair and not self.entry_first:
            raise ValueError("name_drills_per_pair needs entry_first=true (a drill is the answer's opening up to its "
                             "entry); set sft.entry_first=true or sft.name_drills_per_pair=0")
        return self


class TrainSection(Section):
    """The RL driver, `cudaperf train` (pipeline/commands/train_command.py, pipeline/rl/loop.py): steps, placement, logging."""
    steps: int = Field(10, ge=1, description="RL steps of the run; a step runs tasks_per_step tasks x "
                       "rollout.samples_per_task episodes and one learner update over their turns")
    tasks_per_step: int = Field(4, ge=1, description="tasks drawn from the task stream per step")
    checkpoint_every_steps: int = Field(50, ge=0, description="write a checkpoint (Hugging Face model, optimizer, "
                                        "run state) every this many steps and after the last; 0: after the last only")
    generator_gpus_per_actor: float = Field(1.0, ge=0, description="GPU share of each generator actor; 0 on CPU "
                                            "hosts, a fraction when it shares a GPU with the learner and evaluators")
    learner_gpus_per_rank: float = Field(1.0, ge=0, description="GPU share of each learner rank; 0 on CPU hosts "
                                         "(gloo), a fraction when it shares its GPU")
    evaluator_gpu_fraction: float = Field(1.0, gt=0, le=1, description="share of each evaluation GPU that its "
                                          "eval.workers_per_gpu evaluator actors take together (below 1 when "
                                          "generators and the learner use the same GPU)")
    weight_sync: Literal["object_store", "collective"] = Field("object_store", description="how new weights reach "
                                                               "the generators: object_store (rank 0's gathered "
                                                               "copy through Ray's object store) or collective "
                                                               "(rank 0 broadcasts each bucket over NCCL, gloo on "
                                                               "CPU; each generator and learner on GPUs of its own)")
    reproducible: bool = Field(False, description="generate each turn of all episodes together once every "
                               "evaluation returned, with seeds per batch: samples do not depend on timing, so a "
                               "resumed run repeats the original's steps (with cached evaluation results); less overlap")
    wandb_mode: Literal["offline", "online", "disabled"] = Field("offline", description="Weights & Biases logging; "
                                                                 "offline writes under the run directory")
    wandb_project: str = Field("cudaperf", description="Weights & Biases project name")
    progress_bar: bool = Field(True, description="show a progress bar over the steps on the terminal")
    samples_per_step: int = Field(4, ge=0, description="episodes per step whose turns (response text, verdict, "
                                  "reason) go to samples.jsonl in the run directory")
    live_eval_tasks: int = Field(0, ge=0, description="tasks per step from train.live_eval_source rolled out with "
                                 "the step's own weights and logged as live/<metric>, never trained on (a live "
                                 "evaluation curve); 0 turns it off")
    live_eval_source: str = Field("generated:heldout", description="task source of the live evaluation; it must "
                                  "share no task with tasks.source (generated:heldout beside generated:train)")


class DataSection(Section):
    """The task dataset, `cudaperf data build | stats | measure | card` (pipeline/data/)."""
    source: str = Field("generated", description="task source of the data commands: 'generated' (the task generators), "
                        "'builtin', or a directory of task YAML files")
    split_seed: int = Field(0, description="seed of the train/val/test split by family: 0 reads the frozen table "
                            "pipeline/assets/splits.json, others rank today's families afresh (tasks/splits.py)")
    allow_unchecked_tasks: bool = Field(False, description="train and benchmark on tasks the degeneracy registry "
                                        "does not vouch for (none of its entries, a changed task, or `unchecked`)")
    measured_dir: str = Field("", description="directory of the measurement Parquet files, one per shard; '' is the "
                              "package's pipeline/assets/measured/")
    measure_warmup_trials: int = Field(2, ge=0, description="untimed calls before each timing round")
    measure_trials: int = Field(20, ge=1, description="timed calls per implementation and timing configuration, over "
                                "all rounds")
    measure_rounds: int = Field(2, ge=1, description="rounds per timing configuration; each round times every "
                                "implementation of the task in turn, so drift affects all alike")
    measure_budget_s: float = Field(0.5, gt=0, description="a round stops adding trials of one implementation after "
                                    "this long (at least 5 trials)")
    compile_workers: int = Field(0, ge=0, description="nvcc processes at once while measuring; 0 uses every CPU core")
    batch_compile: bool = Field(True, description="build all implementations of a task with one nvcc call (one "
                                "library; a task whose batch fails is built one implementation at a time)")
    gpu_workers: int = Field(2, ge=1, description="measurement processes sharing the GPU: checks overlap, timing is "
                             "exclusive")
    lookahead_tasks: int = Field(64, ge=1, description="tasks compiled ahead of the GPU")
    task_timeout_s: float = Field(120.0, gt=0, description="a task's measurement is abandoned after this long and its "
                                  "worker restarted")
    tasks_per_worker: int = Field(200, ge=1, description="a worker process is replaced after this many tasks (it keeps "
                                  "every library it loaded)")
    checkpoint_s: float = Field(60.0, gt=0, description="seconds between rewrites of the shard file while measuring")


class RankerSection(Section):
    """The offline pairwise ranker, `cudaperf rank train | eval` (pipeline/ranker/), and its term in the reward."""
    min_gap: float = Field(1.2, ge=1.0, description="pairs are kept when slower time / faster time is at least this "
                           "(measurement noise below it)")
    task_sources: list[str] = Field(["builtin", "generated"], description="task sources the measured rows' code and "
                                    "work models are read from (sources that fail to load are skipped)")
    feature_cache_dir: str = Field("~/.cache/cudaperf/ranker", description="cache of features computed with nvcc "
                                   "for rows without features_json, and of code embeddings, keyed by source hash")
    feature_workers: int = Field(2, ge=1, description="processes computing features (nvcc + static analysis) at once")
    checkpoint: str = Field("", description="ranker checkpoint (a version directory or a root of versions) the "
                            "reward's ranker term uses; '' when reward.w_ranker is 0")
    threads: int = Field(2, ge=1, description="CPU threads of LightGBM and torch")
    gbt_trees: int = Field(800, ge=1, description="gbt: boosting rounds")
    gbt_learning_rate: float = Field(0.05, gt=0, description="gbt: shrinkage per round")
    gbt_leaves: int = Field(4, ge=2, description="gbt: leaves per tree (shallow trees generalise better to unseen "
                            "families: 4 beat 7 and 15 in cross-validation on the first measured shard)")
    gbt_min_data_in_leaf: int = Field(5, ge=1, description="gbt: implementations per leaf at least")
    neural_encoder: Literal["scratch", "minilm"] = Field("scratch", description="neural: code encoder: hashed token "
                                                         "n-grams trained from scratch, or the frozen all-MiniLM-L6-v2")
    neural_epochs: int = Field(40, ge=1, description="neural: passes over the training pairs")
    neural_lr: float = Field(3e-3, gt=0, description="neural: peak AdamW learning rate (one-cycle schedule)")
    neural_hidden: int = Field(128, ge=8, description="neural: width of the scoring MLP")
    neural_embed_dim: int = Field(64, ge=8, description="neural: size of the code vector")
    neural_pairs_per_batch: int = Field(512, ge=1, description="neural: pairs per optimizer step")
    neural_max_steps: int = Field(2000, ge=1, description="neural: optimizer steps at most (ends the last epoch "
                                  "early; bounds training time on large data)")
    minilm_max_chunks: int = Field(2, ge=1, description="neural, minilm encoder: 256-token windows of the code "
                                   "embedded (the rest is not read)")


class ClusterSection(Section):
    """Which nodes each role's actors run on: a role goes to the nodes that offer its custom resource (one
    `<role>_resource` field per row of the table of node roles, pipeline/core/node_roles.py)."""
    pin_roles: Literal["auto", "always", "never"] = Field("auto", description="auto: pin each role to its "
                                                          "nodes when the cluster (or its autoscaler) offers any of "
                                                          "the role resources, place anywhere on a plain Ray; always: "
                                                          "pin, and fail at start when no node offers a role's "
                                                          "resource; never: place anywhere")
    generator_resource: str = Field("generator_node", description="custom resource of the generator nodes; '' "
                                    "places generators anywhere")
    evaluator_resource: str = Field("evaluator_node", description="custom resource of the evaluator nodes; '' "
                                    "places evaluators anywhere")
    learner_resource: str = Field("learner_node", description="custom resource of the learner nodes; '' places "
                                  "learner ranks anywhere")
    compiler_resource: str = Field("compiler_node", description="custom resource of the compile nodes; '' places "
                                   "compilers anywhere")
    start_timeout_s: float = Field(60.0, gt=0, description="seconds a job's actors may wait for resources the "
                                   "cluster does not have free before the job stops and says what is missing "
                                   "(actors slow to load are waited for)")


class RunConfig(Section):
    run: RunSection = Field(default_factory=RunSection)
    tasks: TasksSection = Field(default_factory=TasksSection)
    compile: CompileSection = Field(default_factory=CompileSection)
    eval: EvalSection = Field(default_factory=EvalSection)
    model: ModelSection = Field(default_factory=ModelSection)
    rollout: RolloutSection = Field(default_factory=RolloutSection)
    reward: RewardSection = Field(default_factory=RewardSection)
    rl: RLSection = Field(default_factory=RLSection)
    learner: LearnerSection = Field(default_factory=LearnerSection)
    data: DataSection = Field(default_factory=DataSection)
    train: TrainSection = Field(default_factory=TrainSection)
    sft: SFTSection = Field(default_factory=SFTSection)
    ranker: RankerSection = Field(default_factory=RankerSection)
    cluster: ClusterSection = Field(default_factory=ClusterSection)


class ConfigError(UserError, ValueError):
    """Every problem found in a configuration, one per line."""


def _parse_scalar(text: str) -> Any:
    """A command-line value: YAML scalars and lists (`3`, `0.5`, `true`, `[1,2]`, `name`)."""
    if not text.strip():
        return ""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """Set `a.b.c=value` entries into a nested dict; a malformed entry is a ConfigError."""
    problems = []
    for item in overrides:
        if "=" not in item:
            problems.append(f"override '{item}' has no '=': write section.key=value")
            continue
        dotted, value = item.split("=", 1)
        node = raw
        parts = dotted.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                problems.append(f"override '{dotted}': '{part}' is a value, not a section")
                break
        else:
            node[parts[-1]] = _parse_scalar(value)
    if problems:
        raise ConfigError("\n".join(problems))
    return raw


def add_config_option(parser, help: str = "YAML run configuration"):
    """`--config FILE` and the note that section.key=value overrides may follow: every command's common part."""
    parser.add_argument("--config", default=None, help=help)
    parser.epilog = "Any number of section.key=value overrides may follow."
    return parser


def parse_command_line(parser, argv: list[str]):
    """(args, overrides) of one command's argument list: its flags as `parser` (argparse) defines them,
    and any number of `section.key=value` overrides among them; anything else ends in the parser's
    usage error. Every command of `cudaperf` reads its arguments this way."""
    args, extra = parser.parse_known_args(argv)
    unknown = [e for e in extra if e.startswith("-") or "=" not in e]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args, extra


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Load a RunConfig from YAML (or defaults) plus overrides; raise ConfigError listing every problem."""
    raw: dict = {}
    if path is not None:
        p = Path(path)
        if p.is_dir():
            yamls = sorted(q.name for q in p.glob("*.yaml"))[:6]
            raise ConfigError(f"--config {p} is a directory; pass one YAML file in it"
                              + (f" (such as {p / yamls[0]}; it holds {', '.join(yamls)})" if yamls else
                                 ", such as configs/local.yaml"))
        if not p.is_file():
            raise ConfigError(f"config file '{p}' does not exist; pass a path such as configs/local.yaml")
        try:
            raw = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"config file '{p}' is not valid YAML: {e}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"config file '{p}' must hold a mapping of sections, not {type(raw).__name__}")
    raw = apply_overrides(raw, overrides or [])
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as e:
        given = override_keys(overrides or [])
        lines = [f"  - {describe_error(err, RunConfig)} ({error_source(err, given, path)})" for err in e.errors()]
        raise ConfigError(f"{len(lines)} problem(s) in the configuration:\n" + "\n".join(lines)
                          + "\nevery key, its default and meaning: cudaperf config --describe") from None
