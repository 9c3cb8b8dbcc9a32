"""Stand-in actors: the methods the driver calls on each role, the work replaced by a service time.

Each stand-in keeps the signature of the real actor (actors/generators.py, evaluators.py, learners.py), so the
real `SupervisedPool`, `CompileThenEvaluate`, `PoolWaiter`, `WeightState` and `LearnerGroup` drive them. What
they return has the real types: a generator's `GenerationResult` holds token ids of the tiny tokenizer and a
fenced answer that defines the task's entry point (so parsing and evaluation run as for a real policy), a
compiler's `CompileResult` is a build that succeeded, an evaluator's `EvalResult`s say `correct` with a
speedup drawn from the candidate's hash, a learner's update returns the metrics the loop reads.

Service times (`ServiceTimes`) come from measured figures (benchmarks/scale_sim.py says which) and can be
scaled by one factor for a machine with fewer cores than the simulated cluster has roles. Each stand-in
records its busy seconds (`busy_s`), so a benchmark can read every role's busy fraction.
"""
from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from dataclasses import dataclass

import ray


@dataclass(frozen=True)
class ServiceTimes:
    """Seconds of work per call of each role."""
    generate_per_sequence_s: float = 0.05   # one sampled answer, within a batch
    generate_per_call_s: float = 0.02       # one generation call's fixed cost
    compile_s: float = 0.9                  # one candidate: gate, nvcc, artefact check (CPU)
    evaluate_per_candidate_s: float = 0.2   # one candidate on one GPU: 300 a minute
    evaluate_per_group_s: float = 0.0       # a group's inputs, references and baseline
    update_s: float = 1.0                   # one learner update
    export_s: float = 0.05                  # gathering the weights for the generators

    def scaled(self, factor: float) -> ServiceTimes:
        return ServiceTimes(**{k: v * factor for k, v in self.__dict__.items()})


class _Busy:
    """Busy seconds of one actor, for the benchmark's busy fractions."""

    def __init__(self):
        self._lock = threading.Lock()
        self.total = 0.0

    def work(self, seconds: float) -> None:
        time.sleep(seconds)
        with self._lock:
            self.total += seconds


class _StandIn:
    """What every stand-in answers besides its role's work: its busy seconds, liveness, process and node."""
    times = ServiceTimes()
    calls_per_actor = 1  # calls served at once (threads): the number of evaluators or compilers one process stands for
    busy: _Busy

    def busy_s(self) -> float:
        return self.busy.total

    def ping(self) -> str:
        return "ok"

    def pid(self) -> int:
        return os.getpid()

    def node(self) -> str:
        return ray.get_runtime_context().get_node_id()


class StandInGenerator(_StandIn):
    """`GeneratorActor`'s methods; an answer per request after the generation time."""

    def __init__(self, model_cfg, rollout_cfg, seed: int):
        from pipeline.rollout.tiny_model import load_tokenizer, resolve_model_path
        self.tokenizer = load_tokenizer(resolve_model_path(model_cfg))
        self.version = 0
        self.busy = _Busy()
        self._answers: dict[str, tuple[list[int], str]] = {}
        self._eot = self.tokenizer.convert_tokens_to_ids("<|im_end|>")

    def _answer(self, prompt_ids: list[int]) -> tuple[list[int], str]:
        text = self.tokenizer.decode(prompt_ids[-400:], skip_special_tokens=True)
        names = re.findall(r'extern\s+"C"[^(;{]*?\b(\w+)\s*\(', text) or re.findall(r"\bvoid\s+(\w+)\s*\(", text)
        name = names[-1] if names else "run"
        if name not in self._answers:
            answer = (f'```cuda\nextern "C" void {name}(const float* x, float* y, int n) {{\n'
                      f"    for (int i = 0; i < n; ++i) y[i] = x[i];\n}}\n```")
            self._answers[name] = (self.tokenizer.encode(answer, add_special_tokens=False) + [self._eot], answer)
        return self._answers[name]

    def generate(self, requests, sampling):
        from pipeline.rollout.generation import GenerationResult, Sample, with_extracted
        n = sum(r.n for r in requests)
        elapsed = self.times.generate_per_call_s + n * self.times.generate_per_sequence_s
        self.busy.work(elapsed)
        out = []
        for r in requests:
            ids, text = self._answer(r.prompt_ids)
            ids = ids[:sampling.max_new_tokens]
            out.append([Sample(list(ids), [-0.5] * len(ids), text, "stop" if ids[-1] == self._eot else "length")
                        for _ in range(r.n)])
        out = with_extracted(requests, out)  # answers are read where they are generated, as Generator does
        return GenerationResult(out, self.version, elapsed, "stand-in", sum(len(s.token_ids) for g in out for s in g))

    def update_weights(self, named_tensors, version: int) -> int:
        self.version = version
        return version

    def weight_version(self) -> int:
        return self.version


