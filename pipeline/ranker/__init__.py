"""Stage 1: the offline pairwise ranker of CUDA programs (docs/ranker.md).

- `features`: the allow-list of pre-run features (never a time), task features, the feature cache.
- `dataset`: implementations with code, features and measured times (measured Parquet, or the
  evaluator benchmark JSON as a small development set); splits by family.
- `pairs`: same task and configuration, beyond the noise threshold, tagged strategy / variant.
- `base`: the interface `score(task, code, features) -> float`.
- `gbt`: gradient-boosted trees with a pairwise logistic objective (LightGBM).
- `neural`: code + features, Bradley-Terry loss, torch on CPU (scratch or MiniLM encoder).
- `heuristics`: occupancy, memory transactions, coalescing, structural score.
- `evaluate`: accuracy by gap bucket and pair kind, Kendall tau, report and plot.
- `checkpoint`: versioned checkpoint directories with a manifest.
- `serve`: batched scoring and the reward's preference over the task's baseline.
- `train`, `cli`: `cudaperf rank train | eval`.
Nothing is imported here.
"""
