"""The light candidate format's calling convention, defined once.

A light candidate is one `.cu` file (no torch headers) exporting

    extern "C" int launch(void* const* inputs, void* const* outputs,
                          const int64_t* sizes, cudaStream_t stream);

- `inputs`: device pointers to the tensors returned by the reference's `get_inputs()` in order,
  followed by the reference module's parameters and buffers in `state_dict()` order. All are
  contiguous, in the reference's dtype. Inputs must not be modified.
- `outputs`: device pointers to the output tensors (the reference's return value, or each
  element of a returned tuple), contiguous, allocated by the harness and filled with NaN before
  the call: every element must be written.
- `sizes`: the shapes, SIZES_STRIDE int64 values per tensor, tensors numbered inputs first,
  then outputs: `sizes[SIZES_STRIDE*i]` is the rank of tensor i and
  `sizes[SIZES_STRIDE*i + 1 + d]` its extent in dimension d (at most SIZES_STRIDE - 1 dims).
- `stream`: the stream to launch on. Work on other streams or threads is not allowed.
- Return 0 on success. A non-zero value is recorded, but the verdict comes only from the
  harness's own reading of the output buffers.
"""
from __future__ import annotations

SIZES_STRIDE = 8
ENTRY_POINT = "launch"
SIGNATURE = ("extern \"C\" int launch(void* const* inputs, void* const* outputs, "
             "const int64_t* sizes, cudaStream_t stream)")


def pack_sizes(shapes: list[tuple[int, ...]]) -> list[int]:
    """The `sizes` array for tensors with these shapes (inputs first, then outputs)."""
    out: list[int] = []
    for shape in shapes:
        if len(shape) > SIZES_STRIDE - 1:
            raise ValueError(f"tensor of rank {len(shape)} exceeds the light format's limit of {SIZES_STRIDE - 1}")
        row = [len(shape), *shape]
        out += row + [0] * (SIZES_STRIDE - len(row))
    return out


def describe(input_shapes: list[tuple[int, ...]], output_shapes: list[tuple[int, ...]]) -> str:
    """Plain-text description of the calling convention for one configuration (used in prompts)."""
    lines = [SIGNATURE]
    for i, s in enumerate(input_shapes):
        lines.append(f"inputs[{i}]: shape {tuple(s)}  (sizes[{SIZES_STRIDE * i}..])")
    n = len(input_shapes)
    for j, s in enumerate(output_shapes):
        lines.append(f"outputs[{j}]: shape {tuple(s)}  (sizes[{SIZES_STRIDE * (n + j)}..])")
    return "\n".join(lines)
