"""Fixtures of the ranker tests: the synthetic dataset split by family, and trained rankers (session scope:
training is the expensive part, and several tests read the same models)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

TEST_FAMILIES = ["fam00", "fam03", "fam07", "fam10"]
"""Held-out synthetic families (an explicit list: the project's split function is tested elsewhere)."""


@pytest.fixture(scope="session")
def synthetic():
    from _synthetic import synthetic_data
    from pipeline.ranker.dataset import assign_splits
    data = synthetic_data()
    assign_splits(data, TEST_FAMILIES)
    return data


@pytest.fixture(scope="session")
def ranker_cfg():
    from pipeline.core.config import RankerSection
    return RankerSection(gbt_trees=120, neural_epochs=25, feature_workers=1)


@pytest.fixture(scope="session")
def trained(synthetic, ranker_cfg):
    from pipeline.ranker.fit import train_split
    return train_split(synthetic, ranker_cfg, ["gbt", "neural"], seed=0, log=lambda *_: None)
