"""Stencil and convolution families (kernels in stencil.py): stencil_1d, stencil_2d, stencil_3d
(constant taps: star, box and diagonal-cross patterns with seeded weights), conv1d, conv2d,
conv3d (a K^d filter given as an input) and image_filter (named image filters: blurs, sharpening,
Laplacians, embossing, gradient magnitudes). Each with zero or clamped boundaries and a post
operator; torch2cuda versions use F.conv1d/2d/3d on (planes, 1, ...) tensors.
"""
from __future__ import annotations

from pipeline.tasks.families._kit import DOUBLE, FLOAT, TorchModule, torch_task
from pipeline.tasks.families.stencil import Stencil, implementations, offsets, stencil_configs, stencil_task
from pipeline.core.records import Tolerance

POSTS = {  # name: (C over a0, a1, xc; torch over a0, a1, x)
    "id": ("a0", "a0"),
    "relu": ("fmax${F}(a0, 0.0${C})", "torch.relu(a0)"),
    "abs": ("fabs${F}(a0)", "torch.abs(a0)"),
    "tanh": ("tanh${F}(a0)", "torch.tanh(a0)"),
    "sigmoid": ("1.0${C} / (1.0${C} + exp${F}(-a0))", "torch.sigmoid(a0)"),
    "plus_center": ("a0 + 0.5${C} * xc", "a0 + 0.5 * x"),
    "times_center": ("a0 * xc", "a0 * x"),
    "clamp01": ("fmin${F}(fmax${F}(a0, 0.0${C}), 1.0${C})", "torch.clamp(a0, 0.0, 1.0)"),
    "clamp_sym": ("fmin${F}(fmax${F}(a0, -1.0${C}), 1.0${C})", "torch.clamp(a0, -1.0, 1.0)"),
    "square": ("a0 * a0", "a0 * a0"),
}
POSTS2 = {"mag": ("sqrt${F}(a0 * a0 + a1 * a1)", "torch.sqrt(a0 * a0 + a1 * a1)"),
          "l1mag": ("fabs${F}(a0) + fabs${F}(a1)", "torch.abs(a0) + torch.abs(a1)"),
          "diff": ("a0 - a1", "a0 - a1"), "max_abs": ("fmax${F}(fabs${F}(a0), fabs${F}(a1))",
                                                    "torch.maximum(torch.abs(a0), torch.abs(a1))")}
# posts of stencils with seeded weights: no clamp to [0, 1], which can zero a whole output when the
# weights sum below zero (image filters, whose weights sum to one, keep it)
STENCIL_POSTS = [p if p != "clamp01" else "clamp_sym" for p in POSTS if p != "clamp_sym"]
_CONV = {1: "F.conv1d", 2: "F.conv2d", 3: "F.conv3d"}
_SHAPE = {1: "(planes, 1, n)", 2: "(planes, 1, h, w)", 3: "(planes, 1, d, h, w)"}


def _dense(dims: int, radius: int, taps) -> list:
    """Taps as a dense nested list of weights (side 2r+1) for torch's conv."""
    side = 2 * radius + 1
    flat = [0.0] * side ** dims
    for off, w in taps:
        idx = 0
        for o in off:
            idx = idx * side + (o + radius)
        flat[idx] = w
    return flat


TORCH_STENCIL_TOL = Tolerance(rtol=1e-4, atol=1e-4)
"""PyTorch's reference is cuDNN's convolution, which sums the taps in its own order: where taps of
both signs cancel to near 0, two correct sums differ by more than 1e-5 of the output's RMS (a few
points in millions on the H200)."""


