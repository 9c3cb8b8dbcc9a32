"""Which part of the child's sandbox a CUDA context needs: the probe op under variants of the file allow-list.

    python benchmarks/experiments/sandbox_gpu_probe.py      # prints one line per variant
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from pipeline.evaluation.child import sandbox  # noqa: E402

base = sandbox.child_access
variants = {
    "as built": None,
    "no landlock": lambda s, e, m: {},
}
for name, fn in variants.items():
    sandbox.child_access = fn or base
    try:
        with sandbox.ChildProcess("0", "", 1 << 34) as c:
            reply = c.request({"op": "probe"}, 60)
            print(f"{name:22} landlock={c.sandbox_info.get('landlock')} ok={reply.get('ok')} "
                  f"{reply.get('device') or reply.get('error', '')[:160]}", flush=True)
    except Exception as e:
        print(f"{name:22} failed: {str(e)[:200]}", flush=True)
