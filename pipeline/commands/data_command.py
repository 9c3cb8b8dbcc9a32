"""`cudaperf data build | stats | card | measure | splits | degeneracy | memory`: the task dataset from the command line.

  cudaperf data build   [--source S] [--check-compile] [--check-references] [--check-gate] [--sample N] [--family F]
                                                      generate the tasks, print counts and checks; with the
                                                      flags also compile every implementation (nvcc, many
                                                      per call), compile and run every C reference on the
                                                      small configurations (gcc) and every PyTorch reference
                                                      on the CPU, or run the static gate on every one
  cudaperf data stats   [--source S] [--measured DIR] [--card DIR]   the dataset card's table
  cudaperf data card    [--source S] [--measured DIR] [--out DIR]    the card (markdown + plots)
  cudaperf data measure --shard K/N [--minutes M] [--out DIR] [--source S] [--retry-failed] [--compile-only]
  cudaperf data splits  [--freeze | --rebalance]      check the frozen split table (pipeline/assets/splits.json)
                                                      against the generated families; --freeze adds new families
                                                      and drops removed ones (no family moves), --rebalance ranks
                                                      every family afresh at exact shares (families move)
  cudaperf data degeneracy [--source S] [--kernelbench-dir DIR --levels 1,2,3] [--family F] [--tasks IDS] [--resume]
                           [--flagged] [--out FILE] [--update] [--report]
                                                      run every reference on the CPU, at every check and timing
                                                      configuration, and flag tasks whose check a kernel passes
                                                      without the work (docs/fidelity.md); --update merges the
                                                      verdicts into the shipped registry, --resume checks only
                                                      tasks without a current entry, --report prints it
  cudaperf data memory [--source S] [--kernelbench-dir DIR --levels 1,2,3] [--gpu-memory-gib 79.2,139] [--out FILE]
                                                      the device memory one group of each task needs (the
                                                      evaluator's own estimate, made on torch's meta device: no
                                                      GPU, nothing allocated) against each card's evaluation
                                                      budget; lists the tasks a card must refuse

The degeneracy sweep runs each task in a child forked for it, within --limit-s: a C reference that crashes, or a
check past its time, gives that task the verdict `unchecked` and the sweep goes on.

Every subcommand takes --config FILE and section.key=value overrides (e.g. data.gpu_workers=3).
Exit status: 0 done, 1 a check failed or a shard is incomplete, 2 a usage error (one line).
"""
from __future__ import annotations

import argparse
import math
from collections import Counter

from pipeline.core.assets import SPLITS_TABLE
from pipeline.core.config import RunConfig, add_config_option, load_config

MIN_C2CUDA, MIN_TORCH2CUDA, MIN_FAMILIES, MAX_FAMILY_SHARE = 3000, 1000, 40, 0.05
MIN_CONFIGS, MIN_IMPLS, MIN_TEST_IMPLS = 3, 3, 5


def _tasks(cfg: RunConfig, source: str | None):
    from pipeline.tasks.reader import load_source
    return load_source(source or cfg.data.source, split_seed=cfg.data.split_seed)


def _measurements(cfg: RunConfig, path: str | None):
    from pipeline.tasks.measured import MeasurementsError, load_measurements
    try:
        return load_measurements(path or cfg.data.measured_dir or None)
    except MeasurementsError:
        if path:
            raise
        return None


