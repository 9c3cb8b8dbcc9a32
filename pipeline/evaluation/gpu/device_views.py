"""Torch tensors that view raw device buffers (no copy), for both sides of the evaluator.

The trusted side owns buffers allocated with the driver API and exported over CUDA IPC; the
child maps them. Both read and write them through torch tensors made here, via the
`__cuda_array_interface__` protocol that torch accepts.
"""
from __future__ import annotations

import torch

TYPESTR = {"float32": "<f4", "float64": "<f8", "float16": "<f2", "int32": "<i4", "int64": "<i8",
           "uint8": "|u1", "int8": "|i1", "bool": "|b1", "int16": "<i2", "uint32": "<u4", "uint64": "<u8"}


class _CudaBuffer:
    def __init__(self, ptr: int, shape, typestr: str):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, False),
                                         "version": 3, "strides": None}


def view(ptr: int, shape, dtype: str) -> torch.Tensor:
    """A torch tensor over `ptr` with this shape and dtype name (numpy-style, or 'bfloat16')."""
    if dtype == "bfloat16":
        return torch.as_tensor(_CudaBuffer(ptr, shape, "<i2"), device="cuda").view(torch.bfloat16)
    return torch.as_tensor(_CudaBuffer(ptr, shape, TYPESTR[dtype]), device="cuda")
