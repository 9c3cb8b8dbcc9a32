"""Shared pieces of the learner tests: the tiny random Qwen2, a fixed batch, and the worker that
each of two spawned CPU ranks runs (it must live in an importable module for spawn)."""
from pathlib import Path

import torch

from pipeline.core.config import LearnerSection, RLSection
from pipeline.rl.batch import TrainSequence, make_microbatches, split_across_ranks

TINY = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
            intermediate_size=256, vocab_size=512, max_position_embeddings=512)
BUDGET_TOKENS = 160  # padded tokens per micro-batch: the fixed batch needs several passes


def tiny_model():
    from transformers import Qwen2Config, Qwen2ForCausalLM
    return Qwen2ForCausalLM(Qwen2Config(**TINY))


def learner_cfg(**kw) -> LearnerSection:
    base = dict(lr=1e-3, max_tokens_per_microbatch=BUDGET_TOKENS, sync_bucket_bytes=1 << 20)
    return LearnerSection(**{**base, **kw})


def fixed_sequences(n: int = 8, seed: int = 0) -> list[TrainSequence]:
    """n turns of random tokens: prompts of 10-17 tokens, responses of 20-34, advantages +-1."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        p, r = 10 + i, 20 + 2 * i
        ids = torch.randint(0, TINY["vocab_size"], (p + r,), generator=g).tolist()
        out.append(TrainSequence(ids, p, [0.0] * r, 1.0 if i % 2 else -1.0, ("ep", i)))
    return out


def on_policy(learner, microbatches):
    """Use the learner's own logprobs as the generator's (ratio 1 before the first update)."""
    for mb, lp in zip(microbatches, learner.logprobs(microbatches)):
        mb.old_logprobs = lp * mb.response_mask
    return microbatches


def rank_worker(rank: int, world: int, port: int, out_dir: str, zero_stage: int = 3) -> None:
    """One of `world` ZeRO CPU ranks: one PPO step on its share of the fixed batch, an export
    gathered on every rank, a checkpoint, and a fresh learner restored from it."""
    from pipeline.rl.distributed import init_process_group
    init_process_group(rank, world, port)
    from pipeline.rl.learner import Learner

    out = Path(out_dir)
    cfg = learner_cfg(zero_stage=zero_stage)
    learner = Learner(cfg, RLSection(), tiny_model, seed=0)
    # rank 0 gets two micro-batches, rank 1 one: the short rank must pad with an empty pass
    share = split_across_ranks(fixed_sequences(), world)[rank]
    mbs = make_microbatches(share, 1000 if rank else BUDGET_TOKENS)
    metrics = learner.train_step(on_policy(learner, mbs))
    buckets = [[(name, t.detach().clone()) for name, t in bucket] for bucket in learner.export_buckets(all_ranks=True)]
    rank0_only = sum(1 for _ in learner.export_buckets())
    learner.save_checkpoint(out / "ckpt", run_state={"driver_step": 1})
    restored = Learner(cfg, RLSection(), tiny_model, seed=1)
    run_state = restored.load_checkpoint(out / "ckpt")
    torch.save({"metrics": metrics, "microbatches": len(mbs), "buckets": buckets, "rank0_only": rank0_only,
                "restored": restored.state_dict_for_export(), "restored_step": restored.step,
                "run_state": run_state}, out / f"rank{rank}.pt")
