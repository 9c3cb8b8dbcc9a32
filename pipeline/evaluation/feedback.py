"""The one feedback formatter: an EvalResult in, the message the policy reads next turn out.

Rollout only places this text in the conversation. It states the verdict in one line (never that code
builds unless it was built: `unbuilt` says it was not), then what the policy can act on: compiler
errors, the first failing configuration, per-configuration
times against the baseline, and the structural hints (most severe first, at most `max_hints`).
"""
from __future__ import annotations

from pipeline.core.records import EvalResult

HEADLINES = {
    "format_error": "Your answer could not be used",
    "compile_error": "Your code does not compile",
    "rejected": "Your code was rejected",
    "runtime_error": "Your code failed while running",
    "timeout": "Your code did not finish in time",
    "incorrect": "Your code ran but produced wrong results",
    "correct": "Your code is correct",
    "not_executed": "Your code was compiled but could not be run here, so correctness is unknown",
    "unbuilt": "Your code was not built: this host has no compiler for it, so neither its build nor its "
               "correctness is known",
    "evaluator_error": "Your code could not be judged: the evaluator itself failed on this task, not your code",
}


def format_feedback(result: EvalResult, max_hints: int = 5, max_chars: int = 3000) -> str:
    lines = [f"{HEADLINES[result.verdict]}."]
    if result.reason and result.verdict not in ("correct", "compile_error"):
        lines.append(f"Reason: {result.reason}")
    if result.verdict == "compile_error" and result.compile_log:
        lines += ["Compiler errors:", result.compile_log.strip()]
    timed = [c for c in result.configs if c.time is not None]
    if result.verdict == "correct":
        checked = [c.name for c in result.configs if c.passed]
        if checked:
            lines.append(f"Outputs match the reference on: {', '.join(checked)}.")
        for c in timed:
            ratio = c.baseline_time.median_ms / c.time.median_ms if c.baseline_time else None
            extra = f", baseline {c.baseline_time.median_ms:.4f} ms ({ratio:.2f}x)" if ratio else ""
            lines.append(f"Time on {c.name}: {c.time.median_ms:.4f} ms{extra}.")
        if result.speedup is not None:
            verdict = "faster than" if result.speedup > 1 else "not faster than"
            lines.append(f"Overall speedup {result.speedup:.2f}x: {verdict} the baseline.")
    hints = [f for f in result.findings if f.source in ("structure", "gate") and f.message not in result.reason]
    order = {"error": 0, "warning": 1, "info": 2}
    hints.sort(key=lambda f: order[f.severity])
    if hints[:max_hints]:
        lines.append("Notes:")
        lines += [f"- {f.message}" for f in hints[:max_hints]]
    whole = sum(len(line) + 1 for line in lines) - 1  # each line is cut first: no unbounded string is built
    return capped("\n".join(capped(line, max_chars) for line in lines), max_chars, whole)


def capped(text: str, max_chars: int, whole: int | None = None) -> str:
    """`text` when it has at most `max_chars` characters, else its start and a last line saying how long the whole
    was (`whole`, default len(text)), `max_chars` in all: the policy never reads an unbounded message."""
    if len(text) <= max_chars:
        return text
    marker = f"\n... (trimmed: {whole or len(text):,} characters in all, the first shown)"
    return text[:max(0, max_chars - len(marker))] + marker