def build_checks(tasks, split_seed: int) -> list[tuple[bool, str]]:
    """(passed, line) for every requirement on the generated task set."""
    from pipeline.tasks.splits import FRACTIONS, balanced_seed, shares_ok, split_of_task, split_shares
    kinds = Counter(t.kind for t in tasks)
    fams = Counter(t.family for t in tasks)
    biggest = max(fams.items(), key=lambda kv: kv[1]) if fams else ("-", 0)
    checks = [(kinds["c2cuda"] >= MIN_C2CUDA, f"c2cuda tasks {kinds['c2cuda']} >= {MIN_C2CUDA}"),
              (kinds["torch2cuda"] >= MIN_TORCH2CUDA, f"torch2cuda tasks {kinds['torch2cuda']} >= {MIN_TORCH2CUDA}"),
              (len(fams) >= MIN_FAMILIES, f"families {len(fams)} >= {MIN_FAMILIES}"),
              (biggest[1] <= MAX_FAMILY_SHARE * len(tasks),
               f"largest family {biggest[0]} has {biggest[1]} tasks ({biggest[1] / max(len(tasks), 1):.1%}) "
               f"<= {MAX_FAMILY_SHARE:.0%}")]
    few_cfg = [t.id for t in tasks if len(t.configs) < MIN_CONFIGS]
    checks.append((not few_cfg, f"every task has >= {MIN_CONFIGS} input configurations"
                   + (f" (not: {', '.join(few_cfg[:5])}{' ...' if len(few_cfg) > 5 else ''})" if few_cfg else "")))
    need = {t.id: MIN_TEST_IMPLS if split_of_task(t, split_seed) == "test" else MIN_IMPLS for t in tasks}
    few_impl = [t.id for t in tasks if len(t.implementations) < need[t.id]]
    checks.append((not few_impl, f"every task has >= {MIN_IMPLS} implementations (>= {MIN_TEST_IMPLS} in test "
                   f"families)" + (f" (not: {', '.join(few_impl[:5])}{' ...' if len(few_impl) > 5 else ''})"
                                   if few_impl else "")))
    bad_naive = [t.id for t in tasks if t.kind == "c2cuda" and (not t.implementations
                                                               or t.implementations[0].strategy != "naive")]
    checks.append((not bad_naive, "every c2cuda task lists its naive baseline first"
                   + (f" (not: {', '.join(bad_naive[:5])})" if bad_naive else "")))
    from pipeline.tasks.generate import normalised_reference
    refs = Counter(normalised_reference(t) for t in tasks)
    dups = sum(c - 1 for c in refs.values() if c > 1)
    checks.append((dups == 0, f"no two tasks share a normalised reference ({dups} duplicates)"))
    shares = split_shares(fams, split_seed)
    ok = shares_ok(shares)
    line = "split shares of families " + ", ".join(f"{s} {v:.0%} (aim {FRACTIONS[s]:.0%})" for s, v in shares.items())
    if not ok and fams:
        try:
            line += f"; data.split_seed={balanced_seed(fams)} balances them"
        except ValueError as e:
            line += f"; {e}"
    checks.append((ok, line))
    return checks


def cmd_build(cfg: RunConfig, args) -> int:
    from pipeline.dataset.card import format_stats, kernelbench_overlap, task_counts
    tasks = _tasks(cfg, args.source)
    print(format_stats(task_counts(tasks, cfg.data.split_seed, kernelbench_overlap(tasks)), None).split("\n\n")[0])
    checks = build_checks(tasks, cfg.data.split_seed)
    print()
    for ok, line in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {line}")
    status = 0 if all(ok for ok, _ in checks) else 1
    if args.check_compile or args.check_references or args.check_gate:
        status |= run_generator_checks(tasks, args)
    return status


def run_generator_checks(tasks, args) -> int:
    """The per-implementation checks of pipeline/dataset/checks.py on the selected tasks; 1 if any failed."""
    from pipeline.dataset import checks
    if args.family:
        families = set(args.family.split(","))
        tasks = [t for t in tasks if t.family in families]
    if args.sample:
        tasks = checks.sample_tasks(tasks, args.sample)
    status = 0

    def report(what: str, failures: list[str]) -> int:
        print(f"{what}, {len(failures)} failed")
        for f in failures:
            print("  " + f)
        return int(bool(failures))
    n_impls = sum(len(t.implementations) for t in tasks)
    if args.check_gate:
        status |= report(f"static gate: {n_impls} checked", checks.check_gate(tasks))
    if args.check_references:
        status |= report(f"C references: {sum(t.kind == 'c2cuda' for t in tasks)} checked",
                         checks.check_c_references(tasks, workers=args.workers))
        status |= report(f"PyTorch references: {sum(t.kind == 'torch2cuda' for t in tasks)} run on CPU",
                         checks.check_torch_references(tasks))
    if args.check_compile:
        status |= report(f"implementations: {n_impls} compiled",
                         checks.check_compile(tasks, workers=args.workers, batch=args.batch, progress=True))
    return status


