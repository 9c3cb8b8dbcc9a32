"""The records every stage hands to the next: Task, Candidate, EvalResult (and their parts).

One definition each, JSON-serialisable through pydantic (`model_dump_json` / `model_validate`),
versioned by `RECORD_VERSION`. Units are in the field names: `_ms` milliseconds, `_s` seconds,
sizes in elements unless a name says `_bytes`.

Task kinds and candidate formats (see docs/formats.md):
- `c2cuda`: translate a C function to CUDA. The task carries the C reference and its argument
  list (`args`); a candidate is a `.cu` file defining the same function with C linkage, taking
  device pointers, launching its own kernels (format `c2cuda`).
- `torch2cuda`: replace a PyTorch `Model` (KernelBench layout: `Model`, `get_inputs`,
  `get_init_inputs`). A candidate is either a `.cu` file in the light format (`light`, calling
  convention in `pipeline/evaluation/light_abi.py`) or a Python `ModelNew` building its kernels
  with `load_inline` (`kernelbench`).
"""
from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

RECORD_VERSION = 1

TaskKind = Literal["c2cuda", "torch2cuda"]
CandidateFormat = Literal["c2cuda", "light", "kernelbench"]
Verdict = Literal[
    "format_error", "compile_error", "rejected", "runtime_error", "timeout",
    "incorrect", "correct", "not_executed", "unbuilt", "evaluator_error",
]
"""`not_executed`: gated and compiled, never run (no GPU). `unbuilt`: gated but not built, because this
host has no compiler for its format (no nvcc, or no CUDA build of torch for a KernelBench answer) and
`eval.allow_unbuilt` asked to go on without one: nothing is known about whether it compiles, so it
earns nothing and takes no part in its group's advantages. `evaluator_error`: the trusted side failed
(the task's reference or baseline, the evaluator's own memory, processes or code, a GPU that stayed
busy): nothing is known about the candidate, which is neither blamed nor rewarded (a neutral reward,
left out of the group's advantages)."""
ArgRole = Literal["in", "out", "inout", "scalar"]


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class ArgSpec(Record):
    """One parameter of a c2cuda task's function, in signature order."""
    name: str
    ctype: str = Field(description="C type as written in the signature, e.g. 'const float*', 'int'")
    role: ArgRole = Field(description="in/out/inout for pointers; scalar for values")
    size: str = Field(default="", description="pointer args: element count, an expression over the config's params")
    init: str = Field(default="uniform(-1,1)", description="pointer args: how the harness fills inputs: "
                      "uniform(lo,hi) | randint(lo,hi) (hi exclusive, expressions allowed) | "
                      "scalars: an expression over the params giving the value")


class InputConfig(Record):
    """One input configuration: values of the size parameters, and what it is used for."""
    name: str
    params: dict[str, float | int] = Field(default_factory=dict,
                                           description="c2cuda: size params; torch2cuda: module globals to override")
    check: bool = Field(default=True, description="outputs are compared against the reference")
    time: bool = Field(default=False, description="candidate and baseline are timed on it")


class WorkModel(Record):
    """Work of one call, as expressions over a config's params: FLOPs and minimum bytes moved."""
    flops: str = "0"
    bytes: str = "0"


class Implementation(Record):
    """A known CUDA implementation of a task (the naive one is the c2cuda GPU baseline)."""
    name: str
    strategy: str = Field(description="optimisation strategy label: naive, coalesced, tiled_shared, ...")
    format: CandidateFormat
    code: str
    times_ms: dict[str, float] = Field(default_factory=dict, description="median time per config name, measured")
    gpu: str = ""


class Tolerance(Record):
    """Pass when |out - ref| <= rtol*|ref| + atol*rms(ref) + atol_abs for every element (and no NaN/Inf), and,
    with rel_l2, when ||out - ref|| <= rel_l2 * ||ref|| over the whole output. atol_abs is an absolute
    allowance: KernelBench tasks carry KernelBench's own (torch.allclose with atol = rtol = 1e-4 for
    float32), so every answer its harness accepts elementwise passes here too; their rel_l2 keeps that
    allowance from passing tiny outputs (a long softmax row) as zeros, which KernelBench's check would."""
    rtol: float = 1e-4
    atol: float = 1e-4
    atol_abs: float = 0.0
    rel_l2: float = 0.0

    @model_serializer(mode="wrap")
    def _without_unused_allowance(self, handler):
        """atol_abs and rel_l2 are written only when set, so tasks without them keep their content and
        measured hashes."""
        data = handler(self)
        if isinstance(data, dict):
            for name in ("atol_abs", "rel_l2"):
                if not getattr(self, name):
                    data.pop(name, None)
        return data


