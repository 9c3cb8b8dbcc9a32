"""The driver binding's allocation rule, with a stand-in for libcuda (no GPU needed)."""
import ctypes

from pipeline.evaluation.gpu.driver import LARGE_PAGE, Driver


class FakeLib:
    def __init__(self):
        self.sizes = []

    def cuMemAlloc_v2(self, ptr_ref, size):
        self.sizes.append(size.value)
        ctypes.cast(ptr_ref, ctypes.POINTER(ctypes.c_uint64)).contents.value = 0x7F0000000000
        return 0


def test_allocations_are_whole_large_pages():
    """A child maps an IPC allocation with large pages only when its size is a whole number of them."""
    drv = object.__new__(Driver)
    drv.lib = FakeLib()
    for n in (1, 512, LARGE_PAGE - 1, LARGE_PAGE, LARGE_PAGE + 512, 7 * LARGE_PAGE + 3):
        assert drv.alloc(n) == 0x7F0000000000
    assert drv.lib.sizes == [LARGE_PAGE, LARGE_PAGE, LARGE_PAGE, LARGE_PAGE, 2 * LARGE_PAGE, 8 * LARGE_PAGE]