def cmd_stats(cfg: RunConfig, args, card_dir: str | None) -> int:
    from pipeline.dataset.card import format_stats, kernelbench_overlap, measurement_stats, task_counts, write_card
    from pipeline.tasks.measured import current_rows
    from pipeline.tasks.reader import generator_version
    tasks = _tasks(cfg, args.source)
    table = _measurements(cfg, args.measured)
    counts = task_counts(tasks, cfg.data.split_seed, kernelbench_overlap(tasks))
    stale = 0
    if table is not None:
        table, stale = current_rows(table, tasks)
    mstats = measurement_stats(table) if table is not None and table.num_rows else None
    print(format_stats(counts, mstats))
    if stale:
        print(f"\n{stale} measured tasks changed or were removed since their measurement and are left out "
              "(`cudaperf data measure` measures changed ones again)")
    if card_dir:
        source = args.source or cfg.data.source
        print(f"\nwrote {write_card(card_dir, counts, mstats, source, generator_version(source))}")
    return 0


def cmd_measure(cfg: RunConfig, args) -> int:
    from pipeline.dataset.measure import measure_shards, parse_shards
    from pipeline.tasks.measured import MEASURED_DIR
    from pipeline.tasks.reader import generator_version
    source = args.source or cfg.data.source
    shards = parse_shards(args.shard)
    tasks = _tasks(cfg, source)
    summaries = measure_shards(cfg, tasks, shards, args.out or cfg.data.measured_dir or MEASURED_DIR,
                               minutes=args.minutes, retry_failed=args.retry_failed,
                               compile_only=args.compile_only, generator_version=generator_version(source))
    for summary in summaries:
        print("\n".join(summary.lines()))
    complete = len(summaries) == len(shards) and all(s.complete for s in summaries)
    return 0 if args.compile_only or complete else 1


def _degeneracy_child(task, limit_s: int, max_bytes: int, max_flops: float, out_fd: int) -> None:
    """In a forked child: one task's degeneracy as JSON on `out_fd`, then exit (a crash of a C reference, or a
    check past its time, ends the child alone)."""
    import json
    import os
    import signal
    import torch
    from pipeline.evaluation.checks.degeneracy import degeneracy
    torch.set_num_threads(1)
    signal.alarm(limit_s + 5)  # the parent kills it at limit_s; this ends an orphan
    d = degeneracy(task, max_bytes=max_bytes, max_flops=max_flops).to_dict()
    with os.fdopen(out_fd, "w") as f:
        f.write(json.dumps(d))
    os._exit(0)


def degeneracy_sweep(tasks, workers: int, limit_s: int, max_bytes: int, max_flops: float, on_row) -> list[dict]:
    """Every task's degeneracy row (Degeneracy.to_dict() and its registry hash), `workers` forked children at a
    time, each task within `limit_s`; a child that crashes or runs past it gives an `unchecked` row. `on_row(k,
    row)` is called as rows arrive (k counts them)."""
    import json
    import os
    import select
    import signal
    import time
    from pipeline.tasks.degenerate import registry_hash
    import torch  # noqa: F401 - imported once here, so every forked child starts with them
    import pipeline.evaluation.checks.degeneracy  # noqa: F401
    import pipeline.evaluation.checks.footprint  # noqa: F401
    import pipeline.evaluation.checks.reference_c  # noqa: F401
    import pipeline.evaluation.checks.reference_torch  # noqa: F401
    rows, running, todo = [], {}, list(tasks)
    while todo or running:
        while todo and len(running) < max(1, workers):
            task = todo.pop(0)
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child
                os.close(r)
                try:
                    _degeneracy_child(task, limit_s, max_bytes, max_flops, w)
                finally:
                    os._exit(1)
            os.close(w)
            running[r] = (pid, task, time.monotonic(), [])
        ready, _, _ = select.select(list(running), [], [], 1.0)
        now = time.monotonic()
        for fd in list(running):
            pid, task, start, chunks = running[fd]
            done = False
            if fd in ready:
                data = os.read(fd, 1 << 20)
                chunks.append(data)
                done = not data
            late = now - start > limit_s
            if not (done or late):
                continue
            if late and not done:
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(fd)
            del running[fd]
            try:
                row = json.loads(b"".join(chunks)) if done else None
            except json.JSONDecodeError:
                row = None
            if row is None:
                why = f"the CPU check took over {limit_s} s" if late else "the CPU check crashed (the C reference?)"
                row = {"task": task.id, "verdict": "unchecked", "task_draw": [], "under_check": [], "reason": why,
                       "sizes": ""}
            row["hash"] = registry_hash(task)
            rows.append(row)
            on_row(len(rows), row)
    return rows


