"""A seccomp allow-list for the candidate's child process, installed through libseccomp (ctypes).

`install(libseccomp_path)` is called by the child itself (child/main.py `apply_sandbox`) after it has
read its hello message and before any candidate code is loaded; the filter then holds for the
rest of the process and every thread it starts, and cannot be removed. `find_libseccomp()`
locates `libseccomp.so.2` (the system's, else `<project>/.sandbox-tools/lib`, which
benchmarks/tools/sandbox_tools.sh fills). No Python binding is used, so any Python version works.

The policy (`ALLOWED` below, one group per line of concern): a system call not listed fails
with EPERM. Refused, among others: execve/execveat (no new programs), fork/vfork and clone
without CLONE_THREAD (threads only, which the CUDA driver needs; no child processes), clone3
(answers ENOSYS, so glibc falls back to clone, whose flags a filter can read), ptrace and
process_vm_*, mount/umount2/pivot_root/chroot/unshare/setns (no leaving or changing the
namespaces), bpf, perf_event_open, keyctl/add_key/request_key, module loading, kexec, reboot,
swapon/swapoff, personality, userfaultfd, io_uring_*, setuid and friends. `kill` and `tgkill`
reach only the process itself. Sockets: only AF_UNIX (socket and socketpair with domain 1).
The CUDA driver opens AF_UNIX SOCK_SEQPACKET sockets and tries to connect to
/tmp/nvidia-mps/control; inside the sandbox's private network namespace (abstract socket names
are per network namespace) and mount namespace (a private /tmp, no host socket files bound)
such a socket reaches nothing outside. AF_INET, AF_INET6, AF_NETLINK and AF_PACKET fail.

What it does not do: it does not confine file writes (the read-only mount namespace does), nor
ioctl requests (the CUDA driver's interface is ioctl on /dev/nvidia*), nor memory or time (the
evaluator's deadline and memory watch do). It filters the native x86_64/aarch64 ABI; calls of
another ABI (e.g. int 0x80) kill the process (libseccomp's default bad-architecture action).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from pathlib import Path

TOOLS_LIB = Path(__file__).resolve().parents[3] / ".sandbox-tools" / "lib"

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_EQ = 4
SCMP_CMP_MASKED_EQ = 7
CLONE_THREAD = 0x00010000
AF_UNIX = 1


def SCMP_ACT_ERRNO(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


# The allow-list, one group per concern. Names unknown on this architecture (e.g. `open` on
# aarch64) are skipped. File writes are allowed here because the mount namespace makes every
# path but the scratch directory and a private /tmp read-only.
ALLOWED = {
    "process and threads": "exit exit_group set_tid_address set_robust_list get_robust_list rseq futex futex_waitv "
                           "gettid getpid getppid getpgrp getpgid getsid arch_prctl prctl wait4 waitid restart_syscall",
    "scheduling": "sched_yield sched_getaffinity sched_setaffinity sched_getparam sched_getscheduler sched_getattr "
                  "sched_get_priority_max sched_get_priority_min getpriority getcpu",
    "identity (read only)": "getuid geteuid getgid getegid getgroups getresuid getresgid capget",
    "memory": "brk mmap munmap mremap mprotect madvise msync mincore mlock mlock2 munlock mlockall munlockall "
              "get_mempolicy set_mempolicy mbind membarrier memfd_create",
    "signals": "rt_sigaction rt_sigprocmask rt_sigreturn rt_sigpending rt_sigtimedwait rt_sigsuspend sigaltstack "
               "pause alarm setitimer getitimer",
    "time": "clock_gettime clock_getres clock_nanosleep nanosleep gettimeofday time times timer_create "
            "timer_settime timer_gettime timer_getoverrun timer_delete timerfd_create timerfd_settime timerfd_gettime",
    "file descriptors and I/O": "read readv pread64 preadv preadv2 write writev pwrite64 pwritev pwritev2 close "
                                "close_range lseek dup dup2 dup3 fcntl flock ioctl fadvise64 fsync fdatasync "
                                "ftruncate fallocate sendfile splice tee copy_file_range",
    "files and directories": "open openat openat2 creat stat lstat fstat newfstatat statx statfs fstatfs access "
                             "faccessat faccessat2 readlink readlinkat getdents getdents64 getcwd chdir fchdir mkdir "
                             "mkdirat unlink unlinkat rmdir rename renameat renameat2 symlink symlinkat link linkat "
                             "chmod fchmod fchmodat umask utimensat utime utimes truncate getxattr lgetxattr "
                             "fgetxattr listxattr llistxattr flistxattr inotify_init1 inotify_add_watch inotify_rm_watch",
    "pipes and polling": "pipe pipe2 select pselect6 poll ppoll epoll_create epoll_create1 epoll_ctl epoll_wait "
                         "epoll_pwait epoll_pwait2 eventfd eventfd2",
    "sockets (created only as AF_UNIX, see SPECIAL)": "connect bind listen accept accept4 sendto recvfrom sendmsg "
                                                      "recvmsg sendmmsg recvmmsg shutdown getsockname getpeername "
                                                      "setsockopt getsockopt",
    "limits and system information": "getrlimit setrlimit prlimit64 getrusage sysinfo uname getrandom",
    "more filters (a filter can only narrow; lock_exec adds one)": "seccomp",
}
PROT_EXEC = 0x4


def _special(pid: int) -> list[tuple[str, int, list[tuple[int, int, int, int]]]]:
    """Rules with argument checks: (name, action, [(arg index, comparison, a, b)])."""
    return [
        ("clone", SCMP_ACT_ALLOW, [(0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD)]),  # threads only
        ("clone3", SCMP_ACT_ERRNO(errno.ENOSYS), []),  # glibc then falls back to clone
        ("socket", SCMP_ACT_ALLOW, [(0, SCMP_CMP_EQ, AF_UNIX, 0)]),
        ("socketpair", SCMP_ACT_ALLOW, [(0, SCMP_CMP_EQ, AF_UNIX, 0)]),
        ("kill", SCMP_ACT_ALLOW, [(0, SCMP_CMP_EQ, pid, 0)]),    # itself only
        ("tgkill", SCMP_ACT_ALLOW, [(0, SCMP_CMP_EQ, pid, 0)]),  # its own threads only
    ]


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


class SeccompUnavailable(RuntimeError):
    """libseccomp cannot be found or loaded, or the filter cannot be installed."""


def find_libseccomp(explicit: str = "") -> str:
    """Path or soname of libseccomp.so.2: `explicit`, else the system's, else .sandbox-tools/lib; '' if none."""
    if explicit:
        return explicit if Path(explicit).is_file() else ""
    found = ctypes.util.find_library("seccomp")
    if found:
        return found
    local = TOOLS_LIB / "libseccomp.so.2"
    return str(local) if local.is_file() else ""


