"""Helpers of the structure tests: the hand-written kernels under tests/data/structure/."""
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "structure"


def kernel_files() -> list[Path]:
    return sorted(DATA.glob("*.cu"))


def expectations(path: Path) -> dict:
    """The `// EXPECT ...` lines of a data kernel: accesses, features, bank ways, strides."""
    exp = {"access": set(), "feature": {}, "bank": {}, "stride": {}}
    for line in path.read_text().splitlines():
        if not line.startswith("// EXPECT "):
            continue
        kind, *rest = line.split()[2:]
        if kind == "access":
            exp["access"].add(tuple(rest))
        elif kind == "feature":
            exp["feature"][rest[0]] = float(rest[1])
        elif kind == "bank":
            exp["bank"][rest[0]] = int(rest[1])
        elif kind == "stride":
            exp["stride"][rest[0]] = rest[1]
        else:
            raise ValueError(f"{path.name}: unknown EXPECT kind '{kind}'")
    return exp
