"""The candidate's child process: harness code that runs one candidate on buffers the evaluator owns.

Started by `sandbox.ChildProcess` as `python -m pipeline.evaluation.child.main FD_IN FD_OUT`, one
process per candidate (or per trusted baseline). It talks JSON lines over two private pipes
(never stdout, which the candidate may write to). Messages from the evaluator:
  hello {scratch, user, isolate_network, preload_torch} -> applies the sandbox, reports what held
  probe {}                       -> the device name (and the driver bound for empty batches)
  map   {arenas, buffers}        -> the CUDA context and the group's buffers mapped (trusted: before any
                                    candidate code, so a warm child waits with them mapped; warm.py)
  load  {format, artifact, entry, source, extensions, arenas, buffers, calls, torch_compute}
        (arenas and buffers may be left out after `map`)
        arenas: IPC handles of the group's device allocations ('' where not mapped here);
        buffers: each {arena, offset, nbytes} within them;
        calls: per configuration, the call spec of each slot (a set of buffers);
        torch_compute: whether torch may compute in forward (eval.gate_profile's rule)
  call  {config, slot}           -> runs the candidate once on that slot's buffers, syncs
  run   {config, slots}          -> one call per listed slot, in order, a device-wide sync after each
        (trusted children: slots [] with `launches` and `fill_bytes`: that many memsets of that size,
        and with `harness` "kernelbench" each wrapped as a KernelBench-format call is: `calibration_batch`)
  status {}                      -> the runtime checks' flags (kernelbench: patched functions, threads)
  free_scratch {}                -> trusted children: the calibration scratch freed (its group has ended)
  exit
`run` answers with `events_ms`, the sum of its calls' times from CUDA events of this process, a pair
around each call (`timed_call`: for a KernelBench-format candidate the forward alone, as KernelBench's
own harness times it; the checks of its result and the copy into the output buffer come after the end
mark). That is a claim, which the evaluator accepts only where its own clock (from sending `run` until
it has seen the right outputs and its probe on the GPU completed, less what a trusted batch of the same
shape costs besides its calls) allows it, and it checks every slot's outputs.
What this protects against, and what not: the candidate cannot touch the evaluator's memory
except the buffers mapped here; its crash, illegal address or hang ends this process only (the
evaluator kills it on a deadline). Everything in this process (this harness code included) is
the candidate's to rewrite, so nothing it reports is believed except bad news: the verdict comes
from the trusted side's buffers, clock and deadlines; the OS sandbox bounds what it can reach.
"""
from __future__ import annotations

import ctypes
import json
import os
import sys
import threading
import time

from pipeline.evaluation.gpu.driver import CudaError, Driver
from pipeline.evaluation.checks.numerics import float32_mode, mode_changes, set_full_float32

CLONE_NEWNET = 0x40000000
CTYPES = {"int": ctypes.c_int, "unsigned int": ctypes.c_uint, "unsigned": ctypes.c_uint, "long": ctypes.c_long,
          "int64_t": ctypes.c_int64, "long long": ctypes.c_longlong, "size_t": ctypes.c_size_t,
          "float": ctypes.c_float, "double": ctypes.c_double, "int32_t": ctypes.c_int32,
          "uint32_t": ctypes.c_uint32, "uint64_t": ctypes.c_uint64, "unsigned char": ctypes.c_ubyte,
          "uint8_t": ctypes.c_uint8}