class ParEvalFill(Record):
    """One output ParEval's driver fills before it launches the kernel: `count` elements (a C expression over
    the function's arguments) set to `value` (a C literal)."""
    arg: str
    count: str
    value: str = "0"


class ParEvalSpec(Record):
    """What makes a c2cuda task one of ParEval's CUDA problems (pipeline/tasks/pareval.py): the candidate writes only
    the `__global__` kernel of ParEval's prompt, and the harness launches it as ParEval's driver does."""
    problem: str = Field(description="ParEval's problem name, e.g. 03_dense_la_axpy")
    problem_type: str = Field(description="ParEval's problem type, e.g. dense_la")
    kernel: str = Field(description="the __global__ kernel's name; its parameters are the task's args, in order")
    grid: list[str] = Field(description="gridDim, 1-3 C expressions over the arguments (the driver's compute())")
    block: list[int] = Field(description="blockDim, 1-3 numbers (the driver's compute())")
    fill: list[ParEvalFill] = Field(default_factory=list, description="outputs the driver fills before the launch")
    prompt: str = Field(description="ParEval's CUDA generation prompt (a comment and the kernel's opening line)")
    problem_size: int = Field(default=0, description="ParEval's DRIVER_PROBLEM_SIZE for CUDA (its efficiency@k's "
                              "resources); 0: not given, efficiency is then left out")
    helpers: str = Field(default="", description="device code the driver provides beside the kernel")
    casts: dict[str, str] = Field(default_factory=dict, description="arguments the kernel takes as another type "
                                  "(e.g. a double* of interleaved pairs as cuDoubleComplex*): argument -> its type")
    kernel_form: bool = Field(default=False, description="the policy writes the kernel of ParEval's prompt, which "
                              "the harness launches (task source 'pareval:kernel'); otherwise it translates the "
                              "serial function as any c2cuda task")


class Task(Record):
    version: int = RECORD_VERSION
    id: str
    kind: TaskKind
    family: str
    description: str = ""
    reference: str = Field(description="c2cuda: C source of the function; torch2cuda: Python module source")
    function: str = Field(default="", description="c2cuda: the function name the candidate must define")
    args: list[ArgSpec] = Field(default_factory=list, description="c2cuda: parameters in signature order")
    configs: list[InputConfig]
    work: WorkModel = Field(default_factory=WorkModel)
    tolerance: Tolerance = Field(default_factory=Tolerance)
    implementations: list[Implementation] = Field(default_factory=list)
    source_path: str = Field(default="", description="file the task was loaded from, for messages")
    pareval: ParEvalSpec | None = Field(default=None, description="ParEval problems only (pipeline/tasks/pareval.py)")
    fixed_state: list[str] = Field(default_factory=list, description="torch2cuda: state_dict names of constant "
                                   "parameters or buffers that rightly keep their value (every other constant one "
                                   "is redrawn for the check: pipeline/evaluation/checks/fidelity.py)")

    @model_serializer(mode="wrap")
    def _without_unused_pareval(self, handler):
        """`pareval` and `fixed_state` are written only when set, so other tasks keep their content and measured
        hashes."""
        data = handler(self)
        if isinstance(data, dict):
            if self.pareval is None:
                data.pop("pareval", None)
            if not self.fixed_state:
                data.pop("fixed_state", None)
        return data

    def baseline(self) -> Implementation | None:
        """The task's naive implementation: the GPU baseline of c2cuda tasks."""
        for impl in self.implementations:
            if impl.strategy == "naive":
                return impl
        return None

    def content_hash(self) -> str:
        """The task as evaluated: what a cached evaluation result depends on (implementations excluded)."""
        body = self.model_dump_json(exclude={"implementations", "source_path", "description"})
        return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def measured_hash(self) -> str:
        """The task as measured, implementations included (the `task_hash` of the measured dataset): a
        change to any of it means measuring again."""
        body = self.model_dump_json(exclude={"source_path", "description"})
        return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class Candidate(Record):
    task_id: str
    code: str
    format: CandidateFormat
    turn: int = 0

    def content_hash(self) -> str:
        """16 hex digits of format and code; any text hashes, lone surrogates included ("surrogatepass"), so a
        candidate the evaluator cannot read still has a name in its result."""
        return hashlib.sha256(f"{self.format}\0{self.code}".encode("utf-8", "surrogatepass")).hexdigest()[:16]


class Timing(Record):
    """Statistics of one timed callable: median and spread of per-call times, after warm-up. Under timed
    rounds each time is one round's batch divided by its calls, and `trials` counts the calls timed."""
    median_ms: float
    iqr_ms: float
    min_ms: float
    trials: int


