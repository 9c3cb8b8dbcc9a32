"""Child processes for untrusted work, from the trusted side: spawn, talk, watch, kill.

`ChildProcess` starts `python -m pipeline.evaluation.child.main FD_IN FD_OUT` with a private scratch
directory and the GPU it may use in CUDA_VISIBLE_DEVICES. With `sandbox="bwrap"` (the default)
it runs inside bubblewrap (`bwrap_command`):
- user namespace: uid/gid 65534 inside, no capabilities, no further user namespaces; pid, net
  (no network, not even a route to the host), ipc, uts and cgroup namespaces of its own;
- mount namespace: /usr, /etc, /lib*, /bin, /sbin, /opt, the Python installation and the
  `pipeline/` package read-only; a fresh /dev with the /dev/nvidia* nodes, the scratch directory
  read-only (the artefact is placed there) and a private /tmp, a tmpfs of CHILD_TMP_BYTES: the only
  place it can write, so its disk use has a kernel-enforced quota. The home directory, the
  project's other directories (runs/, outputs) and the compile and result caches do not exist in
  there. Files of /etc that other users cannot read are hidden;
- /proc and /sys narrowed to an allow-list (`_host_view_mounts`): a fresh /proc of its pid namespace
  whose host-wide files (load, memory, interrupts, CPU, disk and network counters, uptime, /proc/sys,
  the NVIDIA driver's version and GPU list) are covered, keeping its own processes' entries, what the
  CUDA driver reads (PROC_VISIBLE) and a copy of /proc/cpuinfo without each core's clock; an empty /sys
  with only the CPU and NUMA node lists and the NVIDIA GPUs' PCI directories bound back (`visible_sys`);
- the child is pid 1 of its pid namespace (`--as-pid-1`): no reaper of bwrap's beside it, which runs
  without the seccomp filter and whose memory (/proc/1/mem) a child could write to run code unfiltered;
- a clean environment (bwrap itself gets only PATH and its libraries, so no process of the sandbox
  can read the evaluator's environment), a new session (no terminal), and death with its parent.
The child then narrows what it can open to an allow-list the kernel enforces (landlock.py,
`child_access`: the libraries, the package, the artefact, its own /proc entries and the few /proc and
/sys files above, the devices CUDA needs and its /tmp) and
installs a seccomp allow-list (seccomp.py) before it loads candidate code; once the candidate is
loaded, a second filter refuses memfd_create and, in c2cuda/light children, new executable memory
(`seccomp.lock_exec`). What held is reported in `sandbox_info` and in the load reply. `sandbox="none"` is an explicit opt-out for hosts without
user namespaces: rlimits, a best-effort network namespace, an unprivileged user when the
evaluator runs as root, and seccomp where libseccomp is found.

What this does not protect against: kernel bugs reachable through the allowed system calls and
the NVIDIA driver's ioctl interface; reading what the bound trees hold (the uid inside maps to
the evaluator's uid outside, so files there readable by that user are readable, besides the
hidden ones); using the GPU it was given (its memory, other contexts' timing). Host memory is
watched (resident set of the whole sandbox) and every request has a wall-clock deadline: past
either, the sandbox is killed and the request raises `ChildFailed` with `timeout` or `memory`
set. The child's stdout/stderr go to a log file read only for diagnostics, never for a verdict.
"""
from __future__ import annotations

import atexit
import glob
import json
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from functools import lru_cache
from pathlib import Path

from pipeline.core.errors import UserError
from pipeline.evaluation.child.seccomp import find_libseccomp

PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])
TOOLS_DIR = Path(PACKAGE_ROOT) / ".sandbox-tools"
SANDBOX_UID = 65534
SYSTEM_TREES = ["/usr", "/etc", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/opt"]
# The host's /proc and /sys as a sandbox sees them (an allow-list: everything else is covered): its own
# processes' /proc entries, and what the CUDA driver reads at cuInit. Host-wide state (load, memory, interrupts,
# CPU and disk counters, uptime, other devices, the driver's version) is not there.
PROC_VISIBLE = ["driver/nvidia/params", "driver/nvidia/capabilities"]  # relative to /proc
CPUINFO_CHANGING = ("cpu MHz",)  # lines of /proc/cpuinfo that follow the host's load (each core's clock): left out
SYS_VISIBLE = ["/sys/devices/system/cpu/online", "/sys/devices/system/cpu/possible", "/sys/devices/system/cpu/present",
               "/sys/devices/system/node/online", "/sys/devices/system/node/possible",
               "/sys/devices/system/node/has_cpu", "/sys/devices/system/node/has_memory",
               "/sys/devices/system/node/has_normal_memory"]
SYS_NODE_VISIBLE = ["cpumap", "cpulist", "distance"]  # of each /sys/devices/system/node/node<N>
SYS_LISTED = ["/sys/devices/system/node", "/sys/bus/pci/devices"]  # the driver lists them to find NUMA nodes and GPUs
NVIDIA_VENDOR = "0x10de"
TMP_BYTES = 1 << 30  # size of a sandbox's private /tmp (it is memory); the compile step sets its own
CHILD_TMP_BYTES = 256 << 20  # the candidate child's private /tmp, the only place it can write: its disk quota
LIBRARY_TREES = ["/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/usr/local/lib", "/usr/local/cuda",
                 "/usr/local/nvidia"]  # where the loader and the CUDA driver find libraries
DEVICE_NODES = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"]
FIX = "install bubblewrap (apt-get install bubblewrap), run benchmarks/tools/sandbox_tools.sh, or set {field}=none"


class ChildFailed(RuntimeError):
    def __init__(self, message: str, timeout: bool = False, memory: bool = False, log: str = ""):
        super().__init__(message)
        self.timeout, self.memory, self.log = timeout, memory, log


class SandboxUnavailable(UserError, RuntimeError):
    """The configured sandbox cannot run on this host (a setup problem, never a candidate's)."""


# --- bubblewrap ---------------------------------------------------------------------------------
def find_bwrap(explicit: str = "") -> tuple[str, dict[str, str]]:
    """(bwrap path, extra environment for bwrap itself); PATH first, then .sandbox-tools/bin. ('', {}) if none."""
    if explicit:
        return (explicit, {}) if os.access(explicit, os.X_OK) else ("", {})
    found = shutil.which("bwrap")
    if found:
        return found, {}
    local = TOOLS_DIR / "bin" / "bwrap"
    if os.access(local, os.X_OK):  # its libraries (libcap, libselinux) come with it
        lib = str(TOOLS_DIR / "lib")
        return str(local), {"LD_LIBRARY_PATH": os.pathsep.join(p for p in [lib, os.environ.get("LD_LIBRARY_PATH")] if p)}
    return "", {}


@lru_cache(maxsize=4)
def _userns_problem(bwrap: str, bwrap_env: tuple) -> str:
    """'' when bwrap can build a user+net namespace sandbox here, else its complaint."""
    true = shutil.which("true") or "/bin/true"
    argv = [bwrap, "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--unshare-net",
            "--unshare-pid", "--ro-bind", "/", "/", "--", true]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=dict(os.environ, **dict(bwrap_env)))
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    return "" if proc.returncode == 0 else (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]


def require_bwrap(explicit: str = "", field: str = "eval.sandbox") -> tuple[str, dict[str, str]]:
    """bwrap and its environment, or SandboxUnavailable saying in one sentence what is missing and the fix."""
    bwrap, env = find_bwrap(explicit)
    if not bwrap:
        where = f"at {explicit}" if explicit else "on PATH or in .sandbox-tools/bin"
        raise SandboxUnavailable(f"{field} is 'bwrap' but bubblewrap was not found {where}; " + FIX.format(field=field))
    problem = _userns_problem(bwrap, tuple(sorted(env.items())))
    if problem:
        raise SandboxUnavailable(f"{field} is 'bwrap' but bubblewrap cannot create user namespaces here ({problem}); "
                                 f"allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
                                 f"kernel.apparmor_restrict_unprivileged_userns=0) or set {field}=none")
    return bwrap, env


def _hidden_entries(tree: str) -> list[tuple[str, bool]]:
    """(path, is_dir) of entries under `tree` that other users may not read: covered inside the sandbox."""
    out = []
    for top, dirs, files in os.walk(tree):
        for name in dirs + files:
            path = os.path.join(top, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode) or st.st_mode & 0o004:
                continue
            out.append((path, stat.S_ISDIR(st.st_mode)))
        covered = {path for path, is_dir in out if is_dir}
        dirs[:] = [d for d in dirs if os.path.join(top, d) not in covered]
    return out