def _torch_stencil(family, variant, s: Stencil, tpost: str, description: str, flops: int):
    dims, R = s.dims, s.radius
    side = 2 * R + 1
    view = ", ".join(["1", "1"] + [str(side)] * dims)
    conv = _CONV[dims]
    lines, init = [], []
    if s.boundary == "clamp":
        lines.append(f"xp = F.pad(x, {(R,) * (2 * dims)}, mode='replicate')")
        src, pad = "xp", ""
    else:
        src, pad = "x", f", padding={R}"
    if s.k:
        init = [f"self.weight = nn.Parameter(torch.rand({view}) - 0.5)"]
        lines.append(f"a0 = {conv}({src}, self.weight{pad})")
    else:
        for k, taps in enumerate(s.taps):
            w = ", ".join(repr(v) for v in _dense(dims, R, taps))
            lines.append(f"w{k} = torch.tensor([{w}], dtype=x.dtype, device=x.device).reshape({view})")
            lines.append(f"a{k} = {conv}({src}, w{k}{pad})")
    lines.append(f"return {tpost}")
    sizes = {1: {"planes": 16, "n": 65536}, 2: {"planes": 4, "h": 512, "w": 512}, 3: {"planes": 1, "d": 64, "h": 64, "w": 64}}
    module = TorchModule([("x", f"torch.rand{_SHAPE[dims]}")], lines, sizes[dims], init=init)
    dims_idx = {1: "int planes = (int)dim_of(sizes, 0, 0), n = (int)dim_of(sizes, 0, 2);\n    run(planes, n, ",
                2: "int planes = (int)dim_of(sizes, 0, 0), h = (int)dim_of(sizes, 0, 2), w = (int)dim_of(sizes, 0, 3);\n"
                   "    run(planes, h, w, ",
                3: "int planes = (int)dim_of(sizes, 0, 0), d = (int)dim_of(sizes, 0, 2), h = (int)dim_of(sizes, 0, 3), "
                   "w = (int)dim_of(sizes, 0, 4);\n    run(planes, d, h, w, "}[dims]
    launch = ("    " + dims_idx + "(const float*)inputs[0], " + ("(const float*)inputs[1], " if s.k else "")
              + "(float*)outputs[0], stream);")
    total = "*".join(s.sizes())
    return torch_task(family, variant, module.source(), stencil_configs(dims, FLOAT), f"{flops}*{total}",
                      f"8*{total}", implementations(s), launch, TORCH_STENCIL_TOL, description)


def _weights(rng, n: int) -> list[float]:
    return [round(float(v), 3) for v in rng.uniform(-1, 1, n)]


