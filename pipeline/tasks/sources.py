"""Where tasks come from: the built-in set, the generated dataset, a directory of task YAML files, a KernelBench
checkout or problem file, and candidate files for a task; `select_tasks`, the one task selection of a run."""
from __future__ import annotations

import difflib
import logging
import re
from pathlib import Path
from typing import Iterable

from pipeline.core.assets import BUILTIN_DIR
from pipeline.core.records import Candidate, InputConfig, Task, Tolerance, WorkModel
from pipeline.core.errors import TaskError
from pipeline.tasks.reference_module import REQUIRED_DEFS, module_names
from pipeline.tasks.pareval import load_pareval
from pipeline.tasks.validation import load_task_file

log = logging.getLogger(__name__)



TASK_SUFFIXES = (".yaml", ".yml")


def _task_files(directory: Path) -> list[Path]:
    return sorted(f for f in directory.rglob("*") if f.is_file() and f.suffix in TASK_SUFFIXES)


def _check_unique(tasks: list[Task]) -> None:
    first: dict[str, Task] = {}
    for t in tasks:
        if t.id in first:
            raise TaskError(f"task id '{t.id}' is defined twice, in {first[t.id].source_path} and in "
                            f"{t.source_path}; rename one of them.")
        first[t.id] = t


def is_kernelbench_checkout(path: str | Path) -> bool:
    root = Path(path)
    return any((d / "level1").is_dir() or (d / "level2").is_dir() for d in (root / "KernelBench", root))


def load_tasks(source: str | Path, kernelbench_levels: Iterable[int] = (1, 2), split_seed: int = 0) -> list[Task]:
    """Tasks from 'builtin' (pipeline/assets/builtin_tasks/), 'pareval' (ParEval's CUDA problems as c2cuda tasks,
    pipeline/assets/pareval_tasks/; 'pareval:kernel' in ParEval's own form), 'generated' or 'generated:<split>' (the
    generated dataset, pipeline/tasks/generate.py, optionally one split: train, val or test, the
    families split by `split_seed`, i.e. `data.split_seed`), a directory of task YAML files
    (recursively), a single task YAML file, or a KernelBench checkout; sorted by id. Duplicate ids
    are an error."""
    if str(source) == "generated" or str(source).startswith("generated:"):
        return load_generated(str(source).partition(":")[2], split_seed)
    if str(source) in ("pareval", "pareval:kernel"):
        tasks = load_pareval(kernel_form=str(source) == "pareval:kernel")
    elif str(source) == "builtin":
        files = _task_files(BUILTIN_DIR)
        if not files:
            raise TaskError(f"the built-in task directory {BUILTIN_DIR} holds no task files; reinstall cudaperf.")
        tasks = [load_task_file(f) for f in files]
    else:
        path = Path(source).expanduser()
        if path.is_file():
            files = [path]
        elif path.is_dir():
            files = _task_files(path)
            if not files:
                if is_kernelbench_checkout(path):
                    return load_kernelbench(path, kernelbench_levels)
                raise TaskError(f"task source '{source}' holds no *.yaml task files and is not a KernelBench "
                                f"checkout; point tasks.source at a directory of task files, a KernelBench "
                                f"checkout, or 'builtin'.")
        else:
            raise TaskError(f"task source '{source}' is neither 'builtin' nor an existing file or directory; "
                            f"set tasks.source to 'builtin', a directory of task YAML files or a KernelBench checkout.")
        tasks = [load_task_file(f) for f in files]
    _check_unique(tasks)
    return sorted(tasks, key=lambda t: t.id)


def load_generated(split: str = "", split_seed: int = 0) -> list[Task]:
    """The generated tasks (all, or those of one split by `split_seed`: train, val or test by family, or the
    held-out tasks of the training families), sorted by id."""
    from pipeline.tasks.generate import cached_tasks
    from pipeline.tasks.splits import TASK_SPLITS, split_of_task
    if split and split not in TASK_SPLITS:
        raise TaskError(f"task source 'generated:{split}' names an unknown split; use 'generated' or "
                        f"'generated:<split>' with split one of {', '.join(TASK_SPLITS)}.")
    return [t for t in cached_tasks() if not split or split_of_task(t, split_seed) == split]


