"""The child's sandbox seen from inside: a real ChildProcess under bwrap tries what a hostile candidate would.

`ProbeChild` is a ChildProcess whose program is a probe script (copied into its scratch
directory) instead of the serve loop: the same bwrap command, the same hello message and the
same `child.apply_sandbox` (namespaces, rlimits, seccomp), then attempts that must fail (exec,
fork, subprocess, inet sockets, ptrace, writes outside scratch, reads of caches and home) and
two that must work (writing in scratch, a thread). No GPU is needed.
"""
from __future__ import annotations

import ast
import ctypes.util
import os
import shutil
import sys
import time
import uuid
from pathlib import Path

import pytest

from pipeline.evaluation.child.sandbox import (PACKAGE_ROOT, ChildFailed, ChildProcess, SandboxUnavailable, bwrap_command,
                                         find_bwrap, python_trees)

PROBE = r'''
import ctypes, json, os, socket, subprocess, sys, threading
from pipeline.evaluation.child.main import apply_sandbox

rin, wout = os.fdopen(int(sys.argv[1]), "r"), os.fdopen(int(sys.argv[2]), "w")
def send(obj):
    wout.write(json.dumps(obj) + "\n")
    wout.flush()

send({"ready": True})  # the child's first line, as main.main writes it
hello = json.loads(rin.readline())
applied = apply_sandbox(hello)
send({"ok": True, "sandbox": applied})
paths = json.loads(rin.readline())["paths"]
results = {}
def attempt(name, fn):
    try:
        got = fn()
        results[name] = "ok" + (f" {sorted(got)}" if isinstance(got, list) else "")
    except Exception as e:
        results[name] = f"{type(e).__name__}: {e}"

def write(path):
    with open(path, "w") as f:
        f.write("x")

def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)

def inet_connect():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect(("127.0.0.1", 22))

def ptrace():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(0, 0, 0, 0) != 0:  # PTRACE_TRACEME
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))

def thread():
    seen = []
    t = threading.Thread(target=lambda: seen.append(1))
    t.start()
    t.join()
    assert seen == [1]

attempt("fork", fork)
attempt("subprocess", lambda: subprocess.run(["/bin/true"], check=True))
attempt("inet_connect", inet_connect)
attempt("inet6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM))
attempt("netlink", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW))
attempt("unix_socketpair", lambda: socket.socketpair(socket.AF_UNIX))
attempt("ptrace", ptrace)
def other_processes():  # the child is pid 1 of its namespace: nothing else (no unfiltered reaper) is there
    pids = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    if not pids:
        raise ProcessLookupError("no other process is visible")
    for p in pids:
        os.kill(int(p), 0)
    return pids

attempt("other_process", other_processes)
results["own_pid"] = f"pid {os.getpid()}"
seen = ""
try:
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
except OSError:  # the allow-list does not let it list /proc: try the first pids by name
    pids = [str(p) for p in range(1, 64)]
for p in pids:
    try:
        seen += open(f"/proc/{p}/environ", "rb").read().decode(errors="replace")
    except OSError:
        pass
results["host_environ"] = "ok: the evaluator's environment" if "CUDAPERF_SANDBOX_SECRET" in seen else "not visible"
for name, path in paths["write"].items():
    attempt("write_" + name, lambda p=path: write(p))
for name, path in paths["read"].items():
    attempt("read_" + name, lambda p=path: os.listdir(p) if os.path.isdir(p) else [open(p).read(40)])
attempt("write_scratch", lambda: write(os.path.join(os.getcwd(), "inside.txt")))
attempt("write_private_tmp", lambda: write("/tmp/inside.txt"))
attempt("read_placed", lambda: [open(os.path.join(os.getcwd(), "placed.txt")).read()])

def fill_tmp():  # many files, each under the file-size limit: only the tmpfs's size stops them
    chunk = b"x" * (1 << 20)
    for i in range(2000):
        with open(f"/tmp/fill{i}", "wb") as f:
            for _ in range(16):
                f.write(chunk)

attempt("fill_tmp", fill_tmp)
for i in range(2000):
    try:
        os.unlink(f"/tmp/fill{i}")
    except OSError:
        break

def native_open(path):  # what native code reaches by finding open/read in the loaded objects' symbol tables
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.open(path.encode(), 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    libc.close(fd)

for name, path in paths["outside_allow_list"].items():
    attempt("native_open_" + name, lambda p=path: native_open(p))
attempt("proc_self_mem", lambda: open("/proc/self/mem", "r+b"))
attempt("thread", thread)
send(results)
json.loads(rin.readline())  # "lock": what a loaded candidate meets once the child has locked execution
import mmap
from pipeline.evaluation.child.main import lock_exec
locked = {"lock": lock_exec(hello, applied, native=True)}
def attempt2(name, fn):
    try:
        fn()
        locked[name] = "ok"
    except Exception as e:
        locked[name] = f"{type(e).__name__}: {e}"
attempt2("memfd", lambda: os.memfd_create("lib"))
attempt2("exec_mapping", lambda: mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_EXEC))
def dlopen_from_tmp():
    import shutil
    shutil.copyfile(paths["library"], "/tmp/lib.so")
    ctypes.CDLL("/tmp/lib.so")
attempt2("dlopen_written_library", dlopen_from_tmp)
attempt2("data_mapping", lambda: mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE))
send(locked)
json.loads(rin.readline())
try:
    os.execv("/bin/true", ["/bin/true"])
except OSError as e:
    send({"exec": f"{type(e).__name__}: {e}"})
'''


