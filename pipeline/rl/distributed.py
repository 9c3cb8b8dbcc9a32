"""The learner's process group: joining it, and the few collectives the learner needs.

In: this process's rank, the world size and the rendezvous address (from the driver or a test).
Out: an initialised torch.distributed group that DeepSpeed uses. Touches: the environment
variables DeepSpeed reads (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, and
DS_ACCELERATOR=cpu for gloo), which is why this is the one place that sets them.

On CPU (tests, laptops) the backend is gloo and DeepSpeed runs with its CPU accelerator; without
these variables DeepSpeed goes looking for MPI (mpi4py). On GPU hosts the backend is nccl and
each rank first selects its local GPU.
"""
from __future__ import annotations

import os
import socket
from typing import Literal

import torch
import torch.distributed as dist

# Set in every process of a run, the ones Ray starts included (actors/cluster.py start_ray passes it as
# Ray's runtime_env): NVLink multicast (NVLS) stays off in NCCL, torch's symmetric memory and NVSHMEM.
# On shared multi-GPU hosts a program using multicast can take the host's GPUs out of service.
COLLECTIVE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def free_port() -> int:
    """A TCP port free on this host right now (for a local rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_process_group(rank: int, world_size: int, master_port: int, master_addr: str = "127.0.0.1",
                       local_rank: int | None = None, backend: Literal["gloo", "nccl"] = "gloo") -> None:
    """Join (or, for rank 0, open) the learner's process group; a no-op when one exists.

    Call it in every learner process before building a `Learner`. gloo selects DeepSpeed's CPU
    accelerator; nccl binds the process to GPU `local_rank` (default: `rank`).
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside 0..{world_size - 1}")
    local = rank if local_rank is None else local_rank
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world_size), "LOCAL_RANK": str(local),
                       "MASTER_ADDR": master_addr, "MASTER_PORT": str(master_port)})
    if backend == "gloo":
        os.environ["DS_ACCELERATOR"] = "cpu"
    elif backend == "nccl":
        torch.cuda.set_device(local)
    else:
        raise ValueError(f"backend {backend!r} is not one of 'gloo', 'nccl'")
    if dist.is_initialized():
        return
    import deepspeed  # imported here: DS_ACCELERATOR must be set before DeepSpeed picks its accelerator

    if backend == "gloo":
        # DeepSpeed's CPU backend JIT-compiles a shared-memory all-reduce kernel on first use (about
        # a minute of g++); gloo alone is all CPU runs need, so mark that op unavailable.
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    deepspeed.init_distributed(dist_backend=backend, auto_mpi_discovery=False)


def rank_and_world() -> tuple[int, int]:
    """(rank, world size) of the initialised group; (0, 1) without one."""
    if not dist.is_initialized():
        return 0, 1
    return dist.get_rank(), dist.get_world_size()


def _device() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device()) if dist.is_initialized() and \
        dist.get_backend() == "nccl" else torch.device("cpu")


def all_reduce(values: list[float], op: Literal["sum", "max"] = "sum") -> list[float]:
    """Element-wise sum or max of a list of floats over all ranks (every rank must call it)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return [float(v) for v in values]
    t = torch.tensor(values, dtype=torch.float64, device=_device())
    dist.all_reduce(t, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
    return t.cpu().tolist()


def barrier() -> None:
    """Wait for every rank; a no-op without a group."""
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()
