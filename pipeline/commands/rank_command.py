"""`cudaperf rank train | eval`: train the pairwise rankers, and judge them on held-out families.

  cudaperf rank train [--data PATH] [--out DIR] [--rankers gbt,neural] [--test-families A,B]
                      [--config FILE] [section.key=value ...]
  cudaperf rank eval  [--data PATH] [--checkpoints DIR] [--report DIR] [--cv K] [--test-families A,B]
                      [--rankers gbt,neural] [--config FILE] [section.key=value ...]

--data: the measured dataset (a Parquet file or directory; default pipeline/assets/measured/) or an
evaluator benchmark JSON (benchmarks/results/v1/evaluator_h200.json, the built-in tasks' speedups).
train: fits each ranker on the non-test families and writes `OUT/<kind>/vNNNN/` (default OUT:
run.output_dir/run.name/ranker). eval: scores the test families with the latest checkpoints
(or, with --cv K, trains fresh rankers in K folds by family) next to the heuristics, and writes
report.md, accuracy.png and metrics.json to --report (default OUT/report).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.core.config import add_config_option, load_config
from pipeline.core.errors import UserError


HELP = "train and evaluate the pairwise program ranker"


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser("rank", help=HELP, description=HELP)
    sub = parser.add_subparsers(dest="rank_command", metavar="train|eval", required=True)
    for name, what in (("train", "fit the rankers on the non-test families"),
                       ("eval", "score the test families with the latest checkpoints, beside the heuristics")):
        p = add_config_option(sub.add_parser(name, help=what, description=what))
        p.add_argument("--data", default=None, help="measured Parquet file or directory, or an evaluator benchmark JSON")
        p.add_argument("--rankers", default="gbt,neural", help="comma-separated: gbt, neural")
        p.add_argument("--test-families", default=None, help="comma-separated families held out (default: each "
                       "task's split at data.split_seed, pipeline/tasks/splits.py)")
        p.add_argument("--out", default=None, help="checkpoint root (default run.output_dir/run.name/ranker)")
        if name == "eval":
            p.add_argument("--checkpoints", default=None, help="checkpoint root to evaluate (default --out)")
            p.add_argument("--report", default=None, help="report directory (default OUT/report)")
            p.add_argument("--cv", type=int, default=0, help="K-fold cross-validation by family, training fresh "
                           "rankers per fold (for small data)")
    return parser


def run(args, open_cluster=None) -> int:
    """`cudaperf rank train|eval ...` (pipeline/cli.py, which reports a UserError as one line)."""
    from pipeline.ranker.fit import RANKER_KINDS
    cfg = load_config(args.config, args.overrides)
    kinds = [k.strip() for k in args.rankers.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in RANKER_KINDS]
    if unknown or not kinds:
        raise UserError(f"--rankers {args.rankers}: known rankers are {', '.join(RANKER_KINDS)}")
    out = Path(args.out) if args.out else Path(cfg.run.output_dir) / cfg.run.name / "ranker"
    families = [f for f in args.test_families.split(",") if f] if args.test_families else None
    return (_train if args.rank_command == "train" else _eval)(args, cfg, kinds, out, families)


def _train(args, cfg, kinds, out: Path, families) -> int:
    from pipeline.ranker.checkpoint import save_checkpoint
    from pipeline.ranker.fit import prepare_data, train_split, trains_rankers
    data = prepare_data(args.data, cfg.ranker, cfg.compile, families, cfg.data.split_seed)
    trained = train_split(data, cfg.ranker, kinds, cfg.run.seed)
    test_families = sorted({im.family for im in data.impls if im.split == "test"})
    for kind, (ranker, metrics) in trained.items():
        path = save_checkpoint(ranker, out / kind, data.subset(trains_rankers).content_hash(),
                               metrics, {"data_source": data.source, "test_families": test_families,
                                         "min_gap": cfg.ranker.min_gap})
        print(f"{kind}: checkpoint {path}")
    return 0


def _eval(args, cfg, kinds, out: Path, families) -> int:
    from pipeline.ranker.checkpoint import load_ranker, read_manifest, resolve
    from pipeline.ranker.evaluate import write_report
    from pipeline.ranker.fit import best_heuristic, cross_validate, evaluate_rankers, prepare_data
    report_dir = Path(args.report) if args.report else out / "report"
    notes = []
    if args.cv:
        # the folds assign the splits, so no split function is needed to load
        data = prepare_data(args.data, cfg.ranker, cfg.compile, [], cfg.data.split_seed)
        results = cross_validate(data, cfg.ranker, kinds, args.cv, cfg.run.seed)
        notes.append(f"{args.cv}-fold cross-validation by family over {len(data.families())} families "
                     f"({len(data.impls)} implementations, {data.source})")
    else:
        root = Path(args.checkpoints) if args.checkpoints else out
        rankers, manifests = {}, {}
        for kind in kinds:
            rankers[kind], manifests[kind] = load_ranker(root / kind, cfg.ranker.feature_cache_dir)
        if families is None:  # hold out what training held out
            families = read_manifest(root / kinds[0]).get("test_families") or None
        data = prepare_data(args.data, cfg.ranker, cfg.compile, families, cfg.data.split_seed)
        for kind, m in manifests.items():
            notes.append(f"{kind}: {resolve(root / kind)} (data hash {m['data_hash']})")
        notes.append(f"test families: {', '.join(sorted({im.family for im in data.impls if im.split == 'test'}))}")
        results = evaluate_rankers(data, rankers, cfg.ranker.min_gap)
    name, acc = best_heuristic(results)
    notes.append(f"pairs kept at a gap of at least {cfg.ranker.min_gap}x; best heuristic at gap >= 1.5x: {name}"
                 + (f" ({acc:.1%})" if acc is not None else ""))
    path = write_report(results, report_dir, "Ranker evaluation on held-out families", notes)
    for rname, m in results.items():
        ge = m["gap_ge_1.5"]["all"]
        tau = m["kendall_tau"]
        print(f"{rname:26s} pairs {m['pairs']:5d}  accuracy {_pct(m['accuracy'])}  gap>=1.5x {_pct(ge['accuracy'])} "
              f"({ge['n']})  tau {'-' if tau is None else f'{tau:.3f}'}")
    print(f"report: {path}")
    return 0


def _pct(x) -> str:
    return "   -  " if x is None else f"{x:6.1%}"
