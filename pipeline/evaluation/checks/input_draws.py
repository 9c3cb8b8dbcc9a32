"""Inputs drawn as a c2cuda task's arguments declare them: uniform(lo, hi), randint(lo, hi), records(...), graph(n, p).

In: a random generator (numpy on the host, torch on a device), a dtype name, an element count and an
initialiser as `pipeline.tasks.parse_init` gives it, evaluated at a configuration's parameters.
Out: a flat array of `n` elements: numpy (`draw_on_host`, the check sets) or a torch tensor made on the
device (`draw_on_device`, the timed rounds' fresh inputs), drawn by the same rules.
"""
from __future__ import annotations

import numpy as np

from pipeline.evaluation.checks.group_data import torch_dtype

_FLOAT_OF_WIDTH = {4: "float32", 8: "float64"}  # records(...): a uniform field in a 4- or 8-byte element
_DRAWS = "use uniform(lo,hi), randint(lo,hi), records(...) or graph(n, p)"


def draw_on_host(rng: np.random.Generator, dtype: str, n: int, init: tuple) -> np.ndarray:
    """`n` elements of `dtype` drawn as `init` (parse_init's, evaluated) says, on the host."""
    kind = init[0]
    if kind == "records":
        return _records(rng, dtype, n, init[1], init[2])
    if kind == "graph":
        upper = np.triu(rng.random((init[1], init[1])) < init[2], 1)
        return (upper | upper.T).astype(dtype).reshape(-1)
    _, lo, hi = init
    if kind == "randint":
        return rng.integers(lo, hi, size=n).astype(dtype)
    if kind == "uniform":
        return rng.uniform(lo, hi, size=n).astype(dtype)
    raise ValueError(f"pointer argument initialised with {kind!r}: {_DRAWS}")


def _records(rng: np.random.Generator, dtype: str, n: int, fields: tuple, sort_keys: int) -> np.ndarray:
    """n // len(fields) records of one element per field, interleaved as an array of structs lays them out;
    a uniform field's floats are stored bit for bit in the element; sorted by the first `sort_keys` fields."""
    dt = np.dtype(dtype)
    rows = n // len(fields)
    cols = [rng.integers(lo, hi, size=rows).astype(dt) if kind == "randint"
            else rng.uniform(lo, hi, size=rows).astype(_FLOAT_OF_WIDTH[dt.itemsize]).view(dt)
            for kind, lo, hi in fields]
    if sort_keys:  # np.lexsort's last key is the most significant
        order = np.lexsort(tuple(cols[j] for j in reversed(range(sort_keys))))
        cols = [c[order] for c in cols]
    return np.stack(cols, axis=1).reshape(-1)


def draw_on_device(gen, dtype: str, n: int, init: tuple, device: str = "cuda"):
    """As `draw_on_host`, but a torch tensor made on `device` with the torch generator `gen`."""
    import torch
    kind = init[0]
    if kind == "uniform":
        return torch.empty(n, dtype=torch_dtype(dtype), device=device).uniform_(init[1], init[2], generator=gen)
    if kind == "randint":
        return torch.randint(int(init[1]), int(init[2]), (n,), generator=gen, device=device).to(torch_dtype(dtype))
    if kind == "graph":
        upper = torch.triu(torch.rand((init[1], init[1]), generator=gen, device=device) < init[2], 1)
        return (upper | upper.T).to(torch_dtype(dtype)).reshape(-1)
    if kind != "records":
        raise ValueError(f"pointer argument initialised with {kind!r}: {_DRAWS}")
    fields, sort_keys = init[1], init[2]
    width = np.dtype(dtype).itemsize
    ints, floats = {4: (torch.int32, torch.float32), 8: (torch.int64, torch.float64)}[width]
    rows = n // len(fields)
    cols = [torch.randint(int(lo), int(hi), (rows,), generator=gen, device=device).to(ints) if kind == "randint"
            else torch.empty(rows, dtype=floats, device=device).uniform_(lo, hi, generator=gen).view(ints)
            for kind, lo, hi in fields]
    if sort_keys:  # stable sorts from the least significant key to the most
        order = torch.arange(rows, device=device)
        for j in reversed(range(sort_keys)):
            order = order[torch.sort(cols[j][order], stable=True).indices]
        cols = [c[order] for c in cols]
    return torch.stack(cols, dim=1).reshape(-1).view(torch_dtype(dtype))
