"""The feature allow-list: only pre-run features reach a ranker; timing-derived keys never do."""
import math

import numpy as np
import pytest

from pipeline.ranker.features import (ALLOWED_FEATURES, FEATURE_NAMES, FORBIDDEN, FeatureCache, check_allow_list,
                                      feature_vector, source_key)

SAXPY = """
__global__ void k(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" void saxpy(const float* x, float* y, float a, int n) { k<<<(n + 255) / 256, 256>>>(x, y, a, n); }
"""


def test_allow_list_has_no_timing_or_decoration_feature():
    assert not [n for n in FEATURE_NAMES if FORBIDDEN.search(n)]
    for bad in ("roofline.fraction", "struct.roofline", "struct.score", "time.median_ms", "speedup",
                "ncu.dram__bytes_read.sum", "static.pragma_unroll", "static.launch_bounds_max_threads"):
        assert bad not in FEATURE_NAMES
        with pytest.raises(RuntimeError, match=bad.replace(".", r"\.")):
            check_allow_list([*FEATURE_NAMES, bad])


def test_feature_vector_ignores_keys_added_after_timing(synthetic):
    feats = dict(synthetic.impls[0].features)
    base = feature_vector(feats, {})
    timed = {**feats, "roofline.fraction": 0.9, "struct.roofline": 0.9, "struct.score": 0.99, "median_ms": 1.0,
             "static.pragma_unroll": 40, "something.new": 3.0}
    np.testing.assert_array_equal(base, feature_vector(timed, {}))
    assert base[FEATURE_NAMES.index("occ.occupancy")] == feats["occ.occupancy"]
    assert base[FEATURE_NAMES.index("occ.limiter=registers")] == 1.0
    assert base[FEATURE_NAMES.index("occ.limiter=warps")] == 0.0
    assert math.isnan(base[FEATURE_NAMES.index("static.warp_shuffle")])  # missing is NaN, never 0


def test_trained_scores_do_not_move_with_roofline_fraction(synthetic, trained):
    task = synthetic.tasks[synthetic.impls[0].task_id]
    for ranker, _ in trained.values():
        im = synthetic.impls[0]
        plain = ranker.score(task, im.code, im.features)
        assert ranker.score(task, im.code, {**im.features, "roofline.fraction": 0.01}) == plain
        assert ranker.score(task, im.code, {**im.features, "roofline.fraction": 0.99}) == plain


def test_features_of_a_real_source_come_from_nvcc_and_the_static_analysis(tmp_path, monkeypatch):
    cache = FeatureCache(tmp_path, workers=1)
    feats = cache.get_many([(SAXPY, "c2cuda")])[0]
    assert feats["ptxas.available"] is True and feats["ptxas.registers_max"] > 0
    assert feats["occ.threads_per_block"] == 256
    assert feats["static.frac_coalesced"] == 1.0
    assert not [k for k in feats if k.startswith("roofline")]
    assert set(ALLOWED_FEATURES) & set(feats)
    assert (tmp_path / source_key(SAXPY, "c2cuda", "sm_90")[:2]).is_dir()
    import pipeline.ranker.features as F
    monkeypatch.setattr(F, "_analyze_job", lambda job: pytest.fail("a cached source was analysed again"))
    assert cache.get_many([(SAXPY, "c2cuda")])[0] == feats
