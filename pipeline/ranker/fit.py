"""Training and evaluating rankers end to end: data, features, pairs, fit, held-out metrics.

In: a data path (measured Parquet or the evaluator's benchmark JSON), the `ranker` and `compile`
config sections, which rankers to train, and how to hold out families (each task's split at
`data.split_seed`, the one the task reader gives, an explicit list of test families, or K-fold
cross-validation by family). Out: fitted rankers, metrics per ranker (the learned ones and the
heuristics) on the held-out families.
Touches: the feature cache (nvcc runs for rows without features_json). No Ray.

Rankers train on every family outside the test split (train and val) and are judged on the
test families only, so the reported accuracy is for computations they have never seen.
"""
from __future__ import annotations

import time

from pipeline.ranker.base import Ranker
from pipeline.ranker.dataset import RankData, assign_splits, family_folds, fill_features, load_data
from pipeline.ranker.evaluate import evaluate_scores, merge_folds
from pipeline.ranker.features import FeatureCache
from pipeline.ranker.heuristics import RULES, HeuristicRanker
from pipeline.ranker.pairs import make_pairs

RANKER_KINDS = ("gbt", "neural")


def make_ranker(kind: str, cfg, seed: int = 0) -> Ranker:
    """A fresh, untrained ranker of `kind` with the settings of the `ranker` config section."""
    if kind == "gbt":
        from pipeline.ranker.gbt import GBTRanker
        return GBTRanker(cfg.gbt_trees, cfg.gbt_learning_rate, cfg.gbt_leaves, cfg.gbt_min_data_in_leaf, seed=seed,
                         threads=cfg.threads)
    if kind == "neural":
        from pipeline.ranker.neural import NeuralRanker
        return NeuralRanker(cfg.neural_encoder, cfg.neural_epochs, cfg.neural_lr, hidden=cfg.neural_hidden,
                            embed_dim=cfg.neural_embed_dim, pairs_per_batch=cfg.neural_pairs_per_batch,
                            max_steps=cfg.neural_max_steps,
                            minilm_max_chunks=cfg.minilm_max_chunks, seed=seed, threads=cfg.threads,
                            cache_dir=cfg.feature_cache_dir)
    raise ValueError(f"ranker '{kind}' is not known: use one of {', '.join(RANKER_KINDS)}")


def prepare_data(path, cfg, compile_cfg, test_families: list[str] | None = None, split_seed: int = 0,
                 log=print) -> RankData:
    """Load the rows, fill missing features (cached nvcc analysis), give every impl a split."""
    t0 = time.perf_counter()
    data = load_data(path, cfg.task_sources)
    log(f"data: {len(data.impls)} implementations of {len({i.task_id for i in data.impls})} tasks in "
        f"{len(data.families())} families from {data.source} ({time.perf_counter() - t0:.1f} s)")
    t0 = time.perf_counter()
    cache = FeatureCache(cfg.feature_cache_dir, compile_cfg.arch, compile_cfg.nvcc, cfg.feature_workers)
    filled = fill_features(data, cache)
    log(f"features: {len(data.impls) - filled} from the rows, {filled} computed or read from the cache "
        f"({time.perf_counter() - t0:.1f} s)")
    assign_splits(data, test_families, split_seed)
    return data


def trains_rankers(im) -> bool:
    """Whether an implementation is in a ranker's training data: not of a test family, nor of a held-out task."""
    return im.split not in ("test", "heldout")


def train_split(data: RankData, cfg, kinds, seed: int = 0, log=print) -> dict[str, tuple[Ranker, dict]]:
    """Fit each ranker in `kinds` on the pairs of its training data (`trains_rankers`); {kind: (ranker, metrics)}."""
    train = data.subset(trains_rankers)
    pairs = make_pairs(train, cfg.min_gap)
    out = {}
    for kind in kinds:
        t0 = time.perf_counter()
        ranker = make_ranker(kind, cfg, seed)
        metrics = ranker.fit(train, pairs)
        metrics["train_s"] = round(time.perf_counter() - t0, 2)
        metrics["train_families"] = len(train.families())
        log(f"{kind}: {metrics['train_pairs']} pairs, train accuracy {metrics['train_accuracy']:.3f}, "
            f"{metrics['train_s']} s")
        out[kind] = (ranker, metrics)
    return out


def evaluate_rankers(data: RankData, rankers: dict[str, Ranker], min_gap: float,
                     heuristics: bool = True) -> dict[str, dict]:
    """Metrics of each ranker (and of every heuristic) on the test families of `data`."""
    test = data.subset(lambda im: im.split == "test")
    pairs = make_pairs(test, min_gap)
    everyone = dict(rankers)
    if heuristics:
        everyone.update({f"heuristic:{r}": HeuristicRanker(r) for r in RULES})
    return {name: evaluate_scores(test, pairs, r.score_data(test)) for name, r in everyone.items()}


def cross_validate(data: RankData, cfg, kinds, k: int, seed: int = 0, log=print) -> dict[str, dict]:
    """K-fold cross-validation by family: each family is a test family once; metrics pooled over folds."""
    per_fold: dict[str, list[dict]] = {}
    for i, fold in enumerate(family_folds(data.families(), k, seed)):
        chosen = set(fold)
        for im in data.impls:
            im.split = "test" if im.family in chosen else "train"
        log(f"fold {i + 1}/{k}: test families {', '.join(fold)}")
        trained = train_split(data, cfg, kinds, seed, log)
        results = evaluate_rankers(data, {kind: r for kind, (r, _) in trained.items()}, cfg.min_gap)
        for name, m in results.items():
            per_fold.setdefault(name, []).append(m)
    return {name: merge_folds(ms) for name, ms in per_fold.items()}


def best_heuristic(results: dict[str, dict], key: str = "gap_ge_1.5") -> tuple[str, float | None]:
    """The heuristic with the highest accuracy on pairs with gap >= 1.5x (all kinds)."""
    best = (None, None)
    for name, m in results.items():
        acc = m[key]["all"]["accuracy"]
        if name.startswith("heuristic:") and acc is not None and (best[1] is None or acc > best[1]):
            best = (name, acc)
    return best
