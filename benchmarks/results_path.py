"""Where a benchmark writes by default: `benchmarks/results/v<EVALUATOR_VERSION>/`, one folder per evaluator
version, and never over an earlier result (a second run of the same name gets `.2`, `.3`, ... before its
suffix). Figures of another evaluator version stay where they were measured."""
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def version_dir() -> Path:
    from pipeline.evaluation.evaluator import EVALUATOR_VERSION
    return RESULTS / f"v{EVALUATOR_VERSION}"


def fresh_result_path(name: str) -> Path:
    """`results/v<N>/<name>`, or the first `<stem>.<k><suffix>` that does not exist yet."""
    path = version_dir() / name
    k = 2
    while path.exists():
        path = version_dir() / f"{Path(name).stem}.{k}{Path(name).suffix}"
        k += 1
    return path