class StandInCompiler(_StandIn):
    """`CompilerActor`'s methods; a successful build after the compile time."""

    def __init__(self, compile_cfg, gate_profile: str = "strict", limits=None):
        self.busy = _Busy()

    def compile(self, candidate, task):
        from pipeline.evaluation.build.compile import CompileResult
        self.busy.work(self.times.compile_s)
        return CompileResult(ok=True, log="", key=candidate.content_hash(), worker_s=self.times.compile_s)

    def compile_group(self, candidates, task):
        return [self.compile(c, task) for c in candidates]


class StandInEvaluator(_StandIn):
    """`EvaluatorActor`'s methods; a group's results after its evaluation time."""

    def __init__(self, eval_cfg, compile_cfg, use_gpu: bool):
        self.busy = _Busy()

    def evaluate(self, task, candidates, compiled=None):
        from pipeline.core.records import EvalResult
        self.busy.work(self.times.evaluate_per_group_s + len(candidates) * self.times.evaluate_per_candidate_s)
        out = []
        for c in candidates:
            h = c.content_hash()
            speedup = 0.5 + int(hashlib.sha256(h.encode()).hexdigest()[:4], 16) / 65535 * 2.0
            out.append(EvalResult(task_id=task.id, candidate_hash=h, format=c.format, turn=c.turn, verdict="correct",
                                  speedup=speedup, evaluator_version="stand-in",
                                  stage_s={"evaluate": self.times.evaluate_per_candidate_s}))
        return out


class StandInLearner(_StandIn):
    """`LearnerActor`'s methods; an update after the update time, checkpoints of the run state alone."""

    def __init__(self, rank: int, world_size: int):
        self.rank = rank
        self.busy = _Busy()

    def address(self):
        from pipeline.rl.distributed import free_port
        return ray.util.get_node_ip_address(), free_port()

    def setup(self, learner_cfg, rl_cfg, model_path, temperature, master_addr, master_port, use_gpu, seed,
              top_p=1.0) -> dict:
        return {"parameters": 0, "trainable": 0}

    def train(self, sequences) -> dict:
        self.busy.work(self.times.update_s)
        return {"learner/update_s": self.times.update_s, "learner/loss": 0.0, "learner/ratio_mean_first": 1.0,
                "learner/sequences": float(len(sequences))}

    def export_weights(self):
        import torch
        self.busy.work(self.times.export_s)
        return [("lm_head.weight", torch.zeros(1))] if self.rank == 0 else []

    def save(self, directory: str, run_state: dict) -> str:
        import json
        from pathlib import Path
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        (d / "run_state.json").write_text(json.dumps(run_state))
        return str(d)

    def load(self, directory: str) -> dict:
        import json
        from pathlib import Path
        return json.loads((Path(directory) / "run_state.json").read_text())


def stand_in_roles(times: ServiceTimes = ServiceTimes(), evaluator_calls: int = 1, compiler_calls: int = 1):
    """The four stand-ins with these service times (a class of each, made for them), as `RoleActors`.
    `evaluator_calls`, `compiler_calls`: the calls one stand-in process serves at once, each in its own thread,
    so that one process stands for that many evaluators (GPUs) or compilers: the driver's pools then hold that
    many times fewer actors of that many calls each (`calls_per_actor`), and a simulation of hundreds of GPUs
    fits this machine's memory."""
    from actors.cluster import RoleActors  # here: the actors' own processes never import the driver's modules

    def made(cls, calls: int = 1):  # a name the module does not define: Ray pickles the class by value
        return type(f"{cls.__name__}Timed", (cls,), {"times": times, "calls_per_actor": calls,
                                                      "__module__": cls.__module__})
    return RoleActors(generator=made(StandInGenerator), evaluator=made(StandInEvaluator, evaluator_calls),
                      compiler=made(StandInCompiler, compiler_calls), learner=made(StandInLearner))
