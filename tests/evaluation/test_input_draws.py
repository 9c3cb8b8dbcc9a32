"""Inputs drawn from a task's initialisers, on the host (numpy, the checked sets) and on a device (torch, the
timed rounds' fresh inputs): the same law either way, records laid out as an array of structs."""
import numpy as np
import pytest

from pipeline.evaluation.checks.input_draws import draw_on_device, draw_on_host
from pipeline.tasks import parse_init

torch = pytest.importorskip("torch")

RECORDS = "records(randint(0, m), randint(0, k), uniform(-1, 1), sorted_by=2)"


def _host(dtype: str, n: int, text: str, params: dict, seed: int = 0) -> np.ndarray:
    return draw_on_host(np.random.default_rng(seed), dtype, n, parse_init(text, params))


def _device(dtype: str, n: int, text: str, params: dict, seed: int = 0) -> np.ndarray:
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed)
    t = draw_on_device(gen, dtype, n, parse_init(text, params), device="cpu")
    assert str(t.dtype) == f"torch.{dtype}" and t.numel() == n
    return t.view(torch.int64 if dtype == "uint64" else t.dtype).numpy().view(dtype)


@pytest.mark.parametrize("draw", [_host, _device], ids=["host", "device"])
def test_records_are_structs_of_their_fields_sorted_by_the_leading_ones(draw):
    params = {"m": 50, "k": 7}
    words = draw("uint64", 3 * 4000, RECORDS, params)
    rows, cols = words[0::3], words[1::3]
    values = words[2::3].view(np.float64)
    assert rows.min() == 0 and rows.max() == 49 and cols.min() == 0 and cols.max() == 6
    assert values.min() >= -1 and values.max() < 1 and abs(values.mean()) < 0.05 and values.std() > 0.5
    keys = rows * 7 + cols
    assert np.all(np.diff(keys.astype(np.int64)) >= 0), "records are not sorted by (row, column)"
    assert len(np.unique(keys)) > 300  # the sort kept the records whole: many distinct (row, column) pairs
    unsorted = draw("uint64", 3 * 4000, RECORDS.replace("sorted_by=2", "sorted_by=0"), params)
    assert np.any(np.diff((unsorted[0::3] * 7 + unsorted[1::3]).astype(np.int64)) < 0)


@pytest.mark.parametrize("draw", [_host, _device], ids=["host", "device"])
def test_4_byte_records_store_float32_fields(draw):
    words = draw("int32", 2 * 1000, "records(randint(-5, 5), uniform(10, 20))", {})
    assert words[0::2].min() == -5 and words[0::2].max() == 4
    floats = words[1::2].view(np.float32)
    assert floats.min() >= 10 and floats.max() < 20


@pytest.mark.parametrize("draw", [_host, _device], ids=["host", "device"])
def test_bytes_of_zero_or_one(draw):
    b = draw("uint8", 10000, "randint(0, 2)", {})
    assert b.dtype == np.uint8 and set(np.unique(b)) == {0, 1} and 0.45 < b.mean() < 0.55


@pytest.mark.parametrize("draw", [_host, _device], ids=["host", "device"])
def test_a_graph_is_a_symmetric_adjacency_matrix_without_loops(draw):
    n = 400
    a = draw("int32", n * n, "graph(n, 4.0 / n)", {"n": n}).reshape(n, n)
    assert np.array_equal(a, a.T) and not a.diagonal().any() and set(np.unique(a)) == {0, 1}
    edges = a.sum() / 2
    assert 0.7 * 4 * (n - 1) / 2 < edges < 1.3 * 4 * (n - 1) / 2  # about p * n(n-1)/2
