"""The torch operators a strict candidate's forward may run: allocation, views and metadata.

The child's runtime check (torch_guard) and the artefact check of KernelBench extensions (artifact.py) read
the same lists. Plain data, so the child can import it with nothing beyond the standard library.
"""
ALLOWED_OPS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "zero_", "fill_", "view", "_unsafe_view", "reshape", "as_strided", "detach", "alias",
    "t", "transpose", "permute", "expand", "squeeze", "unsqueeze", "slice", "select", "split",
    "split_with_sizes", "unbind", "chunk", "lift_fresh", "_local_scalar_dense", "size", "stride",
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "numel", "dim", "is_contiguous",
    "is_non_overlapping_and_dense", "_reshape_alias", "view_as", "flatten", "unflatten", "set_",
    "record_stream", "resize_",
}


# Composite operators the profiler lists but a dispatch mode never sees (they decompose above the
# Python key into the ALLOWED_OPS, or into a computing operator that is then listed as well).
VIEW_COMPOSITES = {"contiguous", "to", "reshape", "flatten", "view_as", "expand_as", "narrow", "item", "type_as",
                   "resolve_conj", "resolve_neg", "cuda", "is_same_size", "requires_grad_", "data", "clone_if_needed"}