@lru_cache(maxsize=1)
def _system_mounts() -> tuple[str, ...]:
    """Read-only system trees (symlinks such as /lib -> usr/lib kept as links), private /etc files covered."""
    args: list[str] = []
    for tree in SYSTEM_TREES:
        if os.path.islink(tree):
            args += ["--symlink", os.readlink(tree), tree]
        elif os.path.isdir(tree):
            args += ["--ro-bind", tree, tree]
    for path, is_dir in _hidden_entries("/etc"):
        args += ["--tmpfs", path, "--remount-ro", path] if is_dir else ["--ro-bind", "/dev/null", path]
    return tuple(args)


@lru_cache(maxsize=1)
def gpu_pci_devices() -> list[tuple[str, str]]:
    """(link under /sys/bus/pci/devices, the device directory it names) of each NVIDIA display or 3D controller."""
    found = []
    for link in sorted(glob.glob("/sys/bus/pci/devices/*")):
        try:
            vendor, cls = (Path(link, name).read_text().strip() for name in ("vendor", "class"))
        except OSError:
            continue
        if vendor == NVIDIA_VENDOR and cls.startswith("0x03"):
            found.append((link, os.path.realpath(link)))
    return found


def visible_sys() -> list[str]:
    """The files and directories of /sys a sandbox sees (bound back on an empty /sys), where they exist."""
    nodes = [os.path.join(node, name) for node in sorted(glob.glob("/sys/devices/system/node/node[0-9]*"))
             for name in SYS_NODE_VISIBLE]
    return [p for p in SYS_VISIBLE + nodes + [device for _, device in gpu_pci_devices()] if os.path.exists(p)]


def _cover_except(tree: str, visible: list[str], top: bool = True) -> list[str]:
    """bwrap args covering every entry of `tree` but the `visible` ones (paths relative to it) and the
    directories on the way to them: files by /dev/null, directories by an empty read-only tmpfs. Symlinks
    (/proc/self, /proc/net: into the sandbox's own process) and, at the top, numeric entries (its own
    processes) stay."""
    args: list[str] = []
    try:
        entries = sorted(os.scandir(tree), key=lambda e: e.name)
    except OSError:
        return args
    for entry in entries:
        if entry.is_symlink() or (top and entry.name.isdigit()) or entry.name in visible:
            continue
        below = [v.split("/", 1)[1] for v in visible if v.startswith(entry.name + "/")]
        if entry.is_dir(follow_symlinks=False):
            args += _cover_except(entry.path, below, top=False) if below else \
                ["--tmpfs", entry.path, "--remount-ro", entry.path]
        else:
            args += ["--ro-bind", "/dev/null", entry.path]
    return args


_CPUINFO: dict[int, str] = {}  # pid -> its snapshot: a forked process makes its own, its parent's may go first


def cpuinfo_snapshot() -> str:
    """Path of a copy of /proc/cpuinfo without its CPUINFO_CHANGING lines, shown in its place ('' if unreadable):
    torch reads it to choose its CPU kernels (without it, its slowest ones). Made once per process (again if it
    was removed), removed when the process exits."""
    path = _CPUINFO.get(os.getpid(), "")
    if path and os.path.exists(path):
        return path
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines(keepends=True)
    except OSError:
        return ""
    fd, path = tempfile.mkstemp(prefix="cudaperf-cpuinfo-")
    with os.fdopen(fd, "w") as f:
        f.writelines(line for line in lines if not line.startswith(CPUINFO_CHANGING))
    os.chmod(path, 0o444)
    _CPUINFO[os.getpid()] = path
    atexit.register(_remove_own, path, os.getpid())
    return path


def _remove_own(path: str, pid: int) -> None:
    if os.getpid() == pid and os.path.exists(path):
        os.unlink(path)


def _host_view_mounts() -> tuple[str, ...]:
    """A fresh /proc of the sandbox's pid namespace with the host-wide entries covered (PROC_VISIBLE kept, the
    cpuinfo snapshot in place of /proc/cpuinfo), and an empty read-only /sys with only `visible_sys()` bound
    back (and the links naming the GPUs)."""
    args = ["--proc", "/proc", *_cover_except("/proc", PROC_VISIBLE + ["cpuinfo"])]
    snapshot = cpuinfo_snapshot()
    args += ["--ro-bind", snapshot, "/proc/cpuinfo"] if snapshot else ["--ro-bind", "/dev/null", "/proc/cpuinfo"]
    args += ["--tmpfs", "/sys"]
    for path in visible_sys():
        args += ["--ro-bind", path, path]
    for link, _ in gpu_pci_devices():
        args += ["--symlink", os.readlink(link), link]
    return tuple(args + ["--remount-ro", "/sys"])


