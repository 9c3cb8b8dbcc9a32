"""Which part of the child's sandbox a CUDA context needs: the probe op under variants of the sandbox, one line each.

    python benchmarks/experiments/sandbox_gpu_probe.py            # every variant
    python benchmarks/experiments/sandbox_gpu_probe.py --only wide # one (to run under strace -f: what the driver reads)

Variants: "as built" (bubblewrap's narrowed /proc and /sys, the Landlock allow-list), "torch" (the same with torch's
CUDA runtime started, as in KernelBench children), "mounts only" (no Landlock), "no landlock, wide" and "wide"
(the whole /proc and /sys as before they were narrowed: the baseline whose trace shows everything the driver reads).
Each line also says whether host-wide files (/proc/loadavg, /proc/meminfo, /proc/driver/nvidia/version) were readable.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from pipeline.evaluation.child import sandbox  # noqa: E402

BASE_ACCESS, BASE_MOUNTS = sandbox.child_access, sandbox._host_view_mounts
HOST_WIDE = ["/proc/loadavg", "/proc/meminfo", "/proc/driver/nvidia/version", "/sys/class/net"]


def wide_mounts() -> tuple[str, ...]:
    """/proc and /sys as they were before: a fresh /proc, the host's /sys read-only but for its debug trees."""
    args = ["--proc", "/proc", "--ro-bind", "/sys", "/sys"]
    for path in ["/sys/kernel/debug", "/sys/kernel/tracing", "/sys/kernel/security", "/sys/firmware", "/sys/fs/bpf"]:
        args += ["--tmpfs", path, "--remount-ro", path]
    return tuple(args)


def wide_access(scratch, env, mode):
    access = BASE_ACCESS(scratch, env, mode)
    return dict(access, read=access["read"] + ["/proc", "/sys"])


VARIANTS = {  # name: (child_access, mounts, preload_torch)
    "built": (BASE_ACCESS, BASE_MOUNTS, False),
    "torch": (BASE_ACCESS, BASE_MOUNTS, True),
    "mounts_only": (lambda s, e, m: {}, BASE_MOUNTS, False),
    "wide_no_landlock": (lambda s, e, m: {}, wide_mounts, False),
    "wide": (wide_access, wide_mounts, False),
    "wide_torch": (wide_access, wide_mounts, True),
}


class ReadingChild(sandbox.ChildProcess):
    """The production child; before serving, a thread-free look at a few host-wide files from inside."""

    def _program(self, fd_in: str, fd_out: str) -> list[str]:
        code = ("import sys, runpy; from pipeline.evaluation.child import main as m; orig = m.apply_sandbox\n"
                "def applied(hello):\n"
                "    out = orig(hello); seen = {}\n"
                f"    for p in {HOST_WIDE!r}:\n"
                "        try:\n"
                "            import os; seen[p] = len(os.listdir(p)) if os.path.isdir(p) else len(open(p).read())\n"
                "        except OSError as e: seen[p] = e.strerror\n"
                "    out['host_wide'] = seen; return out\n"
                "m.apply_sandbox = applied; sys.argv = ['main', sys.argv[1], sys.argv[2]]; m.main()\n")
        return [sys.executable, "-c", code, fd_in, fd_out]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(VARIANTS), help="run this variant alone")
    args = parser.parse_args()
    for name, (access, mounts, torch) in VARIANTS.items():
        if args.only and name != args.only:
            continue
        sandbox.child_access, sandbox._host_view_mounts = access, mounts
        try:
            with ReadingChild("0", "", 1 << 34, preload_torch=torch) as c:
                reply = c.request({"op": "probe"}, 120)
                info = c.sandbox_info
                print(f"{name:17} landlock={info.get('landlock', '-')} ok={reply.get('ok')} "
                      f"host_wide={info.get('host_wide')} {reply.get('device') or reply.get('error', '')[:200]}",
                      flush=True)
        except Exception as e:
            print(f"{name:17} failed: {str(e)[:300]} log: {getattr(e, 'log', '')[-600:]}", flush=True)


if __name__ == "__main__":
    main()