def source_of(task_id: str) -> str:
    """The registry report's source of a task id: kernelbench/levelN, pareval, generated c2cuda|torch2cuda (ids of
    three parts: kind/family/name), or the built-in kind."""
    parts = task_id.split("/")
    if parts[0] == "kernelbench":
        return "/".join(parts[:2])
    if parts[0] == "pareval":
        return "pareval"
    return f"generated {parts[0]}" if len(parts) >= 3 else f"builtin {parts[0]}"


VERDICTS = ("ok", "repaired", "degenerate", "unchecked")


def registry_report(entries: dict, families: bool = True) -> str:
    """The registry as a report: counts per source (and per generated family), then every flagged task with its
    reason."""
    by_source: dict[str, Counter] = {}
    by_family: dict[str, Counter] = {}
    for task_id, e in entries.items():
        by_source.setdefault(source_of(task_id), Counter())[e["verdict"]] += 1
        if source_of(task_id).startswith("generated"):
            by_family.setdefault(task_id.split("/")[1], Counter())[e["verdict"]] += 1
    lines = ["| tasks | " + " | ".join(VERDICTS) + " |", "| --- " * (len(VERDICTS) + 1) + "|"]
    lines += [f"| {s} | " + " | ".join(str(c[v]) for v in VERDICTS) + " |" for s, c in sorted(by_source.items())]
    if families and by_family:
        lines += ["", "| generated family | " + " | ".join(VERDICTS) + " |", "| --- " * (len(VERDICTS) + 1) + "|"]
        lines += [f"| {f} | " + " | ".join(str(c[v]) for v in VERDICTS) + " |" for f, c in sorted(by_family.items())]
    flagged = [(i, e) for i, e in sorted(entries.items()) if e["verdict"] != "ok"]
    if flagged:
        lines += ["", "flagged tasks:"] + [f"- `{i}` **{e['verdict']}**: {e.get('reason', '')}" for i, e in flagged]
    return "\n".join(lines)


def cmd_degeneracy(cfg: RunConfig, args) -> int:
    """Every selected task's degeneracy (pipeline/evaluation/checks/degeneracy.py); 1 if any is degenerate."""
    import json
    from pathlib import Path
    from pipeline.commands.bench_command import kernelbench_levels
    from pipeline.tasks import load_kernelbench
    from pipeline.tasks.degenerate import REGISTRY, entry_of, load_registry, write_registry
    if args.report:
        print(registry_report(load_registry(str(REGISTRY))))
        return 0
    tasks = (load_kernelbench(args.kernelbench_dir, kernelbench_levels(args.levels))
             if args.kernelbench_dir else _tasks(cfg, args.source))
    if args.family:
        tasks = [t for t in tasks if t.family in set(args.family.split(","))]
    if args.tasks:
        tasks = [t for t in tasks if t.id in set(args.tasks.split(","))]
    if args.resume:
        tasks = [t for t in tasks if entry_of(t) is None]
    if args.flagged:
        tasks = [t for t in tasks if (entry_of(t) or {}).get("verdict", "ok") != "ok"]
    if args.sample:
        from pipeline.dataset.checks import sample_tasks
        tasks = sample_tasks(tasks, args.sample)
    print(f"checking {len(tasks)} tasks ({args.workers} workers, {args.limit_s} s a task, configurations of at most "
          f"{args.max_mib} MiB and, where timed, {args.max_mflop} MFLOP)", flush=True)
    pending: dict = {}

    def save() -> None:
        table = dict(load_registry(str(REGISTRY)))
        table.update(pending)
        write_registry(table)
        pending.clear()

    def on_row(k: int, row: dict) -> None:
        if row["verdict"] != "ok":
            print(f"[{k}/{len(tasks)}] {row['task']}: {row['verdict']}: {row['reason'][:300]}", flush=True)
        elif k % 100 == 0:
            print(f"[{k}/{len(tasks)}]", flush=True)
        if args.update:
            pending[row["task"]] = row
            if len(pending) >= 100:  # a sweep stopped half-way keeps what it found (--resume goes on from there)
                save()
    rows = degeneracy_sweep(tasks, args.workers, args.limit_s, args.max_mib << 20, args.max_mflop * 1e6, on_row)
    counts = Counter(r["verdict"] for r in rows)
    print(", ".join(f"{v} {n}" for v, n in sorted(counts.items())))
    report = {"tasks": {r["task"]: r for r in rows}}
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))
        print(f"report written to {args.out} (every task's properties and the sizes checked)")
    if args.update:
        save()
        print(f"registry updated: {REGISTRY}")
    print(registry_report({r["task"]: r for r in rows}, families=True))
    return int(counts["degenerate"] > 0)


