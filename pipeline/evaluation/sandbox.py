"""Child processes for untrusted work, from the trusted side: spawn, talk, watch, kill.

`ChildProcess` starts `pipeline.evaluation.child` in a new session with a private scratch
directory, the GPU it may use in CUDA_VISIBLE_DEVICES, and a clean environment; the child then
enters a private network namespace and drops to an unprivileged user where the host allows it
(what held is reported in `sandbox_info`). Every request has a wall-clock deadline, and the
child's resident memory is watched: past either, the whole process group is killed and the
request raises `ChildFailed` with `timeout` or `memory` set. Its stdout/stderr go to a log file
that is read only for diagnostics, never for a verdict.
"""
from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class ChildFailed(RuntimeError):
    def __init__(self, message: str, timeout: bool = False, memory: bool = False, log: str = ""):
        super().__init__(message)
        self.timeout, self.memory, self.log = timeout, memory, log


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class ChildProcess:
    """One sandboxed child; use as a context manager so it is always reaped."""

    def __init__(self, gpu: str | None, user: str, memory_limit_bytes: int, preload_torch: bool = False,
                 startup_timeout_s: float = 60.0):
        self.memory_limit_bytes = memory_limit_bytes
        self.scratch = tempfile.mkdtemp(prefix="cudaperf-child-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": os.pathsep.join(
            p for p in [PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")] if p),
            "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1", "HOME": self.scratch, "TMPDIR": self.scratch}
        for key in ("LD_LIBRARY_PATH", "CUDA_HOME", "VIRTUAL_ENV"):
            if key in os.environ:
                env[key] = os.environ[key]
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu
        if user and os.geteuid() == 0:
            import pwd
            try:
                pw = pwd.getpwnam(user)
                os.chown(self.scratch, pw.pw_uid, pw.pw_gid)
            except KeyError:
                user = ""
        self.log_path = os.path.join(self.scratch, "child.log")
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline.evaluation.child", str(to_child_r), str(from_child_w)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.scratch,
            pass_fds=(to_child_r, from_child_w), start_new_session=True)
        log.close()
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self.sandbox_info = self.request({"op": "hello", "scratch": self.scratch, "user": user,
                                          "isolate_network": True, "preload_torch": preload_torch},
                                         startup_timeout_s)["sandbox"]

    def place(self, path: str) -> str:
        """Copy a file into the scratch directory, readable by the child's user."""
        dst = os.path.join(self.scratch, os.path.basename(path))
        shutil.copyfile(path, dst)
        os.chmod(dst, 0o755)
        return dst

    def request(self, msg: dict, timeout_s: float) -> dict:
        data = (json.dumps(msg) + "\n").encode()
        try:
            while data:
                data = data[os.write(self._to_child, data):]
        except OSError:  # the child is gone (broken pipe): report how it ended
            code = self.proc.wait()
            raise ChildFailed(f"the child process ended before '{msg['op']}' ({_describe_exit(code)})",
                              log=self.log()) from None
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise ChildFailed(f"no answer to '{msg['op']}' within {timeout_s:.0f} s", timeout=True, log=self.log())
            ready, _, _ = select.select([self._from_child], [], [], min(left, 0.05))
            if self.memory_limit_bytes and _rss_bytes(self.proc.pid) > self.memory_limit_bytes:
                self.kill()
                raise ChildFailed(f"the child exceeded {self.memory_limit_bytes >> 20} MiB of host memory",
                                  memory=True, log=self.log())
            if ready:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    code = self.proc.wait()
                    raise ChildFailed(f"the child process ended during '{msg['op']}' ({_describe_exit(code)})",
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

    def kill(self) -> None:
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
    return f"exit status {code}"
