"""The task generators, one module per group of computation families.

`MODULES` is the registry that `pipeline.tasks.generate.generate_tasks` walks in order: each entry's
module exposes `generate(rng: numpy.random.Generator) -> list[Task]`, and the entry's name is the
seed key of that group's random stream (`numpy.random.default_rng([seed, crc32(name)])`). A name is
therefore part of the dataset: renaming or reordering an entry changes the tasks it makes, and the
measured dataset would no longer match (tests/dataset/test_measured_hashes.py fails). `PARTS` lists
the modules whose generators a group's `generate` calls on the same stream, and `HELPERS` the
modules that only provide code to others, so every module of this package is accounted for here.
"""
from pipeline.tasks.families import (argreduce, colscan, elementwise, filters, gemm, geometry, imaging, layout, misc,
                                    pooling, reductions, rows, sorting, sparse, sparse2, stencil)

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
PARTS = {"reductions": [argreduce], "sparse": [sparse2], "misc": [sorting], "imaging": [pooling]}
HELPERS = [stencil]  # the stencil kernels and configurations that `filters` builds its tasks from
