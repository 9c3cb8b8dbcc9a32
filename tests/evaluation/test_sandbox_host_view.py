"""What of the host a sandboxed child sees in /proc and /sys: its own process, what the CUDA driver reads, nothing
host-wide (load, memory, interrupts, CPU and disk counters, uptime, network devices, disks, other devices, the
driver's version). Each layer is tried alone too: the mounts bubblewrap builds (no Landlock) and the Landlock
allow-list (sandbox 'none', the host's own /proc and /sys). No GPU is needed.
"""
from __future__ import annotations

import glob
import json
import os
import sys
from pathlib import Path

import pytest

from pipeline.evaluation.child import sandbox
from pipeline.evaluation.child.sandbox import ChildProcess, find_bwrap

READER = r'''
import json, os, sys
from pipeline.evaluation.child.main import apply_sandbox

rin, wout = os.fdopen(int(sys.argv[1]), "r"), os.fdopen(int(sys.argv[2]), "w")
def send(obj):
    wout.write(json.dumps(obj) + "\n")
    wout.flush()

send({"ready": True})  # the child's first line, as main.main writes it
send({"ok": True, "sandbox": apply_sandbox(json.loads(rin.readline()))})
seen = {}
for path in json.loads(rin.readline())["paths"]:
    try:
        seen[path] = ("dir", sorted(os.listdir(path))) if os.path.isdir(path) else ("file", open(path).read(1 << 16))
    except OSError as e:
        seen[path] = ("error", e.strerror)
if "torch" in sys.modules:  # preloaded: which CPU kernels it chose from what it read of the CPU
    seen["torch_cpu"] = sys.modules["torch"].backends.cpu.get_cpu_capability()
send(seen)
'''

# host-wide state a candidate could read to learn about the machine and the other work on it
HOST_WIDE = ["/proc/loadavg", "/proc/meminfo", "/proc/interrupts", "/proc/stat", "/proc/uptime", "/proc/vmstat",
             "/proc/diskstats", "/proc/softirqs", "/proc/zoneinfo", "/proc/schedstat", "/proc/version", "/proc/cmdline",
             "/proc/modules", "/proc/partitions", "/proc/pressure/cpu", "/proc/pressure/memory",
             "/proc/sys/kernel/random/boot_id", "/proc/sys/fs/file-nr", "/proc/sys/kernel/hostname",
             "/proc/driver/nvidia/version", "/proc/driver/nvidia/gpus", "/sys/class/net", "/sys/block",
             "/sys/class/block", "/sys/class/thermal", "/sys/class/hwmon", "/sys/devices/system/cpu/cpu0",
             "/sys/devices/system/cpu/cpufreq", "/sys/devices/system/node/node0/meminfo",
             "/sys/devices/system/node/node0/vmstat", "/sys/kernel/mm", "/sys/fs/cgroup", "/sys/module",
             "/sys/class/drm", "/sys/devices/virtual/net", "/sys/kernel/debug",
             "/sys/firmware", "/sys/devices/system/memory"]
OWN = ["/proc/self/status", "/proc/thread-self/comm", "/proc/self/task", "/proc/self/maps"]
NEEDED = ["/sys/devices/system/cpu/online", "/sys/devices/system/cpu/possible"]  # the loader's and the driver's


def _shows_something(kind: str, value) -> bool:
    return (kind == "file" and value != "") or (kind == "dir" and value != [])


HOST_SHOWN = [p for p in HOST_WIDE if os.path.exists(p) and _shows_something(
    *(("dir", os.listdir(p)) if os.path.isdir(p) else ("file", Path(p).read_text(errors="replace")[:1])))]


class ReaderChild(ChildProcess):
    """The production ChildProcess with a script that reads the paths it is sent, after the sandbox is applied."""

    def _program(self, fd_in: str, fd_out: str) -> list[str]:
        script = Path(self.scratch, "reader.py")
        script.write_text(READER)
        return [sys.executable, str(script), fd_in, fd_out]


def _read_inside(paths: list[str], **kwargs) -> tuple[dict, dict]:
    with ReaderChild(None, "", 1 << 30, **kwargs) as child:
        seen = child.request({"op": "read", "paths": paths}, 60)
        return child.sandbox_info, seen


def _assert_nothing_host_wide(seen: dict) -> None:
    leaked = {p: seen[p] for p in HOST_SHOWN if _shows_something(*seen[p])}
    assert not leaked, f"host-wide state readable inside: {json.dumps(leaked)[:1500]}"
    kind, net = seen["/proc/net/dev"]  # its own network namespace at most: the loopback device
    host_devices = set(os.listdir("/sys/class/net")) - {"lo"} if os.path.isdir("/sys/class/net") else set()
    assert not any(f"{name}:" in str(net) for name in host_devices), net
    kind, pci = seen["/sys/bus/pci/devices"]  # the NVIDIA GPUs' at most, none of the host's other devices
    if kind == "dir":
        assert set(pci) <= {os.path.basename(link) for link, _ in sandbox.gpu_pci_devices()}, pci


