"""The documents the code and the docs cite exist: every `docs/<name>.md` named in the source, every relative
link between the docs, and every file path a recipe of docs/extending.md tells a contributor to touch."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [p for d in ("pipeline", "actors", "benchmarks", "tests") for p in (ROOT / d).rglob("*.py")] \
    + [ROOT / "README.md", ROOT / "setup.py"]
DOCS = sorted((ROOT / "docs").glob("*.md"))


def test_every_cited_document_is_in_the_repository():
    cited = {}
    for path in SOURCES + DOCS:
        for name in re.findall(r"\bdocs/([\w.-]+\.md)\b", path.read_text(errors="replace")):
            cited.setdefault(name, path.relative_to(ROOT))
    assert cited, "no document cited: the pattern no longer matches"
    missing = {name: str(where) for name, where in cited.items() if not (ROOT / "docs" / name).is_file()}
    assert missing == {}, f"documents cited but absent (name: first file citing it): {missing}"


def test_no_source_cites_a_design_file_outside_the_repository():
    outside = "DESIGN" + ".md"  # spelled in two parts so this test does not name it
    offenders = [str(p.relative_to(ROOT)) for p in SOURCES + DOCS if outside in p.read_text(errors="replace")]
    assert offenders == [], "cite docs/protocol.md (the evaluation protocol) instead of a design file outside the repository"


def test_relative_links_between_docs_resolve():
    broken = []
    for path in DOCS + [ROOT / "README.md"]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (path.parent / target).exists():
                broken.append(f"{path.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_every_file_a_recipe_names_exists():
    text = (ROOT / "docs" / "extending.md").read_text()
    named = set(re.findall(r"`((?:pipeline|actors|tests|configs|benchmarks|docs)/[\w./-]+\.(?:py|md|json|yaml))`",
                           text))
    named |= set(re.findall(r"`((?:cluster\.yaml|setup\.py))`", text))
    missing = sorted(p for p in named if "<" not in p and not (ROOT / p).exists())
    assert missing == [], f"docs/extending.md names files that do not exist: {missing}"