def apply_sandbox(hello: dict) -> dict:
    """Limits and the seccomp allow-list, before any candidate code runs; returns what held.

    With sandbox 'bwrap' the namespaces (uid 65534, no network, read-only mounts) were set up by
    bubblewrap before this process started; with 'none' this enters a network namespace where
    it may and drops to `user` when it runs as root. Torch (trusted harness code) is imported
    first when asked; the seccomp filter (seccomp.py) comes last and holds for the rest of the
    process: no exec, no child processes, no sockets but AF_UNIX, no ptrace, no mounts.
    """
    import pwd
    import resource
    from pipeline.evaluation.child import landlock, seccomp
    applied: dict = {}
    for lim, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, 256 << 20)):
        try:
            resource.setrlimit(lim, (value, value))
        except (ValueError, OSError):
            pass
    os.chdir(hello["scratch"])
    tmp = hello.get("tmp") or hello["scratch"]
    os.environ.update(HOME=tmp, TMPDIR=tmp)
    if hello.get("isolate_network"):
        ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWNET)
    if hello.get("preload_torch"):  # before the filter and, with 'none', before dropping privileges
        import pipeline.evaluation.child.torch_guard  # noqa: F401
    user = hello.get("user") or ""
    if hello.get("sandbox") == "none" and user and os.geteuid() == 0:
        pw = pwd.getpwnam(user)  # the evaluator checked that it exists
        os.setgroups([])
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)
    applied["uid"] = os.getuid()
    try:
        applied["user"] = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        applied["user"] = str(os.getuid())
    with open("/proc/net/dev") as f:  # this process's network namespace: only 'lo' when isolated
        applied["network_isolated"] = [ln.split(":")[0].strip() for ln in f.readlines()[2:]] in ([], ["lo"])
    try:  # the CUDA context now: its driver names its threads through /proc/self/task/*/comm, which the file
        applied["driver"] = Driver(0)  # allow-list then closes (cuInit fails with an OS error behind it)
    except (CudaError, OSError) as e:  # no GPU here: the first request that needs one reports it
        applied["cuda_error"] = str(e)
    if "driver" in applied and hello.get("preload_torch"):  # torch's runtime on that context too, its threads
        try:                                                # started and named
            import torch
            torch.cuda.init()
            torch.empty(1, device="cuda")
        except Exception as e:  # the candidate's load reports what is wrong with torch's CUDA
            applied["cuda_error"] = f"torch: {e}"
    if hello.get("access"):  # the kernel's file allow-list (landlock.py), before any candidate code
        try:
            applied.update(landlock.restrict(hello["access"]))
        except landlock.LandlockFailed as e:
            if hello.get("sandbox") != "none":
                raise
            applied["landlock_error"] = str(e)
    applied["seccomp"] = False
    if hello.get("libseccomp"):
        try:
            applied["seccomp_rules"] = seccomp.install(hello["libseccomp"])
            applied["seccomp"] = True
        except seccomp.SeccompUnavailable as e:
            if hello.get("sandbox") != "none":
                raise  # the child stops here; the evaluator reports its log
            applied["seccomp_error"] = str(e)
    return applied


class NativeRunner:
    """c2cuda and light candidates: a shared library called through ctypes."""

    def __init__(self, msg: dict, ptrs: list[int], spans: list[tuple[int, int]]):
        self.lib = ctypes.CDLL(msg["artifact"], mode=os.RTLD_LOCAL | os.RTLD_NOW)
        self.fn = getattr(self.lib, msg["entry"])
        self.light = msg["format"] == "light"
        self.fn.restype = ctypes.c_int if self.light else None
        self.flags: list[str] = []
        self.calls = [[self._prepare(spec, ptrs) for spec in slots] for slots in msg["calls"]]

    def _prepare(self, spec: dict, ptrs: list[int]):
        if self.light:
            ins = (ctypes.c_void_p * max(len(spec["inputs"]), 1))(*[ptrs[b] for b in spec["inputs"]])
            outs = (ctypes.c_void_p * max(len(spec["outputs"]), 1))(*[ptrs[b] for b in spec["outputs"]])
            sizes = (ctypes.c_int64 * max(len(spec["sizes"]), 1))(*spec["sizes"])
            return (ins, outs, sizes, ctypes.c_void_p(0))
        args = []
        for kind, *rest in spec["args"]:
            if kind == "ptr":
                args.append(ctypes.c_void_p(ptrs[rest[0]]))
            else:
                ctype, value = rest
                args.append(CTYPES[ctype](value))
        return tuple(args)

    def call(self, config: int, slot: int = 0) -> int:
        ret = self.fn(*self.calls[config][slot])
        return int(ret) if self.light else 0

    def timed_call(self, config: int, slot: int, start, end) -> int:
        """One call between the marks of its CUDA events."""
        args = self.calls[config][slot]
        start()
        ret = self.fn(*args)
        end()
        return int(ret) if self.light else 0

    def status(self) -> list[str]:
        return self.flags