PYTHON_TREES = " ".join(python_trees())


class ProbeChild(ChildProcess):
    """The production ChildProcess with the probe script as its program."""

    def _program(self, fd_in: str, fd_out: str) -> list[str]:
        script = Path(self.scratch, "probe.py")
        script.write_text(PROBE)
        return [sys.executable, str(script), fd_in, fd_out]


@pytest.fixture
def secrets_dirs():
    """A compile cache, a result cache (in the home directory) and a file in each, as the evaluator keeps them."""
    base = Path.home() / ".cache" / f"cudaperf-sandbox-test-{uuid.uuid4().hex[:8]}"
    dirs = {"compile_cache": base / "compile", "result_cache": base / "results"}
    for d in dirs.values():
        d.mkdir(parents=True)
        (d / "entry.json").write_text("{}")
    yield dirs
    shutil.rmtree(base, ignore_errors=True)


def test_candidate_code_cannot_leave_the_sandbox(secrets_dirs, monkeypatch):
    monkeypatch.setenv("CUDAPERF_SANDBOX_SECRET", "token")  # the evaluator's environment: never readable inside
    host_tmp = f"/tmp/cudaperf-probe-{uuid.uuid4().hex[:8]}"
    project_file = os.path.join(PACKAGE_ROOT, f"probe-{uuid.uuid4().hex[:8]}.txt")
    package_file = os.path.join(PACKAGE_ROOT, "pipeline", f"probe-{uuid.uuid4().hex[:8]}.txt")
    writes = {"host_tmp": host_tmp, "project": project_file, "package": package_file,
              **{k: str(v / "new.json") for k, v in secrets_dirs.items()}}
    reads = {"home": str(Path.home()), "runs": os.path.join(PACKAGE_ROOT, "runs"),
             **{k: str(v) for k, v in secrets_dirs.items()},
             **{k + "_file": str(v / "entry.json") for k, v in secrets_dirs.items()}}
    if os.path.exists("/etc/shadow"):
        reads["shadow"] = "/etc/shadow"
    os.makedirs(reads["runs"], exist_ok=True)
    outside = {"etc_passwd": "/etc/passwd", "usr_bin": shutil.which("env") or "/usr/bin/env",
               "usr_share": "/usr/share"}
    library = ctypes.util.find_library("m") or "libm.so.6"
    library = next((os.path.join(d, library) for d in ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu",
                                                        "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")
                    if os.path.exists(os.path.join(d, library))), library)
    with ProbeChild(None, "", 1 << 30, hidden=tuple(str(v) for v in secrets_dirs.values())) as child:
        assert child.sandbox_info["seccomp"] is True and child.sandbox_info["uid"] == 65534
        assert child.sandbox_info["landlock"] >= 1, child.sandbox_info  # this kernel has Landlock
        Path(child.place(__file__)).rename(Path(child.scratch, "placed.txt"))  # what the evaluator places there
        results = child.request({"paths": {"write": writes, "read": reads, "outside_allow_list": outside,
                                           "library": library}, "op": "probe"}, 120)
        # the scratch is the host's disk: read-only inside; the private /tmp is writable up to its quota
        assert "Read-only file system" in results.pop("write_scratch")
        assert not Path(child.scratch, "inside.txt").exists()
        assert results.pop("write_private_tmp") == "ok"
        assert results.pop("read_placed").startswith("ok")
        assert "No space left" in results.pop("fill_tmp")
        for name in outside:  # in bound trees, but not on the allow-list the kernel enforces
            assert "Permission denied" in results.pop("native_open_" + name), name
        assert "Permission denied" in results.pop("proc_self_mem")
        assert results.pop("thread") == "ok"
        assert results.pop("own_pid") == "pid 1"
        assert results.pop("unix_socketpair") == "ok"  # the CUDA driver's AF_UNIX sockets; see seccomp.py
        # /tmp inside is private: a write there may succeed (also into a project checked out under /tmp,
        # which is hidden by that private /tmp except its read-only pipeline/), but never reaches the host
        for key, path in writes.items():
            if path.startswith("/tmp/") and not path.startswith(os.path.join(PACKAGE_ROOT, "pipeline")):
                results.pop(f"write_{key}")
        assert not os.path.exists(host_tmp)
        # the home directory exists inside only as the parent of a bound tree (a Python under ~/.pyenv):
        # none of its real entries, such as the caches in ~/.cache, are there
        home = results.pop("read_home")
        listing = ast.literal_eval(home[3:]) if home.startswith("ok ") else []
        assert ".cache" not in home and all(name in PYTHON_TREES for name in listing)
        if "read_shadow" in results:  # private /etc files are covered (the uid inside maps to root's outside)
            shadow = results.pop("read_shadow")
            assert shadow == "ok ['']" or "Permission" in shadow, shadow
        for name, outcome in results.items():
            assert not outcome.startswith("ok"), f"{name} succeeded inside the sandbox: {outcome}"
        for name in ("fork", "subprocess", "inet_connect", "inet6", "netlink", "ptrace"):
            assert "Operation not permitted" in results[name], (name, results[name])
        for path in (project_file, package_file, *writes.values()):
            assert not os.path.exists(path)
        locked = child.request({"op": "lock"}, 60)
        assert locked.pop("lock") == "memfd and executable mappings"
        assert locked.pop("data_mapping") == "ok"
        for name, outcome in locked.items():  # no library from memory or from a file it wrote, no JIT'd code
            assert "Operation not permitted" in outcome or "failed to map" in outcome, (name, outcome)
        try:  # exec is refused by the filter: the probe answers instead of turning into /bin/true
            reply = child.request({"op": "exec"}, 30)
        except ChildFailed as e:
            pytest.fail(f"execve of /bin/true succeeded inside the sandbox: {e}")
        assert "Operation not permitted" in reply["exec"]


