"""Weight sync over a collective (gloo on CPU): after learner rank 0 broadcasts its trained weights bucket by
bucket into the transformers generator (pipeline/rl/weight_sync.py; sender and receiver are threads of one
process here, each its own member of the group), the generator's logprobs equal the learner's; before the
sync they do not. The fixtures and the logprob check are those of the object-store test beside this one."""
import threading

import pytest
import torch
from test_rollout_weight_sync import trained_learner, worst_gap  # noqa: F401 (trained_learner is a fixture)

from pipeline.rl.distributed import free_port
from pipeline.rl.weight_sync import SyncGroup, receive_weights, send_from_learner

pytestmark = pytest.mark.slow


def test_transformers_generator_equals_the_learner_after_a_collective_sync(trained_learner, hf_generator):
    from transformers import AutoModelForCausalLM
    gen = hf_generator
    initial = AutoModelForCausalLM.from_pretrained(str(gen.model_path), dtype=torch.float32).state_dict()
    gen.update_weights(list(initial.items()), gen.weight_version + 1)  # as other tests may have left it
    assert worst_gap(trained_learner, gen) > 0.05, "before the sync the generator should disagree"
    version, port, sent = gen.weight_version + 1, free_port(), {}

    def learner_rank0():
        group = SyncGroup("127.0.0.1", port, 0, 2, "gloo", timeout_s=60)
        sent.update(send_from_learner(trained_learner, group, version))
    sender = threading.Thread(target=learner_rank0)
    sender.start()
    group = SyncGroup("127.0.0.1", port, 1, 2, "gloo", timeout_s=60)
    gen.update_weights(receive_weights(group, version), version)
    sender.join(60)
    assert gen.weight_version == version
    assert worst_gap(trained_learner, gen) < 2e-3
    n_bytes = sum(p.numel() * p.element_size() for p in trained_learner.engine.module.parameters())
    assert n_bytes <= sent["bytes"] < n_bytes * 1.01 and sent["buckets"] >= 1
    print(f"collective sync (gloo, CPU): {sent['bytes'] / 1e6:.1f} MB in {sent['buckets']} bucket(s), "
          f"{sent['seconds']:.3f} s, {sent['bytes'] / sent['seconds'] / 1e9:.2f} GB/s")
