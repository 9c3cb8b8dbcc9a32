"""Reading the policy's answer: response text in, a Candidate or a `format_error` EvalResult out.

The answer format (prompts.py) is one fenced ```cuda block holding the whole .cu file. Rules:
- Closed fenced blocks (``` or ~~~, any length, closed by the same fence) are found; blocks
  tagged as CUDA, C or C++ (or untagged) are code, blocks in other languages are ignored.
- Among the code blocks, the answer is the last one that defines the entry point (the task's
  C function, or `launch` for the light format) with a body: models often show a fragment first
  and the full file last, or repeat the file after a correction.
- Nothing usable is a `format_error` whose reason tells the policy what to do: no block at all,
  a block never closed (with a note when the response hit the token limit), only blocks in
  other languages, or no block defining the entry point. The evaluator's formatter turns that
  reason into the next turn's message; this module decides no reward. Such a result is made here,
  without the evaluator (its `evaluator_version` stays empty).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.core.records import Candidate, EvalResult, Task
from pipeline.rollout.prompts import candidate_format, entry_point
from pipeline.tasks.c_source import defines
from pipeline.tasks.pareval import in_kernel_form, kernel_candidate

_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[^\s`~]*)[^\n]*\n"  # opening line
                    r"(?P<body>.*?)^[ \t]*(?P=fence)[ \t]*$", re.M | re.S)     # body, then the same fence
_OPEN_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})", re.M)
CODE_LANGS = {"", "cuda", "cu", "cuh", "c++", "cpp", "cxx", "cc", "c", "h", "hpp"}
ANSWER_HINT = "put the complete .cu file between a line ```cuda and a line ```"


@dataclass(frozen=True)
class Extracted:
    """The code of an answer, or (code None) the reason it has none."""
    code: str | None
    problem: str = ""


@dataclass(frozen=True)
class AnswerSpec:
    """What an answer to a task must define, all that reading it needs: a generator given one with a request
    reads its own samples (`Sample.extracted`), so the driver only takes the result."""
    entry: str
    kernel: bool = False

    def extract(self, text: str, finish_reason: str = "stop") -> Extracted:
        return extract_code(text, self.entry, finish_reason, kernel=self.kernel)


def answer_spec(task: Task) -> AnswerSpec:
    """The AnswerSpec of `task`: its entry point, and whether it is a kernel in ParEval's own form."""
    return AnswerSpec(entry_point(task), in_kernel_form(task))


def extract_code(text: str, entry: str, finish_reason: str = "stop", kernel: bool = False) -> Extracted:
    """The answer's code per the module's rules; `entry` is the function the code must define (kernel: a
    `__global__` kernel the harness launches, not a C-linkage entry)."""
    cut = (" The answer was cut off at the token limit: write less text and shorter code."
           if finish_reason == "length" else "")
    if not text.strip():
        return Extracted(None, f"the answer is empty; {ANSWER_HINT}.{cut}")
    blocks = [(m.group("lang").lower(), m.group("body")) for m in _FENCE.finditer(text)]
    if not blocks:
        if _OPEN_FENCE.search(text):
            return Extracted(None, f"the code block is never closed with ```; {ANSWER_HINT}.{cut}")
        return Extracted(None, f"no fenced code block found; {ANSWER_HINT}.{cut}")
    code_blocks = [body for lang, body in blocks if lang in CODE_LANGS]
    if not code_blocks:
        langs = ", ".join(sorted({f"```{lang}" for lang, _ in blocks}))
        return Extracted(None, f"the answer has no CUDA code block, only {langs}; {ANSWER_HINT}.{cut}")
    defining = [body for body in code_blocks if defines(body, entry)]
    if not defining:
        which = ("the code block does not define" if len(code_blocks) == 1
                 else f"none of the {len(code_blocks)} code blocks defines")
        must = f"the kernel __global__ void {entry} with its body" if kernel else f"extern \"C\" {entry} with its body"
        return Extracted(None, f"{which} the function {entry}(...); the file must define {must}.{cut}")
    return Extracted(defining[-1].strip("\n") + "\n")


def answer_text(code: str) -> str:
    """A model answer holding `code` in the format this module reads back (SFT targets use it)."""
    return f"```cuda\n{code.strip(chr(10))}\n```"


def parse_response(task: Task, text: str, turn: int, finish_reason: str = "stop",
                   extracted: Extracted | None = None) -> Candidate | EvalResult:
    """A Candidate for the evaluator, or the `format_error` result of an answer without usable code.
    `extracted`: what the generator already read from `text` with the task's `answer_spec` (read here if None)."""
    fmt = candidate_format(task)
    spec = answer_spec(task)
    found = extracted if extracted is not None else spec.extract(text, finish_reason)
    if found.code is not None:
        if spec.kernel:  # ParEval's own form: the harness launches the kernel as ParEval's driver does
            return kernel_candidate(task, found.code, turn)
        return Candidate(task_id=task.id, code=found.code, format=fmt, turn=turn)
    raw = Candidate(task_id=task.id, code=text, format=fmt, turn=turn)
    return EvalResult(task_id=task.id, candidate_hash=raw.content_hash(), format=fmt, turn=turn,
                      verdict="format_error", reason=found.problem)
