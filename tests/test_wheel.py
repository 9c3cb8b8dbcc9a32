"""A plain, non-editable install works: the wheel holds every file the code reads at run time (built-in and
ParEval tasks, the shipped tiny policy, the measured dataset, the trusted check pass's sources), and from a
directory outside the checkout the installed package finds them."""
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.integration

NEEDED = ["pipeline/assets/builtin_tasks/c2cuda/saxpy.yaml", "pipeline/assets/pareval_tasks/LICENSE",
          "pipeline/assets/tiny_sft/model.safetensors", "pipeline/assets/measured/shard-000-of-008.parquet",
          "pipeline/evaluation/checks/fused_check.h", "pipeline/evaluation/checks/fused_check.c", "pipeline/evaluation/checks/fused_check.cu",
          "pipeline/assets/degeneracy.json", "pipeline/assets/splits.json"]

CHECK = r"""
import pipeline, sys
from pathlib import Path
assert not str(Path(pipeline.__file__)).startswith(sys.argv[1]), pipeline.__file__
from pipeline.tasks import load_tasks
from pipeline.tasks.pareval import load_pareval
from pipeline.evaluation.checks.fused_check import native_source
from pipeline.rollout.tiny_model import resolve_model_path
from pipeline.core.config import ModelSection
assert len(load_tasks("builtin")) == 24 and len(load_pareval()) > 40
from pipeline.tasks.splits import frozen_splits
assert len(frozen_splits()) >= 45
assert "fc_out_add" in native_source("fused_check.c") and "fc_out_add" in native_source("fused_check.cu")
print("ok", pipeline.__file__)
"""


def clean_copy(dest: Path) -> Path:
    """The checkout's files as a fresh clone has them (tracked, or new and not ignored): no build leftovers
    such as an egg-info from an editable install, which would list files setup.py itself leaves out."""
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    for name in files:
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def test_the_wheel_holds_what_the_code_reads_and_works_outside_the_checkout(tmp_path):
    tree = clean_copy(tmp_path / "tree")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(tree), "--no-deps", "--no-build-isolation",
                            "-w", str(tmp_path / "dist")], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = next((tmp_path / "dist").glob("cudaperf-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [n for n in NEEDED if not any(x.endswith(n) for x in names)]
    assert not missing, f"the wheel lacks {missing}"
    target = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(target),
                                str(wheel)], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-3000:]
    run = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path / "tree")], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin",
                                           "HOME": str(tmp_path)})
    assert run.returncode == 0 and run.stdout.startswith("ok"), run.stdout + run.stderr[-3000:]