def const_stencil_tasks(rng, dims: int, shapes: list[tuple[str, int]], count: int, family: str) -> list:
    out = []
    post_names = STENCIL_POSTS
    k = 0
    while len(out) < count:
        shape, radius = shapes[k % len(shapes)]
        offs = offsets(dims, shape, radius)
        taps = list(zip(offs, _weights(rng, len(offs))))
        boundary = ("zero", "clamp")[(k // len(shapes)) % 2]
        post = post_names[(k * 5 + k // 7) % len(post_names)]
        make_torch = k % 3 == 0
        variant = f"{shape}_r{radius}_{boundary}_{post}_{k}"
        desc = f"{len(offs)}-point {shape} stencil (radius {radius}, seeded weights), {boundary} boundary, then {post}"
        if make_torch:
            s = Stencil(dims, FLOAT, [taps], boundary=boundary, post=POSTS[post][0])
            out.append(_torch_stencil(family, variant, s, POSTS[post][1], desc, 2 * len(offs)))
        else:
            dt = (FLOAT, DOUBLE)[k % 2]
            s = Stencil(dims, dt, [taps], boundary=boundary, post=POSTS[post][0])
            out.append(stencil_task(family, f"{variant}_{dt.name}", s, desc + f", {dt.name}", 2 * len(offs)))
        k += 1
    return out


def conv_tasks(rng, dims: int, ks: list[int], count: int) -> list:
    """`count` distinct (filter size, boundary, post, kind) combinations in a seeded order."""
    family = f"conv{dims}d"
    items = [(K, b, p, kind) for K in ks for b in ("zero", "clamp") for p in STENCIL_POSTS
             for kind in ("torch", "float", "double")]
    out = []
    for i in rng.permutation(len(items))[:count]:
        K, boundary, post, kind = items[i]
        variant = f"k{K}_{boundary}_{post}"
        desc = f"{dims}-D convolution with a {K}^{dims} filter input, {boundary} boundary, then {post}"
        if kind == "torch":
            s = Stencil(dims, FLOAT, k=K, boundary=boundary, post=POSTS[post][0])
            out.append(_torch_stencil(family, variant, s, POSTS[post][1], desc, 2 * K ** dims))
        else:
            dt = FLOAT if kind == "float" else DOUBLE
            s = Stencil(dims, dt, k=K, boundary=boundary, post=POSTS[post][0])
            out.append(stencil_task(family, f"{variant}_{dt.name}", s, desc + f", {dt.name}", 2 * K ** dims))
    return out


def _g(n):
    row = {3: [1, 2, 1], 5: [1, 4, 6, 4, 1]}[n]
    tot = sum(row) ** 2
    r = n // 2
    return [((dy - r, dx - r), row[dy] * row[dx] / tot) for dy in range(n) for dx in range(n)]


def _box(n):
    r = n // 2
    return [((dy, dx), 1.0 / (n * n)) for dy in range(-r, r + 1) for dx in range(-r, r + 1)]


def _sparse(rows):
    r = len(rows) // 2
    return [((dy - r, dx - r), float(v)) for dy, row in enumerate(rows) for dx, v in enumerate(row) if v]


IMAGE_FILTERS = {  # name: (list of tap sets, post over a0/a1 or None for the default posts)
    "box3": ([_box(3)], None), "box5": ([_box(5)], None), "gauss3": ([_g(3)], None), "gauss5": ([_g(5)], None),
    "sharpen": ([_sparse([[0, -1, 0], [-1, 5, -1], [0, -1, 0]])], None),
    "laplacian4": ([_sparse([[0, 1, 0], [1, -4, 1], [0, 1, 0]])], None),
    "laplacian8": ([_sparse([[1, 1, 1], [1, -8, 1], [1, 1, 1]])], None),
    "emboss": ([_sparse([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]])], None),
    "sobel": ([_sparse([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]]), _sparse([[-1, -2, -1], [0, 0, 0], [1, 2, 1]])], "pair"),
    "prewitt": ([_sparse([[-1, 0, 1], [-1, 0, 1], [-1, 0, 1]]), _sparse([[-1, -1, -1], [0, 0, 0], [1, 1, 1]])], "pair"),
    "scharr": ([_sparse([[-3, 0, 3], [-10, 0, 10], [-3, 0, 3]]), _sparse([[-3, -10, -3], [0, 0, 0], [3, 10, 3]])], "pair"),
    "dog": ([_g(5), _g(3)], "pair"),
    "unsharp": ([_g(3)], "unsharp"),
    "edge_boost": ([_sparse([[0, 1, 0], [1, -4, 1], [0, 1, 0]])], "boost"),
}


def image_filter_tasks(rng) -> list:
    out = []
    k = 0
    for name, (tapsets, kind) in IMAGE_FILTERS.items():
        if kind == "pair":
            posts = POSTS2
        elif kind == "unsharp":
            posts = {f"amount{a}".replace(".", "p"): (f"xc + {a}${{C}} * (xc - a0)", f"x + {a} * (x - a0)") for a in (0.5, 1.0, 1.5, 2.0)}
        elif kind == "boost":
            posts = {f"amount{a}".replace(".", "p"): (f"fmin${{F}}(fmax${{F}}(xc - {a}${{C}} * a0, 0.0${{C}}), 1.0${{C}})",
                                    f"torch.clamp(x - {a} * a0, 0.0, 1.0)") for a in (0.25, 0.5, 1.0)}
        else:
            posts = {p: POSTS[p] for p in ("id", "clamp01", "abs", "square", "times_center")}
        for post, (cpost, tpost) in posts.items():
            for boundary in ("clamp", "zero"):
                variant = f"{name}_{post}_{boundary}"
                desc = f"{name} image filter, {boundary} boundary, then {post}"
                if k % 3 == 0:
                    s = Stencil(2, FLOAT, tapsets, boundary=boundary, post=cpost)
                    out.append(_torch_stencil("image_filter", variant, s, tpost, desc, 20))
                else:
                    dt = (FLOAT, DOUBLE)[k % 2]
                    s = Stencil(2, dt, tapsets, boundary=boundary, post=cpost)
                    out.append(stencil_task("image_filter", f"{variant}_{dt.name}", s, desc, 20))
                k += 1
    return out


def generate(rng) -> list:
    return (const_stencil_tasks(rng, 1, [("star", 1), ("star", 2), ("star", 3), ("star", 4)], 180, "stencil_1d")
            + const_stencil_tasks(rng, 2, [("star", 1), ("star", 2), ("box", 1), ("box", 2), ("cross", 1), ("cross", 2)],
                                  200, "stencil_2d")
            + const_stencil_tasks(rng, 3, [("star", 1), ("star", 2), ("box", 1), ("cross", 1)], 160, "stencil_3d")
            + conv_tasks(rng, 1, [3, 5, 7, 9, 11, 15], 120)
            + conv_tasks(rng, 2, [3, 5, 7], 120)
            + conv_tasks(rng, 3, [3, 5], 75)
            + image_filter_tasks(rng))