def test_sandbox_info_reports_what_held():
    with ChildProcess(None, "", 1 << 30) as child:
        info = child.sandbox_info
        assert info["sandbox"] == "bwrap" and info["uid"] == 65534 and info["user"] == "nobody"
        assert info["network_isolated"] is True and info["seccomp"] is True and info["seccomp_rules"] > 100
        reply = child.request({"op": "probe"}, 30)  # the serve loop still answers through the pipes
        if reply["ok"]:  # a GPU host: CUDA works under the namespaces and the filter
            assert reply["device"]
        else:
            assert "libcuda" in reply["error"] or "CUDA" in reply["error"], reply


def test_sandbox_none_is_reported():
    with ChildProcess(None, "", 1 << 30, sandbox="none") as child:
        assert child.sandbox_info["sandbox"] == "none"


def test_missing_bwrap_is_one_clear_sentence():
    with pytest.raises(SandboxUnavailable) as e:
        ChildProcess(None, "", 1 << 30, bwrap_path="/nonexistent/bwrap")
    msg = str(e.value)
    assert "\n" not in msg and msg.count(". ") == 0
    for part in ("bubblewrap", "/nonexistent/bwrap", "apt-get install bubblewrap", "benchmarks/tools/sandbox_tools.sh",
                 "eval.sandbox=none"):
        assert part in msg


def test_bwrap_found_in_sandbox_tools(tmp_path, monkeypatch):
    from pipeline.evaluation.child import sandbox
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "bwrap"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sandbox, "TOOLS_DIR", tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    path, env = find_bwrap()
    assert path == str(fake) and env["LD_LIBRARY_PATH"].split(os.pathsep)[0] == str(tmp_path / "lib")


def test_a_hidden_path_inside_a_bound_tree_is_refused(tmp_path):
    (tmp_path / "venv").mkdir()
    with pytest.raises(SandboxUnavailable, match="must stay invisible"):
        bwrap_command("bwrap", str(tmp_path), [str(tmp_path / "venv")], {}, [str(tmp_path / "venv" / "cache")],
                      devices=False)


def test_a_frozen_child_is_stopped_and_answers_after_thawing():
    with ChildProcess(None, "", 1 << 30) as child:
        child.freeze()
        for _ in range(50):  # SIGSTOP lands asynchronously
            with open(f"/proc/{child.pid}/status") as f:
                state = next(line for line in f if line.startswith("State:"))
            if "T" in state.split()[1]:
                break
            time.sleep(0.01)
        assert "T" in state.split()[1], state
        child.thaw()
        assert "ok" in child.request({"op": "probe"}, 30)
