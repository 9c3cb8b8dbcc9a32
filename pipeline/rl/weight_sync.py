"""Weight sync over a collective: learner rank 0 broadcasts the policy to the generators, bucket by bucket.

In: a `SyncGroup` joined by learner rank 0 (rank 0 of the group) and every generator (ranks 1..G),
the learner's gathered buckets (`Learner.export_buckets`: Hugging Face names, full tensors) and the
new weight version. Out, on each generator: the `(name, tensor)` pairs for `Generator.update_weights`.
Touches: one TCP port on rank 0's host (the group's rendezvous) and the collective backend (NCCL
between GPUs, gloo on CPU).

Why a group of its own: the learner ranks already own torch.distributed's default group (DeepSpeed
uses it), and the generators are not learner ranks. So the sync group is a TCPStore plus a gloo or
NCCL backend object built directly on it, outside torch.distributed's global state; its
collectives are called on that object.

Protocol, one sync: for each bucket, rank 0 broadcasts a header (JSON: version, tensor names,
dtypes, shapes) as a length and its bytes, then the bucket's tensors packed into one byte buffer;
a header with no tensors ends the sync. Receivers need no plan in advance, and check that the
version in the header is the one the driver asked them to load. The driver calls the send and
every receive at the same time; all members block until the last bucket has gone through.
"""
from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Literal

import torch
import torch.distributed as dist

TIMEOUT_S = 600.0  # a sync (or the group's rendezvous) that takes longer than this has lost a member
ALIGN_BYTES = 16  # each tensor starts at a multiple of this in a bucket's buffer, so it can be viewed in place


def _padded(nbytes: int) -> int:
    return -(-nbytes // ALIGN_BYTES) * ALIGN_BYTES


class SyncGroup:
    """One member of the learner-to-generators broadcast group (rank 0 is learner rank 0, the sender)."""

    def __init__(self, master_addr: str, master_port: int, rank: int, world_size: int,
                 backend: Literal["gloo", "nccl"], timeout_s: float = TIMEOUT_S):
        if not 0 <= rank < world_size:
            raise ValueError(f"SyncGroup: rank {rank} is outside 0..{world_size - 1}")
        if world_size < 2:
            raise ValueError(f"SyncGroup: world_size = {world_size}; the group needs the sender and a generator")
        timeout = timedelta(seconds=timeout_s)
        self.rank, self.world_size, self.backend = rank, world_size, backend
        self._store = dist.TCPStore(master_addr, master_port, world_size, is_master=rank == 0, timeout=timeout)
        store = dist.PrefixStore("cudaperf-weight-sync", self._store)
        if backend == "gloo":
            self._pg = dist.ProcessGroupGloo(store, rank, world_size, timeout)
            self.device = torch.device("cpu")
        elif backend == "nccl":
            if not hasattr(dist, "ProcessGroupNCCL"):
                raise RuntimeError("SyncGroup: this torch build has no NCCL; use train.weight_sync=object_store "
                                   "or install a CUDA build of torch")
            options = dist.ProcessGroupNCCL.Options()
            options._timeout = timeout
            self._pg = dist.ProcessGroupNCCL(store, rank, world_size, options)
            self.device = torch.device("cuda", torch.cuda.current_device())
        else:
            raise ValueError(f"SyncGroup: backend {backend!r} is not one of 'gloo', 'nccl'")

    def broadcast(self, tensor: torch.Tensor) -> None:
        """Rank 0's `tensor` into every member's `tensor` (same shape and dtype, on `self.device`)."""
        self._pg.broadcast(tensor, 0).wait()

    def _broadcast_header(self, header: dict | None) -> dict:
        length = torch.zeros(1, dtype=torch.int64, device=self.device)
        if self.rank == 0:
            raw = torch.frombuffer(bytearray(json.dumps(header).encode()), dtype=torch.uint8).to(self.device)
            length[0] = raw.numel()
        self.broadcast(length)
        if self.rank != 0:
            raw = torch.empty(int(length.item()), dtype=torch.uint8, device=self.device)
        self.broadcast(raw)
        return json.loads(bytes(raw.cpu().numpy()).decode())


def _dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"weight sync: unknown dtype {name!r} in a header")
    return dtype


