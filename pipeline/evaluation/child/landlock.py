"""A filesystem allow-list for the candidate's child process, enforced by the kernel (Landlock, ctypes).

`restrict(access)` is called by the child itself (child/main.py `apply_sandbox`), after the trusted
imports and before any candidate code is loaded; like the seccomp filter it holds for the rest of
the process and every thread it starts, and only narrows further. `access` comes from the trusted
side (sandbox.py `child_access`):
- `read`: trees the child may read and list (the Python installation, the package, the library
  directories the loader and the CUDA driver use, its own process's /proc entries, the few /proc and
  /sys files the CUDA driver and torch read, and the read-only scratch holding the artefact), nothing
  else: not /etc (but the loader's cache), /home, /usr/bin, /usr/share, /opt, /var, nor the rest of
  /proc and /sys. A rule's /proc path stays open (O_PATH) for the process's life: a process's /proc
  inodes are made anew once their dentries are dropped, and a rule names an inode;
- `write`: its private tmpfs (/tmp), where it may create, write and remove files;
- `devices`: device nodes it may open for reading, writing and ioctl (/dev/nvidia*, /dev/null, ...).
Where the kernel's Landlock ABI has them, TCP bind/connect are refused outright (ABI 4), and so are
connecting to abstract Unix sockets and signalling processes outside the child (ABI 6).

What held is returned (`{"landlock": abi}`, 0 where the kernel has no Landlock); the child then
keeps the mount namespace bubblewrap built as its only file boundary. Landlock does not govern
memory mappings: making mapped code executable is the seccomp layer's (`seccomp.lock_exec`).
"""
from __future__ import annotations

import ctypes
import os

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # the same on x86_64 and aarch64
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2

_PINNED: list[int] = []  # O_PATH descriptors of the /proc paths given rules, open for the process's lifetime
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the rights a rule on a single file may name


def _handled_fs(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class LandlockFailed(RuntimeError):
    """The kernel has Landlock but the ruleset could not be built or applied."""


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when it has none (or it is disabled)."""
    rc = _libc().syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(int(rc), 0)


def restrict(access: dict) -> dict:
    """Apply the allow-list `access` ({"read": [...], "write": [...], "devices": [...]}) to this process.

    Paths that do not exist are skipped (a host without /usr/lib64). Returns {"landlock": abi}; raises
    LandlockFailed when the kernel has Landlock and a step fails."""
    abi = abi_version()
    if abi < 1:
        return {"landlock": 0}
    libc = _libc()
    handled = _handled_fs(abi)
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 and access.get("scope", True) else 0
    attr = _RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0, scoped)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    fd = libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise LandlockFailed(f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}")
    read = READ_FILE | READ_DIR
    write = read | WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SYM | MAKE_FIFO | MAKE_SOCK \
        | (handled & (REFER | TRUNCATE))
    device = READ_FILE | WRITE_FILE | (handled & IOCTL_DEV)
    rules = 0
    try:
        for paths, rights in ((access.get("read", []), read), (access.get("write", []), write),
                              (access.get("devices", []), device)):
            for path in paths:
                try:
                    pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue  # not on this host
                pinned = path.startswith("/proc/")  # a process's /proc inode is made anew once its dentry is
                try:                                 # dropped: the open descriptor keeps the one the rule names
                    allowed = rights & handled
                    if not os.path.isdir(path):
                        allowed &= FILE_RIGHTS
                    rule = _PathBeneath(allowed, pfd)
                    if libc.syscall(SYS_ADD_RULE, ctypes.c_int(fd), ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(rule),
                                    ctypes.c_uint32(0)) < 0:
                        raise LandlockFailed(f"landlock_add_rule for {path} failed: "
                                             f"{os.strerror(ctypes.get_errno())}")
                    rules += 1
                finally:
                    if pinned:
                        _PINNED.append(pfd)
                    else:
                        os.close(pfd)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise LandlockFailed(f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}")
        if libc.syscall(SYS_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) < 0:
            raise LandlockFailed(f"landlock_restrict_self failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)
    return {"landlock": abi, "landlock_rules": rules}
