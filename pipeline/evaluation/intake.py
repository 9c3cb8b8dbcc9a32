"""The evaluator's border: which candidates it can read at all, and that the numbers it gives out are finite.

`unusable`: one `Candidate` (or whatever a caller handed over in its place) in; `None` when the evaluator
can read it, else an `Unusable(rule, reason)`: the candidate's `format_error`, named by `rule`, decided
before anything hashes, caches or gates it. `finite_result`: an `EvalResult` in, the same result with
no NaN or infinity in it out (see there). Both pure.

A candidate's text reaches files (the compiler's source), hashes, JSON (the result cache, the run's logs)
and the policy's next prompt; each of these fails on text that is not plain UTF-8, and a failure there
must be this candidate's verdict, never the group's exception. The classes refused here:
- `malformed-candidate`: a field of the wrong type or value (code not a string, an unknown format, a turn
  that is not a whole number, a subclass of str or int in their place): a record that bypassed validation
  (`model_construct`, a copy with an `update`) or is no Candidate at all;
- `unreadable-text`: text UTF-8 cannot encode (a lone surrogate such as "\\ud800");
- `nul-byte`: a NUL character, which C tools read as the end of the text and no source file holds;
- `too-large`: more than the gate's `MAX_CANDIDATE_BYTES`, refused before its bytes are hashed or scanned.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import get_args

from pipeline.core.records import CandidateFormat, EvalResult, Finding
from pipeline.evaluation.gate import MAX_CANDIDATE_BYTES
from pipeline.evaluation.gate.rules import INTAKE, advice_for

INTAKE_RULES = ("malformed-candidate", "unreadable-text", "nul-byte", "too-large")


@dataclass(frozen=True)
class Unusable:
    """Why a candidate cannot be read: the rule (one of INTAKE_RULES, each a row of gate.rules.RULES, whose advice
    ends the sentence) and one sentence for the policy."""
    rule: str
    reason: str


def unusable(cand) -> Unusable | None:
    """`None` when `cand` is a Candidate the evaluator can read; else the first problem found."""
    code, fmt, turn = getattr(cand, "code", None), getattr(cand, "format", None), getattr(cand, "turn", 0)
    # exact types: a subclass (what validation never makes) could redefine encode, len or equality
    if type(code) is not str:
        return Unusable("malformed-candidate", f"the candidate's code is a {type(code).__name__[:40]}, not text; "
                                               f"{advice_for('malformed-candidate', INTAKE)}")
    if type(fmt) is not str or fmt not in get_args(CandidateFormat):
        shown = str.__repr__(fmt[:40]) if type(fmt) is str else type(fmt).__name__[:40]
        return Unusable("malformed-candidate", f"the candidate's format {shown} is not one of "
                                               f"{', '.join(get_args(CandidateFormat))}; "
                                               f"{advice_for('malformed-candidate', INTAKE)}")
    if type(turn) is not int:
        return Unusable("malformed-candidate", f"the candidate's turn is a {type(turn).__name__}, not a whole number; "
                                               f"{advice_for('malformed-candidate', INTAKE)}")
    if len(code) > MAX_CANDIDATE_BYTES:  # characters: at most its bytes, counted without encoding a huge text
        return Unusable("too-large", f"the candidate is {len(code):,} characters, over the limit of "
                                     f"{MAX_CANDIDATE_BYTES:,} bytes; {advice_for('too-large', INTAKE)}")
    try:
        size = len(code.encode("utf-8"))
    except UnicodeEncodeError as e:
        line = code.count("\n", 0, e.start) + 1
        return Unusable("unreadable-text", f"line {line} holds a character UTF-8 cannot encode "
                                           f"({code[e.start]!r}, a lone surrogate); "
                                           f"{advice_for('unreadable-text', INTAKE)}")
    if size > MAX_CANDIDATE_BYTES:
        return Unusable("too-large", f"the candidate is {size:,} bytes, over the limit of {MAX_CANDIDATE_BYTES:,} "
                                     f"bytes; {advice_for('too-large', INTAKE)}")
    if "\0" in code:
        line = code.count("\n", 0, code.index("\0")) + 1
        return Unusable("nul-byte", f"line {line} holds a NUL character, which no source file holds; "
                                    f"{advice_for('nul-byte', INTAKE)}")
    return None


def _finite(value) -> bool:
    """A feature a float can hold: text, a flag, a finite float or an int within float's range."""
    if isinstance(value, (str, bool)) or not isinstance(value, (int, float)):
        return True
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an int past float's range: no reader of features could use it
        return False


def finite_result(result: EvalResult) -> EvalResult:
    """`result` without a non-finite number: a feature that is NaN, infinite or an int past float's range is
    left out (a finding says which); a speedup that is not a finite positive number, or a time that is not finite (a timing of our own
    that went wrong), makes the result `evaluator_error`, which is never cached and earns nothing.
    Unchanged when all is finite."""
    bad = sorted(k for k, v in result.features.items() if not _finite(v))
    speedups = {"speedup": result.speedup, "speedup_compiled": result.speedup_compiled}
    broken = {k: v for k, v in speedups.items() if v is not None and not (math.isfinite(v) and v > 0)}
    for c in result.configs:
        for name in ("time", "baseline_time", "compiled_baseline_time", "trusted_time"):
            timing = getattr(c, name)
            if timing is not None and not all(map(math.isfinite, (timing.median_ms, timing.iqr_ms, timing.min_ms))):
                broken[f"{c.name} {name}"] = timing.median_ms
    if not bad and not broken:
        return result
    update: dict = {}
    if bad:
        update["features"] = {k: v for k, v in result.features.items() if k not in bad}
        update["findings"] = result.findings + [Finding(source="structure", severity="info", rule="non-finite-feature",
                                                        message=f"the analysis gave no finite value for "
                                                                f"{', '.join(bad)}; left out")]
    if broken:
        update.update(verdict="evaluator_error", speedup=None, speedup_compiled=None,
                      reason="not judged: the evaluator's timing gave " +
                             ", ".join(f"{k} = {v}" for k, v in broken.items()))
    return result.model_copy(update=update)