def _covered(path: str, trees: list[str]) -> bool:
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in trees)


def bwrap_command(bwrap: str, scratch: str, read_only: list[str], env: dict[str, str], hidden: list[str],
                  devices: bool, tmp_bytes: int = TMP_BYTES, scratch_writable: bool = True) -> list[str]:
    """The bwrap argv (up to and including '--') for one sandbox; the program's argv follows it.

    `read_only`: host paths bound read-only besides the system trees (skipped when missing or
    already inside a bound tree); `scratch`: the one host path the sandbox may write, or only read
    with `scratch_writable` off (then nothing it writes reaches the host's disk); `env`: the whole
    environment inside; `hidden`: paths that must stay invisible (SandboxUnavailable if a bound
    tree would contain one); `devices`: bind the /dev/nvidia* nodes; `tmp_bytes`: the size of its
    private /tmp (a tmpfs: a kernel-enforced quota).
    """
    bound = [t for t in SYSTEM_TREES if os.path.isdir(t) and not os.path.islink(t)]
    extra = []
    for path in read_only:
        path = os.path.realpath(path) if os.path.islink(path) else os.path.abspath(path)
        if os.path.exists(path) and not _covered(path, bound + extra):
            extra.append(path)
    for h in hidden:
        h = os.path.abspath(os.path.expanduser(h))
        tree = next((t for t in bound + extra if _covered(h, [t])), None)
        if tree is not None:
            raise SandboxUnavailable(f"{h} must stay invisible to the sandbox but lies inside {tree}, which it "
                                     f"needs to read; move one of them")
    argv = [bwrap, "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--disable-userns",
            "--unshare-pid", "--as-pid-1", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup",
            "--hostname", "sandbox", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    argv += list(_system_mounts())
    argv += ["--dev", "/dev", *_host_view_mounts(), "--size", str(tmp_bytes), "--tmpfs", "/tmp"]
    if devices:
        for node in sorted(glob.glob("/dev/nvidia*")):
            argv += ["--dev-bind", node, node]
    for path in extra:
        argv += ["--ro-bind", path, path]
    argv += ["--bind" if scratch_writable else "--ro-bind", scratch, scratch,
             "--remount-ro", "/", "--chdir", scratch, "--"]  # "/": bwrap's own tmpfs
    return argv


def python_trees() -> list[str]:
    """What a Python child needs to read: the interpreter's installation and venv, the package only."""
    return [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)),
            os.path.join(PACKAGE_ROOT, "pipeline")]