def cmd_splits(args) -> int:
    """The frozen split table against the generated families (pipeline/tasks/splits.py): what is new, gone or
    moved; with --freeze or --rebalance it is written. 1 when the table is out of date and was not written."""
    from pipeline.tasks.splits import (FRACTIONS, SPLITS, SplitsTableError, frozen_table, generated_families,
                                       refrozen, write_frozen_table)
    try:
        table = frozen_table(args.table)
    except SplitsTableError:
        if not args.rebalance:
            raise
        table = {"ranked": {}, "added": {}}
    new = refrozen(generated_families(), table, args.rebalance)
    before, after = {**table["ranked"], **table["added"]}, {**new["ranked"], **new["added"]}
    counts = Counter(after.values())
    print(f"{len(after)} families: " + ", ".join(f"{s} {counts[s]} ({counts[s] / max(len(after), 1):.0%}, aim "
                                                 f"{FRACTIONS[s]:.0%})" for s in SPLITS))
    for f in sorted(set(after) | set(before)):
        if f not in before:
            print(f"new    {f}: {after[f]}")
        elif f not in after:
            print(f"gone   {f} (was {before[f]})")
        elif before[f] != after[f]:
            print(f"moved  {f}: {before[f]} -> {after[f]}")
    if new == table:
        print(f"{args.table} is up to date")
        return 0
    if args.freeze or args.rebalance:
        write_frozen_table(new, args.table)
        print(f"wrote {args.table}")
        return 0
    print(f"{args.table} is out of date: run `cudaperf data splits --freeze` and commit it")
    return 1


def memory_plan(tasks, eval_cfg, cards_gib: list[float]) -> list[dict]:
    """One row per task: the device memory an evaluator reserves for a group of it (evaluator.group_memory_need)
    and, per card (its device memory in GiB), whether that fits the card's evaluation budget
    (eval.gpu_memory_fraction of it); where the reference does not run on the meta device, why (the evaluator
    then reserves a fair share of the GPU instead)."""
    from pipeline.evaluation.evaluator import group_memory_need
    from pipeline.evaluation.gpu.memory_budget import GIB
    rows = []
    for task in tasks:
        try:
            need, top = group_memory_need(task, eval_cfg)
        except Exception as e:  # noqa: BLE001 - one problem's reference is no reason to stop the plan
            rows.append({"task": task.id, "error": f"{type(e).__name__}: {str(e)[:200]}"})
            continue
        rows.append({"task": task.id, "largest": top.name, "inputs_bytes": top.inputs, "outputs_bytes": top.outputs,
                     "params_bytes": top.params, "intermediates_bytes": top.intermediates, "need_bytes": need,
                     "fits": {f"{g:g}": need <= g * GIB * eval_cfg.gpu_memory_fraction for g in cards_gib}})
    return rows