_NUM_PREFIX = re.compile(r"^\d+_")


def kernelbench_family(stem: str) -> str:
    """'19_ReLU' -> 'relu'; 'x_Conv2d_ReLU_BiasAdd' -> 'conv2d_relu_biasadd'."""
    fam = _NUM_PREFIX.sub("", stem).strip("_").lower()
    return fam or stem.lower()


# KernelBench's float32 allclose (1e-4 absolute and relative) is within it, so every answer its harness accepts
# elementwise passes; the rms term stays; and the output as a whole within 1 % of the reference's norm, so that
# the absolute 1e-4 cannot pass outputs far below it (a softmax over 393,216 values) as zeros. Honest float32
# answers are 1e-6 to 1e-4 off in that measure. The check adds the float64 anchor on top (what honest float32
# arithmetic gets: pipeline/evaluation/checks/fidelity.py), which TF32 and half-precision inner products fail.
KERNELBENCH_TOLERANCE = Tolerance(rtol=1e-4, atol=1e-4, atol_abs=1e-4, rel_l2=0.01)


def kernelbench_task(path: str | Path, level: str | None = None) -> Task:
    """One KernelBench problem file as a torch2cuda task; raises TaskError if the file is unusable.

    `level` ('level1', ...) defaults to the file's directory name when that looks like a level."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"{path}: cannot be read as text ({e}); pass a KernelBench problem .py file.") from None
    try:
        defined = module_names(text).defined
    except SyntaxError as e:
        raise TaskError(f"{path}: is not valid Python (line {e.lineno}: {e.msg}); "
                        f"fix the file or leave it out.") from None
    missing = [n for n in REQUIRED_DEFS if n not in defined]
    if missing:
        raise TaskError(f"{path}: does not define {', '.join(missing)}; a KernelBench problem needs class Model "
                        f"and functions get_inputs and get_init_inputs.")
    if level is None and re.fullmatch(r"level\d+", path.parent.name):
        level = path.parent.name
    task_id = f"kernelbench/{level}/{path.stem}" if level else f"kernelbench/{path.stem}"
    configs = [InputConfig(name="seed0"), InputConfig(name="seed1"), InputConfig(name="timing", time=True)]
    return Task(id=task_id, kind="torch2cuda", family=kernelbench_family(path.stem),
                description=f"KernelBench {level or 'problem'} {path.stem}", reference=text, configs=configs,
                work=WorkModel(flops="0", bytes="0"), source_path=str(path),
                tolerance=KERNELBENCH_TOLERANCE.model_copy())


def _problem_sort_key(f: Path):
    m = re.match(r"^(\d+)_", f.name)
    return (int(m.group(1)) if m else 1 << 30, f.name)


def load_kernelbench(root: str | Path, levels: Iterable[int] = (1, 2),
                     skipped: list[tuple[str, str]] | None = None) -> list[Task]:
    """KernelBench problems under root/KernelBench/levelN/*.py (or root/levelN/*.py) as torch2cuda
    tasks. A file that does not parse or lacks Model/get_inputs/get_init_inputs is skipped with a
    logged warning (and appended to `skipped` as (path, reason) when a list is given)."""
    root = Path(root).expanduser()
    levels = list(levels)
    base = None
    for cand in (root / "KernelBench", root):
        if any((cand / f"level{lv}").is_dir() for lv in levels):
            base = cand
            break
    if base is None:
        raise TaskError(f"KernelBench checkout '{root}': neither {root}/KernelBench/level<N>/ nor {root}/level<N>/ "
                        f"exists for levels {levels}; point it at a clone of github.com/ScalingIntelligence/KernelBench.")
    tasks: list[Task] = []
    for lv in levels:
        d = base / f"level{lv}"
        if not d.is_dir():
            raise TaskError(f"KernelBench checkout '{root}': level {lv} is missing ({d} does not exist); "
                            f"drop level {lv} from tasks.kernelbench_levels or use a full checkout.")
        for f in sorted(d.glob("*.py"), key=_problem_sort_key):
            try:
                tasks.append(kernelbench_task(f, f"level{lv}"))
            except TaskError as e:
                log.warning("skipping KernelBench problem: %s", e)
                if skipped is not None:
                    skipped.append((str(f), str(e)))
    return tasks


def load_task_arg(arg: str | Path) -> Task:
    """The TASK of `cudaperf eval TASK CANDIDATE`: a task YAML file, a KernelBench problem .py file,
    or a built-in task id such as 'c2cuda/saxpy'."""
    path = Path(arg).expanduser()
    if path.is_file():
        if path.suffix in TASK_SUFFIXES:
            return load_task_file(path)
        if path.suffix == ".py":
            return kernelbench_task(path)
        raise TaskError(f"{path}: a task must be a .yaml task file or a KernelBench problem .py file, "
                        f"not '{path.suffix or 'no extension'}'; pass one of those or a built-in id.")
    if path.is_dir():
        raise TaskError(f"{path}: is a directory; pass one task file or a built-in id such as 'c2cuda/saxpy'.")
    builtin = {t.id: t for t in load_tasks("builtin")}
    if str(arg) in builtin:
        return builtin[str(arg)]
    by_name = {}  # 'saxpy' for 'c2cuda/saxpy': a slip in the name part is matched on the name
    for task_id in builtin:
        by_name.setdefault(task_id.split("/")[-1], []).append(task_id)
    close = difflib.get_close_matches(str(arg), list(builtin), n=3, cutoff=0.75)
    close += [i for n in difflib.get_close_matches(str(arg).split("/")[-1], list(by_name), n=3, cutoff=0.75)
              for i in by_name[n] if i not in close]
    hint = f"did you mean {' or '.join(repr(c) for c in close[:3])}? " if close else ""
    raise TaskError(f"task '{arg}' is neither an existing file nor a built-in task id; {hint}"
                    "`cudaperf eval --list-tasks` lists every built-in id")


def load_candidate_file(path: str | Path, task: Task, turn: int = 0) -> Candidate:
    """A candidate file for `task`: `.py` is KernelBench style (torch2cuda only); `.cu` is the
    c2cuda format for c2cuda tasks and the light format for torch2cuda tasks."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise TaskError(f"{path}: candidate file does not exist; pass the path of a .cu or .py file.")
    suffix = path.suffix.lower()
    if suffix == ".py":
        if task.kind != "torch2cuda":
            raise TaskError(f"{path}: a .py (KernelBench-style) candidate cannot solve the c2cuda task '{task.id}'; "
                            f"write a .cu file defining extern \"C\" {task.function}(...).")
        fmt = "kernelbench"
    elif suffix in (".cu", ".cuh"):
        fmt = "c2cuda" if task.kind == "c2cuda" else "light"
    else:
        raise TaskError(f"{path}: candidate extension '{path.suffix or '(none)'}' is not understood; use .cu "
                        f"(c2cuda or light format) or .py (KernelBench ModelNew).")
    try:
        code = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"{path}: cannot be read as UTF-8 text ({e}); save the candidate as a text file.") from None
    return Candidate(task_id=task.id, code=code, format=fmt, turn=turn)


def select_tasks(tasks_cfg, split_seed: int = 0, source: str | Path | None = None) -> list[Task]:
    """The run's task selection, one rule for every job: the tasks of `tasks_cfg.source` (or `source`)
    whose kind is in `tasks_cfg.kinds`, KernelBench checkouts read at `tasks_cfg.kernelbench_levels`,
    the generated dataset split by `split_seed` (`data.split_seed`)."""
    chosen = tasks_cfg.source if source is None else source
    return [t for t in load_tasks(chosen, tasks_cfg.kernelbench_levels, split_seed) if t.kind in tasks_cfg.kinds]
