"""Tests of pipeline/evaluation/gate/rules.py: the gate's rules are one table, and the checks agree with it.

Run: .venv/bin/pytest tests/test_gate_rules.py -q   (CPU only; the corpus test replays the gate's test corpus)
- every rule name the source can emit has a row (an `ast` scan of the emitting modules), and so has every rule the
  gate's test corpus makes the gate emit, under the profiles its row lists;
- every row is complete (advice, known stages and profiles, a version stamp) and none is dead;
- a rule emitted without a row is a refusal with fallback advice at run time, never an exception, and the scan
  names it before it is committed;
- the recipe of docs/extending.md ("A gate rule") carried out on a scratch rule.
"""
from __future__ import annotations

import ast
import importlib.util
import inspect
import itertools
import re
import sys
from pathlib import Path

import pytest

from pipeline.core.records import Candidate
from pipeline.evaluation import evaluator, intake
from pipeline.evaluation.gate import FORM_RULES, PROFILES, check_candidate, cuda, rules
from pipeline.evaluation.gate.rules import CUDA, FALLBACK_ADVICE, RULES, STAGES, Rule, make_finding

import test_gate
import test_gate_holes
import test_gate_text
from test_gate import C2CUDA, SAXPY

sys.path.insert(0, str(Path(__file__).resolve().parent / "evaluation"))  # the profile tests' corpus, as they import it
import test_gate_profiles  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# the modules that emit gate findings (rules.py itself only defines the table)
EVALUATION = ROOT / "pipeline" / "evaluation"
EMITTERS = sorted({*(EVALUATION / "gate").glob("*.py"), EVALUATION / "build" / "artifact.py",
                   EVALUATION / "intake.py", EVALUATION / "bounded.py"} - {EVALUATION / "gate" / "rules.py"})
# the helpers that take a rule name first, with how many positional arguments a call of theirs has at least
HELPERS = {"make_finding": 4, "rule_finding": 3, "finding": 3, "add": 3, "Unusable": 2, "advice_for": 2}


