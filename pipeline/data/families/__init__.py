"""The task generators, one module per group of computation families.

Each module exposes `generate(rng: numpy.random.Generator) -> list[Task]`; `MODULES` is the plain
registry that `pipeline.data.generate.generate_tasks` walks in order.
"""
from pipeline.data.families import colscan, elementwise, filters, gemm, geometry, imaging, layout, misc, reductions, rows, sparse

MODULES = {
    "elementwise": elementwise,
    "reductions": reductions,
    "rows": rows,
    "colscan": colscan,
    "layout": layout,
    "gemm": gemm,
    "filters": filters,
    "sparse": sparse,
    "geometry": geometry,
    "misc": misc,
    "imaging": imaging,
}