def _assert_own_process_readable(seen: dict, pid: int | None) -> None:
    kind, status = seen["/proc/self/status"]
    assert kind == "file" and "Pid:" in status, seen["/proc/self/status"]
    if pid is not None:
        assert f"Pid:\t{pid}\n" in status
    assert seen["/proc/self/task"][0] == "dir" and seen["/proc/self/task"][1], seen["/proc/self/task"]
    assert seen["/proc/thread-self/comm"][0] == "file" and seen["/proc/self/maps"][0] == "file"
    for path in NEEDED:
        if os.path.exists(path):
            assert seen[path] == ["file", Path(path).read_text()], (path, seen[path])


ALL = HOST_WIDE + OWN + NEEDED + ["/proc/net/dev", "/sys/bus/pci/devices"]
needs_bwrap = pytest.mark.skipif(not find_bwrap()[0], reason="bubblewrap is not installed")


@needs_bwrap
def test_the_sandboxed_child_sees_nothing_host_wide():
    assert HOST_SHOWN, "this host shows none of the host-wide files: the test would prove nothing"
    info, seen = _read_inside(ALL)
    assert info["sandbox"] == "bwrap" and info["landlock"] >= 1, info
    _assert_nothing_host_wide(seen)
    _assert_own_process_readable(seen, pid=1)


@needs_bwrap
def test_the_mounts_alone_show_nothing_host_wide(monkeypatch):
    monkeypatch.setattr(sandbox, "child_access", lambda *a: {})  # no Landlock: bubblewrap's mounts only
    info, seen = _read_inside(ALL)
    assert "landlock" not in info, info
    _assert_nothing_host_wide(seen)
    _assert_own_process_readable(seen, pid=1)
    assert seen["/proc/sys/kernel/random/boot_id"][0] != "file"


def test_the_allow_list_alone_refuses_host_wide_files():
    info, seen = _read_inside(ALL, sandbox="none")  # the host's /proc and /sys: only Landlock narrows them
    assert info["landlock"] >= 1, info
    _assert_nothing_host_wide(seen)
    _assert_own_process_readable(seen, pid=None)
    for path in HOST_SHOWN:
        assert seen[path] == ["error", "Permission denied"], (path, seen[path])


@needs_bwrap
def test_only_the_gpus_pci_devices_are_shown(monkeypatch):
    """On a GPU host the NVIDIA devices' PCI directories are bound back; here one other PCI device stands in."""
    devices = sorted(glob.glob("/sys/bus/pci/devices/*"))
    if len(devices) < 2:
        pytest.skip("this host has fewer than two PCI devices")
    chosen = (devices[0], os.path.realpath(devices[0]))
    monkeypatch.setattr(sandbox, "gpu_pci_devices", lambda: [chosen])
    info, seen = _read_inside(["/sys/bus/pci/devices", f"{chosen[0]}/vendor", f"{chosen[1]}/vendor",
                               f"{devices[1]}/vendor"])
    vendor = Path(chosen[0], "vendor").read_text()
    assert seen["/sys/bus/pci/devices"] in (["dir", [os.path.basename(chosen[0])]], ["error", "Permission denied"])
    assert seen[f"{chosen[0]}/vendor"] == ["file", vendor] and seen[f"{chosen[1]}/vendor"] == ["file", vendor]
    assert seen[f"{devices[1]}/vendor"][0] == "error", seen


@pytest.mark.integration
def test_torch_sees_the_cpu_but_not_its_changing_clock():
    """torch reads /proc/cpuinfo to choose its CPU kernels: a copy without each core's current clock stands in."""
    torch = pytest.importorskip("torch")
    if not find_bwrap()[0]:
        pytest.skip("bubblewrap is not installed")
    info, seen = _read_inside(["/proc/cpuinfo"], preload_torch=True)
    kind, text = seen["/proc/cpuinfo"]
    assert kind == "file" and "processor" in text and "cpu MHz" not in text, seen["/proc/cpuinfo"][:300]
    assert seen["torch_cpu"] == torch.backends.cpu.get_cpu_capability()


def test_a_removed_cpuinfo_copy_is_made_again():
    """A long-lived evaluator whose copy was removed (a /tmp cleaner) still starts sandboxes."""
    first = sandbox.cpuinfo_snapshot()
    if not first:
        pytest.skip("/proc/cpuinfo is not readable here")
    os.unlink(first)
    again = sandbox.cpuinfo_snapshot()
    assert again != first and os.path.exists(again)
    assert "--ro-bind" in sandbox._host_view_mounts() and again in sandbox._host_view_mounts()
