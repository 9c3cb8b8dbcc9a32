"""The gate's rules, one table: every rule a refusal can name, the checks that emit it, the gate profiles it
applies to, the fix its findings advise, and the evaluator version that gave it its present meaning.

    RULES: dict[str, Rule]                                       # rule name -> its row
    advice_for(rule, stage) -> str                               # the fix a finding of `rule` from `stage` advises
    make_finding(rule, stage, line, what, advice=None) -> Finding    # 'line N: what; advice [rule]'

A rule name is what `Finding.rule` and a verdict's flags carry; the checks (the stages below) decide when a rule
applies, this table says what it is called and what to do about it. Every module that emits a finding takes its
advice from here; an `advice` argument to make_finding replaces the row's only where the fix names something of
that one finding (the entry point's signature, the profile's linker flags, the import allow-list).

A rule emitted without a row still makes a finding, with FALLBACK_ADVICE: a refusal must never become an
exception in a training run. tests/test_gate_rules.py refuses such a rule before it is committed (it scans the
source for emitted names and runs the gate's test corpus). docs/extending.md ("A gate rule") is the recipe.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.core.records import Finding
from pipeline.evaluation.gate.profile import PROFILES

# --- stages: the checks that emit findings ----------------------------------------------------------
PYTHON = "python"            # a kernelbench candidate's Python and its load_inline options (gate/python.py,
                             # gate/compute.py, gate/__init__.py)
CUDA = "cuda"                # CUDA/C++ text, as written and after preprocessing (gate/cuda.py, text_rules.py,
                             # load_time.py)
SOURCE_TEXT = "source-text"  # characters and forms with two meanings (gate/source_text.py)
CANDIDATE = "candidate"      # the candidate as a whole: size, kernels, entry point, declarations (gate/__init__.py)
ARTEFACT = "artefact"        # what the compile step built: symbols, load-time code, system calls (build/artifact.py)
INTAKE = "intake"            # what the evaluator cannot read at all, before the gate (evaluation/intake.py)
LIMITS = "limits"            # a trusted stage stopped by its caps (evaluation/bounded.py)
STAGES = (PYTHON, CUDA, SOURCE_TEXT, CANDIDATE, ARTEFACT, INTAKE, LIMITS)

EVERY_PROFILE = frozenset(PROFILES)
# profiles under which torch may not compute: the rules on torch compute and self-declared library functions
NO_TORCH_COMPUTE = frozenset(name for name, p in PROFILES.items() if not p.torch_compute)
FALLBACK_ADVICE = "remove what this line does that the rule names"  # a rule without a row (a test refuses it)


@dataclass(frozen=True)
class Rule:
    """One rule of the gate: its row in RULES."""
    name: str                   # what Finding.rule and the verdict's flags call it
    stages: tuple[str, ...]     # the checks that emit it (STAGES)
    advice: str                 # the fix, one clause: the end of 'line N: what; <advice> [rule]'
    since: str                  # the EVALUATOR_VERSION that added it or last changed what it refuses
    profiles: frozenset[str] = EVERY_PROFILE   # the gate profiles (profile.PROFILES) under which it applies
    stage_advice: dict[str, str] = field(default_factory=dict)  # a stage whose findings advise otherwise (the
                                                                 # Python spelling of a fix, an artefact's form)


# The rows. The rules older than this table carry "20", the version it was made at (their history:
# docs/changelog.md); a new rule, or one that refuses more or less, carries the EVALUATOR_VERSION that ships it.
_ROWS = (
    # --- the Python of a kernelbench candidate -------------------------------------------------------
    Rule("syntax", (PYTHON,), "fix the Python syntax", "20"),
    Rule("no-modelnew", (PYTHON,), "define class ModelNew(nn.Module) with the reference's constructor and forward "
                                   "signature", "20"),
    Rule("subclass-reference", (PYTHON,), "derive ModelNew from nn.Module only and compute forward with your own "
                                          "kernels", "20"),
    Rule("reference-use", (PYTHON,), "do not use the reference; compute the result with your own kernels", "20"),
    Rule("forbidden-import", (PYTHON,), "import only the modules of the gate's allow-list", "20"),
    Rule("forbidden-name", (PYTHON,), "use only names the installed allowed modules (torch, math, typing, ...) define",
         "20"),
    Rule("try-fallback", (PYTHON,), "remove the try statement and let errors surface", "20"),
    Rule("tensor-subclass", (PYTHON,), "return plain tensors; do not subclass torch.Tensor", "20"),
    Rule("dynamic-build", (PYTHON,), "pass load_inline string literals, lists of them, or variables (of the module "
                                     "or of the function that calls it) assigned only them", "20"),
    Rule("compile-flags", (PYTHON,), "use only flags such as -O3, --use_fast_math or -DNAME", "20"),
    # --- rules of both languages and of the built code -----------------------------------------------
    Rule("side-stream", (PYTHON, CUDA, ARTEFACT),
         "launch every kernel on the stream the harness passes in (the current stream)", "20",
         stage_advice={PYTHON: "launch on the current stream"}),
    Rule("threads", (PYTHON, CUDA, ARTEFACT), "do all the work from the calling thread, on the GPU", "20",
         stage_advice={PYTHON: "do all the work from the calling thread"}),
    Rule("timing-tamper", (PYTHON, CUDA, ARTEFACT), "leave timing, device selection and graphs to the harness", "20",
         stage_advice={PYTHON: "do not patch modules or time anything; the harness does the timing"}),
    Rule("introspection", (PYTHON, CUDA, ARTEFACT), "do not reach into Python from the extension", "20",
         stage_advice={PYTHON: "do not inspect or alter the interpreter, torch internals or objects' dunders"}),
    Rule("process-or-file-or-network", (PYTHON, CUDA, ARTEFACT),
         "a kernel needs no files, processes, environment or network: remove it", "20"),
    Rule("precision-downgrade", (PYTHON, CUDA, ARTEFACT), "compute in float32, the task's precision", "20"),
    Rule("torch-state", (PYTHON, CUDA),
         "leave torch's global settings alone (precision switches, the caching allocator)", "20"),
    Rule("torch-compute-in-forward", (PYTHON, CUDA, ARTEFACT),
         "compute with your own kernels and use torch only to allocate outputs (torch::empty)", "20",
         profiles=NO_TORCH_COMPUTE,
         stage_advice={PYTHON: "compute with your own CUDA kernels and use torch only to allocate outputs "
                               "(torch.empty)",
                       ARTEFACT: "compute in your own kernels; from torch use only allocation, views and metadata"}),
    Rule("forbidden-include", (PYTHON, CUDA), "include only the CUDA runtime and standard headers of the allow-list",
         "20", stage_advice={PYTHON: "pass only relative paths inside the build directory or the CUDA or torch "
                                     "include directories"}),
    # --- CUDA/C++ text --------------------------------------------------------------------------------
    Rule("ipc", (CUDA, ARTEFACT), "share no GPU memory with other processes", "20"),
    Rule("driver-api", (CUDA, ARTEFACT), "use the CUDA runtime API only", "20"),
    Rule("dispatch-tamper", (CUDA,), "leave torch's dispatcher state alone (no dispatch-key guards, modes or "
                                     "record-function switches)", "20"),
    Rule("inline-asm-host", (CUDA,), "keep inline assembly inside __device__ or __global__ functions", "20"),
    Rule("load-time-code", (CUDA, ARTEFACT), "do no work when the library loads; do it inside the entry point", "20",
         stage_advice={ARTEFACT: "do no work when the library loads (no constructors, no globals with constructors); "
                                 "do it inside the entry point"}),
    Rule("symbol-alias", (CUDA, ARTEFACT), "call functions by their own names", "20",
         stage_advice={ARTEFACT: "do not define functions with the names of CUDA runtime or C library functions"}),
    Rule("token-paste", (CUDA,), "write identifiers out in full instead of pasting tokens together", "20"),
    Rule("digraph", (CUDA,), "write preprocessor directives with #", "20"),
    Rule("line-directive", (CUDA,), "remove #line directives and line markers; the gate reports your file's own lines",
         "20"),
    Rule("directive", (CUDA,), "use only #include, #define, #undef, #if/#ifdef/#ifndef/#elif/#else/#endif, #pragma, "
                               "#error and #warning", "20"),
    Rule("reserved-macro", (CUDA,), "give your own macros names that start with neither two underscores nor an "
                                    "underscore and a capital letter", "20"),
    Rule("pragma", (CUDA,), "use only #pragma unroll, once, pack and diagnostic pragmas", "20"),
    Rule("source-text", (SOURCE_TEXT,), "save the source as plain UTF-8 text with LF (or CRLF) line ends, no control "
                                        "characters other than tab, no trigraphs, and a blank beside every "
                                        "line-continuation backslash", "20"),
    # --- the candidate as a whole ---------------------------------------------------------------------
    Rule("too-large", (CANDIDATE, INTAKE), "send a shorter candidate", "20"),
    Rule("no-device-code", (CANDIDATE,), "write at least one __global__ kernel that does the work", "20"),
    Rule("missing-entry-point", (CANDIDATE,), "define the task's host entry point with C linkage and the task's "
                                              "parameters", "20"),  # findings name the exact signature instead
    Rule("undefined-function", (CANDIDATE,), "define every function you declare; call no library's compute by "
                                             "declaring it yourself", "20", profiles=NO_TORCH_COMPUTE),
    # --- the built code ---------------------------------------------------------------------------------
    Rule("unlisted-symbol", (ARTEFACT,), "call only CUDA runtime launch, memory, error and occupancy functions, libm "
                                         "and the C++ runtime basics", "20"),
    Rule("artifact-check", (ARTEFACT,), "keep the source to one plain .cu file the checker can build", "20"),
    # --- before the gate, and a stage's caps --------------------------------------------------------
    Rule("malformed-candidate", (INTAKE,), "send a Candidate record as validation builds it (code as text, a known "
                                           "format, a whole-number turn)", "20"),
    Rule("unreadable-text", (INTAKE,), "send plain UTF-8 text", "20"),
    Rule("nul-byte", (INTAKE,), "remove it", "20"),  # after 'line N holds a NUL character, which no source file holds'
    Rule("stage-limit", (LIMITS,), "simplify the source: deep nesting, very long lines and macro, template or "
                                   "constant-expression expansion cost the evaluator more than any kernel is worth",
         "20"),
)
RULES: dict[str, Rule] = {row.name: row for row in _ROWS}


def advice_for(rule: str, stage: str) -> str:
    """The fix a finding of `rule` emitted by `stage` advises: the stage's own wording, else the row's, else
    FALLBACK_ADVICE (a rule without a row; never an exception at run time)."""
    row = RULES.get(rule)
    if row is None:
        return FALLBACK_ADVICE
    return row.stage_advice.get(stage, row.advice)


def make_finding(rule: str, stage: str, line: int, what: str, advice: str | None = None) -> Finding:
    """An error finding of the gate: 'line N: what; advice [rule]', the advice from RULES unless `advice` names
    this finding's own fix."""
    return Finding(source="gate", severity="error", line=line, rule=rule,
                   message=f"line {line}: {what}; {advice or advice_for(rule, stage)} [{rule}]")
