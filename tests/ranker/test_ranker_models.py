"""Both rankers learn the synthetic speed rule and judge held-out families better than chance and
than any single heuristic; the pairwise objective's gradient is right; checkpoints round-trip."""
import json

import numpy as np
import pytest

from pipeline.ranker.checkpoint import CheckpointError, load_ranker, read_manifest, save_checkpoint
from pipeline.ranker.gbt import pairwise_logistic_grad
from pipeline.ranker.fit import best_heuristic, evaluate_rankers


@pytest.fixture(scope="module")
def results(synthetic, trained, ranker_cfg):
    return evaluate_rankers(synthetic, {k: r for k, (r, _) in trained.items()}, ranker_cfg.min_gap)


def test_test_families_are_held_out(synthetic, trained):
    test_fams = {im.family for im in synthetic.impls if im.split == "test"}
    assert test_fams == {"fam00", "fam03", "fam07", "fam10"}
    for _, metrics in trained.values():
        assert metrics["train_families"] == 8


@pytest.mark.parametrize("kind", ["gbt", "neural"])
def test_ranker_learns_the_rule_on_held_out_families(results, kind):
    m = results[kind]
    assert m["pairs"] > 100
    assert m["accuracy"] >= 0.85, m
    assert m["gap_ge_1.5"]["all"]["accuracy"] >= 0.9, m
    assert m["kendall_tau"] >= 0.6, m
    _, heuristic = best_heuristic(results)
    assert m["gap_ge_1.5"]["all"]["accuracy"] > heuristic


def test_pairwise_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    preds = rng.normal(size=5)
    faster, slower = np.array([0, 1, 3, 0]), np.array([2, 2, 4, 4])

    def loss(p):
        return float(np.sum(np.log1p(np.exp(-(p[faster] - p[slower])))))
    grad, hess = pairwise_logistic_grad(preds, faster, slower)
    eps = 1e-6
    for i in range(5):
        e = np.zeros(5)
        e[i] = eps
        assert grad[i] == pytest.approx((loss(preds + e) - loss(preds - e)) / (2 * eps), abs=1e-6)
        second = (loss(preds + e) - 2 * loss(preds) + loss(preds - e)) / eps ** 2
        assert hess[i] == pytest.approx(second, abs=1e-3)


@pytest.mark.parametrize("kind", ["gbt", "neural"])
def test_checkpoint_round_trip_gives_identical_scores(tmp_path, synthetic, trained, kind):
    ranker, metrics = trained[kind]
    first = save_checkpoint(ranker, tmp_path, synthetic.content_hash(), metrics)
    second = save_checkpoint(ranker, tmp_path, synthetic.content_hash(), metrics)
    assert (first.name, second.name) == ("v0001", "v0002")
    loaded, manifest = load_ranker(tmp_path)  # the root resolves to the latest version
    assert manifest["version"] == 2 and manifest["kind"] == kind
    assert manifest["data_hash"] == synthetic.content_hash()
    assert manifest["metrics"]["train_pairs"] == metrics["train_pairs"]
    np.testing.assert_array_equal(loaded.score_data(synthetic), ranker.score_data(synthetic))
    assert read_manifest(first)["version"] == 1


def test_the_out_directory_of_rank_train_names_its_one_kind_and_several_kinds_need_a_choice(tmp_path, trained):
    save_checkpoint(trained["gbt"][0], tmp_path / "gbt", "h", {})  # `cudaperf rank train --out tmp_path`
    assert load_ranker(tmp_path)[1]["kind"] == "gbt"
    save_checkpoint(trained["neural"][0], tmp_path / "neural", "h", {})
    with pytest.raises(CheckpointError, match=r"several kinds \(gbt, neural\).*ranker.checkpoint=.*gbt"):
        load_ranker(tmp_path)


def test_checkpoint_with_another_feature_list_is_refused(tmp_path, synthetic, trained):
    path = save_checkpoint(trained["gbt"][0], tmp_path, "h", {})
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["feature_names"] = manifest["feature_names"][:-1]
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="another feature list"):
        load_ranker(path)
    with pytest.raises(CheckpointError, match="no ranker checkpoint"):
        load_ranker(tmp_path / "nothing")


def test_data_hash_changes_with_times(synthetic):
    import copy
    other = copy.deepcopy(synthetic)
    other.impls[0].times_ms["large"] *= 2
    assert other.content_hash() != synthetic.content_hash()


def test_minilm_encoder_embeds_code_offline_and_caches(tmp_path):
    from pipeline.ranker.neural import minilm_embeddings
    codes = ["__global__ void k(float* a) { a[threadIdx.x] = 0; }", "int main() { return 0; }"]
    first = minilm_embeddings(codes, cache_dir=tmp_path)
    assert first.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, rtol=1e-5)
    assert not np.allclose(first[0], first[1])
    assert len(list(tmp_path.glob("*.npy"))) == 2
    np.testing.assert_array_equal(minilm_embeddings(codes, cache_dir=tmp_path), first)


@pytest.mark.integration
def test_neural_ranker_with_minilm_encoder_learns_the_rule(synthetic, ranker_cfg, tmp_path):
    from pipeline.ranker.fit import make_ranker
    cfg = ranker_cfg.model_copy(update={"neural_encoder": "minilm", "feature_cache_dir": str(tmp_path)})
    results = evaluate_rankers(synthetic, train_and_keep(synthetic, cfg), cfg.min_gap, heuristics=False)
    assert results["neural"]["accuracy"] >= 0.85, results["neural"]
    assert make_ranker("neural", cfg).settings["encoder"] == "minilm"


def train_and_keep(data, cfg):
    from pipeline.ranker.fit import train_split
    return {k: r for k, (r, _) in train_split(data, cfg, ["neural"], log=lambda *_: None).items()}
