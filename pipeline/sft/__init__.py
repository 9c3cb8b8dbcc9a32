"""`cudaperf sft --config FILE [section.key=value ...]`: the supervised warm start of the policy.

In: the tasks of `tasks.source` (the dataset's train split, `generated:train`, for real runs;
`builtin` in tests), the policy `model.path` ('tiny' starts from a random model), the `sft`,
`learner` and `rollout` sections. Out: a Hugging Face checkpoint (model + tokenizer) in
`<sft.output_dir>/hf` that `model.path` can point at (`cudaperf train` starts from it), the
DeepSpeed state beside it, `sft_log.jsonl` (one line per optimizer step) and, with
`sft.heldout_source`, a benchmark of the result on held-out tasks (scoring/bench.py).

Two modes, one training loop (the RL learner, pipeline/rl/learner.py, with the cross-entropy loss
of pipeline/rl/loss.py: the loss is on response tokens only):
- supervised: (prompt, implementation) pairs. The prompt is the episode's opening, built by
  pipeline/rollout/prompts.py through the chat template exactly as in RL; the response is the
  implementation in the answer format parsing.py reads back, ended by the end-of-turn token. Only
  implementations in the policy's format (c2cuda, light) are used. `keep_fastest_per_task` keeps
  the fastest ones: measured times (pipeline/assets/measured/) where every kept implementation of a
  task was measured correct, strategy order otherwise; the log says which. `rename_copies_per_pair`
  adds copies of c2cuda pairs with the function renamed throughout, so the policy learns to take
  the name from the prompt, and `entry_name_weight` weights the loss on the tokens of that name.
  `name_drills_per_pair` adds short sequences that teach only the copying: the prompt of a c2cuda
  task renamed to a made-up name, and as response the answer's opening up to the end of its
  extern "C" entry (no end of turn), so each costs a fraction of a pair and its loss is mostly the
  name and parameters taken from the prompt.
  Pairs longer than model.max_model_len_tokens are dropped (counted).
- rejection: per round, sample every task (rollout settings, multi-turn as in RL), evaluate with
  the evaluator pools, and train on the turns whose verdict is in `sft.rejection_keep`, as the
  policy sampled them (its own tokens, its own context).
One learner rank (this process; bf16 on a GPU, fp32 on CPU).

The package, by job: `pairs` (training data), `training` (the loop and its learner), `rejection`
(rejection rounds), `heldout` (the held-out check), `run` (one run from its config); the command is
pipeline/commands/sft_command.py.
"""
from pipeline.sft.heldout import heldout_check
from pipeline.sft.examples import (answer_head, encode_pairs, entry_first, fastest_first, measured_times, name_drills,
                                random_name, rename_word, renamed, supervised_pairs, supervised_sequences)
from pipeline.sft.rejection import rejection_rounds, rejection_sequences
from pipeline.sft.run import run_sft
from pipeline.sft.training import SFTError, make_learner, train, training_deadline

__all__ = ["SFTError", "answer_head", "encode_pairs", "entry_first", "fastest_first", "heldout_check",
           "make_learner", "measured_times", "name_drills", "random_name", "rejection_rounds", "rejection_sequences",
           "rename_word", "renamed", "run_sft", "supervised_pairs", "supervised_sequences", "train",
           "training_deadline"]
