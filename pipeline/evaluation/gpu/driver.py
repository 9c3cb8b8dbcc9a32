"""A minimal ctypes binding of the CUDA driver API (libcuda.so.1), shared by both sides.

The trusted evaluator and the candidate's child process both use it: device buffers, CUDA IPC
(the child maps buffers the trusted side owns), events for timing, synchronisation. It needs
nothing but the driver, so a child starts in well under a second, and it works beside torch and
beside a candidate's statically linked CUDA runtime because every user binds the device's
primary context.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1
CU_EVENT_DEFAULT = 0
CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13
CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36
CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
IPC_HANDLE_BYTES = 64
LARGE_PAGE = 2 << 20


def gpu_count() -> int:
    """GPUs visible to this process through the CUDA driver (0 without a driver)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    n = ctypes.c_int(0)
    if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(n)) != 0:
        return 0
    return n.value


def allocated_bytes(nbytes: int) -> int:
    """Device bytes `Driver.alloc(nbytes)` takes: whole 2 MiB pages."""
    return -(-max(nbytes, 1) // LARGE_PAGE) * LARGE_PAGE


class CudaError(RuntimeError):
    def __init__(self, code: int, name: str, text: str, call: str):
        super().__init__(f"{call} failed: {name} ({code}): {text}")
        self.code, self.name, self.call = code, name, call


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * IPC_HANDLE_BYTES)]


@dataclass
class DeviceInfo:
    name: str
    sm_count: int
    clock_khz: int
    memory_clock_khz: int


class Driver:
    """The driver API bound to one device's primary context (made current on this thread)."""

    def __init__(self, device_index: int = 0):
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise CudaError(-1, "NO_DRIVER", f"libcuda.so.1 could not be loaded ({e}); this host has no NVIDIA driver", "dlopen") from None
        self._check(self.lib.cuInit(0), "cuInit")
        self.device = ctypes.c_int()
        self._check(self.lib.cuDeviceGet(ctypes.byref(self.device), device_index), "cuDeviceGet")
        self.context = ctypes.c_void_p()
        self._check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.context), self.device), "cuDevicePrimaryCtxRetain")
        self.make_current()

    def make_current(self) -> None:
        self._check(self.lib.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def _check(self, code: int, call: str) -> None:
        if code != 0:
            name_p, text_p = ctypes.c_char_p(), ctypes.c_char_p()
            self.lib.cuGetErrorName(code, ctypes.byref(name_p))
            self.lib.cuGetErrorString(code, ctypes.byref(text_p))
            name = (name_p.value or b"CUDA_ERROR").decode()
            text = (text_p.value or b"unknown error").decode()
            raise CudaError(code, name, text, call)

    # --- device facts -------------------------------------------------------------------
    def info(self) -> DeviceInfo:
        buf = ctypes.create_string_buffer(256)
        self._check(self.lib.cuDeviceGetName(buf, 256, self.device), "cuDeviceGetName")

        def attr(a: int) -> int:
            v = ctypes.c_int()
            self._check(self.lib.cuDeviceGetAttribute(ctypes.byref(v), a, self.device), "cuDeviceGetAttribute")
            return v.value
        return DeviceInfo(buf.value.decode(), attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
                          attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE), attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE))

    def total_memory(self) -> int:
        """Bytes of device memory of this GPU."""
        v = ctypes.c_size_t()
        self._check(self.lib.cuDeviceTotalMem_v2(ctypes.byref(v), self.device), "cuDeviceTotalMem")
        return v.value

    # --- memory ---------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        """A device allocation of at least `nbytes`, rounded up to whole 2 MiB pages: a process that maps
        it over IPC then maps it with large pages too (an odd size maps it with small ones, and kernels
        that move between buffers of several slots run up to 1.9x slower there, on TLB misses)."""
        ptr = ctypes.c_uint64()
        self._check(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(allocated_bytes(nbytes))), "cuMemAlloc")
        return ptr.value

    def free(self, ptr: int) -> None:
        self._check(self.lib.cuMemFree_v2(ctypes.c_uint64(ptr)), "cuMemFree")

    def memset_async(self, ptr: int, byte: int, nbytes: int, stream: int = 0) -> None:
        self._check(self.lib.cuMemsetD8Async(ctypes.c_uint64(ptr), ctypes.c_ubyte(byte), ctypes.c_size_t(nbytes),
                                             ctypes.c_void_p(stream)), "cuMemsetD8Async")

    # --- IPC ------------------------------------------------------------------------------
    def ipc_export(self, ptr: int) -> str:
        """Hex text of the IPC handle of an allocation made by `alloc` (its base pointer)."""
        handle = _IpcHandle()
        self._check(self.lib.cuIpcGetMemHandle(ctypes.byref(handle), ctypes.c_uint64(ptr)), "cuIpcGetMemHandle")
        return ctypes.string_at(ctypes.addressof(handle), IPC_HANDLE_BYTES).hex()

    def ipc_open(self, handle_hex: str) -> int:
        handle = _IpcHandle()
        ctypes.memmove(ctypes.addressof(handle), bytes.fromhex(handle_hex), IPC_HANDLE_BYTES)
        ptr = ctypes.c_uint64()
        self._check(self.lib.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                    "cuIpcOpenMemHandle")
        return ptr.value

    # --- sync and events --------------------------------------------------------------------
    def synchronize(self) -> None:
        """Device-wide: waits for work on every stream of the context."""
        self._check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")

    def event(self) -> int:
        ev = ctypes.c_void_p()
        self._check(self.lib.cuEventCreate(ctypes.byref(ev), CU_EVENT_DEFAULT), "cuEventCreate")
        return ev.value

    def record(self, event: int, stream: int = 0) -> None:
        self._check(self.lib.cuEventRecord(ctypes.c_void_p(event), ctypes.c_void_p(stream)), "cuEventRecord")

    def elapsed_ms(self, start: int, end: int) -> float:
        self._check(self.lib.cuEventSynchronize(ctypes.c_void_p(end)), "cuEventSynchronize")
        ms = ctypes.c_float()
        fn = getattr(self.lib, "cuEventElapsedTime_v2", None) or self.lib.cuEventElapsedTime
        self._check(fn(ctypes.byref(ms), ctypes.c_void_p(start), ctypes.c_void_p(end)),
                    "cuEventElapsedTime")
        return ms.value
