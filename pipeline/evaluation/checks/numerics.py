"""The float32 numerics that the trusted PyTorch reference and a KernelBench-format candidate share.

The reference computes in full float32: TF32 off for matmul and for cuDNN convolution (PyTorch's own
default leaves cuDNN convolution on TF32). A candidate that keeps torch modules for the parts it does
not rewrite (`nn.Conv2d`, `nn.BatchNorm2d`, ...) runs them in its own process; under PyTorch's defaults
its convolutions would round to TF32 and differ from the reference by about 1e-3 relative, failing a
float32 tolerance through no fault of its own (KernelBench's harness runs both in one process, under
one mode). So the candidate's process is put in the same mode before the candidate loads, and a
candidate that changes it is rejected as a precision downgrade (`REJECTING_FLAGS`).
"""
from __future__ import annotations

DOWNGRADE_FLAG = "precision-downgrade"


def set_full_float32(torch) -> None:
    """Full float32 for matmul and convolution, in this process."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def float32_mode(torch) -> tuple:
    """What decides float32 numerics in this process now (compared before and after a candidate runs)."""
    return (bool(torch.backends.cuda.matmul.allow_tf32), bool(torch.backends.cudnn.allow_tf32),
            torch.get_float32_matmul_precision())


def mode_changes(torch, expected: tuple) -> list[str]:
    """A flag when the float32 mode is no longer `expected` (or can no longer be read: PyTorch refuses
    to report it once its newer `fp32_precision` settings were mixed in, which only a change does)."""
    try:
        now = float32_mode(torch)
    except RuntimeError as e:
        return [f"{DOWNGRADE_FLAG}: the candidate changed torch's float32 mode ({str(e)[:120]}); "
                f"compute in full float32"]
    if now == expected:
        return []
    return [f"{DOWNGRADE_FLAG}: the candidate changed torch's float32 mode (TF32 for matmul, TF32 for "
            f"convolution, matmul precision) from {expected} to {now}; compute in full float32"]