# --- the source scan ------------------------------------------------------------------------------
def _text(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _sentence(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or " " in (_text(node) or "")


def _rule_table_names(node: ast.AST) -> list[str]:
    """Rule names in a container assigned to a name ending in RULES (its strings, or its tuples' first strings)."""
    if isinstance(node, ast.Call) and node.args:  # frozenset({...})
        node = node.args[0]
    elts = node.elts if isinstance(node, (ast.List, ast.Tuple, ast.Set)) else []
    firsts = [e.elts[0] if isinstance(e, ast.Tuple) and e.elts else e for e in elts]
    return [t for t in map(_text, firsts) if t]


def emitted_rules(source: str) -> set[str]:
    """Every rule name `source` can emit, read with `ast`:
    - the first argument of a finding helper (HELPERS) when it is a string literal, and `rule=` of an error Finding;
    - the first string of a (rule, what) tuple: a word, then a sentence (what classify_name and the verdict
      functions return, and the rows of cuda._NAME_RULES);
    - the strings of a container assigned to a name ending in RULES (FORM_RULES, MODULE_RULES, _NAME_RULES) and
      the keys of DENIED_NAMES (rule -> names)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if name in HELPERS and len(node.args) >= HELPERS[name] and _text(node.args[0]):
                found.add(_text(node.args[0]))
            keywords = {k.arg: k.value for k in node.keywords}
            if name == "Finding" and _text(keywords.get("rule")) and _text(keywords.get("severity")) in (None, "error"):
                found.add(_text(keywords["rule"]))
        elif isinstance(node, ast.Tuple) and len(node.elts) >= 2 and _text(node.elts[0]) \
                and " " not in _text(node.elts[0]) and any(map(_sentence, node.elts[1:])):
            found.add(_text(node.elts[0]))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if any(n.endswith("RULES") for n in names):
                found.update(_rule_table_names(node.value))
            if "DENIED_NAMES" in names and isinstance(node.value, ast.Dict):
                found.update(t for t in map(_text, node.value.keys) if t)
    return found


def source_rules() -> dict[str, list[str]]:
    """Rule name -> the emitting modules that name it."""
    out: dict[str, list[str]] = {}
    for path in EMITTERS:
        for rule in emitted_rules(path.read_text()):
            out.setdefault(rule, []).append(str(path.relative_to(ROOT)))
    return out


def without_row(emitted: dict[str, list[str]], table: dict[str, Rule]) -> dict[str, list[str]]:
    return {rule: where for rule, where in emitted.items() if rule not in table}


def row_problems(row: Rule) -> list[str]:
    """What a row lacks: advice (one clause), known stages and profiles, a version stamp not past the evaluator's."""
    out = []
    if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", row.name):
        out.append(f"{row.name!r} is not a lower-case, hyphenated name")
    for stage, advice in [("", row.advice), *row.stage_advice.items()]:
        if not advice.strip() or advice.rstrip().endswith(".") or re.search(r"\.\s+[A-Z]", advice):
            out.append(f"{row.name}: the advice {advice!r}{f' of {stage}' if stage else ''} is not one clause")
    if not row.stages or set(row.stages) - set(STAGES) or set(row.stage_advice) - set(row.stages):
        out.append(f"{row.name}: stages {row.stages} (stage advice for {sorted(row.stage_advice)}) not among {STAGES}")
    if not row.profiles or row.profiles - set(PROFILES):
        out.append(f"{row.name}: profiles {sorted(row.profiles)} not among {sorted(PROFILES)}")
    if not (row.since.isdigit() and int(row.since) <= int(evaluator.EVALUATOR_VERSION)):
        out.append(f"{row.name}: version {row.since!r} is not an EVALUATOR_VERSION up to "
                   f"{evaluator.EVALUATOR_VERSION}")
    return out


def test_every_rule_the_source_emits_has_a_row():
    assert without_row(source_rules(), RULES) == {}, "add a row to pipeline/evaluation/gate/rules.py"


def test_no_row_is_dead():
    assert sorted(set(RULES) - set(source_rules())) == [], "a row no module emits: remove it or emit it"


def test_every_row_is_complete_and_named_once():
    assert len(rules._ROWS) == len(RULES), "two rows with one name"
    assert {r.name: row_problems(r) for r in RULES.values() if row_problems(r)} == {}
    assert all(name == row.name for name, row in RULES.items())


def test_the_verdict_rule_sets_are_rows():
    assert FORM_RULES <= set(RULES) and set(intake.INTAKE_RULES) <= set(RULES)


def test_a_row_gives_its_stages_advice():
    assert rules.advice_for("side-stream", rules.PYTHON) == "launch on the current stream"
    assert rules.advice_for("side-stream", rules.ARTEFACT) == RULES["side-stream"].advice
    f = make_finding("digraph", CUDA, 7, "writes the digraph <%")
    assert f.message == "line 7: writes the digraph <%; write preprocessor directives with # [digraph]"
    assert (f.rule, f.line, f.severity, f.source) == ("digraph", 7, "error", "gate")


# --- the gate's test corpus -------------------------------------------------------------------------
def _argument_sets(fn) -> list[dict]:
    """Every argument set pytest calls `fn` with (its parametrize marks); [] when it needs a fixture or is marked
    otherwise (gpu, integration, skipif)."""
    marks = getattr(fn, "pytestmark", [])
    if any(m.name != "parametrize" for m in marks):
        return []
    sets = [{}]
    for m in marks:
        names = [n.strip() for n in m.args[0].split(",")] if isinstance(m.args[0], str) else list(m.args[0])
        values = [getattr(v, "values", v) for v in m.args[1]]
        rows = [dict(zip(names, v if len(names) > 1 else (v,))) for v in values]
        sets = [{**a, **b} for a, b in itertools.product(sets, rows)]
    wanted = set(inspect.signature(fn).parameters)
    return [s for s in sets if set(s) == wanted]


def run_corpus() -> set[tuple[str, str]]:
    """(rule, profile) of every finding the gate makes while the tests of test_gate, test_gate_holes,
    test_gate_text and test_gate_profiles run (their hacks and honest answers, every parametrisation; tests that
    need a fixture are left out)."""
    seen: set[tuple[str, str]] = set()

    def recording(candidate, task, profile="strict"):
        found = check_candidate(candidate, task, profile)
        seen.update((f.rule, profile) for f in found)
        return found

    modules = (test_gate, test_gate_holes, test_gate_text, test_gate_profiles)
    with pytest.MonkeyPatch.context() as mp:
        for module in (test_gate, test_gate_text):
            mp.setattr(module, "check_candidate", recording)
        for module in modules:
            for name, fn in vars(module).items():
                if name.startswith("test_") and inspect.isfunction(fn) and fn.__module__ == module.__name__:
                    for args in _argument_sets(fn):
                        fn(**args)
    return seen


@pytest.fixture(scope="module")
def corpus_rules() -> set[tuple[str, str]]:
    return run_corpus()


@pytest.mark.slow
def test_the_corpus_emits_only_rows_under_their_profiles(corpus_rules):
    assert len({rule for rule, _ in corpus_rules}) > 30  # the corpus ran and reached most rules
    assert sorted({rule for rule, _ in corpus_rules} - set(RULES)) == []
    assert sorted((rule, p) for rule, p in corpus_rules if p not in RULES[rule].profiles) == []


# --- the trap: a rule emitted without a row -----------------------------------------------------------
def test_a_rule_without_a_row_is_a_refusal_not_an_exception(monkeypatch, request):
    """A check that emits a rule the table lacks (here a name rule of cuda.py matching the kernel's own name) still
    refuses with fallback advice: before the one table, `ADVICE[rule]` raised KeyError inside the gate."""
    monkeypatch.setattr(cuda, "_COMPILED", [("unlisted-new-rule", cuda.ANY, re.compile("saxpy_kernel"), False,
                                             "names the kernel")] + cuda._COMPILED)
    cuda.classify_name.cache_clear()
    request.addfinalizer(cuda.classify_name.cache_clear)  # no cached verdict of the patched rules outlives the test
    found = check_candidate(Candidate(task_id=SAXPY.id, code=C2CUDA, format="c2cuda"), SAXPY)
    new = [f for f in found if f.rule == "unlisted-new-rule"]
    assert new and new[0].severity == "error", [f.message for f in found]
    assert new[0].message.endswith("; remove what this line does that the rule names [unlisted-new-rule]")


def test_the_scan_names_a_rule_emitted_without_a_row():
    scratch = '''
def check(text, add):
    if "x" in text:
        add("brand-new-rule", 1, "writes x")
    return ("another-new-rule", f"writes {text}") if text else None
'''
    emitted = {rule: ["scratch.py"] for rule in emitted_rules(scratch)}
    assert without_row(emitted, RULES) == {"brand-new-rule": ["scratch.py"], "another-new-rule": ["scratch.py"]}


# --- the recipe of docs/extending.md, on a scratch rule ---------------------------------------------
SCRATCH_CHECK = '''
import re
from pipeline.evaluation.gate.rules import CUDA, make_finding


def scratch_findings(text):
    """The scratch rule: a kernel may not call __nanosleep (it would stretch its own timing)."""
    return [make_finding("scratch-sleep", CUDA, text.count("\\n", 0, m.start()) + 1, "sleeps in a kernel")
            for m in re.finditer(r"\\b__nanosleep\\s*\\(", text)]
'''


def test_the_recipe_on_a_scratch_rule(monkeypatch, tmp_path):
    path = tmp_path / "scratch_rule.py"
    path.write_text(SCRATCH_CHECK)
    spec = importlib.util.spec_from_file_location("scratch_rule", path)
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    attack = C2CUDA.replace("y[i] = a * x[i] + y[i];", "{ __nanosleep(1000); y[i] = a * x[i] + y[i]; }")
    # 1. the check without its row: the scan names it, and the finding still refuses, with fallback advice
    assert without_row({r: [path.name] for r in emitted_rules(SCRATCH_CHECK)}, RULES) == {"scratch-sleep": [path.name]}
    assert check.scratch_findings(attack)[0].message.endswith(f"; {FALLBACK_ADVICE} [scratch-sleep]")
    # 2. the row, stamped with the next evaluator version: complete only once EVALUATOR_VERSION is bumped to it
    following = str(int(evaluator.EVALUATOR_VERSION) + 1)
    row = Rule("scratch-sleep", (CUDA,), "let kernels run without sleeping", following)
    assert row_problems(row) == [f"scratch-sleep: version {following!r} is not an EVALUATOR_VERSION up to "
                                 f"{evaluator.EVALUATOR_VERSION}"]
    monkeypatch.setattr(evaluator, "EVALUATOR_VERSION", following)
    monkeypatch.setitem(RULES, row.name, row)
    assert row_problems(row) == []
    assert without_row({r: [path.name] for r in emitted_rules(SCRATCH_CHECK)}, RULES) == {}
    # 3. the attack test: the hack refused at its line with the row's advice, the honest answer accepted
    hit = check.scratch_findings(attack)
    assert [(f.rule, f.line) for f in hit] == [("scratch-sleep", 4)]
    assert hit[0].message == "line 4: sleeps in a kernel; let kernels run without sleeping [scratch-sleep]"
    assert check.scratch_findings(C2CUDA) == []