def cmd_memory(cfg: RunConfig, args) -> int:
    """The memory plan of the selected tasks (memory_plan): the tasks some card must refuse, then the counts."""
    import json
    from pathlib import Path
    from pipeline.commands.bench_command import kernelbench_levels
    from pipeline.core.errors import UserError
    from pipeline.tasks import load_kernelbench
    try:
        cards = [float(x) for x in args.gpu_memory_gib.split(",") if x.strip()]
    except ValueError:
        cards = []
    if not cards or not all(math.isfinite(g) and g > 0 for g in cards):
        raise UserError(f"--gpu-memory-gib {args.gpu_memory_gib!r} is not a list of positive sizes; give each "
                        "card's device memory in GiB, comma-separated, e.g. --gpu-memory-gib 79.2,139")
    tasks = (load_kernelbench(args.kernelbench_dir, kernelbench_levels(args.levels))
             if args.kernelbench_dir else _tasks(cfg, args.source))
    from pipeline.evaluation.gpu.memory_budget import GIB
    rows = memory_plan(tasks, cfg.eval, cards)
    budget = {f"{g:g}": g * cfg.eval.gpu_memory_fraction for g in cards}
    width = max([60] + [len(r["task"]) for r in rows])  # the longest task id sets the column
    print(f"{'task':{width}} {'largest configuration (in / out / params / intermediates GiB)':>62} {'needs GiB':>9}  " +
          "  ".join(f"{k} GiB card" for k in budget))
    for r in rows:
        if "error" in r:
            print(f"{r['task']:{width}} not estimated (the evaluator reserves a fair share of the GPU): {r['error'][:80]}")
        elif not all(r["fits"].values()):
            sizes = f"{r['largest']}: {r['inputs_bytes'] / GIB:.1f} / {r['outputs_bytes'] / GIB:.1f} / " \
                    f"{r['params_bytes'] / GIB:.1f} / {r['intermediates_bytes'] / GIB:.1f}"
            print(f"{r['task']:{width}} {sizes:>62} {r['need_bytes'] / GIB:9.1f}  " +
                  "  ".join(f"{'fits' if r['fits'][k] else 'refused':>{len(k) + 9}}" for k in budget))
    estimated = [r for r in rows if "error" not in r]
    for k, b in budget.items():
        refused = sum(not r["fits"][k] for r in estimated)
        print(f"a {k} GiB card (evaluation budget {b:.1f} GiB, eval.gpu_memory_fraction "
              f"{cfg.eval.gpu_memory_fraction:g}): {len(estimated) - refused} of {len(rows)} tasks fit, {refused} "
              f"refused, {len(rows) - len(estimated)} not estimated")
    if args.out:
        Path(args.out).write_text(json.dumps({"cards_gib": cards, "gpu_memory_fraction": cfg.eval.gpu_memory_fraction,
                                              "rows": rows}, indent=1))
        print(f"plan written to {args.out}")
    return 0