class TorchRunner:
    """KernelBench-format candidates: candidate Python with prebuilt extensions, runtime checks on."""

    def __init__(self, msg: dict, ptrs: list[int], spans: list[tuple[int, int]]):
        import torch
        from pipeline.evaluation.child import torch_guard
        self.torch, self.guard = torch, torch_guard
        self.memory = torch_guard.HarnessMemory(spans)  # a result in these buffers is refused (output-aliasing)
        self.torch_compute = bool(msg.get("torch_compute", False))  # the gate profile's; the gate stays outside
        self.flags: list[str] = []
        set_full_float32(torch)  # the reference's numerics, before the candidate's module runs
        self.float32_mode = float32_mode(torch)
        self.snapshot = torch_guard.snapshot()
        self.threads_before = threading.active_count()
        namespace = torch_guard.load_candidate(msg["source"], msg["extensions"])
        self.model_cls = namespace["ModelNew"]
        self.models: dict[str, object] = {}
        self.calls = [[self._prepare(spec, ptrs) for spec in slots] for slots in msg["calls"]]

    def _wrap(self, t: dict, ptrs: list[int]):
        from pipeline.evaluation.gpu.device_views import view
        return view(ptrs[t["buf"]], t["shape"], t["dtype"])

    def _prepare(self, spec: dict, ptrs: list[int]):
        key = json.dumps(spec["init_inputs"])
        if key not in self.models:
            self.torch.manual_seed(spec["init_seed"])
            model = self.model_cls(*spec["init_inputs"]).cuda().eval()
            params = {p["name"]: self._wrap(p, ptrs) for p in spec["params"]}
            self.guard.copy_matching_state(model, params)
            self.models[key] = model
        inputs = [self._wrap(t, ptrs) if "buf" in t else t["value"] for t in spec["inputs"]]
        outputs = [self._wrap(t, ptrs) for t in spec["outputs"]]
        return self.models[key], inputs, outputs

    def call(self, config: int, slot: int = 0) -> int:
        """One checked forward on a slot: the caching allocator poisoned first, torch's compute refused and
        audited while it runs (unless the gate profile lets torch compute), its result checked and copied into
        the harness's output buffers, then the slower checks (`status`)."""
        model, inputs, outputs = self.calls[config][slot]
        self.guard.poison_allocator(sum(o.numel() * o.element_size() for o in outputs))
        with self.torch.no_grad(), self.guard.NoTorchCompute(self.flags, audit=True,  # audits cost ~0.5 ms
                                                             allow_compute=self.torch_compute):
            result = model(*inputs)
            # taken apart inside the mode, by exact type: a container whose iteration computes, or a tuple
            # subclass, meets the check instead of running after it
            results = list(result) if type(result) in (tuple, list) else [result]
        self.guard.deliver(results, outputs, self.memory, self.flags)
        self.status()
        return 0

    def timed_call(self, config: int, slot: int, start, end) -> int:
        """One timed forward: the forward alone between the marks of its CUDA events (torch_guard.forward_once),
        then its result checked and copied into the output buffers (the trusted side checks every timed call's
        outputs itself, and `status` the process's state after the batch)."""
        model, inputs, outputs = self.calls[config][slot]
        results = self.guard.forward_once(lambda: model(*inputs), self.flags, start, end)
        self.guard.deliver(results, outputs, self.memory, self.flags)
        return 0

    def status(self) -> list[str]:
        self.flags += self.guard.changes_since(self.snapshot)
        self.flags += mode_changes(self.torch, self.float32_mode)
        if threading.active_count() > self.threads_before:
            self.flags.append("threads: the candidate started threads")
        self.flags = sorted(set(self.flags))
        return self.flags


def lock_exec(hello: dict, applied: dict, native: bool) -> str:
    """The second seccomp filter once the candidate is loaded (seccomp.lock_exec); what it locks, '' if none.
    Native children first load the CUDA driver's JIT compiler, the one library the driver may still load
    (for PTX when the device is newer than the build's architecture)."""
    if not applied.get("seccomp"):
        return ""
    from pipeline.evaluation.child import seccomp
    if native:
        try:
            ctypes.CDLL("libnvidia-ptxjitcompiler.so.1")
        except OSError:
            pass
    seccomp.lock_exec(hello["libseccomp"], mappings=native)
    return "memfd and executable mappings" if native else "memfd"