def allowed_names() -> list[str]:
    """Every system call the policy allows unconditionally."""
    return sorted({name for group in ALLOWED.values() for name in group.split()})


def install(libseccomp: str) -> int:
    """Install the allow-list on this process (irreversible); returns the number of rules added."""
    rules = [(name, SCMP_ACT_ALLOW, []) for name in allowed_names()] + _special(os.getpid())
    return _load(libseccomp, SCMP_ACT_ERRNO(errno.EPERM), rules)


def lock_exec(libseccomp: str, mappings: bool) -> int:
    """A second filter, once the candidate's code is loaded: no memfd_create (no library from memory) and, with
    `mappings`, no new executable memory (mmap, mprotect or pkey_mprotect with PROT_EXEC), so no code is
    loaded or generated on the host from here on. `mappings` is off where the trusted code itself still
    loads libraries lazily (torch's cuDNN and NVRTC parts in kernelbench children)."""
    exec_bit = [(2, SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC)]
    rules = [("memfd_create", SCMP_ACT_ERRNO(errno.EPERM), [])]
    if mappings:
        rules += [(name, SCMP_ACT_ERRNO(errno.EPERM), exec_bit) for name in ("mmap", "mprotect", "pkey_mprotect")]
    return _load(libseccomp, SCMP_ACT_ALLOW, rules)


def _load(libseccomp: str, default: int, rules: list) -> int:
    try:
        lib = ctypes.CDLL(libseccomp, use_errno=True)
    except OSError as e:
        raise SeccompUnavailable(f"libseccomp could not be loaded from {libseccomp!r}: {e}") from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(default)
    if not ctx:
        raise SeccompUnavailable("seccomp_init failed")
    added = 0
    try:
        for name, action, cmps in rules:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:  # not a system call of this architecture
                continue
            array = (_ArgCmp * max(len(cmps), 1))(*[_ArgCmp(*c) for c in cmps])
            rc = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), array)
            if rc < 0:
                raise SeccompUnavailable(f"seccomp_rule_add for {name} failed: {os.strerror(-rc)}")
            added += 1
        rc = lib.seccomp_load(ctx)
        if rc < 0:
            raise SeccompUnavailable(f"seccomp_load failed: {os.strerror(-rc)}")
    finally:
        lib.seccomp_release(ctx)
    return added