def send_weights(group: SyncGroup, buckets: Iterable[list[tuple[str, torch.Tensor]]], version: int) -> dict:
    """Rank 0: broadcast every bucket, then the end marker. Returns {bytes, buckets, seconds} of this sync."""
    if group.rank != 0:
        raise ValueError(f"send_weights: rank {group.rank} of the sync group; only rank 0 (learner rank 0) sends")
    t0 = time.perf_counter()
    total = n = 0
    for bucket in buckets:
        if not bucket:
            continue
        tensors = [t.detach().to(group.device).contiguous() for _, t in bucket]
        group._broadcast_header({"version": version, "tensors": [[name, str(t.dtype), list(t.shape)]
                                                                 for (name, _), t in zip(bucket, tensors)]})
        flat = torch.zeros(sum(_padded(t.numel() * t.element_size()) for t in tensors), dtype=torch.uint8,
                           device=group.device)
        offset = 0
        for t in tensors:
            raw = t.reshape(-1).view(torch.uint8)
            flat[offset:offset + raw.numel()] = raw
            offset += _padded(raw.numel())
        group.broadcast(flat)
        total += flat.numel()
        n += 1
    group._broadcast_header({"version": version, "tensors": []})
    if group.device.type == "cuda":
        torch.cuda.synchronize(group.device)
    return {"bytes": total, "buckets": n, "seconds": time.perf_counter() - t0}


def receive_buckets(group: SyncGroup, version: int) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """Ranks 1..G: the buckets rank 0 sends, as (name, tensor on `group.device`) lists, until the end marker.
    When the sender's version is not `version` (the driver paired two different syncs), the sync is
    received to its end (so the sender is not left waiting) but nothing is yielded, and this raises."""
    wrong = None
    while True:
        header = group._broadcast_header(None)
        if header["version"] != version:
            wrong = header["version"]
        if not header["tensors"]:
            if wrong is not None:
                raise RuntimeError(f"weight sync: the learner sent version {wrong} but this generator was asked "
                                   f"to load version {version}")
            return
        specs = [(name, _dtype(dtype), shape) for name, dtype, shape in header["tensors"]]
        sizes = [torch.Size(shape).numel() * torch.empty(0, dtype=dtype).element_size() for _, dtype, shape in specs]
        flat = torch.empty(sum(_padded(size) for size in sizes), dtype=torch.uint8, device=group.device)
        group.broadcast(flat)
        out, offset = [], 0
        for (name, dtype, shape), size in zip(specs, sizes):
            out.append((name, flat[offset:offset + size].view(dtype).view(shape)))
            offset += _padded(size)
        if wrong is None:
            yield out


def receive_weights(group: SyncGroup, version: int) -> list[tuple[str, torch.Tensor]]:
    """Every (name, tensor) of one sync (the whole model, on `group.device`)."""
    return [pair for bucket in receive_buckets(group, version) for pair in bucket]


def send_from_learner(learner, group: SyncGroup | None, version: int) -> dict:
    """Every learner rank calls this at once (the ZeRO-3 gather is collective); rank 0 passes its `group`
    and broadcasts each gathered bucket, the other ranks pass None and only take part in the gathers.
    Returns send_weights' figures on rank 0, {} elsewhere."""
    if learner.cfg.lora_rank > 0:
        raise ValueError("weight sync over a collective sends the learner's parameters as they are; with LoRA "
                         "(learner.lora_rank > 0) set train.weight_sync=object_store, which merges the adapters")
    if learner.rank == 0 and group is None:
        raise RuntimeError("send_from_learner: learner rank 0 has not joined the sync group; the driver joins it "
                           "(CollectiveWeightSync.connect) before the first sync")
    buckets = learner.export_buckets()
    if group is None:
        for _ in buckets:
            pass
        return {}
    return send_weights(group, buckets, version)