def serve(rin, wout) -> None:
    def send(obj: dict) -> None:
        wout.write(json.dumps(obj) + "\n")
        wout.flush()

    hello = json.loads(rin.readline())
    applied = apply_sandbox(hello)
    early = applied.pop("driver", None)  # the CUDA context made before the allow-list (GPU children)
    send({"ok": True, "sandbox": applied, "pid": os.getpid()})
    driver, runner = early, None
    scratch, scratch_bytes, stand_in = 0, 0, None
    pairs: list[tuple[int, int]] = []  # CUDA event pairs, one per call of a batch, made once and reused
    mapped: list[int] | None = None  # the buffers' pointers, once `map` has run
    spans: list[tuple[int, int]] = []  # (pointer, bytes) of every buffer mapped here

    def map_buffers(msg: dict) -> list[int]:
        nonlocal spans
        bases = [driver.ipc_open(h) if h else 0 for h in msg["arenas"]]  # '' : not mapped here
        ptrs = [bases[b["arena"]] + b["offset"] if bases[b["arena"]] else 0 for b in msg["buffers"]]
        spans = [(p, int(b["nbytes"])) for p, b in zip(ptrs, msg["buffers"]) if p]
        return ptrs

    def drop_scratch() -> None:  # the calibration scratch freed, its pointer never left dangling
        nonlocal scratch, scratch_bytes, stand_in
        old, scratch, scratch_bytes, stand_in = scratch, 0, 0, None
        if old:
            driver.free(old)

    def event_pairs(n: int) -> list[tuple[int, int]]:
        while len(pairs) < n:
            pairs.append((driver.event(), driver.event()))
        return pairs[:n]

    def calibration_batch(msg: dict, marks: list[tuple[int, int]]) -> None:
        """A trusted batch standing for a batch of calls: per call one memset of `fill_bytes` between the marks
        of its events, and with `harness` "kernelbench" the same harness code around it as a KernelBench-format
        call (torch_guard.forward_once, and deliver's checks; the trusted side makes the copies)."""
        nonlocal scratch, scratch_bytes, stand_in
        fill = max(4, int(msg.get("fill_bytes", 4)))  # per call it stands for, so it costs the same launches,
        if fill > scratch_bytes:                      # switches between processes and wake-ups as real calls
            drop_scratch()
            scratch = driver.alloc(fill)
            scratch_bytes = fill
        kernelbench = msg.get("harness") == "kernelbench"
        if kernelbench and stand_in is None:
            from pipeline.evaluation.gpu.device_views import view
            stand_in = view(scratch, (scratch_bytes,), "uint8")
        if not kernelbench:
            for s, e in marks:
                driver.record(s)
                driver.memset_async(scratch, 0, fill)
                driver.record(e)
                driver.synchronize()
            return
        from pipeline.evaluation.child import torch_guard
        memory, flags = torch_guard.HarnessMemory(spans), []
        for s, e in marks:
            results = torch_guard.forward_once(lambda: (driver.memset_async(scratch, 0, fill), stand_in)[1], flags,
                                               lambda s=s: driver.record(s), lambda e=e: driver.record(e))
            torch_guard.deliver(results, [stand_in], memory, flags, copy=False)
            driver.synchronize()
    for line in rin:
        msg = json.loads(line)
        op = msg["op"]
        if op == "exit":
            break
        t0 = time.perf_counter()
        try:
            if op == "probe":
                driver = driver or Driver(0)
                send({"ok": True, "device": driver.info().name})
            elif op == "map":
                driver = driver or Driver(0)
                mapped = map_buffers(msg)
                driver.synchronize()
                send({"ok": True, "device": driver.info().name})
            elif op == "load":
                driver = driver or Driver(0)
                ptrs = map_buffers(msg) if "arenas" in msg else mapped
                runner = (TorchRunner if msg["format"] == "kernelbench" else NativeRunner)(msg, ptrs, spans)
                driver.synchronize()
                locked = lock_exec(hello, applied, native=isinstance(runner, NativeRunner))
                send({"ok": True, "device": driver.info().name, "flags": runner.flags, "exec_lock": locked})
            elif op == "call":
                ret = runner.call(msg["config"], msg.get("slot", 0))
                driver.synchronize()
                send({"ok": True, "ret": ret, "flags": runner.flags, "s": time.perf_counter() - t0})
            elif op == "run":
                slots = msg["slots"]
                marks = event_pairs(len(slots) if slots else max(1, int(msg.get("launches", 1))))
                rets = []
                for k, (s, e) in zip(slots, marks):  # each call alone on an idle device, as KernelBench's trials
                    rets.append(runner.timed_call(msg["config"], k, lambda s=s: driver.record(s),
                                                  lambda e=e: driver.record(e)))
                    driver.synchronize()
                if not slots:  # an empty or calibration batch (trusted children only)
                    calibration_batch(msg, marks)
                failed = [r for r in rets if r]
                send({"ok": not failed, "error": f"launch returned {failed[0]}" if failed else "",
                      "events_ms": sum(driver.elapsed_ms(s, e) for s, e in marks),
                      "flags": runner.flags if runner else []})
            elif op == "free_scratch":  # trusted children: the calibration scratch back, when a group ends
                drop_scratch()
                send({"ok": True})
            elif op == "status":
                send({"ok": True, "flags": runner.status() if runner else []})
            else:
                send({"ok": False, "stage": op, "error": f"unknown op {op!r}"})
        except CudaError as e:
            send({"ok": False, "stage": op, "cuda": True, "error": str(e), "flags": getattr(runner, "flags", [])})
        except Exception as e:  # candidate failures are data for the evaluator, not crashes of it
            send({"ok": False, "stage": op, "error": f"{type(e).__name__}: {e}"[:2000],
                  "flags": getattr(runner, "flags", [])})


def main() -> None:
    fd_in, fd_out = int(sys.argv[1]), int(sys.argv[2])
    if os.environ.get("CUDAPERF_CHILD_PRELOAD_TORCH") == "1":  # torch's import (no CUDA) while the evaluator
        import pipeline.evaluation.child.torch_guard  # noqa: F401 - does other work; apply_sandbox finds it done
    with os.fdopen(fd_in, "r") as rin, os.fdopen(fd_out, "w") as wout:
        wout.write('{"ready": true}\n')  # Python is up: the evaluator may take the GPU's lock for hello
        wout.flush()
        serve(rin, wout)


if __name__ == "__main__":
    main()