def _env_trees(env: dict[str, str]) -> list[str]:
    """Library and CUDA directories the environment names (bound read-only so they resolve inside)."""
    dirs = [d for d in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
    return dirs + ([env["CUDA_HOME"]] if env.get("CUDA_HOME") else [])


def child_access(scratch: str, env: dict[str, str], sandbox: str) -> dict[str, list[str]]:
    """The child's filesystem allow-list (landlock.restrict): what it may read, write and open as a device.

    Read: the Python installation and the package, the library trees, the directories the environment
    names, the loader's cache, its own process's /proc entries (/proc/self), /proc/cpuinfo, the parts of /proc
    and /sys the sandbox shows (PROC_VISIBLE, `visible_sys`; under bwrap also SYS_LISTED, whose mounted copies
    hold nothing else), and the scratch directory that holds the artefact. Write:
    its private /tmp under bwrap (the scratch stays read-only there), the scratch without bwrap."""
    devices = DEVICE_NODES + sorted(glob.glob("/dev/nvidia*"))
    listed = SYS_LISTED if sandbox == "bwrap" else []  # there they hold only what `visible_sys` bound back
    read = [*python_trees(), *LIBRARY_TREES, *sorted(glob.glob("/usr/local/cuda-*")), *_env_trees(env),
            "/etc/ld.so.cache", "/proc/self", "/proc/cpuinfo", *[f"/proc/{p}" for p in PROC_VISIBLE], *visible_sys(),
            *listed, scratch]
    return {"read": read, "write": ["/tmp"] if sandbox == "bwrap" else [scratch], "devices": devices}


def bwrap_environment(bwrap_env: dict[str, str]) -> dict[str, str]:
    """bwrap's own environment: what it needs to run, nothing of the evaluator's (tokens, keys). A process of
    the sandbox that can read bwrap's /proc/<pid>/environ then learns nothing."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **bwrap_env}


# --- memory watch -------------------------------------------------------------------------------
def _rss_bytes(pid: int) -> int:
    """Resident memory of `pid` and all its descendants (bwrap, its init, the child)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        break
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            pass
    return total


# --- the child ----------------------------------------------------------------------------------
class ChildProcess:
    """One sandboxed child; use as a context manager so it is always reaped.

    `hidden`: paths the sandbox must not show (the compile and result caches; the home directory
    is never bound). `bwrap_path`/`libseccomp_path`: explicit tools ('' finds them). Raises
    SandboxUnavailable (one sentence: what is missing, the fix) before starting anything when
    `sandbox="bwrap"` cannot run here.
    """

    def __init__(self, gpu: str | None, user: str, memory_limit_bytes: int, preload_torch: bool = False,
                 startup_timeout_s: float = 60.0, sandbox: str = "bwrap", bwrap_path: str = "",
                 libseccomp_path: str = "", hidden: tuple[str, ...] = (), hello_now: bool = True):
        """The child's process, started; with `hello_now` also through its trusted start (`hello`), otherwise
        the caller says hello when it is ready for the child's CUDA context (a warm start: warm.py)."""
        if sandbox not in ("bwrap", "none"):
            raise ValueError(f"sandbox must be 'bwrap' or 'none', not {sandbox!r}")
        self.memory_limit_bytes = memory_limit_bytes
        self.ops: list[str] = []  # every request's op, in order (warm.py: what a child ran before it was handed out)
        libseccomp = find_libseccomp(libseccomp_path)
        if sandbox == "bwrap":
            bwrap, bwrap_env = require_bwrap(bwrap_path)
            if not libseccomp:
                raise SandboxUnavailable("eval.sandbox is 'bwrap' but libseccomp.so.2 was not found (system library "
                                         "path or .sandbox-tools/lib); install libseccomp2, run "
                                         "benchmarks/tools/sandbox_tools.sh, or set eval.sandbox=none")
        self.scratch = tempfile.mkdtemp(prefix="cudaperf-child-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        tmp = "/tmp" if sandbox == "bwrap" else self.scratch  # the one place it writes: its quota'd tmpfs under bwrap
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": os.pathsep.join(
               p for p in [PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")] if p),
               "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1", "HOME": tmp, "TMPDIR": tmp,
               "CUDA_CACHE_DISABLE": "1"}
        for key in ("LD_LIBRARY_PATH", "CUDA_HOME", "VIRTUAL_ENV"):
            if key in os.environ:
                env[key] = os.environ[key]
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu
        if preload_torch:  # torch imported as the process starts, before hello (main.py): no CUDA in it
            env["CUDAPERF_CHILD_PRELOAD_TORCH"] = "1"
        try:
            user = self._start(sandbox, env, user, str(to_child_r), str(from_child_w),
                               (bwrap, bwrap_env) if sandbox == "bwrap" else ("", {}), hidden)
        except BaseException:
            for fd in (self._to_child, self._from_child):
                os.close(fd)
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self._buffer = b""
        self._hello = {"op": "hello", "scratch": self.scratch, "tmp": tmp, "sandbox": sandbox, "user": user,
                       "isolate_network": sandbox == "none", "preload_torch": preload_torch,
                       "libseccomp": libseccomp, "access": child_access(self.scratch, env, sandbox)}
        self._startup_timeout_s = startup_timeout_s
        self.sandbox_info: dict = {}
        self._up = False  # its "ready" line read: Python (and torch where asked) imported
        if hello_now:
            self.hello()

    def ready(self) -> None:
        """Wait until the child's Python is up (torch imported where asked; nothing on the GPU yet): a warm start
        takes the GPU's lock only after this, for `hello`'s CUDA context."""
        if self._up:
            return
        try:
            self._answer("ready", self._startup_timeout_s)
        except BaseException:
            self.close()
            raise
        self._up = True

    def hello(self) -> None:
        """The child's trusted start: limits, the user, its CUDA context, the allow-lists (main.apply_sandbox).
        Before it the process only started Python (and imported torch where asked): nothing on the GPU."""
        self.ready()
        try:
            reply = self.request(self._hello, self._startup_timeout_s)
        except BaseException:
            self.close()
            raise
        self.sandbox_info = dict(reply["sandbox"], sandbox=self._hello["sandbox"], outside_uid=os.geteuid())

    def _start(self, sandbox: str, env: dict, user: str, fd_in: str, fd_out: str, tools: tuple, hidden) -> str:
        """Launch the child (inside bwrap, or as `user` for sandbox='none'); returns the user it runs as."""
        program = self._program(fd_in, fd_out)
        if sandbox == "bwrap":
            bwrap, bwrap_env = tools
            user = ""  # the user namespace gives it uid 65534; no setuid needed
            hide = [str(Path.home()), *hidden, os.path.join(PACKAGE_ROOT, "runs")]
            argv = bwrap_command(bwrap, self.scratch, python_trees() + _env_trees(env), env, hide, devices=True,
                                 tmp_bytes=CHILD_TMP_BYTES, scratch_writable=False)
            argv, popen_env = argv + program, bwrap_environment(bwrap_env)
        else:
            argv, popen_env = program, env
            if user and os.geteuid() == 0:
                import pwd
                try:
                    pw = pwd.getpwnam(user)
                    os.chown(self.scratch, pw.pw_uid, pw.pw_gid)
                except KeyError:
                    user = ""
        self.log_path = os.path.join(self.scratch, "child.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=popen_env, cwd=self.scratch, pass_fds=(int(fd_in), int(fd_out)),
                                         start_new_session=True)
        return user

    @property
    def pid(self) -> int:
        """Host pid of the child itself (under bwrap: the deepest process below bwrap)."""
        pid = self.proc.pid
        while True:
            try:
                with open(f"/proc/{pid}/task/{pid}/children") as f:
                    below = f.read().split()
            except OSError:
                return pid
            if not below:
                return pid
            pid = int(below[0])

    def _program(self, fd_in: str, fd_out: str) -> list[str]:
        """The child's argv (after bwrap's, when sandboxed)."""
        return [sys.executable, "-m", "pipeline.evaluation.child.main", fd_in, fd_out]

    def place(self, path: str) -> str:
        """Copy a file into the scratch directory, readable by the child's user."""
        dst = os.path.join(self.scratch, os.path.basename(path))
        shutil.copyfile(path, dst)
        os.chmod(dst, 0o755)
        return dst

    def request(self, msg: dict, timeout_s: float) -> dict:
        self.ops.append(msg.get("op", ""))
        data = (json.dumps(msg) + "\n").encode()
        if self.proc.poll() is not None:  # bwrap gone: what is left of the sandbox is dying with it
            raise ChildFailed(f"the child process ended before '{msg['op']}' ({_describe_exit(self.proc.returncode)})",
                              log=self.log())
        try:
            while data:
                data = data[os.write(self._to_child, data):]
        except OSError:  # the child is gone (broken pipe): report how it ended
            code = self.proc.wait()
            raise ChildFailed(f"the child process ended before '{msg['op']}' ({_describe_exit(code)})",
                              log=self.log()) from None
        return self._answer(msg["op"], timeout_s)

    def _answer(self, op: str, timeout_s: float) -> dict:
        """The child's next line: its answer to `op` (or, for "ready", the line it writes once Python is up)."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise ChildFailed(f"no answer to '{op}' within {timeout_s:.0f} s", timeout=True, log=self.log())
            ready, _, _ = select.select([self._from_child], [], [], min(left, 0.05))
            if self.memory_limit_bytes and _rss_bytes(self.proc.pid) > self.memory_limit_bytes:
                self.kill()
                raise ChildFailed(f"the child exceeded {self.memory_limit_bytes >> 20} MiB of host memory",
                                  memory=True, log=self.log())
            if ready:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    code = self.proc.wait()
                    raise ChildFailed(f"the child process ended during '{op}' ({_describe_exit(code)})",
                                      log=self.log())
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def log(self, limit: int = 2000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                data = f.read()
            return data[-limit:].decode(errors="replace")
        except OSError:
            return ""

    def freeze(self) -> None:
        """Stop every thread of the child (SIGSTOP): outside its own requests it cannot watch the buffers,
        precompute, or disturb the GPU from the host while others are timed. Kernels it left running are
        the trusted side's GPU probes' to catch."""
        self._signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        """Kill the child's process group (with bwrap: bwrap, whose death ends the whole sandbox)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                os.write(self._to_child, b'{"op": "exit"}\n')
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> "ChildProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    if 128 < code < 128 + 65:  # bwrap's init reports a child killed by signal n as 128 + n
        try:
            return f"exit status {code}: killed by {signal.Signals(code - 128).name}"
        except ValueError:
            pass
    return f"exit status {code}"