class ConfigResult(Record):
    """What happened on one input configuration."""
    name: str
    passed: bool | None = Field(default=None, description="None when not checked")
    max_error: float | None = Field(default=None, description="max of |out-ref| / (rtol*|ref| + atol*rms(ref) + atol_abs); <= 1 passes")
    error: str = ""
    time: Timing | None = None
    baseline_time: Timing | None = None
    compiled_baseline_time: Timing | None = Field(default=None, description="torch2cuda: the reference under "
                                                  "torch.compile, when eval.compile_baseline is on and it builds")
    floor_ms: float | None = Field(default=None, description="roofline floor: fastest time the hardware allows")
    calls_per_batch: int | None = Field(default=None, description="timed calls per batch, one slot (set of "
                                        "buffers with fresh inputs) each, all checked")
    trusted_time: Timing | None = Field(default=None, description="the candidate's per-call time by the trusted "
                                        "clock alone (window less fixed costs): the bound its own events must meet")
    batch_overhead_ms: float | None = Field(default=None, description="what a batch's window costs besides its "
                                            "calls (the median of trusted calibration batches), taken off each batch's time")
    timing_stop: str = Field(default="", description="why the timed rounds ended: 'trials' (eval.timing_trials "
                             "calls), 'settled' (the time ratio's 95 % interval within eval.timing_ci) or 'budget' "
                             "(eval.timing_budget_s spent first, the interval not reached: a long call's few rounds)")
    baseline_drift: float | None = Field(default=None, description="eval.timing_baseline bracket or chained: how "
                                         "far apart the baseline's start and end were (|end - start| / start); past "
                                         "0.02 the baseline was timed beside every candidate batch instead")


class Finding(Record):
    """One structured observation for the feedback message and the reward."""
    source: Literal["gate", "compile", "check", "timing", "structure", "sandbox"]
    severity: Literal["error", "warning", "info"]
    message: str
    line: int | None = None
    rule: str = ""


class EvalResult(Record):
    version: int = RECORD_VERSION
    task_id: str
    candidate_hash: str
    format: CandidateFormat
    turn: int = 0
    verdict: Verdict
    reason: str = ""
    compile_log: str = ""
    configs: list[ConfigResult] = Field(default_factory=list)
    speedup: float | None = Field(default=None, description="baseline time / candidate time, geometric mean over timed configs")
    speedup_compiled: float | None = Field(default=None, description="torch.compile reference time / candidate time, "
                                           "geometric mean over timed configs (torch2cuda, eval.compile_baseline)")
    features: dict[str, float | int | str | bool] = Field(default_factory=dict)
    flags: list[str] = Field(default_factory=list, description="anti-hack rules raised")
    findings: list[Finding] = Field(default_factory=list)
    stage_s: dict[str, float] = Field(default_factory=dict, description="seconds per stage: gate, compile, load, check, timing")
    timing_parts_s: dict[str, float] = Field(default_factory=dict, description="the timing stage's seconds by part: "
                                             "lock_wait (for the GPU's exclusive lock) and each part of the rounds "
                                             "(timed_rounds.TIMING_PARTS); they add up to about stage_s['timing']")
    gpu: str = ""
    peak_memory_bytes: int | None = Field(None, description="device memory the evaluator's trusted process held at "
                                          "its peak for this candidate's group (buffers, references, slots); the "
                                          "candidate's own process is not included")
    evaluator_version: str = ""
    cached: bool = False


class Turn(Record):
    """One turn of an episode: what the policy saw and what it wrote. How it was judged is its EvalResult,
    kept beside it in the rollout's `JudgedTurn` (pipeline/rollout/episodes.py); its reward and advantage
    are the RL step's, in pipeline/rl/step.py's ScoredTurn.
    `prompt_ids` is the context fed to the generator for this turn (after any trimming of old
    turns), `response_ids` the tokens it sampled and `logprobs` the generator's log-probability
    of each of them under weight version `Trajectory.weight_version`."""
    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]
    response_text: str = ""
    finish_reason: Literal["stop", "length", ""] = Field("", description="why sampling ended: the policy's end-of-turn "
                                                        "token (stop) or the max_new_tokens limit (length)")
    kept_turns: list[int] = Field(default_factory=list, description="indices of the earlier turns whose response and "
                                  "feedback are in prompt_ids, in order (older turns were trimmed)")
    feedback: str = Field("", description="the evaluator's message, placed as the next user turn")


class Trajectory(Record):
    """A whole episode (multi-turn refinement of one task by one sample of a group)."""
    version: int = RECORD_VERSION
    task_id: str
    episode_id: str
    group_index: int = Field(0, description="which of the group's samples for the same task")
    weight_version: int = Field(0, description="policy weights that generated every turn (never mixed)")
    turns: list[Turn] = Field(default_factory=list)
    stop_reason: str = Field("", description="success | turn_budget | context | error")