HELP = "build, measure and summarise the task dataset"


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser("data", help=HELP, description=HELP)
    sub = parser.add_subparsers(dest="data_command", metavar="build|stats|card|measure|splits|degeneracy",
                                required=True)

    def common(p):
        p.add_argument("--source", default=None, help="task source (default data.source: generated)")
        return add_config_option(p)
    p = common(sub.add_parser("build", help="generate the tasks and check the counts"))
    p.add_argument("--check-compile", action="store_true", help="compile every implementation with nvcc")
    p.add_argument("--check-references", action="store_true", help="compile and run every C reference on small "
                   "configurations and every PyTorch reference on CPU")
    p.add_argument("--check-gate", action="store_true", help="run the static gate on every implementation")
    p.add_argument("--sample", type=int, default=0, help="check only this many tasks (spread over families)")
    p.add_argument("--family", default="", help="check only these families (comma-separated)")
    p.add_argument("--workers", type=int, default=2, help="parallel compiler processes")
    p.add_argument("--batch", type=int, default=40, help="implementations per nvcc call")
    p = common(sub.add_parser("stats", help="print the dataset card's table"))
    p.add_argument("--measured", default=None, help="measurement Parquet file or directory (default data.measured_dir)")
    p.add_argument("--card", default=None, metavar="DIR", help="also write the dataset card (markdown + plots) here")
    p = common(sub.add_parser("card", help="write the dataset card (markdown + plots)"))
    p.add_argument("--measured", default=None, help="measurement Parquet file or directory (default data.measured_dir)")
    p.add_argument("--out", default="pipeline/assets/card", help="directory of the card")
    p = common(sub.add_parser("measure", help="compile, verify and time a shard of tasks on this GPU"))
    p.add_argument("--shard", default="0/1", help="K/N: measure shard K of N (tasks assigned by a hash of their id); "
                   "'1,2/N' or '1-7/N' measure several shards one after the other")
    p.add_argument("--minutes", type=float, default=None, help="stop starting tasks after this many minutes")
    p.add_argument("--out", default=None, help="directory of the shard's Parquet file (default data.measured_dir)")
    p.add_argument("--retry-failed", action="store_true", help="measure again tasks with a failed implementation")
    p.add_argument("--compile-only", action="store_true", help="only compile and analyse (no GPU needed)")
    p = add_config_option(sub.add_parser("splits", help="check or write the frozen split of every generated family"))
    how = p.add_mutually_exclusive_group()
    how.add_argument("--freeze", action="store_true", help="add new families to the table, each by its own hash, and "
                     "drop removed ones: no family already in it moves")
    how.add_argument("--rebalance", action="store_true", help="rank every family afresh at exact shares: families "
                     "move, so runs before and after are not comparable")
    p.add_argument("--table", default=str(SPLITS_TABLE), help="the table's file (default the shipped one)")
    p = common(sub.add_parser("degeneracy", help="flag tasks whose check a kernel passes without doing the work"))
    p.add_argument("--kernelbench-dir", default="", help="a KernelBench checkout instead of --source")
    p.add_argument("--levels", default="1,2,3", help="KernelBench levels (with --kernelbench-dir)")
    p.add_argument("--sample", type=int, default=0, help="check only this many tasks (spread over families)")
    p.add_argument("--family", default="", help="check only these families (comma-separated)")
    p.add_argument("--tasks", default="", help="check only these tasks (ids, comma-separated)")
    p.add_argument("--resume", action="store_true", help="check only tasks the registry has no current entry for")
    p.add_argument("--flagged", action="store_true", help="check only tasks the registry flags (repaired, degenerate, "
                   "unchecked): after a change that can only take findings away")
    p.add_argument("--report", action="store_true", help="print the registry's counts and flagged tasks, check nothing")
    p.add_argument("--workers", type=int, default=2, help="parallel CPU processes")
    p.add_argument("--limit-s", type=int, default=600, help="seconds one task's check may take")
    p.add_argument("--max-mib", type=int, default=64, help="a configuration's data on the CPU; larger problems, and "
                   "timing configurations, are checked with sizes halved (batch, then independent sizes first)")
    p.add_argument("--max-mflop", type=int, default=50, help="a timing configuration's work on the CPU (its work "
                   "model, in millions of operations); larger ones are checked with sizes halved")
    p.add_argument("--out", default="", help="write the report (JSON) here")
    p.add_argument("--update", action="store_true", help="merge the verdicts into the shipped registry")
    p = common(sub.add_parser("memory", help="the device memory one group of each task needs, against each card"))
    p.add_argument("--kernelbench-dir", default="", help="a KernelBench checkout instead of --source")
    p.add_argument("--levels", default="1,2,3", help="KernelBench levels (with --kernelbench-dir)")
    p.add_argument("--gpu-memory-gib", default="79.2,139", help="each card's device memory in GiB as the driver "
                   "reports it, comma-separated (default: an H100 80 GB's 79.2 and an H200's 139)")
    p.add_argument("--out", default="", help="write every task's row (JSON) here")
    return parser


def run(args, open_cluster=None) -> int:
    """`cudaperf data ...` (pipeline/cli.py, which reports a UserError as one line)."""
    cfg = load_config(args.config, args.overrides)
    if args.data_command == "build":
        return cmd_build(cfg, args)
    if args.data_command == "stats":
        return cmd_stats(cfg, args, args.card)
    if args.data_command == "card":
        return cmd_stats(cfg, args, args.out)
    if args.data_command == "degeneracy":
        return cmd_degeneracy(cfg, args)
    if args.data_command == "splits":
        return cmd_splits(args)
    if args.data_command == "memory":
        return cmd_memory(cfg, args)
    return cmd_measure(cfg, args)
